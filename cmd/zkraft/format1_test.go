package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/zktest"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/server"
	"github.com/zkraft/zkraft/session"
)

// TestFormat1DataDir: a data directory written by zkraft before the key
// layout changed (testdata/format1, written by the binary of commit
// 6366337 with a session left open, see testdata/format1/gen) opens:
// every znode, Stat and ACL is what a client saw then, the open session
// reattaches with its id and password and still owns its ephemerals, and
// closing it deletes them. The same data directory then restarts as
// format 2.
func TestFormat1DataDir(t *testing.T) {
	want, err := zktest.ReadDump("testdata/format1/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-C", dir, "-xzf", "testdata/format1/datadir.tar.gz").CombinedOutput(); err != nil {
		t.Fatalf("untar: %v\n%s", err, out)
	}
	dataDir := filepath.Join(dir, "data")
	addr := fmt.Sprintf("127.0.0.1:%d", zktest.FreePort(t))
	srv := startFormat1(t, dataDir, addr)
	c := zktest.Connect(t, addr)
	got, err := zktest.DumpTree(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want.Nodes) {
		t.Fatalf("%d znodes, the format 1 store had %d", len(got), len(want.Nodes))
	}
	for i := range got {
		g, w := got[i], want.Nodes[i]
		if g.Path != w.Path || fmt.Sprint(g.Data, g.Stat, g.ACL) != fmt.Sprint(w.Data, w.Stat, w.ACL) {
			t.Fatalf("%.60s: %+v, want %+v", g.Path, g, w)
		}
	}

	s := want.Sessions[0]
	rc, resp := reconnect(t, addr, s.ID, session.Password(s.ID), 0)
	if resp.SessionID != s.ID {
		t.Fatalf("reattach to session %#x: got %#x (expired?)", s.ID, resp.SessionID)
	}
	for _, p := range s.Ephemerals {
		_, st, err := c.Get(p)
		if err != nil || st.EphemeralOwner != s.ID {
			t.Fatalf("%s: %v owner %#x, want session %#x", p, err, st.EphemeralOwner, s.ID)
		}
	}
	if h := rc.call(1, jute.OpCloseSession, nil); h.Err != jute.ErrOK {
		t.Fatalf("closeSession: %v", h.Err)
	}
	for _, p := range s.Ephemerals {
		if ok, _, err := c.Exists(p); err != nil || ok {
			t.Fatalf("%s after its session closed: exists %v %v", p, ok, err)
		}
	}
	if _, err := c.Create("/after", []byte("format 2"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	srv.Close()

	// Converted once: it opens again as format 2 with everything.
	srv = startFormat1(t, dataDir, addr)
	defer srv.Close()
	c = zktest.Connect(t, addr)
	if d, _, err := c.Get("/after"); err != nil || string(d) != "format 2" {
		t.Fatalf("/after after a restart: %q %v", d, err)
	}
	if d, _, err := c.Get("/deep" + repeat("/d", 49)); err != nil || string(d) != "49" {
		t.Fatalf("the deepest node after a restart: %q %v", d, err)
	}
}

// format1RaftAddr is the Raft address testdata/format1 was written with;
// Dragonboat refuses a data directory under another.
const format1RaftAddr = "127.0.0.1:28871"

// startFormat1 starts a member on the fixture's data directory. The Raft
// address is fixed by the fixture, so another test's member (or any process
// handed that port by the kernel) may hold it for a while: the start is
// retried while the port is taken, for up to a minute.
func startFormat1(t *testing.T, dataDir, clientAddr string) *server.Server {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		srv, err := newFormat1(dataDir, clientAddr)
		if err != nil && errors.Is(err, syscall.EADDRINUSE) && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
}

func newFormat1(dataDir, clientAddr string) (*server.Server, error) {
	return server.New(server.Config{
		DataDir:                dataDir,
		ClientAddr:             clientAddr,
		RaftAddr:               format1RaftAddr,
		ExtendedTypes:          true,
		SuperDigest:            zktest.SuperDigest,
		ContainerCheckInterval: time.Hour,
		MaxSessionTimeout:      40 * time.Second,
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
