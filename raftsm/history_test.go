package raftsm

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

func historyOf(t *testing.T, h *harness, from int64) (floor int64, evs []HistoryEvent) {
	t.Helper()
	h.viewLocked(func(v View) (any, error) {
		var err error
		if floor, err = v.HistoryFloor(); err != nil {
			return nil, err
		}
		it, err := v.HistoryAfter(from)
		if err != nil {
			return nil, err
		}
		defer it.Close()
		for {
			e, ok := it.Next()
			if !ok {
				break
			}
			evs = append(evs, e)
		}
		return nil, it.Err()
	})
	return floor, evs
}

func TestHistoryRecordsEveryTriggerInZxidOrder(t *testing.T) {
	h := newHarness(t, t.TempDir())
	const s1 = 7
	h.apply(createSession(s1, 30000))
	start := h.zxid()
	h.apply(request(s1, jute.OpCreate, &jute.CreateRequest{Path: "/a", ACL: znode.OpenACL}))
	secret := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "digest", ID: "u:x"}}}
	h.apply(request(s1, jute.OpCreate, &jute.CreateRequest{Path: "/a/s", ACL: secret}))
	h.apply(request(s1, jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{
		{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: "/a", Data: []byte("x"), Version: -1}},
		{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: "/a/s", Version: -1}},
	}}))
	floor, evs := historyOf(t, h, start)
	if floor != 0 {
		t.Fatalf("floor %d, want 0", floor)
	}
	got := ""
	for _, e := range evs {
		got += fmt.Sprintf("%d:%s:%s;", e.Zxid-start, e.Type, e.Path)
	}
	want := "1:NodeCreated:/a;1:NodeChildrenChanged:/;2:NodeCreated:/a/s;2:NodeChildrenChanged:/a;" +
		"3:NodeDataChanged:/a;3:NodeDeleted:/a/s;3:NodeChildrenChanged:/a;"
	if got != want {
		t.Fatalf("history\n got %s\nwant %s", got, want)
	}
	if evs[2].ACL == nil || evs[0].ACL != nil {
		t.Fatalf("ACLs kept only for nodes not readable by anyone: %+v", evs[:3])
	}
	// From a later zxid: only what follows.
	_, later := historyOf(t, h, start+2)
	if len(later) != 3 || later[0].Zxid != start+3 {
		t.Fatalf("history after %d: %+v", start+2, later)
	}
}

func TestHistoryTrimsWholeZxidsByCount(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	h.sm.histMax = 5
	const s1 = 7
	h.apply(createSession(s1, 30000))
	for i := 0; i < 6; i++ {
		// Each create records two events (the node and its parent).
		h.apply(request(s1, jute.OpCreate, &jute.CreateRequest{Path: fmt.Sprintf("/n%d", i), ACL: znode.OpenACL}))
	}
	floor, evs := historyOf(t, h, 0)
	if len(evs) > 5 || len(evs)%2 != 0 {
		t.Fatalf("%d events kept, want at most 5 in whole zxids: %+v", len(evs), evs)
	}
	if evs[0].Zxid != floor+1 {
		t.Fatalf("floor %d but oldest kept zxid %d", floor, evs[0].Zxid)
	}
	if last := evs[len(evs)-1]; last.Path != "/" || last.Zxid != h.zxid() {
		t.Fatalf("newest event %+v, zxid %d", last, h.zxid())
	}
}

func TestHistoryTrimsByAge(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.sm.histMaxAge = 1000
	const s1 = 7
	h.apply(createSession(s1, 30000))
	old := request(s1, jute.OpCreate, &jute.CreateRequest{Path: "/old", ACL: znode.OpenACL})
	old.Time = 10_000
	h.apply(old)
	recent := request(s1, jute.OpCreate, &jute.CreateRequest{Path: "/new", ACL: znode.OpenACL})
	recent.Time = 20_000
	h.apply(recent)
	floor, evs := historyOf(t, h, 0)
	if len(evs) != 2 || evs[0].Path != "/new" || floor != evs[0].Zxid-1 {
		t.Fatalf("floor %d events %+v: want only /new's two events", floor, evs)
	}
}

// TestHistoryTrimsPastSlack: history may run 1/32 over its bound before a
// trim, which then brings it back to the bound (fewer range deletions).
func TestHistoryTrimsPastSlack(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.sm.histMax = 64 // slack 2
	const s1 = 7
	h.apply(createSession(s1, 30000))
	var counts []int
	for i := 0; i < 40; i++ {
		h.apply(request(s1, jute.OpCreate, &jute.CreateRequest{Path: fmt.Sprintf("/n%d", i), ACL: znode.OpenACL}))
		_, evs := historyOf(t, h, 0)
		counts = append(counts, len(evs))
	}
	// Two events a create: 64 after 32 creates, 66 after 33 (within the
	// slack), then 68 is over it and trims back to 64.
	if counts[31] != 64 || counts[32] != 66 || counts[33] != 64 || counts[34] != 66 {
		t.Fatalf("events retained after each create: %v", counts)
	}
}

