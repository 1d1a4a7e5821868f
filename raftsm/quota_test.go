package raftsm

import (
	"testing"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// TestQuotaMadeInAMulti: a multi whose first op finds no quota anywhere,
// then makes one (its limits and stats nodes) and then writes under it,
// keeps the quota's usage as the same ops sent one by one do. (A
// transaction remembers that there is no quota, znode.Txn.noQuotas, until
// it creates a node under /zookeeper/quota.)
func TestQuotaMadeInAMulti(t *testing.T) {
	mk := func(path, data string) jute.MultiOp {
		return jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: path, Data: []byte(data), ACL: znode.OpenACL}}
	}
	set := func(path, data string) jute.MultiOp {
		return jute.MultiOp{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: path, Data: []byte(data), Version: -1}}
	}
	ops := []jute.MultiOp{
		set("/x", "a"),
		mk("/zookeeper/quota/x", ""),
		mk("/zookeeper/quota/x/zookeeper_limits", "count=-1,bytes=-1"),
		mk("/zookeeper/quota/x/zookeeper_stats", "count=0,bytes=0"),
		set("/x", "abcd"),
		mk("/x/y", "0123456789"),
	}
	stats := func(h *harness) string {
		n := h.node("/zookeeper/quota/x/zookeeper_stats")
		if n == nil {
			t.Fatal("no stats node")
		}
		return string(n.Data)
	}

	oneByOne := newHarness(t, t.TempDir())
	oneByOne.apply(createSession(7, 30000), create(7, "/x", 0))
	for _, op := range ops {
		if r := oneByOne.apply1(request(7, op.Type, op.Req)); r.Err != jute.ErrOK {
			t.Fatalf("%v: %v", op.Type, r.Err)
		}
	}
	inMulti := newHarness(t, t.TempDir())
	inMulti.apply(createSession(7, 30000), create(7, "/x", 0))
	if r := inMulti.apply1(multi(7, ops...)); r.Err != jute.ErrOK {
		t.Fatalf("multi: %v", r.Err)
	}
	want := stats(oneByOne)
	if st := znode.ParseStatsTrack([]byte(want)); st.Get("count") != 2 || st.Get("bytes") != 14 {
		t.Fatalf("one by one, the quota's usage is %q, want count=2 and bytes=14 (/x and /x/y)", want)
	}
	if got := stats(inMulti); got != want {
		t.Fatalf("in a multi, the quota's usage is %q; one by one it is %q", got, want)
	}
}
