package raftsm

import (
	"testing"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// TestTreeStatsKept: the tree's figures the state machine keeps with every
// write (View.TreeStats, O(1)) always equal a count of the store, through
// creates, setData, multi (one that fails too), deletes and a session's
// expiry, and they survive a reopen.
func TestTreeStatsKept(t *testing.T) {
	h := newHarness(t, t.TempDir())
	stats := func() TreeStats {
		return h.view(func(v View) (any, error) { return v.TreeStats() }).(TreeStats)
	}
	counted := func() TreeStats {
		h.sm.mu.RLock()
		defer h.sm.mu.RUnlock()
		_, st, err := computeDigest(h.sm.mu.db)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	kept := stats()
	if kept.Nodes < 4 || kept.DataSize <= 0 || kept != counted() {
		t.Fatalf("initial tree stats %+v, counted %+v", kept, counted())
	}
	cmds := []*Command{
		createSession(7, 30000),
		create(0, "/a", jute.FlagPersistent),
		setData(0, "/a", "hello world", -1),
		create(7, "/a/e", jute.FlagEphemeral),
		create(7, "/a/s", jute.FlagEphemeralSequential),
		setData(0, "/a", "x", -1),
		multi(0,
			jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/m", Data: []byte("12345"), ACL: znode.OpenACL}},
			jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/m/c", ACL: znode.OpenACL}}),
		// A failed multi changes nothing.
		multi(0,
			jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/n", Data: []byte("zz"), ACL: znode.OpenACL}},
			jute.MultiOp{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: "/missing", Version: -1}}),
		deleteNode(0, "/m/c", -1),
	}
	for _, c := range cmds {
		h.apply1(c)
		if kept, want := stats(), counted(); kept != want {
			t.Fatalf("after %v: kept %+v, counted %+v", c.Kind, kept, want)
		}
	}
	if st := stats(); st.Ephemerals != 2 {
		t.Fatalf("ephemerals before expiry: %+v", st)
	}
	h.apply1(expire(7))
	h.reopen()
	kept = stats()
	if kept != counted() {
		t.Fatalf("after expiry and reopen: kept %+v, counted %+v", kept, counted())
	}
	if kept.Ephemerals != 0 {
		t.Errorf("ephemerals after expiry: %d", kept.Ephemerals)
	}
	owners, paths, err := func() ([]int64, [][]string, error) {
		var o []int64
		var p [][]string
		var e error
		h.view(func(v View) (any, error) { o, p, e = v.EphemeralsByOwner(); return nil, nil })
		return o, p, e
	}()
	if err != nil || len(owners) != 0 || len(paths) != 0 {
		t.Errorf("ephemerals by owner after expiry: %v %v %v", owners, paths, err)
	}
}
