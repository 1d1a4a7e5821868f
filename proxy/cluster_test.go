package proxy_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/proxy"
	"github.com/zkraft/zkraft/server"
)

// startEnsemble starts three members, each with a proxy port.
func startEnsemble(t *testing.T) []*member {
	t.Helper()
	var ms []server.Member
	for i := 1; i <= 3; i++ {
		ms = append(ms, server.Member{ID: uint64(i), RaftAddr: freeport.Addr(t), ElectionAddr: freeport.Addr(t), ClientAddr: freeport.Addr(t)})
	}
	base := t.TempDir()
	members := make([]*member, 3)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range members {
		cfg := server.Config{
			ClientAddr: ms[i].ClientAddr,
			ProxyAddr:  freeport.Addr(t),
			DataDir:    filepath.Join(base, fmt.Sprint(i+1)),
			ReplicaID:  uint64(i + 1),
			Members:    ms,
			TickTime:   500 * time.Millisecond,
			Admin:      server.AdminConfig{Enabled: false},
			Logger:     logger().With("member", i+1),
			// wchs, for the shared watches' count
			FourLetterWords: []string{"wchs"},
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv, err := server.New(cfg)
			if err != nil {
				errs[i] = err
				return
			}
			members[i] = &member{srv: srv, cfg: cfg}
		}()
	}
	wg.Wait()
	for _, m := range members {
		if m != nil {
			t.Cleanup(func() { m.srv.Close() })
		}
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return members
}

// TestEnsembleMemberDies: a proxy in front of three members loses the
// member it is connected to; it reconnects to another, and its client's
// session, ephemeral and watch survive (the proxy reattaches the session
// and re-sets its watch itself).
func TestEnsembleMemberDies(t *testing.T) {
	ms := startEnsemble(t)
	p := startProxy(t, ms...)
	c, ev := connect(t, 10*time.Second, p.Addr().String())
	id := c.SessionID()
	if _, err := c.Create("/survivor", []byte("a"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, _, wch, err := c.GetW("/survivor")
	if err != nil {
		t.Fatal(err)
	}
	var dead *member
	for _, m := range ms {
		if m.cfg.ProxyAddr == p.Upstream() {
			dead = m
		}
	}
	if dead == nil {
		t.Fatalf("the proxy's upstream %q is none of the members", p.Upstream())
	}
	dead.srv.Close()
	// The proxy keeps its idle client and reattaches the session on
	// another member (reattach.go): the client sees nothing, or at most a
	// disconnect (a reattach slower than its session timeout).
	for deadline := time.Now().Add(30 * time.Second); p.Upstream() == dead.cfg.ProxyAddr || p.Upstream() == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the proxy has no other upstream connection 30s after its member died")
		}
	}
	retryGet(t, c, "/survivor")
	t.Logf("the client's states after its proxy's member died: %v", drainStates(ev))
	if c.SessionID() != id || p.Upstream() == dead.cfg.ProxyAddr || p.Upstream() == "" {
		t.Fatalf("after the member died: session %#x (was %#x), upstream %q (dead %q)", c.SessionID(), id, p.Upstream(), dead.cfg.ProxyAddr)
	}
	var other *member
	for _, m := range ms {
		if m != dead {
			other = m
		}
	}
	direct, _ := connect(t, 10*time.Second, other.cfg.ClientAddr)
	if _, err := direct.Set("/survivor", []byte("b"), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-wch:
		if e.Type != zk.EventNodeDataChanged {
			t.Fatalf("watch after the move: %+v", e)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the watch set before the member died did not fire after the reconnect (setWatches)")
	}
	if _, st, err := direct.Exists("/survivor"); err != nil || st == nil || st.EphemeralOwner != id {
		t.Fatalf("the ephemeral after the member died: %+v %v", st, err)
	}
}

// TestSharedWatchEnsemble: sessions watching one znode through two
// proxies in front of three members: the members hold one watch per
// proxy between them, and a write through a third member notifies every
// session once, before a reply that reflects it.
func TestSharedWatchEnsemble(t *testing.T) {
	const perProxy = 10
	ms := startEnsemble(t)
	pa, pb := startProxy(t, ms...), startProxy(t, ms...)
	waitUpstream(t, pa)
	waitUpstream(t, pb)
	direct, _ := connect(t, 10*time.Second, ms[0].cfg.ClientAddr)
	if _, err := direct.Create("/ens", []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	type watcher struct {
		c *zk.Conn
		w <-chan zk.Event
	}
	var ws []watcher
	for _, p := range []*proxy.Proxy{pa, pb} {
		for range perProxy {
			c, _ := connect(t, 10*time.Second, p.Addr().String())
			_, _, w, err := c.GetW("/ens")
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, watcher{c, w})
		}
	}
	total := 0
	for _, m := range ms {
		_, _, n := wchs(t, m.cfg.ClientAddr)
		total += n
	}
	if total != 2 {
		t.Fatalf("the members hold %d watches for %d sessions through 2 proxies, want 2", total, len(ws))
	}
	if _, err := direct.Set("/ens", []byte("1"), -1); err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		if got, _, err := w.c.Get("/ens"); err != nil || string(got) != "1" {
			t.Fatalf("session %d: get %q %v", i, got, err)
		}
		select {
		case e := <-w.w:
			if e.Type != zk.EventNodeDataChanged {
				t.Errorf("session %d: %+v", i, e)
			}
		default:
			t.Errorf("session %d: the reply showing the change came before its event", i)
		}
	}
}

// retryGet reads path through c until it succeeds, for at most 30 s (a
// request in flight when a proxy loses its member fails with a lost
// connection).
func retryGet(t *testing.T, c *zk.Conn, path string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, _, err := c.Get(path)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("get %s: %v after 30s", path, err)
		}
	}
}

// drainStates returns the session states queued on ev.
func drainStates(ev <-chan zk.Event) []zk.State {
	var states []zk.State
	for {
		select {
		case e := <-ev:
			if e.Type == zk.EventSession {
				states = append(states, e.State)
			}
		default:
			return states
		}
	}
}
