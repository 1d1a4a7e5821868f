package fleet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/internal/smtest"
)

// busyFleet is a map that has seen every kind of change.
func busyFleet(t testing.TB) *harness {
	t.Helper()
	h := newHarness(t)
	h.ok(todayConfig())
	for id := uint64(4); id <= 6; id++ {
		h.ok(&AddMember{Member: member(id)})
	}
	v := h.ok(&CreateCell{Name: "kafka", Placement: Placement{Voters: []uint64{1, 2, 3}, Observers: []uint64{4}}, ClientPort: 2182, TLSPort: 2282}).Version
	v = h.ok(&ActivateCell{Name: "kafka", Expect: v}).Version
	h.ok(&BeginMove{Name: "kafka", Expect: v, Target: voters(1, 2, 5)})
	v = h.ok(create("hbase", 2183, voters(4, 5, 6))).Version
	h.ok(&SetLimits{Name: "hbase", Expect: v, Limits: Limits{MaxZnodes: 10, MaxRequestRate: 100}})
	v = h.ok(create("gone", 2184, voters(6))).Version
	v = h.ok(&DeleteCell{Name: "gone", Expect: v, Empty: &Emptiness{ShardID: 4}}).Version
	h.ok(&PurgeCell{Name: "gone", Expect: v})
	v = h.ok(create("solr", 2185, voters(6))).Version
	h.ok(&DeleteCell{Name: "solr", Expect: v, Force: true})
	h.ok(&AddMember{Member: member(7)})
	x, _ := h.m().Member(7)
	h.ok(&MarkLeaving{ID: 7, Expect: x.Updated})
	return h
}

func TestReopenRecoversTheMap(t *testing.T) {
	h := busyFleet(t)
	m, st, dump := h.m(), h.status(), h.dump()
	if st.Digest != digestOf(m) || st.Applied != h.index || st.Version != m.Version() {
		t.Fatalf("status %+v: digest of the map %#x, index %d, version %d", st, digestOf(m), h.index, m.Version())
	}
	h.reopen()
	if got := h.status(); got != st {
		t.Errorf("status after reopen %+v, want %+v", got, st)
	}
	if !sameRecords(h.m(), m) || !reflect.DeepEqual(h.m().Cells(), m.Cells()) || !reflect.DeepEqual(h.m().Members(), m.Members()) {
		t.Error("the reopened map differs")
	}
	if !reflect.DeepEqual(h.dump(), dump) {
		t.Error("reopening changed the store")
	}
	if h.sink.last().Version() != m.Version() {
		t.Error("Open did not hand the sink the stored map")
	}
	// And it carries on from there: the next shard id is not reused.
	if r := h.ok(create("zk", 2190, voters(1))); r.ShardID != m.NextShardID() {
		t.Errorf("after reopen a cell got shard %d, want %d", r.ShardID, m.NextShardID())
	}
}

func TestUpdateBatches(t *testing.T) {
	h := newHarness(t)
	// Several entries in one Update: each its own reply and version, all
	// in one batch.
	rs := h.batch(Encode(&AddMember{Member: member(1)}, 1), Encode(&AddMember{Member: member(1)}, 2),
		Encode(create("kafka", 2182, voters(1)), 3), Encode(create("kafka", 2182, voters(1, 2)), 4))
	want := []Reply{{Code: CodeOK, Version: 1, Changed: true}, {Code: CodeOK, Version: 1}, {Code: CodeOK, Version: 2, Changed: true, ShardID: 2}}
	if !reflect.DeepEqual(rs[:3], want) || rs[3].Code != CodeExists {
		t.Errorf("replies %+v", rs)
	}
	if ev := h.sink.take(); len(ev) != 2 {
		t.Errorf("events %+v", ev)
	}
	// The applied index must grow.
	for _, idx := range []uint64{h.index, h.index - 1} {
		if _, err := h.sm.Update([]sm.Entry{{Index: idx, Cmd: Encode(&AddMember{Member: member(2)}, 1)}}); !errors.Is(err, ErrAppliedIndex) {
			t.Errorf("entry %d at applied %d: %v", idx, h.index, err)
		}
	}
	if _, ok := h.m().Member(2); ok {
		t.Error("a refused Update applied its entry")
	}
	h.reopen()
	if st := h.status(); st.Applied != h.index || st.Version != 2 {
		t.Errorf("after reopen %+v", st)
	}
}

