package server

import (
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
