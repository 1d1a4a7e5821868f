package raftsm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

func TestNodeCacheEvictsToBudget(t *testing.T) {
	c := newNodeCache(3 * (entryOverhead + 2 + 10))
	for i := range 10 {
		c.put(fmt.Sprintf("/%d", i), make([]byte, 10))
	}
	if c.entries.len() != 3 || c.used > c.max {
		t.Fatalf("%d entries, %d bytes used of %d", c.entries.len(), c.used, c.max)
	}
	for _, p := range []string{"/7", "/8", "/9"} {
		if _, ok := c.get(p); !ok {
			t.Errorf("%s evicted, want the three most recent kept", p)
		}
	}
	c.get("/7") // now the most recent: /8 goes next
	c.put("/a", nil)
	if _, ok := c.get("/8"); ok {
		t.Error("/8 kept, want it evicted as the least recent")
	}
	if v, ok := c.get("/a"); !ok || v != nil {
		t.Errorf("absent entry: %v %v", v, ok)
	}
	c.reset()
	if _, ok := c.get("/7"); ok || c.used != 0 {
		t.Error("reset kept entries")
	}
}

// TestNodeCacheMatchesUncached applies the same random commands to a state
// machine with a tiny node cache (so entries are evicted and reloaded all the
// time) and to one without, and requires identical stores and replies.
func TestNodeCacheMatchesUncached(t *testing.T) {
	cached := newHarness(t, t.TempDir())
	cached.sm.mu.nodes = newNodeCache(4 << 10)
	cached.sm.mu.kids = newChildCache(12) // a few lists at a time: evicted and refilled
	plain := newHarness(t, t.TempDir())
	plain.sm.mu.nodes, plain.sm.mu.kids = nil, nil

	rng := rand.New(rand.NewPCG(1, 2))
	paths := []string{"/a", "/a/b", "/a/c", "/d", "/d/e", "/zookeeper/quota/a", "/zookeeper/quota/a/zookeeper_limits", "/zookeeper/quota/a/zookeeper_stats"}
	sessions := []int64{1, 2, 3}
	var cmds []*Command
	for _, s := range sessions {
		cmds = append(cmds, createSession(s, 30000))
	}
	for range 3000 {
		s := sessions[rng.IntN(len(sessions))]
		p := paths[rng.IntN(len(paths))]
		var c *Command
		switch rng.IntN(8) {
		case 0, 1:
			flags := int32(0)
			if rng.IntN(3) == 0 {
				flags = jute.FlagEphemeral
			}
			c = create(s, p, flags)
		case 2, 3:
			c = setData(s, p, fmt.Sprint(rng.IntN(1000)), -1)
		case 4:
			c = deleteNode(s, p, -1)
		case 5: // a multi that fails half-way must leave nothing behind
			q := paths[rng.IntN(len(paths))]
			c = multi(s,
				jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: p, Data: []byte("m"), ACL: znode.OpenACL}},
				jute.MultiOp{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: q, Data: []byte("m"), Version: int32(rng.IntN(3))}})
		case 6:
			c = &Command{Kind: KindCloseSession, Session: s, Time: 6000}
		case 7:
			c = createSession(s, 30000)
		}
		cmds = append(cmds, c)
	}
	for len(cmds) > 0 {
		n := min(1+rng.IntN(20), len(cmds))
		batch := cmds[:n]
		cmds = cmds[n:]
		got, want := cached.apply(batch...), plain.apply(batch...)
		for i := range got {
			if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
				t.Fatalf("reply %+v with the cache, %+v without", got[i], want[i])
			}
		}
		// Child lists through Lookup: the cached state machine answers from
		// (and fills) its child cache.
		for _, parent := range []string{"/", "/a", "/d", "/zookeeper/quota", "/zookeeper/quota/a"} {
			list := func(h *harness) string {
				return fmt.Sprint(h.view(func(v View) (any, error) { return v.Tree().Children(parent) }))
			}
			if g, w := list(cached), list(plain); g != w {
				t.Fatalf("children of %s: %s with the cache, %s without", parent, g, w)
			}
		}
	}
	if got, want := cached.dump(), plain.dump(); !slices.Equal(got, want) {
		t.Fatalf("stores differ:\n%v\n%v", got, want)
	}
	// Every cached child list tagged with its parent's pzxid is what
	// Pebble holds.
	store := treeReader{r: cached.sm.mu.db}
	for parent, e := range cached.sm.mu.kids.mu.lists.m {
		n, err := store.Get(parent)
		if err != nil || n == nil || !e.val.valid || e.val.pzxid != n.Pzxid {
			continue
		}
		stored, err := store.Children(parent)
		if err != nil || fmt.Sprint(stored) != fmt.Sprint(e.val.names) {
			t.Errorf("children of %s: cached %v, stored %v (%v)", parent, e.val.names, stored, err)
		}
	}
	// Every cached value is what Pebble holds.
	c := cached.sm.mu.nodes
	for p, e := range c.entries.m {
		v, err := getValue(cached.sm.mu.db, nodeKey(p))
		if err != nil || !slices.Equal(v, e.val) || (v == nil) != (e.val == nil) {
			t.Errorf("%s: cached %x, stored %x (%v)", p, e.val, v, err)
		}
	}
}

// TestNodeCacheDroppedWithFailedUpdate: an Update that fails after applying
// some entries commits nothing, and its writes must not survive in the
// cache either.
func TestNodeCacheDroppedWithFailedUpdate(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.apply(createSession(1, 30000))
	children := func() string {
		return fmt.Sprint(h.view(func(v View) (any, error) { return v.Tree().Children("/") }))
	}
	before := children() // cached from here on
	entries := []sm.Entry{
		{Index: h.index + 1, Cmd: EncodeCommand(create(1, "/x", 0))},
		{Index: h.index + 2, Cmd: []byte{0xff, 0xff}},
	}
	if _, err := h.sm.Update(entries); err == nil {
		t.Fatal("Update with an undecodable entry succeeded")
	}
	if after := children(); after != before {
		t.Fatalf("children of / after the failed Update: %s, want %s", after, before)
	}
	if r := h.apply1(create(1, "/x", 0)); r.Err != jute.ErrOK {
		t.Fatalf("create /x after the failed Update: %v, want OK (the failed batch's create must be gone)", r.Err)
	}
}