// storeOf opens h's store with Pebble alone (h's state machine closed).
func storeOf(t *testing.T, h *harness) *pebble.DB {
	t.Helper()
	if err := h.sm.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(StoreDir(h.dir, SystemShardID, 1), &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestDamagedStore(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, db *pebble.DB)
		want   error
	}{
		{"changed record", func(t *testing.T, db *pebble.DB) {
			v := mustGet(t, db, cellKey("hbase"))
			v[len(v)-1] ^= 1
			mustSet(t, db, cellKey("hbase"), v)
		}, ErrDamaged},
		{"lost record", func(t *testing.T, db *pebble.DB) {
			if err := db.Delete(memberKey(6), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}, ErrDamaged},
		{"lost record, digest rewritten", func(t *testing.T, db *pebble.DB) {
			// The digest agrees, the map does not hold together: a cell
			// placed on a member the map no longer has.
			v := mustGet(t, db, memberKey(6))
			d := binary.BigEndian.Uint64(mustGet(t, db, keyDigest)) ^ recordHash(memberKey(6), v)
			if err := db.Delete(memberKey(6), pebble.Sync); err != nil {
				t.Fatal(err)
			}
			mustSet(t, db, keyDigest, binary.BigEndian.AppendUint64(nil, d))
		}, ErrDamaged},
		{"record that does not decode", func(t *testing.T, db *pebble.DB) {
			mustSet(t, db, cellKey("hbase"), []byte{0, 0, 0, 1})
		}, ErrDamaged},
		{"short applied index", func(t *testing.T, db *pebble.DB) {
			mustSet(t, db, keyApplied, []byte{1})
		}, ErrDamaged},
		{"unknown format", func(t *testing.T, db *pebble.DB) {
			mustSet(t, db, keyFormat, []byte{9})
		}, ErrBadFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := busyFleet(t)
			db := storeOf(t, h)
			tc.damage(t, db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			h.sm = New(Config{Dir: h.dir}, SystemShardID, 1)
			if _, err := h.sm.Open(nil); !errors.Is(err, tc.want) {
				t.Errorf("Open = %v, want %v", err, tc.want)
			}
		})
	}
}

func mustGet(t *testing.T, db *pebble.DB, k []byte) []byte {
	t.Helper()
	v, err := get(db, k)
	if err != nil || v == nil {
		t.Fatalf("get %q: %v", k, err)
	}
	return v
}

func mustSet(t *testing.T, db *pebble.DB, k, v []byte) {
	t.Helper()
	if err := db.Set(k, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) save() []byte {
	h.t.Helper()
	return smtest.Save(h.t, h.sm)
}

func TestSnapshotRoundTrip(t *testing.T) {
	src := busyFleet(t)
	// Prepare pins the map: what is applied after it is not in the
	// snapshot.
	ctx, err := src.sm.PrepareSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	want, wantStatus := src.m(), src.status()
	src.ok(create("later", 2199, voters(1)))
	var buf bytes.Buffer
	if err := src.sm.SaveSnapshot(ctx, &buf, make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	snap := buf.Bytes()

	dst := newFleet(t, 2) // state the snapshot must replace entirely
	dst.ok(create("other", 2300, voters(2)))
	dst.sink.take()
	if err := dst.sm.RecoverFromSnapshot(bytes.NewReader(snap), make(chan struct{})); err != nil {
		t.Fatalf("RecoverFromSnapshot: %v", err)
	}
	if !sameRecords(dst.m(), want) || dst.status() != wantStatus {
		t.Errorf("recovered %+v, want %+v", dst.status(), wantStatus)
	}
	if ev := dst.sink.take(); len(ev) != 1 || ev[0].Kind != EventReset || ev[0].Version != want.Version() || dst.sink.last() != dst.m() {
		t.Errorf("recover events %+v", ev)
	}
	// Durable, with its applied index.
	dst.reopen()
	if !sameRecords(dst.m(), want) || dst.status() != wantStatus {
		t.Errorf("after reopen %+v, want %+v", dst.status(), wantStatus)
	}
	// The same map streams the same bytes.
	if again := dst.save(); !bytes.Equal(again, snap) {
		t.Error("a snapshot of the recovered replica differs from the original")
	}
	// It goes on from the snapshot's index.
	dst.index = wantStatus.Applied
	if r := dst.ok(create("next", 2199, voters(1))); r.ShardID != want.NextShardID() {
		t.Errorf("after recovery a cell got shard %d, want %d", r.ShardID, want.NextShardID())
	}
}

func TestSnapshotCorrupt(t *testing.T) {
	src := busyFleet(t)
	snap := src.save()
	flip := func(i int) []byte {
		b := bytes.Clone(snap)
		b[i] ^= 0x40
		return b
	}
	cases := map[string][]byte{
		"empty":        nil,
		"bad magic":    flip(0),
		"huge length":  append(append([]byte{}, snapshotMagic...), 0xff, 0, 0, 0, 0, 0, 0, 0),
		"bad checksum": flip(len(snap) - 1),
		"flipped body": flip(30),
		"empty body":   append(append([]byte{}, snapshotMagic...), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
	}
	for _, cut := range []int{1, 8, 15, 16, 17, len(snap) / 2, len(snap) - 4, len(snap) - 1} {
		cases[fmt.Sprintf("cut at %d", cut)] = snap[:cut]
	}
	// A body whose checksum is right but whose records break the map.
	st := snapshotState{m: src.m().shallow(), applied: 3}
	st.m.members = st.m.members[1:]
	body := encodeSnapshotBody(st)
	bad := append(append([]byte{}, snapshotMagic...), binary.BigEndian.AppendUint64(nil, uint64(len(body)))...)
	bad = append(append(bad, body...), binary.BigEndian.AppendUint32(nil, crc32c(body))...)
	cases["records that do not hold together"] = bad

	dst := newFleet(t, 2)
	before, beforeStatus := dst.dump(), dst.status()
	for name, b := range cases {
		if err := dst.sm.RecoverFromSnapshot(bytes.NewReader(b), make(chan struct{})); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: RecoverFromSnapshot = %v, want ErrBadSnapshot", name, err)
		}
	}
	if !reflect.DeepEqual(dst.dump(), before) || dst.status() != beforeStatus {
		t.Error("a refused snapshot changed the store")
	}
}

func TestSnapshotStopped(t *testing.T) {
	src := busyFleet(t)
	snap := src.save()
	done := make(chan struct{})
	close(done)
	ctx, err := src.sm.PrepareSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Dragonboat compares with ==: the sentinel, unwrapped.
	if err := src.sm.SaveSnapshot(ctx, io.Discard, done); err != sm.ErrSnapshotStopped {
		t.Errorf("SaveSnapshot with done closed = %v", err)
	}
	dst := newHarness(t)
	if err := dst.sm.RecoverFromSnapshot(bytes.NewReader(snap), done); err != sm.ErrSnapshotStopped {
		t.Errorf("RecoverFromSnapshot with done closed = %v", err)
	}
	if dst.status().Applied != 0 {
		t.Error("a stopped recovery applied the snapshot")
	}
	if err := src.sm.SaveSnapshot("not a snapshot", io.Discard, make(chan struct{})); !errors.Is(err, ErrBadSnapshot) {
		t.Errorf("SaveSnapshot(bad context) = %v", err)
	}
	// The transport's error comes back as it was given.
	ctx, _ = src.sm.PrepareSnapshot()
	if err := src.sm.SaveSnapshot(ctx, failingWriter{}, make(chan struct{})); err != sm.ErrSnapshotStreaming {
		t.Errorf("SaveSnapshot to a failing writer = %v", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, sm.ErrSnapshotStreaming }

// TestSameEntriesSameStore: two replicas given the same entries hold the
// same bytes, key for key, and answer the same replies.
func TestSameEntriesSameStore(t *testing.T) {
	a, b := busyFleet(t), busyFleet(t)
	if da, db := a.dump(), b.dump(); !reflect.DeepEqual(da, db) {
		t.Errorf("stores differ:\n%v\n%v", da, db)
	}
	if a.status() != b.status() {
		t.Errorf("status %+v and %+v", a.status(), b.status())
	}
}
