package cache_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/cache"
	"github.com/zkraft/zkraft/client/session"
	"github.com/zkraft/zkraft/internal/clienttest"
	"github.com/zkraft/zkraft/internal/tcpproxy"
	"github.com/zkraft/zkraft/server"
)

// changes collects what a cache reports.
type changes struct {
	clienttest.Recorder[cache.Change]
}

func newChanges() *changes { return &changes{} }

func (c *changes) on(ch cache.Change)  { c.On(ch) }
func (c *changes) all() []cache.Change { return c.All() }

// waitFor waits until ok holds for what was reported.
func (c *changes) waitFor(t *testing.T, limit time.Duration, what string, ok func([]cache.Change) bool) []cache.Change {
	t.Helper()
	l, done := c.WaitUntil(limit, ok)
	if !done {
		t.Fatalf("after %v, %s: %d changes: %v", limit, what, len(l), summary(l))
	}
	return l
}

func summary(cs []cache.Change) string {
	var b strings.Builder
	for i, c := range cs {
		if i == 20 {
			fmt.Fprintf(&b, " ... (%d more)", len(cs)-20)
			break
		}
		fmt.Fprintf(&b, " %s %s@%x", c.Type, c.Path, c.Zxid)
	}
	return b.String()
}

const timeout = 4 * time.Second

