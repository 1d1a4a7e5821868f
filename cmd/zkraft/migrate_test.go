package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/zktest"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/server"
	"github.com/zkraft/zkraft/session"
	"github.com/zkraft/zkraft/zkdata"
	"github.com/zkraft/zkraft/znode"
)

const fixtures = "../../zkdata/testdata/zk"

func fixtureArgs(name string) []string {
	args := []string{"--zk-data-dir", filepath.Join(fixtures, name, "data")}
	if name == "snappy" {
		args = append(args, "--zk-log-dir", filepath.Join(fixtures, name, "datalog"))
	}
	return args
}

// TestImportVerify imports every fixture with --verify.
func TestImportVerify(t *testing.T) {
	for _, name := range []string{"plain", "gz", "snappy"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			var out bytes.Buffer
			start := time.Now()
			err := importCmd(&out, append(fixtureArgs(name), "--data-dir", dir, "--verify"))
			t.Logf("import took %v:\n%s", time.Since(start), out.String())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "verify: OK") {
				t.Errorf("no verify: OK line")
			}
			// A second import into the same directory is refused.
			out.Reset()
			if err := importCmd(&out, append(fixtureArgs(name), "--data-dir", dir)); err == nil || !strings.Contains(err.Error(), "already holds zkraft state") {
				t.Errorf("second import: %v", err)
			}
		})
	}
}

// TestImportBadInput: what is not a clean ZooKeeper data directory is a
// clear error, and nothing is written.
func TestImportBadInput(t *testing.T) {
	copyFixture := func(t *testing.T) string {
		dst := filepath.Join(t.TempDir(), "zk")
		if err := os.CopyFS(dst, os.DirFS(filepath.Join(fixtures, "plain", "data"))); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	newestLog := func(t *testing.T, dir string) string {
		m, _ := filepath.Glob(filepath.Join(dir, "version-2", "log.*"))
		return m[len(m)-1]
	}
	cases := []struct {
		name  string
		setup func(t *testing.T) string
		want  error
		text  string
	}{
		{"not a data dir", func(t *testing.T) string { return t.TempDir() }, zkdata.ErrNotDataDir, "no version-2"},
		{"corrupt log entry", func(t *testing.T) string {
			d := copyFixture(t)
			p := newestLog(t, d)
			b, _ := os.ReadFile(p)
			b[40] ^= 0xff // inside the first entry
			os.WriteFile(p, b, 0o644)
			return d
		}, zkdata.ErrChecksum, "offset 16"},
		{"wrong log magic", func(t *testing.T) string {
			d := copyFixture(t)
			p := newestLog(t, d)
			b, _ := os.ReadFile(p)
			copy(b, "JUNK")
			os.WriteFile(p, b, 0o644)
			return d
		}, zkdata.ErrBadMagic, "log."},
		{"unknown snapshot version", func(t *testing.T) string {
			d := copyFixture(t)
			m, _ := filepath.Glob(filepath.Join(d, "version-2", "snapshot.*"))
			for _, p := range m {
				b, _ := os.ReadFile(p)
				binary.BigEndian.PutUint32(b[4:], 3)
				os.WriteFile(p, b, 0o644)
			}
			return d
		}, zkdata.ErrUnsupported, "snapshot version 3"},
		{"logs without snapshot", func(t *testing.T) string {
			d := copyFixture(t)
			m, _ := filepath.Glob(filepath.Join(d, "version-2", "snapshot.*"))
			for _, p := range m {
				os.Remove(p)
			}
			return d
		}, zkdata.ErrNoSnapshot, "transaction logs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := c.setup(t)
			out := t.TempDir()
			err := importCmd(io.Discard, []string{"--zk-data-dir", src, "--data-dir", out})
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("got %v, want %v mentioning %q", err, c.want, c.text)
			}
			t.Logf("error: %v", err)
			if entries, _ := os.ReadDir(out); len(entries) != 0 {
				t.Errorf("a failed import wrote %v", entries)
			}
		})
	}
}

