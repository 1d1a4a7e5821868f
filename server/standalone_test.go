package server

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func standaloneConfig(t *testing.T, dir, raftAddr string) Config {
	return Config{ClientAddr: "127.0.0.1:0", RaftAddr: raftAddr, DataDir: dir, TickTime: 250 * time.Millisecond,
		FourLetterWords: []string{"*"}, Logger: testLogger(t, 1)}
}

// TestStandaloneOpensNoRaftPort: a standalone member without a Raft
// address listens on no Raft port, and restarts work both ways: a data
// directory first served with a Raft address (as every zkraft did) starts
// without one while another process holds that address, keeps its data,
// and starts with it again; another address is refused with what to do.
func TestStandaloneOpensNoRaftPort(t *testing.T) {
	dir := t.TempDir()
	raft := freeAddr(t)

	s, err := New(standaloneConfig(t, dir, raft))
	if err != nil {
		t.Fatal(err)
	}
	c := connectZK(t, s.Addr().String())
	if _, err := c.Create("/kept", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// With an address it does listen there (what the next steps rely on
	// being absent).
	if nc, err := net.DialTimeout("tcp", raft, time.Second); err != nil {
		t.Fatalf("a standalone member with --raft-addr %s does not listen on it: %v", raft, err)
	} else {
		nc.Close()
	}
	s.Close()

	// Another process takes the old Raft port.
	ln, err := net.Listen("tcp", raft)
	if err != nil {
		t.Fatal(err)
	}
	s, err = New(standaloneConfig(t, dir, ""))
	if err != nil {
		ln.Close()
		t.Fatalf("restart without a Raft address while %s is taken: %v", raft, err)
	}
	if got, _ := recordedRaftAddr(filepath.Join(dir, "raft")); got != raft {
		t.Errorf("recorded Raft address %q, want %q", got, raft)
	}
	c = connectZK(t, s.Addr().String())
	if data, _, err := c.Get("/kept"); err != nil || string(data) != "v" {
		t.Fatalf("data after the restart without a Raft address: %q %v", data, err)
	}
	if _, err := c.Create("/later", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("write without a Raft port: %v", err)
	}
	c.Close()
	if got := fourLW(t, s.Addr().String(), "srvr"); !strings.Contains(got, "Mode: standalone") {
		t.Errorf("srvr: %q", got)
	}
	s.Close()
	ln.Close()

	// Back with the address it was first started with.
	s, err = New(standaloneConfig(t, dir, raft))
	if err != nil {
		t.Fatalf("restart with the recorded Raft address: %v", err)
	}
	c = connectZK(t, s.Addr().String())
	if _, _, err := c.Get("/later"); err != nil {
		t.Fatalf("data after the restart with the Raft address: %v", err)
	}
	c.Close()
	s.Close()

	// Another address is refused with the recorded one named.
	other := freeAddr(t)
	if _, err := New(standaloneConfig(t, dir, other)); err == nil || !strings.Contains(err.Error(), "first started with Raft address "+raft) {
		t.Fatalf("restart with another Raft address: %v", err)
	}

	// A new directory without a Raft address records the nominal one and
	// restarts.
	fresh := t.TempDir()
	for i := 0; i < 2; i++ {
		s, err := New(standaloneConfig(t, fresh, ""))
		if err != nil {
			t.Fatalf("start %d of a new directory without a Raft address: %v", i, err)
		}
		s.Close()
	}
	if got, _ := recordedRaftAddr(filepath.Join(fresh, "raft")); got != standaloneRaftAddr {
		t.Errorf("a new standalone directory recorded %q, want %q", got, standaloneRaftAddr)
	}
}

// TestStandaloneGrowsIntoEnsemble: a standalone member started with a Raft
// address grows as ZooKeeper's does with standaloneEnabled=false: it
// restarts as an ensemble of one, reconfig adds a member, which joins and
// serves the data. Restarted with a three-member list instead it is
// refused with the way to do it.
func TestStandaloneGrowsIntoEnsemble(t *testing.T) {
	dir := t.TempDir()
	one := Member{ID: 1, RaftAddr: freeAddr(t), ElectionAddr: freeAddr(t), ClientAddr: freeAddr(t)}
	two := Member{ID: 2, RaftAddr: freeAddr(t), ElectionAddr: freeAddr(t), ClientAddr: freeAddr(t)}
	cfg := standaloneConfig(t, dir, one.RaftAddr)
	cfg.ClientAddr = one.ClientAddr
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := connectZK(t, one.ClientAddr)
	if _, err := c.Create("/before", []byte("standalone"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Close()

	three := []Member{one, two, {ID: 3, RaftAddr: freeAddr(t), ElectionAddr: freeAddr(t), ClientAddr: freeAddr(t)}}
	cfg3 := cfg
	cfg3.Members = three
	if _, err := New(cfg3); err == nil || !strings.Contains(err.Error(), "ensemble of one") {
		t.Fatalf("a standalone data directory started as a member of three: %v", err)
	}

	ens := func(members []Member, id uint64, dataDir string) Config {
		c := standaloneConfig(t, dataDir, "")
		c.ClientAddr, c.Members, c.ReplicaID = members[id-1].ClientAddr, members, id
		c.ReconfigEnabled = true
		c.SuperDigest = "super:lK75jTNcA+U9vtVEw5vB51mj/w4=" // super:secret
		return c
	}
	s1, err := New(ens([]Member{one}, 1, dir))
	if err != nil {
		t.Fatalf("the standalone data as an ensemble of one: %v", err)
	}
	defer s1.Close()
	admin := connectZK(t, one.ClientAddr)
	defer admin.Close()
	if data, _, err := admin.Get("/before"); err != nil || string(data) != "standalone" {
		t.Fatalf("ensemble of one: %q %v", data, err)
	}
	if err := admin.AddAuth("digest", []byte("super:secret")); err != nil {
		t.Fatal(err)
	}
	// As with ZooKeeper, the new member joins as an observer, then becomes
	// a participant once it follows: a second voter that is not running
	// would leave the first without a quorum.
	line := func(role string) string {
		return fmt.Sprintf("server.2=%s:%s:%s;%s", two.RaftAddr, strings.Split(two.ElectionAddr, ":")[1], role, two.ClientAddr)
	}
	if _, err := admin.IncrementalReconfig([]string{line("observer")}, nil, -1); err != nil {
		t.Fatalf("reconfig -add server.2 as an observer: %v", err)
	}
	obs := two
	obs.Observer = true
	cfg2 := ens([]Member{one, obs}, 2, t.TempDir())
	cfg2.Join = true
	s2, err := New(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	_, st, err := admin.Exists("/before")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); s2.lastZxid() < st.Mzxid; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the joined member is at zxid %#x, /before at %#x", s2.lastZxid(), st.Mzxid)
		}
	}
	c2 := connectZK(t, two.ClientAddr)
	defer c2.Close()
	if data, _, err := c2.Get("/before"); err != nil || string(data) != "standalone" {
		t.Fatalf("the joined member: %q %v", data, err)
	}
	if _, err := admin.IncrementalReconfig([]string{line("participant")}, nil, -1); err != nil {
		t.Fatalf("reconfig server.2 to participant: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := s1.nh.SyncGetShardMembership(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Nodes[2]; !ok || len(m.Nodes) != 2 || len(m.NonVotings) != 0 {
		t.Fatalf("membership after the promotion: voters %v non-voting %v", m.Nodes, m.NonVotings)
	}
	// Two voters now: a write needs both, and both see it.
	if _, err := admin.Create("/after", []byte("ensemble"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("write with two voters: %v", err)
	}
	if _, err := c2.Sync("/after"); err != nil {
		t.Fatal(err)
	}
	if data, _, err := c2.Get("/after"); err != nil || string(data) != "ensemble" {
		t.Fatalf("the promoted member: %q %v", data, err)
	}
}

// TestMaxCnxns: past maxCnxns on the client listener, a new connection is
// closed at once, whatever address it comes from.
func TestMaxCnxns(t *testing.T) {
	s := startStandalone(t, func(c *Config) { c.MaxCnxns = 2 })
	addr := s.Addr().String()
	held := []*zk.Conn{connectZK(t, addr), connectZK(t, addr)}
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	nc.Write([]byte("ruok"))
	if n, _ := nc.Read(make([]byte, 16)); n != 0 {
		t.Fatal("a third connection was served with maxCnxns=2")
	}
	nc.Close()
	held[0].Close()
	for deadline := time.Now().Add(5 * time.Second); s.connCount() > 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := fourLW(t, addr, "ruok"); got != "imok" {
		t.Errorf("ruok once a connection closed: %q", got)
	}
	held[1].Close()
}