// historyKeys lists the keys of the history space.
func historyKeys(t *testing.T, h *harness) [][]byte {
	t.Helper()
	it := h.sm.mu.db.NewIter(&pebble.IterOptions{LowerBound: []byte{spaceHistory}, UpperBound: upperBound([]byte{spaceHistory})})
	defer it.Close()
	var keys [][]byte
	for it.First(); it.Valid(); it.Next() {
		keys = append(keys, append([]byte(nil), it.Key()...))
	}
	return keys
}

// TestHistoryOneRecordPerTransaction: the events of one zxid (a create and
// its parent, a multi) are one record, and read back as before.
func TestHistoryOneRecordPerTransaction(t *testing.T) {
	h := newHarness(t, t.TempDir())
	const s1 = 7
	h.apply(createSession(s1, 30000))
	start := h.zxid()
	before := len(historyKeys(t, h))
	h.apply(request(s1, jute.OpCreate, &jute.CreateRequest{Path: "/a", ACL: znode.OpenACL}))
	var ops []jute.MultiOp
	for i := 0; i < 4; i++ {
		ops = append(ops, jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: fmt.Sprintf("/a/%d", i), ACL: znode.OpenACL}})
	}
	h.apply(request(s1, jute.OpMulti, &jute.MultiRequest{Ops: ops}))
	h.apply(request(s1, jute.OpSetData, &jute.SetDataRequest{Path: "/a", Data: []byte("x"), Version: -1}))
	if n := len(historyKeys(t, h)) - before; n != 3 {
		t.Fatalf("%d history records for 3 transactions", n)
	}
	_, evs := historyOf(t, h, start)
	got := ""
	for _, e := range evs {
		got += fmt.Sprintf("%d:%s:%s;", e.Zxid-start, e.Type, e.Path)
	}
	want := "1:NodeCreated:/a;1:NodeChildrenChanged:/;" +
		"2:NodeCreated:/a/0;2:NodeChildrenChanged:/a;2:NodeCreated:/a/1;2:NodeChildrenChanged:/a;" +
		"2:NodeCreated:/a/2;2:NodeChildrenChanged:/a;2:NodeCreated:/a/3;2:NodeChildrenChanged:/a;" +
		"3:NodeDataChanged:/a;"
	if got != want {
		t.Fatalf("history\n got %s\nwant %s", got, want)
	}
}

// rewriteHistoryOldLayout rewrites the store's history in the layout of
// stores written before one record per transaction: a record per event,
// seq 0, 1, ... within a zxid.
func rewriteHistoryOldLayout(t *testing.T, h *harness) {
	t.Helper()
	_, evs := historyOf(t, h, 0)
	b := h.sm.mu.db.NewBatch()
	if err := b.DeleteRange([]byte{spaceHistory}, upperBound([]byte{spaceHistory}), nil); err != nil {
		t.Fatal(err)
	}
	var seq uint16
	var last int64 = -1
	for i := range evs {
		if evs[i].Zxid != last {
			last, seq = evs[i].Zxid, 0
		}
		if err := b.Set(historyKey(evs[i].Zxid, seq), appendHistory(nil, &evs[i]), nil); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := h.sm.mu.db.Flush(); err != nil { // the store has no WAL
		t.Fatal(err)
	}
}

// TestHistoryReadsOldLayout: a store written with a record per event keeps
// its history readable, and trims it by events in whole zxids, beside the
// new records.
func TestHistoryReadsOldLayout(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.sm.histMax = 12 // slack 0
	const s1 = 7
	h.apply(createSession(s1, 30000))
	for i := 0; i < 3; i++ {
		h.apply(request(s1, jute.OpCreate, &jute.CreateRequest{Path: fmt.Sprintf("/n%d", i), ACL: znode.OpenACL}))
	}
	_, want := historyOf(t, h, 0)
	nkeys := len(historyKeys(t, h))
	rewriteHistoryOldLayout(t, h)
	if n := len(historyKeys(t, h)); n != 2*nkeys {
		t.Fatalf("old layout: %d records, want %d", n, 2*nkeys)
	}
	_, got := historyOf(t, h, 0)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("old layout reads\n%v\nwant\n%v", got, want)
	}
	h.reopen()
	h.sm.histMax = 12
	// Four more creates of two events each: 14 events, over the bound of
	// 12, so the oldest whole zxid (two old records) goes.
	for i := 3; i < 7; i++ {
		h.apply(request(s1, jute.OpCreate, &jute.CreateRequest{Path: fmt.Sprintf("/n%d", i), ACL: znode.OpenACL}))
	}
	floor, evs := historyOf(t, h, 0)
	if len(evs) != 12 || evs[0].Zxid != floor+1 || evs[0].Path != "/n1" {
		t.Fatalf("floor %d, %d events from %+v", floor, len(evs), evs[0])
	}
	count := h.viewLocked(func(v View) (any, error) { return getInt64(v.tree.r, keyHistCount) })
	if count.(int64) != 12 {
		t.Fatalf("m:hcount %d, want 12 events", count)
	}
}
