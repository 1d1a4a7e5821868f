package raftsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/internal/smtest"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// copyStore copies the files of a store as a process killed now would
// leave them (the page cache survives the process): every file but the
// lock. The store's background flush or compaction may run meanwhile (a
// table it replaces vanishes, a MANIFEST edit names a new one): a copy
// during which the store's files changed is taken again, so the copy is
// of one moment's files.
func copyStore(t *testing.T, from, to string) {
	t.Helper()
	names := func() []string {
		ents, err := os.ReadDir(from)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			if !e.IsDir() && e.Name() != "LOCK" {
				out = append(out, e.Name())
			}
		}
		return out
	}
	for attempt := 0; ; attempt++ {
		if err := os.RemoveAll(to); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(to, 0o755); err != nil {
			t.Fatal(err)
		}
		before := names()
		vanished := false
		for _, name := range before {
			if err := copyFile(filepath.Join(from, name), filepath.Join(to, name)); errors.Is(err, os.ErrNotExist) {
				vanished = true
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if !vanished && reflect.DeepEqual(before, names()) {
			return
		}
		if attempt == 50 {
			t.Fatalf("the files of %s kept changing while they were copied", from)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// TestCrashedStoreOpensAtTheLastSync: the store has no WAL (liveOptions),
// so a store killed after some Updates has lost what its memtable held
// since the last flush. It must open whole (its digest
// adds up) at an applied index no lower than the last Sync and no higher
// than the last Update, and applying the log's entries after that index,
// as Dragonboat does, must give exactly the store that was not killed.
func TestCrashedStoreOpensAtTheLastSync(t *testing.T) {
	h := newHarness(t, t.TempDir())
	var log []sm.Entry // every entry applied, as the Raft log keeps them
	apply := func(cmds ...*Command) {
		t.Helper()
		first := h.index + 1
		h.apply(cmds...)
		for i, c := range cmds {
			log = append(log, sm.Entry{Index: first + uint64(i), Cmd: EncodeCommand(c)})
		}
	}
	apply(createSession(7, 30000))
	for i := range 50 {
		apply(create(7, fmt.Sprintf("/n%02d", i), 0), create(7, fmt.Sprintf("/e%02d", i), jute.FlagEphemeral))
	}
	if err := h.sm.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := h.index
	for i := range 200 {
		apply(setData(7, fmt.Sprintf("/n%02d", i%50), fmt.Sprintf("v%d", i), -1))
		if i%40 == 0 {
			apply(deleteNode(7, fmt.Sprintf("/e%02d", i/40), -1),
				multi(7, jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: fmt.Sprintf("/m%d", i), Data: []byte("x"), ACL: znode.OpenACL}},
					jute.MultiOp{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: "/n00", Data: []byte("m"), Version: -1}}))
		}
	}
	last := h.index

	crashed := t.TempDir()
	copyStore(t, h.sm.dir, StoreDir(crashed, 1, 1))
	c := newHarness(t, crashed)
	if c.index < synced || c.index > last {
		t.Fatalf("crashed store opened at index %d, want within [%d (last Sync), %d (last Update)]", c.index, synced, last)
	}
	t.Logf("last Sync at %d, last Update at %d: the crashed store opened at %d", synced, last, c.index)
	var replay []sm.Entry
	for _, e := range log {
		if e.Index > c.index {
			replay = append(replay, sm.Entry{Index: e.Index, Cmd: e.Cmd})
		}
	}
	for len(replay) > 0 { // in Updates of a few entries, as the log hands them over
		n := min(len(replay), 7)
		if _, err := c.sm.Update(replay[:n]); err != nil {
			t.Fatalf("replaying the log: %v", err)
		}
		replay = replay[n:]
	}
	if got, want := c.dump(), h.dump(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after replaying the log, the crashed store differs:\n got %d keys\nwant %d keys", len(got), len(want))
	}
	// The kill left the mark at the last Update: what the member compares
	// the Raft log with before it opens the store.
	if m, ok, err := ReadAppliedMark(StoreDir(crashed, 1, 1)); err != nil || !ok || m != last {
		t.Fatalf("the crashed store's applied mark: %d, %v, %v; want %d (the last Update)", m, ok, err, last)
	}

	// A clean close keeps everything: the store opens at its last Update.
	if idx := h.reopen(); idx != last {
		t.Fatalf("after Close, Open returned %d, want %d", idx, last)
	}
}

// TestAppliedMark: the mark follows every Update, stays above the store's
// tables after a kill until the replay passes it (a second kill during the
// replay must not lower it), follows a recovered snapshot, and a mark that
// does not decode is reported as such.
func TestAppliedMark(t *testing.T) {
	h := newHarness(t, t.TempDir())
	mark := func(dir string) uint64 {
		t.Helper()
		m, ok, err := ReadAppliedMark(dir)
		if err != nil || !ok {
			t.Fatalf("ReadAppliedMark(%s): %d, %v, %v", dir, m, ok, err)
		}
		return m
	}
	if _, ok, err := ReadAppliedMark(h.sm.dir); ok || err != nil {
		t.Fatalf("a store no Update wrote to has a mark: %v, %v", ok, err)
	}
	h.apply(createSession(7, 30000))
	h.apply(create(7, "/a", 0), create(7, "/b", 0))
	if m := mark(h.sm.dir); m != h.index {
		t.Fatalf("mark %d after Update to %d", m, h.index)
	}
	if err := h.sm.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := h.index
	for i := range 20 {
		h.apply(setData(7, "/a", fmt.Sprint(i), -1))
	}
	last := h.index

	crashed := t.TempDir()
	copyStore(t, h.sm.dir, StoreDir(crashed, 1, 1))
	c := newHarness(t, crashed)
	if c.index != synced {
		t.Fatalf("the crashed store opened at %d, want %d (its last flush: there is no WAL)", c.index, synced)
	}
	if m := mark(c.sm.dir); m != last {
		t.Fatalf("after Open of the crashed store the mark is %d, want %d (the kill's)", m, last)
	}
	c.apply(setData(7, "/b", "x", -1)) // replays one entry: still below the kill's mark
	// The mark is a record of the highest index applied; a replay that
	// has not yet passed it writes its own index, and that is all it is.
	if m := mark(c.sm.dir); m != c.index {
		t.Fatalf("mark %d after the replay's Update to %d", m, c.index)
	}

	// A recovered snapshot sets the mark to its index.
	snap := h.save()
	r := newHarness(t, t.TempDir())
	r.apply(createSession(9, 30000))
	if err := r.sm.RecoverFromSnapshot(bytes.NewReader(snap), nil); err != nil {
		t.Fatal(err)
	}
	if m := mark(r.sm.dir); m != last {
		t.Fatalf("after RecoverFromSnapshot the mark is %d, want the snapshot's %d", m, last)
	}

	other := t.TempDir()
	for _, bad := range [][]byte{[]byte("short"), bytes.Repeat([]byte{0xff}, markLen)} {
		if err := os.WriteFile(MarkPath(other), bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := ReadAppliedMark(other); ok || !errors.Is(err, ErrBadMark) {
			t.Errorf("a mark of %x: ok %v, err %v; want ErrBadMark", bad, ok, err)
		}
	}
}

// TestPreflushBeforeSnapshot: with SnapshotEntries set, the Update that
// comes within SnapshotEntries/preflushLead of the next snapshot (the last
// Sync plus SnapshotEntries) rotates the memtable for a background flush,
// once; Sync starts the count again. Nothing else changes: the store's
// keys are those of a store without the early flush.
func TestPreflushBeforeSnapshot(t *testing.T) {
	const n = 500 // lead 25
	dir := t.TempDir()
	s := New(Config{Dir: dir, Options: znode.Options{ExtendedTypes: true}, SnapshotEntries: n}, 1, 1)
	if _, err := s.Open(nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	plain := newHarness(t, t.TempDir())
	index := uint64(0)
	apply := func(c *Command) {
		t.Helper()
		index++
		if _, err := s.Update([]sm.Entry{{Index: index, Cmd: EncodeCommand(c)}}); err != nil {
			t.Fatal(err)
		}
		plain.apply(c)
	}
	apply(createSession(7, 30000))
	apply(create(7, "/a", 0))
	for round := range 2 {
		for index < s.syncedAt.Load()+n-n/preflushLead-1 {
			apply(setData(7, "/a", fmt.Sprint(index), -1))
		}
		if s.preflushed.Load() {
			t.Fatalf("round %d: early flush at index %d, %d before the snapshot due at %d", round, index, s.syncedAt.Load()+n-index, s.syncedAt.Load()+n)
		}
		apply(setData(7, "/a", "x", -1))
		if !s.preflushed.Load() {
			t.Fatalf("round %d: no early flush at index %d, %d before the snapshot due at %d", round, index, s.syncedAt.Load()+n-index, s.syncedAt.Load()+n)
		}
		apply(setData(7, "/a", "y", -1))
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		if s.preflushed.Load() || s.syncedAt.Load() != index {
			t.Fatalf("round %d: after Sync at %d: preflushed %v, synced at %d", round, index, s.preflushed.Load(), s.syncedAt.Load())
		}
	}
	s.mu.RLock()
	got := smtest.Dump(t, s.mu.db)
	s.mu.RUnlock()
	if want := plain.dump(); !reflect.DeepEqual(got, want) {
		t.Fatalf("with early flushes the store differs: %d keys, want %d", len(got), len(want))
	}
}
