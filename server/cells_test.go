package server

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zkraft/zkraft/fleet"
	"github.com/zkraft/zkraft/internal/ackwrites"
	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
)

// waitMap waits until the member's map satisfies ok.
func waitMap(t *testing.T, s *Server, what string, ok func(m *fleet.Map) bool) *fleet.Map {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := s.fleet.latest.Load(); m != nil && ok(m) {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("member %d: the map never had %s", s.cfg.ReplicaID, what)
	return nil
}

// waitServed waits until the member serves cell name on its port.
func waitServed(t *testing.T, s *Server, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, addr, _, ok := s.fleet.hostedState(name); ok && addr != nil && s.fleet.hostedCell(name).c.serving() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("member %d never served cell %s", s.cfg.ReplicaID, name)
}

// TestStandaloneHostsCells: a standalone member runs the system shard
// beside the default cell, imports its configuration into the map, starts
// a created cell on its own shard and port with its own tree, sessions and
// zxids, activates it, and finds it again after a restart; deleting it
// stops serving and removes its replica's data.
func TestStandaloneHostsCells(t *testing.T) {
	dir := t.TempDir()
	s, err := New(standaloneConfig(t, dir, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	m := waitMap(t, s, "the default cell", func(m *fleet.Map) bool { _, ok := m.Cell(fleet.DefaultCell); return ok })
	if d, _ := m.Cell(fleet.DefaultCell); d.ShardID != s.cfg.ShardID || d.ClientPort != portOfAddr(s.Addr().String()) {
		t.Fatalf("default cell %+v", d)
	}

	port := uint16(freeport.Port(t))
	rep, err := s.fleet.propose(context.Background(), &fleet.CreateCell{Name: "alpha", Placement: fleet.Placement{Voters: []uint64{1}}, ClientPort: port})
	if err != nil || !rep.OK() {
		t.Fatalf("create: %v %v", rep, err)
	}
	shard := rep.ShardID
	waitServed(t, s, "alpha")
	waitMap(t, s, "alpha active", func(m *fleet.Map) bool { c, _ := m.Cell("alpha"); return c.State == fleet.CellActive })

	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ca := connectZK(t, addr)
	cd := connectZK(t, s.Addr().String())
	if _, err := ca.Create("/only-alpha", []byte("a"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := cd.Exists("/only-alpha"); err != nil || ok {
		t.Fatalf("the default cell sees alpha's node: %v %v", ok, err)
	}
	if _, err := cd.Create("/only-default", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := ca.Exists("/only-default"); err != nil || ok {
		t.Fatalf("alpha sees the default cell's node: %v %v", ok, err)
	}
	if got := ca.SessionID() >> 56; got != 1 {
		t.Errorf("alpha's session id %x: top byte %d, want the member id 1", ca.SessionID(), got)
	}
	// The four-letter words answer for the cell of their port.
	for _, x := range []struct {
		addr       string
		own, other *zk.Conn
	}{{addr, ca, cd}, {s.Addr().String(), cd, ca}} {
		cons := fourLW(t, x.addr, "cons")
		if own, other := fmt.Sprintf("sid=0x%x", x.own.SessionID()), fmt.Sprintf("sid=0x%x", x.other.SessionID()); !strings.Contains(cons, own) || strings.Contains(cons, other) {
			t.Errorf("cons on %s lists %s? %v, %s? %v:\n%s", x.addr, own, strings.Contains(cons, own), other, strings.Contains(cons, other), cons)
		}
	}
	if srvr := fourLW(t, addr, "srvr"); !strings.Contains(srvr, "Mode: standalone") || !strings.Contains(srvr, fmt.Sprintf("Zxid: 0x%x", zxidOf(t, ca, "/only-alpha"))) {
		t.Errorf("srvr on alpha's port does not show its zxid:\n%s", srvr)
	}
	ca.Close()
	cd.Close()

	// A restart finds the cell in the map and its data in its store.
	s.Close()
	if s, err = New(standaloneConfig(t, dir, "")); err != nil {
		t.Fatal(err)
	}
	waitServed(t, s, "alpha")
	ca = connectZK(t, addr)
	if data, _, err := ca.Get("/only-alpha"); err != nil || string(data) != "a" {
		t.Fatalf("alpha after a restart: %q %v", data, err)
	}
	ca.Close()

	// Delete (forced): the member stops serving it and removes its data.
	m = waitMap(t, s, "alpha", func(m *fleet.Map) bool { _, ok := m.Cell("alpha"); return ok })
	c, _ := m.Cell("alpha")
	if rep, err := s.fleet.propose(context.Background(), &fleet.DeleteCell{Name: "alpha", Expect: c.Updated, Force: true}); err != nil || !rep.OK() {
		t.Fatalf("delete: %v %v", rep, err)
	}
	store := raftsm.StoreDir(filepath.Join(dir, "state"), shard, 1)
	deadline := time.Now().Add(30 * time.Second)
	for s.fleet.hostedCell("alpha") != nil || dirExists(store) {
		if time.Now().After(deadline) {
			t.Fatalf("alpha still hosted (%v) or its store %s still there", s.fleet.hostedCell("alpha") != nil, store)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		nc.Close()
		t.Fatalf("the deleted cell's port %s still accepts connections", addr)
	}
}

// zxidOf is the mzxid of path: with nothing written since, the cell's zxid.
func zxidOf(t *testing.T, c *zk.Conn, path string) int64 {
	t.Helper()
	_, st, err := c.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mzxid
}

func dirExists(dir string) bool {
	_, err := os.Stat(dir)
	return err == nil
}

// TestCellLimits: a cell's limits from the map hold for that cell only:
// creates past its znodes and setData past its data bytes answer
// QUOTAEXCEEDED, a session past its maximum is refused, a watch past its
// maximum closes the connection; the default cell, without limits, takes
// all of them meanwhile.
func TestCellLimits(t *testing.T) {
	cfg := standaloneConfig(t, t.TempDir(), "")
	reg := prometheus.NewRegistry()
	cfg.Metrics.Registerer = reg
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitMap(t, s, "the default cell", func(m *fleet.Map) bool { _, ok := m.Cell(fleet.DefaultCell); return ok })
	port := uint16(freeport.Port(t))
	// The new cell's tree holds the root and the /zookeeper nodes: 10
	// znodes leave room for a few creates.
	limits := fleet.Limits{MaxZnodes: 10, MaxDataBytes: 2000, MaxSessions: 2, MaxWatches: 3}
	rep, err := s.fleet.propose(context.Background(), &fleet.CreateCell{Name: "small", Placement: fleet.Placement{Voters: []uint64{1}}, ClientPort: port, Limits: limits})
	if err != nil || !rep.OK() {
		t.Fatalf("create: %v %v", rep, err)
	}
	waitServed(t, s, "small")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := connectZK(t, addr)
	defer c.Close()
	d := connectZK(t, s.Addr().String())
	defer d.Close()

	created := 0
	for i := 0; i < 20; i++ {
		_, err := c.Create(fmt.Sprintf("/n%d", i), nil, 0, zk.WorldACL(zk.PermAll))
		if isQuotaExceeded(err) {
			break
		}
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		created++
		if _, err := d.Create(fmt.Sprintf("/n%d", i), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("the default cell refused create %d: %v", i, err)
		}
	}
	if created == 0 || created >= 20 {
		t.Fatalf("%d creates before QUOTAEXCEEDED, want some and fewer than 20", created)
	}
	if _, err := d.Create("/past-small", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("the default cell past small's limit: %v", err)
	}
	// Every cell's figures carry its name.
	znodes := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "znode_count" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cell" {
					znodes[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	if len(znodes) != 2 || znodes["small"] == 0 || znodes["default"] != znodes["small"]+1 {
		// The default cell has small's nodes and /past-small.
		t.Errorf("znode_count by cell: %v, want default one above small", znodes)
	}
	// Data: setData of an existing node past 2000 bytes.
	if _, err := c.Set("/n0", make([]byte, 3000), -1); !isQuotaExceeded(err) {
		t.Fatalf("setData past the data limit: %v, want QUOTAEXCEEDED", err)
	}
	if _, err := c.Set("/n0", make([]byte, 100), -1); err != nil {
		t.Fatalf("setData within the data limit: %v", err)
	}

	// Sessions: c is one, a second fits, a third is refused.
	c2 := connectZK(t, addr)
	defer c2.Close()
	c3, ev, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	deadline := time.After(3 * time.Second)
	for done := false; !done; {
		select {
		case e := <-ev:
			if e.State == zk.StateHasSession {
				t.Fatalf("a third session on a cell of at most 2: %x", c3.SessionID())
			}
		case <-deadline:
			done = true
		}
	}
	c3.Close()

	// Watches: 3 fit; the fourth watching read closes the connection.
	for i := 0; i < 3; i++ {
		if _, _, _, err := c.GetW(fmt.Sprintf("/n%d", i)); err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
	}
	if _, _, _, err := c2.GetW("/n0"); err == nil {
		t.Fatal("a fourth watch on a cell of at most 3 was set")
	}
	for i := 0; i < 5; i++ {
		if _, _, _, err := d.GetW(fmt.Sprintf("/n%d", i)); err != nil {
			t.Fatalf("the default cell's watch %d: %v", i, err)
		}
	}
}

// isQuotaExceeded: go-zookeeper has no name for QUOTAEXCEEDED (-125).
func isQuotaExceeded(err error) bool {
	return err != nil && err.Error() == fmt.Sprintf("unknown error: %d", jute.ErrQuotaExceeded)
}

// fleetOf starts n members of one ensemble, each on its own loopback
// address (the map places no two replicas of a cell on one client host),
// and waits until the map holds all of them.
func fleetOf(t *testing.T, n int) []*Server {
	t.Helper()
	return fleetOfWith(t, n, nil)
}

// fleetOfWith is fleetOf with each member's Config changed by tweak.
func fleetOfWith(t *testing.T, n int, tweak func(*Config)) []*Server {
	t.Helper()
	net := 100 + os.Getpid()%100 + 1
	var members []Member
	for i := 1; i <= n; i++ {
		ip := fmt.Sprintf("127.%d.1.%d", net, i)
		members = append(members, Member{ID: uint64(i), RaftAddr: fmt.Sprintf("%s:%d", ip, freeport.Port(t)),
			ClientAddr: fmt.Sprintf("%s:%d", ip, freeport.Port(t))})
	}
	servers := make([]*Server, n)
	for i := range servers {
		cfg := Config{ClientAddr: members[i].ClientAddr, DataDir: t.TempDir(), Members: members, ReplicaID: uint64(i + 1),
			TickTime: 500 * time.Millisecond, FourLetterWords: []string{"*"}, Logger: testLogger(t, uint64(i+1))}
		if tweak != nil {
			tweak(&cfg)
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		servers[i] = s
		t.Cleanup(func() { s.Close() })
	}
	for _, s := range servers {
		waitMap(t, s, "every member", func(m *fleet.Map) bool { return len(m.Members()) == n })
	}
	return servers
}

// cellAddrs are the addresses of cell port on the given members.
func cellAddrs(servers []*Server, port uint16, ids ...int) []string {
	var out []string
	for _, id := range ids {
		host, _, _ := net.SplitHostPort(servers[id-1].cfg.ClientAddr)
		out = append(out, net.JoinHostPort(host, fmt.Sprint(port)))
	}
	return out
}

// TestCellMoveWhileWriting moves a cell from members 1, 2, 3 to 2, 3, 4
// (Dragonboat membership changes driven by the cell's leader's member)
// while a client writes through one session: the move finishes, member 1
// removes its replica, the client keeps its session, and every write it
// saw acknowledged is on the new member.
func TestCellMoveWhileWriting(t *testing.T) {
	servers := fleetOf(t, 4)
	port := uint16(freeport.Port(t))
	rep, err := servers[0].fleet.propose(context.Background(), &fleet.CreateCell{Name: "mover", Placement: fleet.Placement{Voters: []uint64{1, 2, 3}}, ClientPort: port})
	if err != nil || !rep.OK() {
		t.Fatalf("create: %v %v", rep, err)
	}
	for _, i := range []int{0, 1, 2} {
		waitServed(t, servers[i], "mover")
	}
	c, ev, err := zk.Connect(cellAddrs(servers, port, 1, 2, 3, 4), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	expired := make(chan struct{})
	go func() {
		for e := range ev {
			if e.State == zk.StateExpired {
				close(expired)
				return
			}
		}
	}()
	if _, err := c.Create("/w", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	sid := c.SessionID()
	writes := ackwrites.Start(c, "/w", 20*time.Millisecond)

	m := waitMap(t, servers[0], "mover active", func(m *fleet.Map) bool { c, _ := m.Cell("mover"); return c.State == fleet.CellActive })
	cur, _ := m.Cell("mover")
	rep, err = servers[1].fleet.propose(context.Background(), &fleet.BeginMove{Name: "mover", Expect: cur.Updated, Target: fleet.Placement{Voters: []uint64{2, 3, 4}}})
	if err != nil || !rep.OK() {
		t.Fatalf("begin move: %v %v", rep, err)
	}
	waitMap(t, servers[0], "the move finished", func(m *fleet.Map) bool {
		c, _ := m.Cell("mover")
		return c.State == fleet.CellActive && slices.Equal(c.Placement.Voters, []uint64{2, 3, 4})
	})
	deadline := time.Now().Add(30 * time.Second)
	for servers[0].fleet.hostedCell("mover") != nil {
		if time.Now().After(deadline) {
			t.Fatal("member 1 still hosts the moved cell")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A few more writes after the move, then stop.
	writes.WaitMore(t, 20, 30*time.Second)
	acked := writes.Stop()
	select {
	case <-expired:
		t.Fatal("the client's session expired during the move")
	default:
	}
	if c.SessionID() != sid {
		t.Fatalf("session %x became %x", sid, c.SessionID())
	}
	r := connectZK(t, cellAddrs(servers, port, 4)[0])
	defer r.Close()
	missing, err := ackwrites.Missing(r, "/w", acked)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range missing {
		t.Errorf("acknowledged %s missing on the new member", p)
	}
	t.Logf("%d writes acknowledged across the move, all on member 4", len(acked))
}

// TestCellAbortMove: a move that cannot finish (its new member is down:
// its replica, added to the shard as a voter, never catches up) is
// aborted with the AdminServer's cell_abort; the cell keeps its placement,
// and the member of its leader takes the added replica out of the shard,
// so the shard's quorum is the placement's again. The cell takes writes
// throughout.
func TestCellAbortMove(t *testing.T) {
	servers := fleetOf(t, 4)
	port := uint16(freeport.Port(t))
	rep, err := servers[0].fleet.propose(context.Background(), &fleet.CreateCell{Name: "stuck", Placement: fleet.Placement{Voters: []uint64{1, 2, 3}}, ClientPort: port})
	if err != nil || !rep.OK() {
		t.Fatalf("create: %v %v", rep, err)
	}
	for _, i := range []int{0, 1, 2} {
		waitServed(t, servers[i], "stuck")
	}
	m := waitMap(t, servers[0], "stuck active", func(m *fleet.Map) bool { c, _ := m.Cell("stuck"); return c.State == fleet.CellActive })
	cur, _ := m.Cell("stuck")
	servers[3].Close()
	rep, err = servers[0].fleet.propose(context.Background(), &fleet.BeginMove{Name: "stuck", Expect: cur.Updated, Target: fleet.Placement{Voters: []uint64{1, 2, 4}}})
	if err != nil || !rep.OK() {
		t.Fatalf("begin move: %v %v", rep, err)
	}
	m = waitMap(t, servers[0], "stuck moving", func(m *fleet.Map) bool { c, _ := m.Cell("stuck"); return c.State == fleet.CellMoving })
	moving, _ := m.Cell("stuck")
	added, _ := moving.ReplicaOf(4)
	// The shard's voters, read on member 1, once they are want.
	voters := func(want ...uint64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		var got []uint64
		for time.Now().Before(deadline) {
			got = got[:0]
			if h := servers[0].fleet.hostedCell("stuck"); h != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				mem, err := h.c.rep.membership(ctx)
				cancel()
				if err == nil {
					for id := range mem.voters {
						got = append(got, id)
					}
					slices.Sort(got)
					if slices.Equal(got, want) && len(mem.nonVoting) == 0 {
						return
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("the shard's voters: %v, want %v", got, want)
	}
	voters(1, 2, 3, added)
	c := connectZK(t, cellAddrs(servers, port, 1, 2, 3)[0])
	defer c.Close()
	if _, err := c.Create("/during", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	// Asked on member 2, as an operator would (zkraft cell abort).
	fields, errText := cellAbortJSON(servers[1].view(), url.Values{"name": {"stuck"}})
	if errText != "" {
		t.Fatalf("cell_abort: %s %v", errText, fields)
	}
	m = waitMap(t, servers[0], "stuck active again", func(m *fleet.Map) bool { c, _ := m.Cell("stuck"); return c.State == fleet.CellActive })
	if c, _ := m.Cell("stuck"); !slices.Equal(c.Placement.Voters, []uint64{1, 2, 3}) || c.Hosts(4) {
		t.Fatalf("after the abort: %+v", c)
	}
	voters(1, 2, 3)
	if _, err := c.Create("/after", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	// A second abort: the cell is not moving.
	if _, errText := cellAbortJSON(servers[0].view(), url.Values{"name": {"stuck"}}); !strings.Contains(errText, "badState") {
		t.Fatalf("abort of a cell that is not moving: %q", errText)
	}
}

// TestCellTLSPort: a cell with a TLS port is served over TLS on it with
// the member's stores, in the cell's namespace.
func TestCellTLSPort(t *testing.T) {
	pki := newTestPKI(t)
	cfg := standaloneConfig(t, t.TempDir(), "")
	cfg.TLS = TLSConfig{SecureClientAddr: "127.0.0.1:0", CertFile: pki.serverPEM, CAFile: pki.caFile}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitMap(t, s, "the default cell", func(m *fleet.Map) bool { _, ok := m.Cell(fleet.DefaultCell); return ok })
	port, tlsPort := uint16(freeport.Port(t)), uint16(freeport.Port(t))
	rep, err := s.fleet.propose(context.Background(), &fleet.CreateCell{Name: "secure", Placement: fleet.Placement{Voters: []uint64{1}}, ClientPort: port, TLSPort: tlsPort})
	if err != nil || !rep.OK() {
		t.Fatalf("create: %v %v", rep, err)
	}
	waitServed(t, s, "secure")
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.fleet.mu.Lock()
		ln := s.fleet.mu.hosted["secure"].tlsLn
		s.fleet.mu.Unlock()
		if ln != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cell's TLS port is not served")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := connectTLS(t, fmt.Sprintf("127.0.0.1:%d", tlsPort), pki.clientConfig(true))
	defer c.Close()
	if _, err := c.Create("/over-tls", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	p := connectZK(t, fmt.Sprintf("127.0.0.1:%d", port))
	defer p.Close()
	if ok, _, err := p.Exists("/over-tls"); err != nil || !ok {
		t.Fatalf("the cell's plain port does not see the node written over its TLS port: %v %v", ok, err)
	}
	d := connectZK(t, s.Addr().String())
	defer d.Close()
	if ok, _, err := d.Exists("/over-tls"); err != nil || ok {
		t.Fatalf("the default cell sees the cell's node: %v %v", ok, err)
	}
}

// TestCellDeleteSealsFirst: a delete without force seals the cell in its
// own log before it reads that the cell is empty, so nothing can land in
// the window between that read and the deleteCell: there, a new session is
// refused (the connection closes) and a write proposed to the cell's shard
// is refused with NOTREADONLY. A delete the map refuses (the cell holds a
// session) unseals the cell: the write refused during the window is taken
// after it.
func TestCellDeleteSealsFirst(t *testing.T) {
	dir := t.TempDir()
	s, err := New(standaloneConfig(t, dir, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitMap(t, s, "the default cell", func(m *fleet.Map) bool { _, ok := m.Cell(fleet.DefaultCell); return ok })
	ports := map[string]uint16{}
	for _, name := range []string{"empty", "busy"} {
		ports[name] = uint16(freeport.Port(t))
		rep, err := s.fleet.propose(context.Background(), &fleet.CreateCell{Name: name, Placement: fleet.Placement{Voters: []uint64{1}}, ClientPort: ports[name]})
		if err != nil || !rep.OK() {
			t.Fatalf("create %s: %v %v", name, rep, err)
		}
		waitServed(t, s, name)
		waitMap(t, s, name+" active", func(m *fleet.Map) bool { c, _ := m.Cell(name); return c.State == fleet.CellActive })
	}
	addrOf := func(name string) string { return fmt.Sprintf("127.0.0.1:%d", ports[name]) }
	createReq := func(path string) *jute.CreateRequest {
		return &jute.CreateRequest{Path: path, ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}}
	}
	defer func() { testHookAttested = nil }()

	// 1. An empty cell: in the window, a new client gets no session and a
	// write straight to the cell's shard (what any member would propose)
	// is refused; the delete goes ahead.
	hosted := s.fleet.hostedCell("empty").c
	windowRan := false
	testHookAttested = func(cell string) {
		windowRan = true
		nc, err := net.DialTimeout("tcp", addrOf("empty"), 5*time.Second)
		if err != nil {
			t.Errorf("dial the sealed cell: %v", err)
			return
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		nc.Write(jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)}))
		rc := &rawClient{t: t, nc: nc}
		if b, err := rc.frame(); err == nil {
			resp := new(jute.ConnectResponse)
			jute.Unmarshal(b, resp)
			t.Errorf("the sealed cell gave a new client a session: %+v", resp)
		}
		rep, err := proposeWait(hosted.rep, &raftsm.Command{Kind: raftsm.KindRequest, Op: jute.OpCreate, Time: time.Now().UnixMilli(),
			Body: jute.Marshal(createReq("/in-the-window"))}, nil)
		if err != nil || rep.Err != jute.ErrNotReadOnly {
			t.Errorf("a write in the window: %v %v, want NOTREADONLY", rep, err)
		}
	}
	out, errText := cellDeleteJSON(s.view(), url.Values{"name": {"empty"}})
	if errText != "" || !windowRan {
		t.Fatalf("delete empty: %q (window ran: %v) %v", errText, windowRan, out)
	}
	m := waitMap(t, s, "empty deleting", func(m *fleet.Map) bool { c, _ := m.Cell("empty"); return c.State == fleet.CellDeleting })
	if c, _ := m.Cell("empty"); c.Deletion.Forced || c.Deletion.Empty.Znodes != 0 || c.Deletion.Empty.ShardID != c.ShardID {
		t.Errorf("deletion record %+v", c.Deletion)
	}

	// 2. A cell holding a session: the session's write in the window is
	// refused; the map refuses the delete; the cell is unsealed and takes
	// the write.
	rc := dialRaw(t, addrOf("busy"))
	if h, _, err := rc.call(jute.OpCreate, createReq("/before")); err != nil || h.Err != jute.ErrOK {
		t.Fatalf("create /before: %v %v", h, err)
	}
	testHookAttested = func(cell string) {
		if h, _, err := rc.call(jute.OpCreate, createReq("/during")); err != nil || h.Err != jute.ErrNotReadOnly {
			t.Errorf("the session's create in the window: %+v %v, want NOTREADONLY", h, err)
		}
		if h, _, err := rc.call(jute.OpExists, &jute.ExistsRequest{Path: "/before"}); err != nil || h.Err != jute.ErrOK {
			t.Errorf("a read in the window: %+v %v", h, err)
		}
	}
	out, errText = cellDeleteJSON(s.view(), url.Values{"name": {"busy"}})
	if !strings.Contains(errText, "notEmpty") && !strings.Contains(errText, "holds") {
		t.Fatalf("delete busy: %q %v, want a notEmpty refusal", errText, out)
	}
	testHookAttested = nil
	if h, _, err := rc.call(jute.OpCreate, createReq("/during")); err != nil || h.Err != jute.ErrOK {
		t.Errorf("create after the refused delete: %+v %v (the cell stayed sealed?)", h, err)
	}
	if c, _ := s.fleet.latest.Load().Cell("busy"); c.State != fleet.CellActive {
		t.Errorf("busy is %v after a refused delete", c.State)
	}
}

// TestCellRequestFigures: the request figures (packets, latencies, bytes)
// of srvr and mntr are the cell's of the port they are asked on, and the
// Prometheus endpoint shows them per cell: requests to one cell do not
// count in another's.
func TestCellRequestFigures(t *testing.T) {
	cfg := standaloneConfig(t, t.TempDir(), "")
	cfg.FourLetterWords = []string{"*"}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitMap(t, s, "the default cell", func(m *fleet.Map) bool { _, ok := m.Cell(fleet.DefaultCell); return ok })
	port := uint16(freeport.Port(t))
	if rep, err := s.fleet.propose(context.Background(), &fleet.CreateCell{Name: "busy", Placement: fleet.Placement{Voters: []uint64{1}}, ClientPort: port}); err != nil || !rep.OK() {
		t.Fatalf("create: %v %v", rep, err)
	}
	waitServed(t, s, "busy")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	fourLW(t, s.Addr().String(), "srst")
	fourLW(t, addr, "srst")
	c := connectZK(t, addr)
	const n = 30
	for i := 0; i < n; i++ {
		if _, _, err := c.Exists("/"); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	mntr := func(addr, key string) int64 {
		t.Helper()
		for _, line := range strings.Split(fourLW(t, addr, "mntr"), "\n") {
			if v, ok := strings.CutPrefix(line, "zk_"+key+"\t"); ok {
				var x int64
				fmt.Sscan(v, &x)
				return x
			}
		}
		t.Fatalf("mntr on %s has no zk_%s", addr, key)
		return 0
	}
	if got := mntr(addr, "packets_received"); got < n {
		t.Errorf("busy's packets_received %d after %d requests to it", got, n)
	}
	// The default cell's port saw only its srst and this mntr.
	if got := mntr(s.Addr().String(), "packets_received"); got > 3 {
		t.Errorf("the default cell's packets_received %d: busy's requests counted there", got)
	}
	if got := mntr(s.Addr().String(), "bytes_received_count"); got > 64 {
		t.Errorf("the default cell's bytes_received_count %d: busy's requests counted there", got)
	}
}

// fleetAndJoinedFourth starts a fleet of three members with reconfig on
// and a fourth member on another loopback address that the ensemble took
// in by reconfig -add after the bootstrap (closed at the test's end); it
// returns the three, the fourth, its Member and its address.
func fleetAndJoinedFourth(t *testing.T) ([]*Server, *Server, Member, string) {
	t.Helper()
	tweak := func(c *Config) {
		c.ReconfigEnabled = true
		c.SuperDigest = "super:lK75jTNcA+U9vtVEw5vB51mj/w4=" // super:secret
	}
	servers := fleetOfWith(t, 3, tweak)
	host, _, _ := net.SplitHostPort(servers[2].cfg.ClientAddr)
	ip4 := host[:strings.LastIndex(host, ".")] + ".4"
	fourth := Member{ID: 4, RaftAddr: fmt.Sprintf("%s:%d", ip4, freeport.Port(t)), ElectionAddr: fmt.Sprintf("%s:%d", ip4, freeport.Port(t)),
		ClientAddr: fmt.Sprintf("%s:%d", ip4, freeport.Port(t))}
	admin := connectZK(t, servers[0].Addr().String())
	if err := admin.AddAuth("digest", []byte("super:secret")); err != nil {
		t.Fatal(err)
	}
	join := fmt.Sprintf("server.4=%s:%s:participant;%s", fourth.RaftAddr, strings.Split(fourth.ElectionAddr, ":")[1], fourth.ClientAddr)
	if _, err := admin.IncrementalReconfig([]string{join}, nil, -1); err != nil {
		t.Fatalf("reconfig -add: %v", err)
	}
	cfg := Config{ClientAddr: fourth.ClientAddr, DataDir: t.TempDir(), Members: append(append([]Member(nil), servers[0].cfg.Members...), fourth),
		ReplicaID: 4, Join: true, TickTime: 500 * time.Millisecond, FourLetterWords: []string{"*"}, Logger: testLogger(t, 4)}
	tweak(&cfg)
	s4, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s4.Close() })
	return servers, s4, fourth, ip4
}

// TestJoinedMemberHostsCells: a member added to the ensemble by reconfig
// after the bootstrap gets a non-voting replica of the system shard (the
// system shard's leader's member adds it), puts itself in the fleet's map,
// and a cell placed on it is served there.
func TestJoinedMemberHostsCells(t *testing.T) {
	servers, s4, fourth, ip4 := fleetAndJoinedFourth(t)
	m := waitMap(t, servers[0], "member 4", func(m *fleet.Map) bool { _, ok := m.Member(4); return ok })
	if x, _ := m.Member(4); x.RaftAddr != fourth.RaftAddr || x.ClientHost != ip4 {
		t.Errorf("member 4 in the map: %+v", x)
	}
	port := uint16(freeport.Port(t))
	rep, err := servers[0].fleet.propose(context.Background(), &fleet.CreateCell{Name: "late", Placement: fleet.Placement{Voters: []uint64{2, 3, 4}}, ClientPort: port})
	if err != nil || !rep.OK() {
		t.Fatalf("create on 2,3,4: %v %v", rep, err)
	}
	waitServed(t, s4, "late")
	c := connectZK(t, net.JoinHostPort(ip4, fmt.Sprint(port)))
	if _, err := c.Create("/on-the-new-member", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	c2 := connectZK(t, cellAddrs(servers, port, 2)[0])
	if data, _, err := c2.Get("/on-the-new-member"); err != nil || string(data) != "x" {
		t.Fatalf("the cell on member 2: %q %v", data, err)
	}
}

// TestMemberPromoteLeaveRemove: a member added by reconfig after the
// bootstrap runs a non-voting replica of the system shard; member_promote
// makes it a voter; member_remove is refused until member_leave marked it
// leaving, then takes it out of the map and its replica out of the system
// shard (which the system shard's leader does not add back), and the map
// still answers.
func TestMemberPromoteLeaveRemove(t *testing.T) {
	servers, _, _, _ := fleetAndJoinedFourth(t)
	waitMap(t, servers[0], "member 4", func(m *fleet.Map) bool { _, ok := m.Member(4); return ok })
	system := func(what string, ok func(shardMembers) bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		var mem shardMembers
		var err error
		for time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			mem, err = systemShard{servers[0].nh}.membership(ctx)
			cancel()
			if err == nil && ok(mem) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("the system shard: %s: voters %v, non-voting %v, removed %v (%v)", what, mem.voters, mem.nonVoting, mem.removed, err)
	}
	system("member 4 non-voting", func(m shardMembers) bool { _, ok := m.nonVoting[4]; return ok })
	q := url.Values{"id": {"4"}}

	// Asked on member 2.
	if fields, errText := memberPromoteJSON(servers[1].view(), q); errText != "" {
		t.Fatalf("member_promote: %s %v", errText, fields)
	}
	system("member 4 a voter", func(m shardMembers) bool {
		_, v := m.voters[4]
		_, nv := m.nonVoting[4]
		return v && !nv && len(m.voters) == 4
	})

	if _, errText := memberRemoveJSON(servers[1].view(), q); !strings.Contains(errText, "badState") {
		t.Fatalf("member_remove of an active member: %q, want badState", errText)
	}
	if _, errText := memberLeaveJSON(servers[1].view(), q); errText != "" {
		t.Fatalf("member_leave: %s", errText)
	}
	waitMap(t, servers[0], "member 4 leaving", func(m *fleet.Map) bool { x, _ := m.Member(4); return x.State == fleet.MemberLeaving })
	if _, errText := memberRemoveJSON(servers[1].view(), q); errText != "" {
		t.Fatalf("member_remove: %s", errText)
	}
	waitMap(t, servers[0], "member 4 gone", func(m *fleet.Map) bool { _, ok := m.Member(4); return !ok })
	system("member 4 removed", func(m shardMembers) bool {
		_, v := m.voters[4]
		_, nv := m.nonVoting[4]
		return !v && !nv && m.removed[4] && len(m.voters) == 3
	})
	// The map still takes changes, and member 4 (still in the ensemble)
	// is not added back to the system shard.
	port := uint16(freeport.Port(t))
	rep, err := servers[2].fleet.propose(context.Background(), &fleet.CreateCell{Name: "after", Placement: fleet.Placement{Voters: []uint64{1, 2, 3}}, ClientPort: port})
	if err != nil || !rep.OK() {
		t.Fatalf("create after the removal: %v %v", rep, err)
	}
	if _, errText := memberPromoteJSON(servers[0].view(), q); !strings.Contains(errText, "no member 4") {
		t.Fatalf("member_promote of a removed member: %q", errText)
	}
}
