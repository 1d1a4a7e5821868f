package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/internal/zktest"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/server"
	"github.com/zkraft/zkraft/session"
)

// TestConsolidateTwoEnsembles is docs/cells.md's consolidation walk-through
// on one member: the data directories of two ZooKeeper ensembles (the
// plain and gz fixtures, each what a real ZooKeeper 3.8 wrote with
// sessions open) go into two cells of one fleet with zkraft cell create
// --import, zkraft import --cell on the stopped member and zkraft cell
// release. Each cell then serves its ensemble's tree, every Stat and ACL,
// and its open sessions (a client reconnects with its id and password),
// and nothing of the other; each is exported back to a ZooKeeper data
// directory that a real ZooKeeper serves with the same tree and sessions.
func TestConsolidateTwoEnsembles(t *testing.T) {
	zktest.Require(t)
	dir := t.TempDir()
	raftAddr := fmt.Sprintf("127.0.0.1:%d", freeport.Port(t))
	clientAddr := fmt.Sprintf("127.0.0.1:%d", freeport.Port(t))
	adminAddr := fmt.Sprintf("127.0.0.1:%d", freeport.Port(t))
	start := func() *server.Server {
		t.Helper()
		srv, err := server.New(server.Config{
			DataDir:                dir,
			ClientAddr:             clientAddr,
			RaftAddr:               raftAddr,
			TickTime:               500 * time.Millisecond,
			ExtendedTypes:          true,
			SuperDigest:            zktest.SuperDigest,
			ContainerCheckInterval: time.Hour,
			MaxSessionTimeout:      40 * time.Second,
			Admin:                  server.AdminConfig{Enabled: true, Addr: adminAddr},
			Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	cellCmd := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := runCell(append(args, "--admin", "http://"+adminAddr+"/commands", "--super", "super:secret"), &out)
		return out.String(), err
	}
	type source struct {
		cell, fixture string
		port          int
		want          *zktest.Dump
		final         []zktest.Node
	}
	sources := []*source{{cell: "zk-a", fixture: "plain"}, {cell: "zk-b", fixture: "gz"}}
	for _, s := range sources {
		s.port = freeport.Port(t)
		var err error
		if s.want, err = zktest.ReadDump(filepath.Join(fixtures, s.fixture, "expected.json")); err != nil {
			t.Fatal(err)
		}
		if len(s.want.Sessions) == 0 {
			t.Fatalf("fixture %s has no open sessions", s.fixture)
		}
	}

	// 1. The cells, created importing: nobody serves them yet.
	srv := start()
	for _, s := range sources {
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, err := cellCmd("create", s.cell, "--voters", "1", "--port", fmt.Sprint(s.port), "--import")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("create %s --import: %v\n%s", s.cell, err, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if out, _ := cellCmd("show", s.cell); !strings.Contains(out, `"state" : "importing"`) {
			t.Errorf("cell %s after create --import:\n%s", s.cell, out)
		}
	}
	time.Sleep(1500 * time.Millisecond) // a reconcile round or more: nothing may start
	for _, s := range sources {
		if nc, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), time.Second); err == nil {
			nc.Close()
			t.Errorf("cell %s is served before its import and release", s.cell)
		}
	}
	srv.Close()

	// 2. zkraft import --cell on the stopped member, each ensemble's data
	// into its cell.
	for _, s := range sources {
		var out bytes.Buffer
		if err := importCmd(&out, append(fixtureArgs(s.fixture), "--cell", s.cell, "--data-dir", dir, "--replica-id", "1", "--verify")); err != nil {
			t.Fatalf("import --cell %s: %v\n%s", s.cell, err, out.String())
		}
		if !strings.Contains(out.String(), "verify: OK") {
			t.Errorf("import --cell %s: no verify: OK line:\n%s", s.cell, out.String())
		}
	}
	if err := importCmd(io.Discard, append(fixtureArgs("plain"), "--cell", "zk-a", "--data-dir", dir, "--replica-id", "1")); err == nil ||
		!strings.Contains(err.Error(), "already holds the cell's state") {
		t.Errorf("second import into zk-a: %v", err)
	}
	if err := importCmd(io.Discard, append(fixtureArgs("plain"), "--cell", "nosuch", "--data-dir", dir, "--replica-id", "1")); err == nil ||
		!strings.Contains(err.Error(), "no cell") {
		t.Errorf("import into an unknown cell: %v", err)
	}

	// 3. The member again, and zkraft cell release: each cell serves its
	// ensemble's tree and sessions.
	srv = start()
	closed := false
	defer func() {
		if !closed {
			srv.Close()
		}
	}()
	for _, s := range sources {
		// The system shard starts once the default cell serves.
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, err := cellCmd("release", s.cell)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("release %s: %v\n%s", s.cell, err, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if out, err := cellCmd("release", "zk-a"); err == nil {
		t.Errorf("a second release succeeded:\n%s", out)
	}
	for _, s := range sources {
		addr := fmt.Sprintf("127.0.0.1:%d", s.port)
		waitServing(t, addr, 30*time.Second)
		c := zktest.Connect(t, addr)
		got, err := zktest.DumpTree(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range zktest.Compare(s.want.Nodes, got, zkraftOnly, 20) {
			t.Errorf("cell %s after import: %s", s.cell, d)
		}
		var last int64
		for _, n := range s.want.Nodes {
			last = max(last, n.Stat.Mzxid, n.Stat.Pzxid)
		}
		for _, ses := range s.want.Sessions {
			rc, resp := reconnect(t, addr, ses.ID, session.Password(ses.ID), last)
			if resp.SessionID != ses.ID || resp.TimeOut == 0 {
				t.Fatalf("cell %s: reconnect %#x: %+v", s.cell, ses.ID, resp)
			}
			for _, e := range ses.Ephemerals {
				if _, st, err := c.Exists(e); err != nil || st.EphemeralOwner != ses.ID {
					t.Errorf("cell %s: session %#x: its ephemeral %s: %v %+v", s.cell, ses.ID, e, err, st)
				}
			}
			if h := rc.call(1, jute.OpExists, &jute.ExistsRequest{Path: "/app"}); h.Err != jute.ErrOK {
				t.Errorf("cell %s: session %#x: exists /app: %v", s.cell, ses.ID, h.Err)
			}
		}
		if _, err := c.Create("/only-"+s.cell, []byte(s.cell), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range sources {
		c := zktest.Connect(t, fmt.Sprintf("127.0.0.1:%d", s.port))
		for _, o := range sources {
			if ok, _, err := c.Exists("/only-" + o.cell); err != nil || ok != (o == s) {
				t.Errorf("cell %s sees /only-%s: %v %v", s.cell, o.cell, ok, err)
			}
		}
		if s.final, _ = zktest.DumpTree(c); s.final == nil {
			t.Fatalf("cell %s: no dump", s.cell)
		}
	}
	d := zktest.Connect(t, clientAddr)
	if ok, _, err := d.Exists("/app"); err != nil || ok {
		t.Errorf("the default cell has the imported /app: %v %v", ok, err)
	}
	srv.Close()
	closed = true

	// 4. Each cell exported back, and ZooKeeper serves it with its sessions.
	for _, s := range sources {
		zkDir := t.TempDir()
		var out bytes.Buffer
		if err := exportCmd(&out, []string{"--data-dir", dir, "--cell", s.cell, "--replica-id", "1", "--extended-types", "--zk-data-dir", zkDir}); err != nil {
			t.Fatalf("export --cell %s: %v\n%s", s.cell, err, out.String())
		}
		z := zktest.Start(t, zktest.Config{DataDir: zkDir})
		zc := zktest.Connect(t, z.Addr)
		back, err := zktest.DumpTree(zc)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range zktest.Compare(s.final, back, zkraftOnly, 20) {
			t.Errorf("ZooKeeper from cell %s's export: %s", s.cell, d)
		}
		for _, ses := range s.want.Sessions {
			if _, resp := reconnect(t, z.Addr, ses.ID, session.Password(ses.ID), 0); resp.SessionID != ses.ID {
				t.Errorf("ZooKeeper from cell %s's export: session %#x: %+v", s.cell, ses.ID, resp)
			}
		}
		z.Stop()
	}
}

// TestImportCellOfThreeReplicas is the walk-through's rolling import into
// a cell of three voters: created with --import on a fleet of three members
// (in this process, each on its own loopback address), each member stopped
// in turn and the same ZooKeeper data imported there with --expect (an
// import without it, or with another id, is refused), started again; then
// cell release: every member serves the ensemble's tree and its sessions,
// and the cell's leader takes writes.
func TestImportCellOfThreeReplicas(t *testing.T) {
	zktest.Require(t)
	want, err := zktest.ReadDump(filepath.Join(fixtures, "plain", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	netByte := 100 + os.Getpid()%100 + 2
	var members []server.Member
	var admins []string
	for i := 1; i <= 3; i++ {
		ip := fmt.Sprintf("127.%d.2.%d", netByte, i)
		members = append(members, server.Member{ID: uint64(i), RaftAddr: fmt.Sprintf("%s:%d", ip, freeport.Port(t)),
			ClientAddr: fmt.Sprintf("%s:%d", ip, freeport.Port(t))})
		admins = append(admins, fmt.Sprintf("%s:%d", ip, freeport.Port(t)))
	}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	start := func(i int) *server.Server {
		t.Helper()
		s, err := server.New(server.Config{ClientAddr: members[i].ClientAddr, DataDir: dirs[i], Members: members, ReplicaID: uint64(i + 1),
			TickTime: 500 * time.Millisecond, ExtendedTypes: true, SuperDigest: zktest.SuperDigest, FourLetterWords: []string{"*"},
			ContainerCheckInterval: time.Hour, MaxSessionTimeout: 40 * time.Second,
			Admin:  server.AdminConfig{Enabled: true, Addr: admins[i]},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	servers := make([]*server.Server, 3)
	for i := range servers {
		servers[i] = start(i)
	}
	defer func() {
		for _, s := range servers {
			if s != nil {
				s.Close()
			}
		}
	}()
	cellCmd := func(i int, args ...string) (string, error) {
		var out bytes.Buffer
		err := runCell(append(args, "--admin", "http://"+admins[i]+"/commands", "--super", "super:secret"), &out)
		return out.String(), err
	}
	retry := func(what string, fn func() (string, error)) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, err := fn()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v\n%s", what, err, out)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	port := freeport.Port(t)
	retry("create --import", func() (string, error) {
		return cellCmd(0, "create", "zk-a", "--voters", "1,2,3", "--port", fmt.Sprint(port), "--import")
	})
	// Every member has the cell in its map before it is stopped.
	for i := range servers {
		retry(fmt.Sprintf("member %d's map", i+1), func() (string, error) {
			out, err := cellCmd(i, "show", "zk-a")
			if err == nil && !strings.Contains(out, `"state" : "importing"`) {
				err = fmt.Errorf("not importing yet")
			}
			return out, err
		})
	}
	var dry bytes.Buffer
	if err := importCmd(&dry, append(fixtureArgs("plain"), "--dry-run")); err != nil {
		t.Fatal(err)
	}
	var id string
	if _, after, ok := strings.Cut(dry.String(), "import id "); ok {
		id = strings.Fields(after)[0]
		id = strings.TrimSuffix(id, ";")
	}
	if id == "" {
		t.Fatalf("no import id in the dry run:\n%s", dry.String())
	}

	// The rolling import: one member stopped at a time.
	for i := range servers {
		servers[i].Close()
		servers[i] = nil
		args := append(fixtureArgs("plain"), "--cell", "zk-a", "--data-dir", dirs[i], "--replica-id", fmt.Sprint(i+1))
		if err := importCmd(io.Discard, args); err == nil || !strings.Contains(err.Error(), "--expect") {
			t.Errorf("member %d: import into a cell of 3 replicas without --expect: %v", i+1, err)
		}
		if err := importCmd(io.Discard, append(args, "--expect", "0000-not-it")); err == nil {
			t.Errorf("member %d: import with another import id succeeded", i+1)
		}
		var out bytes.Buffer
		if err := importCmd(&out, append(args, "--expect", id, "--verify")); err != nil {
			t.Fatalf("member %d: import --cell: %v\n%s", i+1, err, out.String())
		}
		servers[i] = start(i)
	}
	retry("release", func() (string, error) { return cellCmd(2, "release", "zk-a") })

	var addrs []string
	for _, m := range members {
		host, _, _ := net.SplitHostPort(m.ClientAddr)
		addrs = append(addrs, net.JoinHostPort(host, fmt.Sprint(port)))
	}
	for _, a := range addrs {
		waitServing(t, a, 60*time.Second)
	}
	var last int64
	for _, n := range want.Nodes {
		last = max(last, n.Stat.Mzxid, n.Stat.Pzxid)
	}
	for _, a := range addrs {
		c := zktest.Connect(t, a)
		got, err := zktest.DumpTree(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range zktest.Compare(want.Nodes, got, notFromZooKeeper, 20) {
			t.Errorf("cell zk-a at %s: %s", a, d)
		}
	}
	for i, ses := range want.Sessions {
		a := addrs[i%len(addrs)]
		rc, resp := reconnect(t, a, ses.ID, session.Password(ses.ID), last)
		if resp.SessionID != ses.ID || resp.TimeOut == 0 {
			t.Fatalf("zk-a at %s: reconnect %#x: %+v", a, ses.ID, resp)
		}
		p := fmt.Sprintf("/app/after-import-%d", i)
		if h := rc.call(1, jute.OpCreate, &jute.CreateRequest{Path: p, ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}, Flags: jute.FlagEphemeral}); h.Err != jute.ErrOK {
			t.Errorf("zk-a at %s: session %#x: create %s: %v", a, ses.ID, p, h.Err)
		}
	}
	retry("zk-a active", func() (string, error) {
		out, err := cellCmd(0, "show", "zk-a")
		if err == nil && !strings.Contains(out, `"state" : "active"`) {
			err = fmt.Errorf("not active yet")
		}
		return out, err
	})
}
