package raftsm

import (
	"testing"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// TestEventSizes: the figures a member keeps from Event.Size and
// Event.Ephemeral, starting from one TreeStats walk, always equal a fresh
// walk, through creates, setData, multi, deletes and a session's expiry.
func TestEventSizes(t *testing.T) {
	h := newHarness(t, t.TempDir())
	stats := func() TreeStats {
		return h.view(func(v View) (any, error) { return v.TreeStats() }).(TreeStats)
	}
	kept := stats()
	if kept.Nodes < 4 || kept.DataSize <= 0 {
		t.Fatalf("initial tree stats %+v", kept)
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
		expire(7),
	}
	for _, c := range cmds {
		h.sink.reset()
		h.apply1(c)
		for _, ev := range h.sink.all() {
			if ev.Kind != EventWatch {
				continue
			}
			kept.DataSize += ev.Size
			d := int64(0)
			switch ev.Type {
			case jute.EventNodeCreated:
				d = 1
			case jute.EventNodeDeleted:
				d = -1
			}
			kept.Nodes += d
			if ev.Ephemeral {
				kept.Ephemerals += d
			}
		}
		if want := stats(); kept != want {
			t.Fatalf("after %v: kept %+v, walk %+v", c.Kind, kept, want)
		}
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