func openSession(t *testing.T, addrs ...string) *session.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Open(ctx, session.Config{Servers: addrs, SessionTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// dial connects the tests' writer. Its connections give up on a server
// that does not answer within deadlineCap, as ZooKeeper's Java client
// gives up on an unanswered ConnectRequest after its connect timeout and
// tries again: go-zookeeper alone waits ten receive timeouts (66 s with a
// 10 s session) for the ConnectResponse, and a ZooKeeper just restarted
// under load once read the writer's request and never answered, so the
// writer missed create's bound with the server serving again all along.
// (client/session, which the caches use, caps its deadlines the same way.)
func dial(t *testing.T, addrs ...string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(addrs, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}), zk.WithDialer(cappedDial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// deadlineCap is past every deadline go-zookeeper sets for a 10 s session
// but the handshake's: its receive timeout is two thirds of the session
// timeout and it pings every half of that.
const deadlineCap = 8 * time.Second

func cappedDial(network, addr string, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return cappedConn{nc}, nil
}

// cappedConn caps every read and write deadline at deadlineCap from now.
type cappedConn struct{ net.Conn }

// capDeadline is d, or deadlineCap from now if d is later (no deadline
// stays none).
func capDeadline(d time.Time) time.Time {
	if limit := time.Now().Add(deadlineCap); !d.IsZero() && d.After(limit) {
		return limit
	}
	return d
}

func (c cappedConn) SetReadDeadline(d time.Time) error { return c.Conn.SetReadDeadline(capDeadline(d)) }
func (c cappedConn) SetWriteDeadline(d time.Time) error {
	return c.Conn.SetWriteDeadline(capDeadline(d))
}
func (c cappedConn) SetDeadline(d time.Time) error { return c.Conn.SetDeadline(capDeadline(d)) }

type quiet struct{}

func (quiet) Printf(string, ...any) {}

func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var open = zk.WorldACL(zk.PermAll)

func TestCaches(t *testing.T) {
	clienttest.Each(t, func(t *testing.T, tg *clienttest.Target) {
		modes := []bool{false}
		if tg.Kind == clienttest.Zkraft {
			modes = append(modes, true) // and zkraft through persistent watches
		}
		for _, persistent := range modes {
			name := "auto"
			if persistent {
				name = "persistent"
			}
			t.Run(name, func(t *testing.T) {
				t.Run("TreeSeesEveryChangeInOrder", func(t *testing.T) { testTreeEveryChange(t, tg, persistent) })
				t.Run("TreeAcrossReconnections", func(t *testing.T) { testTreeReconnect(t, tg, persistent) })
				t.Run("Node", func(t *testing.T) { testNode(t, tg, persistent) })
				t.Run("Depth", func(t *testing.T) { testDepth(t, tg, persistent) })
			})
		}
	})
}

func wantMode(t *testing.T, tg *clienttest.Target, persistent bool, got cache.Mode) {
	t.Helper()
	want := cache.WatchFrom
	if persistent || tg.Kind == clienttest.ZooKeeper {
		want = cache.PersistentWatch
	}
	if got != want {
		t.Fatalf("mode %v, want %v", got, want)
	}
}

// Every kind of change, each reported once with its own zxid (what the
// writer's Stat says), in zxid order, and the cache's contents match the
// server's at the end.
func testTreeEveryChange(t *testing.T, tg *clienttest.Target, persistent bool) {
	root := "/" + strings.ReplaceAll(t.Name(), "/", "_")
	w := dial(t, tg.Addr())
	if _, err := w.Create(root, []byte("r"), 0, open); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Create(root+"/before", []byte("b"), 0, open); err != nil {
		t.Fatal(err)
	}
	got := newChanges()
	c, err := cache.NewTree(within(t, 30*time.Second), openSession(t, tg.Addr()), root, cache.Options{OnChange: got.on, Persistent: persistent})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wantMode(t, tg, persistent, c.Mode())
	if n, ok := c.Get(root + "/before"); !ok || string(n.Data) != "b" {
		t.Fatalf("initial load: %+v %v", n, ok)
	}
	type want struct {
		typ  cache.EventType
		path string
		zxid int64
	}
	var wants []want
	stat := func(p string) *zk.Stat {
		_, st, err := w.Exists(p)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// One change at a time, each awaited, so that persistent watches (whose
	// notifications carry no zxid on ZooKeeper 3.8) see each state too.
	step := func(typ cache.EventType, path string, f func() int64) {
		z := f()
		wants = append(wants, want{typ, path, z})
		got.waitFor(t, 10*time.Second, fmt.Sprintf("%s %s", typ, path), func(l []cache.Change) bool { return len(l) >= len(wants) })
	}
	step(cache.Created, root+"/a", func() int64 {
		w.Create(root+"/a", []byte("1"), 0, open)
		return stat(root + "/a").Czxid
	})
	step(cache.Changed, root+"/a", func() int64 {
		st, _ := w.Set(root+"/a", []byte("2"), -1)
		return st.Mzxid
	})
	step(cache.Created, root+"/a/deep", func() int64 {
		w.Create(root+"/a/deep", nil, 0, open)
		return stat(root + "/a/deep").Czxid
	})
	step(cache.Deleted, root+"/before", func() int64 {
		w.Delete(root+"/before", -1)
		return stat(root).Pzxid
	})
	step(cache.Changed, root, func() int64 {
		st, _ := w.Set(root, []byte("r2"), -1)
		return st.Mzxid
	})
	list := got.all()
	for i, wt := range wants {
		c := list[i]
		if c.Type != wt.typ || c.Path != wt.path {
			t.Fatalf("change %d: %s %s, want %s %s (all:%s)", i, c.Type, c.Path, wt.typ, wt.path, summary(list))
		}
		if c.Zxid != wt.zxid && !(tg.Kind == clienttest.ZooKeeper && c.Type == cache.Deleted) {
			t.Fatalf("change %d (%s %s) at zxid %x, want %x", i, c.Type, c.Path, c.Zxid, wt.zxid)
		}
		if i > 0 && c.Zxid < list[i-1].Zxid {
			t.Fatalf("zxid %x after %x", c.Zxid, list[i-1].Zxid)
		}
	}
	if n, ok := c.Get(root + "/a"); !ok || string(n.Data) != "2" || n.Stat.Mzxid != wants[1].zxid {
		t.Fatalf("cached /a: %+v %v", n, ok)
	}
	if _, ok := c.Get(root + "/before"); ok {
		t.Fatal("a deleted node is still cached")
	}
	if k := c.Children(root); fmt.Sprint(k) != "[a]" {
		t.Fatalf("children %v", k)
	}
	if z := c.Zxid(); z < wants[len(wants)-1].zxid {
		t.Fatalf("cache zxid %x below the last change %x", z, wants[len(wants)-1].zxid)
	}
	// A multi: its changes together, in order.
	if _, err := w.Multi(&zk.CreateRequest{Path: root + "/m1", Acl: open}, &zk.CreateRequest{Path: root + "/m2", Acl: open}); err != nil {
		t.Fatal(err)
	}
	got.waitFor(t, 10*time.Second, "the multi's two creates", func(l []cache.Change) bool {
		return len(l) >= len(wants)+2
	})
	l := got.all()[len(wants):]
	if l[0].Path != root+"/m1" || l[1].Path != root+"/m2" || l[0].Zxid > l[1].Zxid {
		t.Fatalf("multi:%s", summary(l))
	}
}

// Every one of many creates is reported exactly once, with its czxid, in
// zxid order, while the cache's connections are cut twice.
func testTreeReconnect(t *testing.T, tg *clienttest.Target, persistent bool) {
	root := "/" + strings.ReplaceAll(t.Name(), "/", "_")
	p := tcpproxy.New(t, tg.Addr())
	got := newChanges()
	c, err := cache.NewTree(within(t, 30*time.Second), openSession(t, p.Addr()), root, cache.Options{OnChange: got.on, Persistent: persistent})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := dial(t, tg.Addr())
	before := p.Accepted()
	czxids := writeMany(t, w, root, 150, func(i int) {
		if i == 50 || i == 100 {
			p.Cut()
		}
	})
	checkCreates(t, got, root, czxids, 30*time.Second)
	if p.Accepted() < before+2 {
		t.Fatalf("%d connections through the proxy after two cuts (%d before): the cache did not reconnect", p.Accepted(), before)
	}
}

// writeMany creates root and n children, calling between(i) before the
// i-th, and returns each child's czxid (retrying across server outages).
func writeMany(t *testing.T, w *zk.Conn, root string, n int, between func(int)) map[string]int64 {
	t.Helper()
	create(t, w, root)
	out := map[string]int64{}
	for i := 0; i < n; i++ {
		between(i)
		p := fmt.Sprintf("%s/n%04d", root, i)
		out[p] = create(t, w, p)
	}
	return out
}

// create creates path (once, whatever the connection does) and returns
// its czxid.
func create(t *testing.T, w *zk.Conn, path string) int64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := w.Create(path, []byte("x"), 0, open)
		if err == nil || errors.Is(err, zk.ErrNodeExists) {
			if ok, st, err := w.Exists(path); err == nil && ok {
				return st.Czxid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("create %s: %v", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkCreates waits until every path in want was reported created, then
// checks each was reported once, at its czxid, and that zxids never went
// down.
func checkCreates(t *testing.T, got *changes, root string, want map[string]int64, limit time.Duration) {
	t.Helper()
	list := got.waitFor(t, limit, fmt.Sprintf("%d creates", len(want)), func(l []cache.Change) bool {
		n := 0
		for _, c := range l {
			if _, ok := want[c.Path]; ok && c.Type == cache.Created {
				n++
			}
		}
		return n >= len(want)
	})
	seen := map[string]int{}
	for i, c := range list {
		if i > 0 && c.Zxid < list[i-1].Zxid {
			t.Fatalf("change %d (%s %s) at zxid %x after %x", i, c.Type, c.Path, c.Zxid, list[i-1].Zxid)
		}
		if z, ok := want[c.Path]; ok {
			if c.Type != cache.Created {
				t.Fatalf("%s %s: only creates happened", c.Type, c.Path)
			}
			if c.Zxid != z {
				t.Fatalf("%s created at %x, reported at %x", c.Path, z, c.Zxid)
			}
			seen[c.Path]++
		}
	}
	for p := range want {
		if seen[p] != 1 {
			t.Fatalf("%s reported %d times", p, seen[p])
		}
	}
}

// A node cache follows one node through creation, changes and deletion,
// and ignores its children.
func testNode(t *testing.T, tg *clienttest.Target, persistent bool) {
	path := "/" + strings.ReplaceAll(t.Name(), "/", "_")
	got := newChanges()
	c, err := cache.NewNode(within(t, 30*time.Second), openSession(t, tg.Addr()), path, cache.Options{OnChange: got.on, Persistent: persistent})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wantMode(t, tg, persistent, c.Mode())
	if _, ok := c.Get(); ok {
		t.Fatal("a node that does not exist is cached")
	}
	w := dial(t, tg.Addr())
	w.Create(path, []byte("v1"), 0, open)
	got.waitFor(t, 10*time.Second, "created", func(l []cache.Change) bool { return len(l) >= 1 })
	w.Create(path+"/child", nil, 0, open)
	st, err := w.Set(path, []byte("v2"), -1)
	if err != nil {
		t.Fatal(err)
	}
	got.waitFor(t, 10*time.Second, "changed", func(l []cache.Change) bool { return len(l) >= 2 })
	if n, ok := c.Get(); !ok || string(n.Data) != "v2" || n.Stat.Mzxid != st.Mzxid {
		t.Fatalf("cached %+v %v", n, ok)
	}
	w.Delete(path+"/child", -1)
	w.Delete(path, -1)
	l := got.waitFor(t, 10*time.Second, "deleted", func(l []cache.Change) bool { return len(l) >= 3 })
	var types []string
	for _, ch := range l {
		if ch.Path != path {
			t.Fatalf("a node cache reported %s", ch.Path)
		}
		types = append(types, ch.Type.String())
	}
	if strings.Join(types, ",") != "created,changed,deleted" {
		t.Fatalf("changes %v", types)
	}
	if l[1].Zxid != st.Mzxid {
		t.Fatalf("change at %x, written at %x", l[1].Zxid, st.Mzxid)
	}
	if _, ok := c.Get(); ok {
		t.Fatal("deleted node still cached")
	}
}

// Depth 1 follows the root's children and not their children.
func testDepth(t *testing.T, tg *clienttest.Target, persistent bool) {
	root := "/" + strings.ReplaceAll(t.Name(), "/", "_")
	got := newChanges()
	c, err := cache.NewTree(within(t, 30*time.Second), openSession(t, tg.Addr()), root, cache.Options{OnChange: got.on, Depth: 1, Persistent: persistent})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := dial(t, tg.Addr())
	for _, p := range []string{root, root + "/a", root + "/a/x", root + "/b"} {
		create(t, w, p)
	}
	l := got.waitFor(t, 10*time.Second, "three creates", func(l []cache.Change) bool { return len(l) >= 3 })
	var paths []string
	for _, c := range l {
		paths = append(paths, c.Path)
	}
	sort.Strings(paths)
	if fmt.Sprint(paths) != fmt.Sprint([]string{root, root + "/a", root + "/b"}) {
		t.Fatalf("paths %v", paths)
	}
	if _, ok := c.Get(root + "/a/x"); ok {
		t.Fatal("a grandchild is cached at depth 1")
	}
}

// When the history no longer reaches back to where a disconnected cache
// stopped, it reads the tree again and reports what changed meanwhile, in
// order.
func TestTreeCacheAfterCompactedHistory(t *testing.T) {
	tg := clienttest.StartZkraft(t, func(c *server.Config) { c.HistoryMax = 20 })
	root := "/compacted"
	p := tcpproxy.New(t, tg.Addr())
	got := newChanges()
	c, err := cache.NewTree(within(t, 30*time.Second), openSession(t, p.Addr()), root, cache.Options{OnChange: got.on})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Mode() != cache.WatchFrom {
		t.Fatalf("mode %v", c.Mode())
	}
	w := dial(t, tg.Addr())
	first := writeMany(t, w, root, 5, func(int) {})
	checkCreates(t, got, root, first, 10*time.Second)
	p.Block()
	more := map[string]int64{}
	for i := 0; i < 60; i++ {
		path := fmt.Sprintf("%s/m%04d", root, i)
		more[path] = create(t, w, path)
	}
	p.Cut()
	p.Unblock()
	checkCreates(t, got, root, more, 30*time.Second)
	if k := c.Children(root); len(k) != 65 {
		t.Fatalf("%d children cached", len(k))
	}
}

// The caches follow the tree across a restart of the server (SIGKILL,
// then started again on its data), on zkraft and ZooKeeper.
func TestTreeCacheAcrossServerRestart(t *testing.T) {
	for _, kind := range []clienttest.Kind{clienttest.Zkraft, clienttest.ZooKeeper} {
		t.Run(string(kind), func(t *testing.T) {
			e := clienttest.Ensemble(t, kind, 1)
			addr := e.Members[0].Addr()
			root := "/restart"
			got := newChanges()
			c, err := cache.NewTree(within(t, 60*time.Second), openSession(t, addr), root, cache.Options{OnChange: got.on})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			w := dial(t, addr)
			czxids := writeMany(t, w, root, 90, func(i int) {
				if i == 45 {
					e.Members[0].Kill()
					if err := e.Members[0].Start(); err != nil {
						t.Fatal(err)
					}
					clienttest.WaitServing(t, e, 60*time.Second)
				}
			})
			checkCreates(t, got, root, czxids, 60*time.Second)
			t.Logf("mode %v, %d changes", c.Mode(), len(got.all()))
		})
	}
}

// A cache on one member of a 3-member ensemble that is killed resumes on
// another member and reports every create exactly once, in order.
func TestTreeCacheAcrossMemberKill(t *testing.T) {
	for _, kind := range []clienttest.Kind{clienttest.Zkraft, clienttest.ZooKeeper} {
		t.Run(string(kind), func(t *testing.T) {
			e := clienttest.Ensemble(t, kind, 3)
			victim := e.Members[0]
			// The cache's connections start at the first address: the
			// member that is killed.
			addrs := e.Addrs()
			got := newChanges()
			c, err := cache.NewTree(within(t, 60*time.Second), openSession(t, addrs...), "/members", cache.Options{OnChange: got.on})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			w := dial(t, addrs[1], addrs[2])
			czxids := writeMany(t, w, "/members", 120, func(i int) {
				if i == 40 {
					victim.Kill()
				}
			})
			checkCreates(t, got, "/members", czxids, 60*time.Second)
			t.Logf("mode %v, %d changes", c.Mode(), len(got.all()))
		})
	}
}
