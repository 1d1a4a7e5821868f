package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/internal/zktest"
)

// TestProxyMemberLossUnderLoad: a proxy process in front of a 3-member
// ensemble of processes, 40 go-zookeeper sessions through it (timeout
// 12 s), each owning an ephemeral and watching one znode, half of them
// creating sequential znodes as fast as they are answered. The member
// the proxy is attached to is stopped (SIGSTOP) for 8 s, past the
// proxy's idle bound and grace, and later the member it then uses is
// killed (SIGKILL). Each time the proxy reconnects to another member and
// reattaches its sessions there: no session expires or changes id, every
// ephemeral is there with its owner, every acknowledged create is in the
// tree, every writer writes again, the watch set before both losses
// fires exactly once for each session, and a client sees at most a
// disconnect (only those with a request in flight, whose outcome the
// proxy cannot know, are closed).
func TestProxyMemberLossUnderLoad(t *testing.T) {
	base := t.TempDir()
	type mem struct {
		id                                 int
		client, peer, election, proxy, dir string
		p                                  *zkraftProc
	}
	ms := make([]*mem, 3)
	var lines, addrs, proxyAddrs []string
	for i := range ms {
		m := &mem{id: i + 1, client: freeport.Addr(t), peer: freeport.Addr(t), election: freeport.Addr(t), proxy: freeport.Addr(t)}
		m.dir = filepath.Join(base, fmt.Sprint(m.id))
		ms[i] = m
		lines = append(lines, fmt.Sprintf("server.%d=%s:%s:participant;%s", m.id, m.peer, strings.TrimPrefix(m.election, "127.0.0.1:"), m.client))
		addrs = append(addrs, m.client)
		proxyAddrs = append(proxyAddrs, m.proxy)
	}
	start := func(m *mem) {
		_, port, _ := strings.Cut(m.proxy, ":")
		m.p = startZkraftProc(t, filepath.Join(m.dir, "zkraft.log"), "serve", "--config", filepath.Join(m.dir, "zoo.cfg"), "--proxy-port", port)
	}
	for _, m := range ms {
		data := filepath.Join(m.dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintf("%d\n", m.id)), 0o644)
		cfg := fmt.Sprintf("tickTime=1000\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nadmin.enableServer=false\nstandaloneEnabled=false\nmaxClientCnxns=0\n%s\n", data, strings.Join(lines, "\n"))
		if err := os.WriteFile(filepath.Join(m.dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		start(m)
	}
	if _, err := zktest.WaitQuorum(addrs, nil, 60*time.Second); err != nil {
		for _, m := range ms {
			t.Logf("member %d:\n%s", m.id, tail(filepath.Join(m.dir, "zkraft.log"), 20))
		}
		t.Fatal(err)
	}
	pc, admin := freeport.Addr(t), freeport.Addr(t)
	px := startProxyProc(t, base, pc, admin, proxyAddrs...)
	attached := func() *mem {
		st, err := proxyUpstream(admin)
		if err != nil || st["connected"] != true {
			return nil
		}
		for _, m := range ms {
			if st["member"] == m.proxy {
				return m
			}
		}
		return nil
	}

	direct, _, err := zk.Connect(addrs, 15*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	for _, p := range []string{"/w", "/load"} {
		retryOp(t, "create "+p, func() error {
			_, err := direct.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
			if err == zk.ErrNodeExists {
				return nil
			}
			return err
		})
	}

	const n, writers = 40, 20
	type sess struct {
		c           *zk.Conn
		id          int64
		watch       <-chan zk.Event
		disconnects atomic.Int64
		expired     atomic.Bool
		acked       []string
		unknown     int
		wroteAt     atomic.Int64 // Unix ns of its last acknowledged write
		ephemeral   string
	}
	ss := make([]*sess, n)
	for i := range ss {
		s := &sess{ephemeral: fmt.Sprintf("/e-%d", i)}
		c, _, err := zk.Connect([]string{pc}, 12*time.Second, zk.WithLogger(quiet{}), zk.WithEventCallback(func(e zk.Event) {
			if e.Type != zk.EventSession {
				return
			}
			switch e.State {
			case zk.StateDisconnected:
				s.disconnects.Add(1)
			case zk.StateExpired:
				s.expired.Store(true)
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s.c = c
		ss[i] = s
	}
	for _, s := range ss {
		retryOp(t, "create "+s.ephemeral, func() error {
			_, err := s.c.Create(s.ephemeral, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			return err
		})
		s.id = s.c.SessionID()
		_, _, w, err := s.c.GetW("/w")
		if err != nil {
			t.Fatal(err)
		}
		s.watch = w
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range ss[:writers] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 100000; k++ {
				select {
				case <-stop:
					return
				default:
				}
				name, err := s.c.Create("/load/s-", []byte("x"), zk.FlagSequence, zk.WorldACL(zk.PermAll))
				switch {
				case err == nil:
					s.acked = append(s.acked, name)
					s.wroteAt.Store(time.Now().UnixNano())
				default:
					s.unknown++
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	waitMoved := func(from *mem, what string) *mem {
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if m := attached(); m != nil && m != from {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the proxy is not attached to another member after 60s", what)
			}
		}
	}
	writesAfter := func(what string, at time.Time) {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			all := true
			for _, s := range ss[:writers] {
				if s.wroteAt.Load() < at.UnixNano() {
					all = false
				}
			}
			if all {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not every writer wrote again within 30s", what)
			}
		}
	}
	time.Sleep(2 * time.Second)

	// 1. The attached member stops for 8 s.
	first := attached()
	if first == nil {
		t.Fatal("the proxy is not attached")
	}
	t0 := time.Now()
	first.p.cmd.Process.Signal(syscall.SIGSTOP)
	second := waitMoved(first, "member stopped")
	t.Logf("member %d stopped: the proxy moved to member %d after %v", first.id, second.id, time.Since(t0).Round(time.Millisecond))
	time.Sleep(time.Until(t0.Add(8 * time.Second)))
	first.p.cmd.Process.Signal(syscall.SIGCONT)
	writesAfter("member stopped", time.Now())

	// 2. The member it uses now is killed.
	t1 := time.Now()
	second.p.cmd.Process.Signal(syscall.SIGKILL)
	third := waitMoved(second, "member killed")
	t.Logf("member %d killed: the proxy moved to member %d after %v", second.id, third.id, time.Since(t1).Round(time.Millisecond))
	writesAfter("member killed", time.Now())
	close(stop)
	wg.Wait()

	// The watch set before both losses fires once per session.
	retryOp(t, "set /w", func() error {
		_, err := direct.Set("/w", []byte("changed"), -1)
		return err
	})
	for i, s := range ss {
		select {
		case e := <-s.watch:
			if e.Type != zk.EventNodeDataChanged {
				t.Errorf("session %d: watch event %+v", i, e)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("session %d: its watch did not fire", i)
		}
	}
	var acked, unknown, disconnected int
	var disconnects int64
	for i, s := range ss {
		if s.expired.Load() || s.c.SessionID() != s.id {
			t.Errorf("session %d: expired %v, id %#x (was %#x)", i, s.expired.Load(), s.c.SessionID(), s.id)
		}
		_, st, err := direct.Exists(s.ephemeral)
		if err != nil || st == nil || st.EphemeralOwner != s.id {
			t.Errorf("session %d: its ephemeral %s: %+v %v", i, s.ephemeral, st, err)
		}
		acked += len(s.acked)
		unknown += s.unknown
		if d := s.disconnects.Load(); d > 0 {
			disconnected++
			disconnects += d
		}
	}
	children, _, err := direct.Children("/load")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, c := range children {
		have["/load/"+c] = true
	}
	lost := 0
	for _, s := range ss {
		for _, name := range s.acked {
			if !have[name] {
				lost++
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d acknowledged creates are not in the tree", lost)
	}
	st, _ := proxyUpstream(admin)
	t.Logf("%d acknowledged creates (%d not in the tree), %d with an unknown outcome; %d of %d sessions saw a disconnect (%d in all; %d sessions wrote, %d idle); proxy: connects %v, detached %v, reattached %v, not reattached %v, closed at their timeout %v, member silent %v, slow %v, reader starved %v",
		acked, lost, unknown, disconnected, n, disconnects, writers, n-writers,
		st["connects"], st["sessions_detached"], st["sessions_reattached"], st["sessions_not_reattached"], st["sessions_detached_expired"], st["member_silent"], st["member_slow"], st["reader_starved"])
	for i, s := range ss[writers:] {
		if s.disconnects.Load() > 0 {
			t.Errorf("idle session %d saw %d disconnects: the proxy should have kept it", writers+i, s.disconnects.Load())
		}
	}
	_ = px
}