// zkraftOnly leaves out what zkraft serves and ZooKeeper does not: the
// feature node /zookeeper/zkraft, and so the child count (and the
// client-visible cversion) of /zookeeper.
func zkraftOnly(path string) bool { return path == znode.FeaturesPath || path == znode.ZooKeeperPath }

// startZkraft serves dataDir in process, as "zkraft --data-dir" does.
func startZkraft(t *testing.T, dataDir, raftAddr string) *server.Server {
	t.Helper()
	srv, err := server.New(server.Config{
		DataDir:                dataDir,
		ClientAddr:             fmt.Sprintf("127.0.0.1:%d", zktest.FreePort(t)),
		RaftAddr:               raftAddr,
		ExtendedTypes:          true,
		SuperDigest:            zktest.SuperDigest,
		ContainerCheckInterval: time.Hour,
		MaxSessionTimeout:      40 * time.Second,
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// rawConn is a client connection spoken by hand, to reconnect with a
// session id and password from ZooKeeper.
type rawConn struct {
	t  *testing.T
	nc net.Conn
}

func (c *rawConn) send(recs ...jute.Record) {
	c.t.Helper()
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(jute.AppendFrame(nil, recs...)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawConn) recv() *jute.Reader {
	c.t.Helper()
	var l [4]byte
	if _, err := io.ReadFull(c.nc, l[:]); err != nil {
		c.t.Fatalf("read: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(l[:]))
	if _, err := io.ReadFull(c.nc, b); err != nil {
		c.t.Fatal(err)
	}
	return jute.NewReader(b)
}

// reconnect attaches to an existing session the way a ZooKeeper client
// does after losing its server.
func reconnect(t *testing.T, addr string, id int64, passwd []byte, lastZxid int64) (*rawConn, *jute.ConnectResponse) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &rawConn{t: t, nc: nc}
	c.send(&jute.ConnectRequest{LastZxidSeen: lastZxid, TimeOut: 30000, SessionID: id, Passwd: passwd, HasReadOnly: true})
	resp := new(jute.ConnectResponse)
	r := c.recv()
	resp.Decode(r)
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	return c, resp
}

func (c *rawConn) call(xid int32, op jute.OpCode, req jute.Record) *jute.ReplyHeader {
	c.t.Helper()
	c.send(&jute.RequestHeader{Xid: xid, Type: op}, req)
	for {
		r := c.recv()
		h := new(jute.ReplyHeader)
		h.Decode(r)
		if h.Xid == xid {
			return h
		}
	}
}

// TestRoundTrip: a ZooKeeper data directory (left by a ZooKeeper killed
// with sessions open) is imported; zkraft serves exactly what ZooKeeper
// served, takes the old sessions back with their ids and passwords, and
// continues the zxid; then export, and a real ZooKeeper 3.8 serves what
// zkraft served.
func TestRoundTrip(t *testing.T) {
	zktest.Require(t)
	// go-zookeeper requests have no deadline: fail fast, with every
	// goroutine's stack, rather than at go test's 10-minute timeout.
	watchdog := time.AfterFunc(2*time.Minute, func() {
		buf := make([]byte, 1<<20)
		panic(fmt.Sprintf("TestRoundTrip hung:\n%s", buf[:runtime.Stack(buf, true)]))
	})
	defer watchdog.Stop()
	want, err := zktest.ReadDump(filepath.Join(fixtures, "plain", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	start := time.Now()
	if err := importCmd(io.Discard, append(fixtureArgs("plain"), "--data-dir", dataDir)); err != nil {
		t.Fatal(err)
	}
	t.Logf("import: %v", time.Since(start))
	st, err := raftsm.ExportState(filepath.Join(dataDir, "state"), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	epoch := st.Zxid // the first zxid of the new epoch

	raftAddr := fmt.Sprintf("127.0.0.1:%d", zktest.FreePort(t))
	srv := startZkraft(t, dataDir, raftAddr)
	closed := false
	defer func() {
		if !closed {
			srv.Close()
		}
	}()
	addr := srv.Addr().String()

	// 1. zkraft serves ZooKeeper's tree, every Stat and ACL as ZooKeeper
	// answered them before it was killed.
	c := zktest.Connect(t, addr)
	got, err := zktest.DumpTree(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range zktest.Compare(want.Nodes, got, zkraftOnly, 20) {
		t.Errorf("zkraft after import: %s", d)
	}

	// 2. The sessions ZooKeeper had open come back: a client reconnects
	// with its id and the password ZooKeeper gave it (derived from the
	// id), sees its ephemerals, and writes with zxids above ZooKeeper's.
	var lastZooKeeperZxid int64
	for _, n := range want.Nodes {
		lastZooKeeperZxid = max(lastZooKeeperZxid, n.Stat.Mzxid, n.Stat.Pzxid)
	}
	if len(want.Sessions) == 0 {
		t.Fatal("the fixture has no open sessions")
	}
	for i, s := range want.Sessions {
		rc, resp := reconnect(t, addr, s.ID, session.Password(s.ID), lastZooKeeperZxid)
		if resp.SessionID != s.ID || resp.TimeOut == 0 {
			t.Fatalf("reconnect %#x: %+v", s.ID, resp)
		}
		for _, e := range s.Ephemerals {
			if _, st, err := c.Exists(e); err != nil || st.EphemeralOwner != s.ID {
				t.Errorf("session %#x: its ephemeral %s: %v %+v", s.ID, e, err, st)
			}
		}
		if h := rc.call(1, jute.OpExists, &jute.ExistsRequest{Path: "/app"}); h.Err != jute.ErrOK {
			t.Errorf("session %#x: exists /app: %v", s.ID, h.Err)
		}
		p := fmt.Sprintf("/app/reattached-%d", i)
		h := rc.call(2, jute.OpCreate, &jute.CreateRequest{Path: p, ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}, Flags: jute.FlagEphemeral})
		if h.Err != jute.ErrOK || h.Zxid <= epoch {
			t.Fatalf("session %#x: create %s: %+v (epoch starts at %#x)", s.ID, p, h, epoch)
		}
		_, stat, err := c.Exists(p)
		if err != nil || stat.EphemeralOwner != s.ID {
			t.Errorf("%s: %v, owner %#x, want %#x", p, err, stat.EphemeralOwner, s.ID)
		}
	}
	// A wrong password is refused as ZooKeeper refuses it.
	if _, resp := reconnect(t, addr, want.Sessions[0].ID, make([]byte, 16), 0); resp.SessionID != 0 || resp.TimeOut != 0 {
		t.Errorf("bad password accepted: %+v", resp)
	}

	// 3. Writes continue ZooKeeper's counters: versions, sequence numbers.
	_, appStat, _ := c.Get("/app/seq")
	seq, err := c.Create("/app/seq/s-", nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	var wantSeq int32
	for _, n := range want.Nodes {
		if n.Path == "/app/seq" {
			wantSeq = (n.Stat.Cversion + n.Stat.NumChildren) / 2 // the stored cversion
		}
	}
	if wantSeqPath := fmt.Sprintf("/app/seq/s-%010d", wantSeq); seq != wantSeqPath {
		t.Errorf("sequential create after import: %s, want %s (parent stat %+v)", seq, wantSeqPath, appStat)
	}
	if _, err := c.Create("/after-import", []byte("zkraft"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	final, err := zktest.DumpTree(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true

	// 4. Export (the replica first applies its Raft log), and a real
	// ZooKeeper serves what zkraft served, including the sessions that
	// are still open and their ephemerals.
	zkDir := t.TempDir()
	var out bytes.Buffer
	start = time.Now()
	if err := exportCmd(&out, []string{"--data-dir", dataDir, "--raft-addr", raftAddr, "--extended-types", "--zk-data-dir", zkDir, "--compression", "gz"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("export: %v: %s", time.Since(start), out.String())
	z := zktest.Start(t, zktest.Config{DataDir: zkDir})
	zc := zktest.Connect(t, z.Addr)
	back, err := zktest.DumpTree(zc)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range zktest.Compare(final, back, zkraftOnly, 20) {
		t.Errorf("ZooKeeper after export: %s", d)
	}
	if z.LogContains("Digests are not matching") {
		t.Errorf("ZooKeeper found the digest wrong:\n%s", z.Log(30))
	}
	// The sessions survive the way back too.
	for _, s := range want.Sessions {
		if _, resp := reconnect(t, z.Addr, s.ID, session.Password(s.ID), 0); resp.SessionID != s.ID {
			t.Errorf("ZooKeeper after export: session %#x: %+v", s.ID, resp)
		}
	}
}

// TestLiveSwitch: a client holding a session, an ephemeral and watches on
// a real ZooKeeper carries on when ZooKeeper stops, the data directory is
// imported in place, and zkraft starts on the same port: same session, no
// expiry, the ephemeral intact, the watches re-registered.
func TestLiveSwitch(t *testing.T) {
	zktest.Require(t)
	watchdog := time.AfterFunc(2*time.Minute, func() {
		buf := make([]byte, 1<<20)
		panic(fmt.Sprintf("TestLiveSwitch hung:\n%s", buf[:runtime.Stack(buf, true)]))
	})
	defer watchdog.Stop()
	dir := t.TempDir() // ZooKeeper's dataDir, then zkraft's
	port := zktest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	z := zktest.Start(t, zktest.Config{DataDir: dir, Port: port})

	states := make(chan zk.State, 100)
	c, _, err := zk.Connect([]string{addr}, 20*time.Second, zk.WithLogInfo(false),
		zk.WithEventCallback(func(e zk.Event) {
			if e.Type == zk.EventSession {
				states <- e.State
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitState := func(want zk.State) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case s := <-states:
				if s == zk.StateExpired {
					t.Fatalf("the session expired")
				}
				if s == want {
					return
				}
			case <-timeout:
				t.Fatalf("no %v", want)
			}
		}
	}
	waitState(zk.StateHasSession)
	sid := c.SessionID()
	acl := zk.WorldACL(zk.PermAll)
	if _, err := c.Create("/live", []byte("v1"), 0, acl); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("/live/eph", nil, zk.FlagEphemeral, acl); err != nil {
		t.Fatal(err)
	}
	_, _, dataW, err := c.GetW("/live")
	if err != nil {
		t.Fatal(err)
	}
	_, _, childW, err := c.ChildrenW("/live")
	if err != nil {
		t.Fatal(err)
	}

	z.Stop()
	waitState(zk.StateDisconnected)
	var out bytes.Buffer
	if err := importCmd(&out, []string{"--zk-data-dir", dir, "--data-dir", dir, "--verify"}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	srv := startZkraftOn(t, dir, addr)
	defer srv.Close()
	// The member knows its zxid from the store at start, so the client
	// (whose lastZxidSeen is ZooKeeper's last zxid) is accepted at once.
	waitState(zk.StateHasSession)
	other := zktest.Connect(t, addr)
	if c.SessionID() != sid {
		t.Fatalf("session %#x, want %#x", c.SessionID(), sid)
	}
	if _, st, err := c.Exists("/live/eph"); err != nil || st.EphemeralOwner != sid {
		t.Fatalf("ephemeral after the switch: %v %+v", err, st)
	}
	if _, err := other.Set("/live", []byte("v2"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Create("/live/new", nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		ch   <-chan zk.Event
		want zk.EventType
	}{{dataW, zk.EventNodeDataChanged}, {childW, zk.EventNodeChildrenChanged}} {
		select {
		case e := <-w.ch:
			if e.Type != w.want || e.Path != "/live" {
				t.Errorf("watch: %+v, want %v on /live", e, w.want)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("no %v event after the switch", w.want)
		}
	}
	c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, _, err := other.Exists("/live/eph")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ephemeral outlived its closed session")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func startZkraftOn(t *testing.T, dataDir, clientAddr string) *server.Server {
	t.Helper()
	srv, err := server.New(server.Config{
		DataDir:                dataDir,
		ClientAddr:             clientAddr,
		RaftAddr:               fmt.Sprintf("127.0.0.1:%d", zktest.FreePort(t)),
		ExtendedTypes:          true,
		SuperDigest:            zktest.SuperDigest,
		ContainerCheckInterval: time.Hour,
		MaxSessionTimeout:      40 * time.Second,
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestImportConfigAndExportStore: import in place from a zoo.cfg (the
// ZooKeeper files stay), then export a store that was never served (no Raft
// log: read directly).
func TestImportConfigAndExportStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "zk")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtures, "gz", "data"))); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "zoo.cfg")
	os.WriteFile(cfg, []byte("tickTime=2000\ndataDir="+dir+"\nclientPort=2181\n"), 0o644)
	before, _ := os.ReadDir(filepath.Join(dir, "version-2"))
	if err := importCmd(io.Discard, []string{"--config", cfg, "--verify"}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadDir(filepath.Join(dir, "version-2"))
	if len(before) != len(after) {
		t.Errorf("the ZooKeeper files changed: %d -> %d", len(before), len(after))
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "shard-1-replica-1")); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var buf bytes.Buffer
	if err := exportCmd(&buf, []string{"--config", cfg, "--zk-data-dir", out, "--compression", "snappy"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "raft")); err == nil {
		t.Errorf("export of a never-served store started Raft")
	}
	src, err := zkdata.Restore(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	back, err := zkdata.Restore(out, "")
	if err != nil {
		t.Fatal(err)
	}
	if d := zkdata.Compare(src.Tree, back.Tree, 10); len(d) > 0 {
		t.Errorf("export differs from the source: %v", d)
	}
	if back.Tree.Zxid != raftsm.NextEpoch(src.Tree.Zxid) {
		t.Errorf("exported zxid %#x", back.Tree.Zxid)
	}
	if err := exportCmd(io.Discard, []string{"--config", cfg, "--zk-data-dir", out}); !errors.Is(err, zkdata.ErrExists) {
		t.Errorf("export over an exported dir: %v", err)
	}
}

// TestImportDigestMismatch: a log whose recorded digest disagrees with the
// replayed tree stops the import, unless --ignore-digest.
func TestImportDigestMismatch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "zk")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtures, "plain", "data"))); err != nil {
		t.Fatal(err)
	}
	m, _ := filepath.Glob(filepath.Join(dir, "version-2", "log.*"))
	p := m[len(m)-1]
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// Change the tree digest of the last entry that has one, and seal the
	// entry again: a consistent log that records a wrong digest.
	off, last := 16, -1
	for off+12 <= len(b) {
		n := int(binary.BigEndian.Uint32(b[off+8:]))
		if n == 0 || off+12+n+1 > len(b) {
			break
		}
		if entry := b[off+12 : off+12+n]; n >= 44 && binary.BigEndian.Uint32(entry[n-12:]) == 2 {
			last = off
		}
		off += 12 + n + 1
	}
	if last < 0 {
		t.Fatal("no entry with a digest")
	}
	n := int(binary.BigEndian.Uint32(b[last+8:]))
	entry := b[last+12 : last+12+n]
	entry[n-1] ^= 1
	binary.BigEndian.PutUint64(b[last:], uint64(adler32.Checksum(entry)))
	os.WriteFile(p, b, 0o644)

	err = importCmd(io.Discard, []string{"--zk-data-dir", dir, "--data-dir", t.TempDir()})
	if !errors.Is(err, zkdata.ErrDigestMismatch) {
		t.Fatalf("got %v, want a digest mismatch", err)
	}
	t.Logf("error: %v", err)
	if err := importCmd(io.Discard, []string{"--zk-data-dir", dir, "--data-dir", t.TempDir(), "--ignore-digest"}); err != nil {
		t.Fatal(err)
	}
}
