package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/zktest"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/server"
	"github.com/zkraft/zkraft/znode"
)

// runMainEnv makes the test binary run zkraft's main with its arguments
// instead of the tests: the ensemble test starts its zkraft members as
// processes ("zkraft serve --config zoo.cfg") without building the binary.
const runMainEnv = "ZKRAFT_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	os.Exit(code)
}

// ensMember is one member of the ensemble: the same ports, zoo.cfg, myid
// and dataDir for ZooKeeper and then zkraft.
type ensMember struct {
	id                     int
	client, peer, election int
	dir, dataDir, cfg      string
	zk                     *zktest.Server
	zr                     *zkraftProc
}

func (m *ensMember) addr() string { return fmt.Sprintf("127.0.0.1:%d", m.client) }

// zkraftProc is a zkraft member running as a process.
type zkraftProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

func startZkraftProc(t *testing.T, logPath string, args ...string) *zkraftProc {
	t.Helper()
	return startProcEnv(t, logPath, os.O_APPEND, os.Environ(), args...)
}

// startProcEnv runs the test binary as main with args and env, its output
// appended to logPath (mode os.O_APPEND) or replacing it (os.O_TRUNC), in
// a process group of its own; the test's end kills it.
func startProcEnv(t *testing.T, logPath string, mode int, env []string, args ...string) *zkraftProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(env, runMainEnv+"=1")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|mode, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	p := &zkraftProc{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(syscall.SIGKILL) })
	return p
}

// stop sends sig and waits (SIGKILL after 10s).
func (p *zkraftProc) stop(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *zkraftProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// quiet drops go-zookeeper's log lines (lost connections are expected here).
type quiet struct{}

func (quiet) Printf(string, ...any) {}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// retryOp runs op until it succeeds or fails with something other than a
// lost connection, for at most 30s.
func retryOp(t *testing.T, what string, op func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := op()
		if err == nil {
			return time.Since(start)
		}
		if !errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, zk.ErrNoServer) && !errors.Is(err, zk.ErrSessionMoved) {
			t.Fatalf("%s: %v", what, err)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("%s: still %v after 30s", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dumpMember reads the whole tree from one member, as the super user.
func dumpMember(t *testing.T, addr string) []zktest.Node {
	t.Helper()
	c := zktest.Connect(t, addr)
	defer c.Close()
	if _, err := c.Sync("/"); err != nil {
		t.Fatalf("sync %s: %v", addr, err)
	}
	d, err := zktest.DumpTree(c)
	if err != nil {
		t.Fatalf("dump %s: %v", addr, err)
	}
	return d
}

func waitEvent(t *testing.T, ch <-chan zk.Event, want zk.EventType, path string) {
	t.Helper()
	select {
	case e := <-ch:
		if e.Type != want || e.Path != path {
			t.Errorf("watch: %+v, want %v on %s", e, want, path)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("no %v event on %s", want, path)
	}
}

// notFromZooKeeper leaves out of a comparison between ZooKeeper and zkraft
// what each server makes itself: zkraft's feature node (zkraftOnly), and
// /zookeeper/config, which every member of either rewrites (with its own
// mtime) from the server.N lines when it starts; its data is compared by
// sameConfig.
func notFromZooKeeper(path string) bool { return zkraftOnly(path) || path == znode.ConfigPath }

// sameConfig compares the data of /zookeeper/config in two dumps.
func sameConfig(t *testing.T, what string, want, got []zktest.Node) {
	t.Helper()
	find := func(d []zktest.Node) []byte {
		for _, n := range d {
			if n.Path == znode.ConfigPath {
				return n.Data
			}
		}
		return nil
	}
	if w, g := find(want), find(got); !bytes.Equal(w, g) {
		t.Errorf("%s: /zookeeper/config %q, want %q", what, g, w)
	}
}

var (
	reImportID  = regexp.MustCompile(`import id  (\S+) \(last zxid (0x[0-9a-f]+)\)`)
	reExportDry = regexp.MustCompile(`zxid (0x[0-9a-f]+); applied index (\d+) .*export id (\S+);`)
)

// TestEnsembleMigration migrates a 3-member Apache ZooKeeper 3.8 ensemble
// to a 3-member zkraft ensemble from the same zoo.cfg files, all at once,
// as docs/migration.md describes, with a client that keeps its session,
// ephemerals and watches; kills the zkraft leader; and goes back to a
// ZooKeeper 3.8 ensemble from one member's export, the session still alive.
func TestEnsembleMigration(t *testing.T) {
	zktest.Require(t)
	watchdog := time.AfterFunc(3*time.Minute, func() {
		buf := make([]byte, 1<<20)
		panic(fmt.Sprintf("TestEnsembleMigration hung:\n%s", buf[:runtime.Stack(buf, true)]))
	})
	defer watchdog.Stop()
	t0 := time.Now()
	step := func(format string, args ...any) {
		t.Logf("%6.2fs  %s", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
	}

	// Three members on loopback: one zoo.cfg each (the same server.N
	// lines), myid in the dataDir.
	base := t.TempDir()
	ms := make([]*ensMember, 3)
	var lines, addrs []string
	for i := range ms {
		m := &ensMember{id: i + 1, client: zktest.FreePort(t), peer: zktest.FreePort(t), election: zktest.FreePort(t)}
		m.dir = filepath.Join(base, strconv.Itoa(m.id))
		m.dataDir = filepath.Join(m.dir, "data")
		m.cfg = filepath.Join(m.dir, "zoo.cfg")
		ms[i] = m
		lines = append(lines, fmt.Sprintf("server.%d=127.0.0.1:%d:%d:participant;127.0.0.1:%d", m.id, m.peer, m.election, m.client))
		addrs = append(addrs, m.addr())
	}
	for _, m := range ms {
		if err := os.MkdirAll(m.dataDir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(m.dataDir, "myid"), []byte(fmt.Sprintf("%d\n", m.id)), 0o644)
		// snapCount makes ZooKeeper roll snapshots and logs under the load
		// below (zkraft ignores the key).
		cfg := fmt.Sprintf("tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=%s\n4lw.commands.whitelist=*\nadmin.enableServer=false\nstandaloneEnabled=false\nmaxClientCnxns=0\nsnapCount=100\n%s\n",
			m.dataDir, strings.Join(lines, "\n"))
		if err := os.WriteFile(m.cfg, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	startZooKeeper := func() int {
		t.Helper()
		for _, m := range ms {
			m.zk = zktest.StartPeer(t, m.cfg, m.addr())
		}
		servers := []*zktest.Server{ms[0].zk, ms[1].zk, ms[2].zk}
		leader, err := zktest.WaitQuorum(addrs, servers, 60*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return leader
	}
	zkraftLog := func(m *ensMember) string { return filepath.Join(m.dir, "zkraft.log") }
	startZkraftMember := func(m *ensMember) {
		m.zr = startZkraftProc(t, zkraftLog(m), "serve", "--config", m.cfg, "--super-digest", zktest.SuperDigest, "--log-level", "info")
	}
	waitZkraft := func() int {
		t.Helper()
		leader, err := zktest.WaitQuorum(addrs, nil, 30*time.Second)
		if err != nil {
			for _, m := range ms {
				t.Logf("member %d log:\n%s", m.id, tail(zkraftLog(m), 20))
			}
			t.Fatal(err)
		}
		return leader
	}

	// 1. ZooKeeper 3.8 ensemble.
	leader := startZooKeeper()
	step("ZooKeeper ensemble up, member %d leads", ms[leader].id)

	// The client under test: all three addresses, a session with
	// ephemerals and watches. It must never see its session expire.
	var expired atomic.Bool
	type stateAt struct {
		state zk.State
		at    time.Time
	}
	states := make(chan stateAt, 1000)
	c, _, err := zk.Connect(addrs, 30*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}), zk.WithEventCallback(func(e zk.Event) {
		if e.Type != zk.EventSession {
			return
		}
		if e.State == zk.StateExpired {
			expired.Store(true)
		}
		select {
		case states <- stateAt{e.State, time.Now()}:
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// waitSession returns when the client had its session again.
	waitSession := func(what string) time.Time {
		t.Helper()
		timeout := time.After(45 * time.Second)
		for {
			select {
			case s := <-states:
				if s.state == zk.StateExpired {
					t.Fatalf("%s: the session expired", what)
				}
				if s.state == zk.StateHasSession {
					return s.at
				}
			case <-timeout:
				t.Fatalf("%s: no session after 45s (state %v)", what, c.State())
			}
		}
	}
	waitSession("connect")
	sid := c.SessionID()
	// An administrator's session, also on all three addresses.
	admin, _, err := zk.Connect(addrs, 30*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	retryOp(t, "admin auth", func() error { return admin.AddAuth("digest", []byte("super:secret")) })

	acl := zk.WorldACL(zk.PermAll)
	mustCreate := func(conn *zk.Conn, p string, data []byte, flags int32, acl []zk.ACL) string {
		t.Helper()
		var got string
		retryOp(t, "create "+p, func() error {
			var err error
			got, err = conn.Create(p, data, flags, acl)
			if errors.Is(err, zk.ErrNodeExists) && flags&zk.FlagSequence == 0 {
				got, err = p, nil // created before a lost reply
			}
			return err
		})
		return got
	}
	mustCreate(admin, "/app", []byte("root"), 0, acl)
	mustCreate(admin, "/app/config", []byte("v1"), 0, acl)
	mustCreate(admin, "/app/members", nil, 0, acl)
	mustCreate(admin, "/app/seq", nil, 0, acl)
	for i := 0; i < 5; i++ {
		mustCreate(admin, "/app/seq/s-", []byte{byte(i)}, zk.FlagSequence, acl)
	}
	mustCreate(admin, "/app/secret", []byte("s3cret"), 0, zk.DigestACL(zk.PermAll, "alice", "pw"))
	retryOp(t, "create container", func() error {
		_, err := admin.CreateContainer("/app/cont", nil, zk.FlagContainer, acl)
		return err
	})
	mustCreate(admin, "/app/cont/child", nil, 0, acl)
	mustCreate(admin, "/app/bulk", nil, 0, acl)
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < 300; i += 6 {
				if _, err := admin.Create(fmt.Sprintf("/app/bulk/n-%03d", i), bytes.Repeat([]byte{'a' + byte(i%26)}, 100), 0, acl); err != nil {
					t.Errorf("bulk create %d: %v", i, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	eph1 := mustCreate(c, "/app/members/m1", []byte("me"), zk.FlagEphemeral, acl)
	eph2 := mustCreate(c, "/app/members/m-", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
	_, _, dataW, err := c.GetW("/app/config")
	if err != nil {
		t.Fatal(err)
	}
	_, _, childW, err := c.ChildrenW("/app/members")
	if err != nil {
		t.Fatal(err)
	}
	_, _, existsW, err := c.ExistsW("/app/later")
	if err != nil {
		t.Fatal(err)
	}
	step("tree written: session %#x holds %s and %s, watches on /app/config, /app/members, /app/later", sid, eph1, eph2)

	// 2. Stop ZooKeeper: a follower first, then a write it misses, then
	// the others. The members end with different last zxids.
	modes := map[int]string{}
	for i, m := range ms {
		modes[i] = zktest.Mode(m.addr())
	}
	lag := -1
	for i := range ms {
		if modes[i] == "follower" {
			lag = i
			break
		}
	}
	if lag < 0 {
		t.Fatalf("no follower: %v", modes)
	}
	ms[lag].zk.Stop()
	mustCreate(admin, "/app/after-lag", []byte("member "+strconv.Itoa(ms[lag].id)+" missed this"), 0, acl)
	retryOp(t, "sync", func() error { _, err := admin.Sync("/"); return err })
	zkTree, err := zktest.DumpTree(admin)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if i != lag && modes[i] == "leader" {
			m.zk.Stop()
		}
	}
	for i, m := range ms {
		if i != lag && modes[i] != "leader" {
			m.zk.Stop()
		}
	}
	zkStopped := time.Now()
	step("ZooKeeper stopped: member %d first, then a write it missed, then the others (%d znodes)", ms[lag].id, len(zkTree))
	// The client has lost its connection; forget the events so far.
	for deadline := time.Now().Add(10 * time.Second); c.State() == zk.StateHasSession && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	for len(states) > 0 {
		<-states
	}

	// 3. Find the member with the highest last zxid.
	type dry struct {
		id   string
		zxid int64
	}
	drys := make([]dry, len(ms))
	src := -1
	for i, m := range ms {
		var out bytes.Buffer
		if err := importCmd(&out, []string{"--config", m.cfg, "--dry-run"}); err != nil {
			t.Fatalf("member %d: dry run: %v\n%s", m.id, err, out.String())
		}
		g := reImportID.FindStringSubmatch(out.String())
		if g == nil {
			t.Fatalf("member %d: no import id in:\n%s", m.id, out.String())
		}
		z, _ := strconv.ParseInt(g[2], 0, 64)
		drys[i] = dry{g[1], z}
		if src < 0 || z > drys[src].zxid {
			src = i
		}
	}
	id := drys[src].id
	step("dry runs: %v; the source is member %d (import id %s)", drys, ms[src].id, id)
	if drys[lag].zxid >= drys[src].zxid {
		t.Fatalf("member %d stopped first but has zxid %#x, the source %#x", ms[lag].id, drys[lag].zxid, drys[src].zxid)
	}

	// 4. The checks that keep members from starting on different data.
	noStore := func(m *ensMember) {
		t.Helper()
		if _, err := os.Stat(filepath.Join(m.dataDir, "state")); err == nil {
			t.Fatalf("member %d: a refused import wrote state", m.id)
		}
	}
	lagM := ms[lag]
	if err := importCmd(&bytes.Buffer{}, []string{"--config", lagM.cfg}); err == nil || !strings.Contains(err.Error(), "--expect") {
		t.Errorf("ensemble import without --expect: %v", err)
	}
	if err := importCmd(&bytes.Buffer{}, []string{"--config", lagM.cfg, "--expect", id}); !errors.Is(err, errImportMismatch) {
		t.Errorf("import of member %d's own (older) data with the source's id: %v", lagM.id, err)
	} else {
		t.Logf("refused: %v", err)
	}
	lagCopy := filepath.Join(base, "lagging-copy")
	if err := os.CopyFS(filepath.Join(lagCopy, "version-2"), os.DirFS(filepath.Join(lagM.dataDir, "version-2"))); err != nil {
		t.Fatal(err)
	}
	if err := importCmd(&bytes.Buffer{}, []string{"--config", ms[src].cfg, "--zk-data-dir", lagCopy, "--expect", drys[lag].id}); err == nil || !strings.Contains(err.Error(), "after the source's last zxid") {
		t.Errorf("import of older data on member %d: %v", ms[src].id, err)
	} else {
		t.Logf("refused: %v", err)
	}
	for _, m := range ms {
		noStore(m)
	}
	// zkraft serve refuses a dataDir with ZooKeeper data and no store.
	p := startZkraftProc(t, filepath.Join(base, "refused.log"), "serve", "--config", lagM.cfg, "--log-level", "warn")
	select {
	case <-p.done:
		if !strings.Contains(tail(p.log, 5), "no zkraft store for member") {
			t.Errorf("serve without import: %s", tail(p.log, 5))
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("zkraft serve started on ZooKeeper data that was not imported")
	}

	// 5. Import the source's data on every member: in place on the source,
	// from a copy elsewhere (as if copied over with scp).
	importStart := time.Now()
	for i, m := range ms {
		args := []string{"--config", m.cfg, "--expect", id, "--verify"}
		if i != src {
			cp := filepath.Join(m.dir, "zk-source")
			if err := os.CopyFS(filepath.Join(cp, "version-2"), os.DirFS(filepath.Join(ms[src].dataDir, "version-2"))); err != nil {
				t.Fatal(err)
			}
			args = append(args, "--zk-data-dir", cp)
		}
		var out bytes.Buffer
		if err := importCmd(&out, args); err != nil {
			t.Fatalf("member %d: import: %v\n%s", m.id, err, out.String())
		}
		if !strings.Contains(out.String(), "verify: OK") {
			t.Fatalf("member %d: import: no verify OK:\n%s", m.id, out.String())
		}
		out.Reset()
		if err := importCmd(&out, []string{"--config", m.cfg, "--show"}); err != nil || !strings.Contains(out.String(), "import id "+id) {
			t.Fatalf("member %d: --show: %v %s", m.id, err, out.String())
		}
		if !strings.Contains(out.String(), fmt.Sprintf("shard-1-replica-%d", m.id)) {
			t.Errorf("member %d: imported as another replica: %s", m.id, out.String())
		}
	}
	step("imported on the 3 members in %v", time.Since(importStart).Round(time.Millisecond))

	// 6. zkraft on the same ports from the same zoo.cfg files.
	zkraftStart := time.Now()
	for _, m := range ms {
		startZkraftMember(m)
	}
	leader = waitZkraft()
	up := time.Since(zkraftStart)
	reconnect := waitSession("switch to zkraft")
	step("zkraft ensemble up %v after its start (member %d leads); the client had its session back %v after the start, %v after ZooKeeper stopped",
		up.Round(time.Millisecond), ms[leader].id, reconnect.Sub(zkraftStart).Round(time.Millisecond), reconnect.Sub(zkStopped).Round(time.Millisecond))
	for _, m := range ms {
		if b, _ := os.ReadFile(zkraftLog(m)); !bytes.Contains(b, []byte("import_id="+id)) {
			t.Errorf("member %d did not log import id %s:\n%s", m.id, id, tail(zkraftLog(m), 10))
		}
	}
	if c.SessionID() != sid || expired.Load() {
		t.Fatalf("session %#x (expired %v), want %#x", c.SessionID(), expired.Load(), sid)
	}
	checkEphemerals := func(what string) {
		t.Helper()
		for _, p := range []string{eph1, eph2} {
			var st *zk.Stat
			retryOp(t, "exists "+p, func() error { var err error; _, st, err = admin.Exists(p); return err })
			if st == nil || st.EphemeralOwner != sid {
				t.Errorf("%s: ephemeral %s: %+v, want owner %#x", what, p, st, sid)
			}
		}
	}
	checkEphemerals("after the switch")
	// What zkraft serves is what ZooKeeper served (zkraft adds its feature
	// node under /zookeeper).
	trees := make([][]zktest.Node, len(ms))
	for i, m := range ms {
		trees[i] = dumpMember(t, m.addr())
		for _, d := range zktest.Compare(zkTree, trees[i], notFromZooKeeper, 20) {
			t.Errorf("member %d after the switch: %s", m.id, d)
		}
		sameConfig(t, fmt.Sprintf("member %d after the switch", m.id), zkTree, trees[i])
	}
	// The watches set on ZooKeeper fire on zkraft.
	retryOp(t, "set /app/config", func() error { _, err := admin.Set("/app/config", []byte("v2"), -1); return err })
	waitEvent(t, dataW, zk.EventNodeDataChanged, "/app/config")
	mustCreate(admin, "/app/members/by-admin", nil, 0, acl)
	waitEvent(t, childW, zk.EventNodeChildrenChanged, "/app/members")
	mustCreate(admin, "/app/later", []byte("x"), 0, acl)
	waitEvent(t, existsW, zk.EventNodeCreated, "/app/later")
	mustCreate(c, "/app/members/on-zkraft", nil, zk.FlagEphemeral, acl)
	// Every member serves the same tree.
	for i, m := range ms {
		trees[i] = dumpMember(t, m.addr())
		if i > 0 {
			for _, d := range zktest.Compare(trees[0], trees[i], nil, 20) {
				t.Errorf("member %d differs from member 1: %s", m.id, d)
			}
		}
	}
	step("zkraft: same session, ephemerals, 3 watches fired, the 3 members serve the same %d znodes", len(trees[0]))

	// 7. Kill the zkraft leader: the ensemble keeps serving the client.
	killed := ms[leader]
	killedAt := time.Now()
	killed.zr.stop(syscall.SIGKILL)
	var n int
	writeAfter := retryOp(t, "write after the leader kill", func() error {
		n++
		_, err := admin.Create(fmt.Sprintf("/app/after-kill-%d", n), nil, 0, acl)
		return err
	})
	mustCreate(c, "/app/members/after-kill", nil, zk.FlagEphemeral, acl)
	if c.SessionID() != sid || expired.Load() {
		t.Fatalf("after the leader kill: session %#x (expired %v)", c.SessionID(), expired.Load())
	}
	checkEphemerals("after the leader kill")
	step("killed leader member %d: first write acknowledged after %v", killed.id, writeAfter.Round(time.Millisecond))
	startZkraftMember(killed)
	leader = waitZkraft()
	mustCreate(admin, "/app/rejoined", nil, 0, acl)
	for i, m := range ms {
		trees[i] = dumpMember(t, m.addr())
		if i > 0 {
			for _, d := range zktest.Compare(trees[0], trees[i], nil, 20) {
				t.Errorf("after the rejoin: member %d differs from member 1: %s", m.id, d)
			}
		}
	}
	step("member %d restarted and rejoined %v after the kill; member %d leads; the 3 members serve the same %d znodes",
		killed.id, time.Since(killedAt).Round(time.Millisecond), ms[leader].id, len(trees[0]))

	// 8. The way back: stop zkraft, export on the member with the highest
	// zxid, copy its version-2 to the others, start ZooKeeper 3.8.
	_, _, dataW, err = c.GetW("/app/config")
	if err != nil {
		t.Fatal(err)
	}
	retryOp(t, "sync", func() error { _, err := admin.Sync("/"); return err })
	final, err := zktest.DumpTree(admin)
	if err != nil {
		t.Fatal(err)
	}
	stopping := time.Now()
	for _, m := range ms {
		wg.Add(1)
		go func(m *ensMember) {
			defer wg.Done()
			start := time.Now()
			m.zr.stop(syscall.SIGTERM)
			took := time.Since(start)
			t.Logf("zkraft member %d stopped in %v", m.id, took.Round(time.Millisecond))
			if took > 2*time.Second {
				t.Logf("member %d log:\n%s", m.id, tail(zkraftLog(m), 12))
			}
		}(m)
	}
	wg.Wait()
	zkraftStopped := time.Now()
	step("zkraft stopped (SIGTERM) in %v", zkraftStopped.Sub(stopping).Round(time.Millisecond))
	for c.State() == zk.StateHasSession && time.Since(zkraftStopped) < 10*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	for len(states) > 0 {
		<-states
	}
	type edry struct {
		id      string
		zxid    int64
		applied uint64
	}
	edrys := make([]edry, len(ms))
	from := -1
	for i, m := range ms {
		var out bytes.Buffer
		if err := exportCmd(&out, []string{"--config", m.cfg, "--dry-run"}); err != nil {
			t.Fatalf("member %d: export --dry-run: %v\n%s", m.id, err, out.String())
		}
		g := reExportDry.FindStringSubmatch(out.String())
		if g == nil {
			t.Fatalf("member %d: export --dry-run printed:\n%s", m.id, out.String())
		}
		z, _ := strconv.ParseInt(g[1], 0, 64)
		a, _ := strconv.ParseUint(g[2], 10, 64)
		edrys[i] = edry{g[3], z, a}
		if from < 0 || z > edrys[from].zxid || (z == edrys[from].zxid && a > edrys[from].applied) {
			from = i
		}
	}
	step("export dry runs: %v; exporting member %d", edrys, ms[from].id)
	for _, m := range ms {
		if err := os.Rename(filepath.Join(m.dataDir, "version-2"), filepath.Join(m.dataDir, "version-2.before-zkraft")); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	exportStart := time.Now()
	if err := exportCmd(&out, []string{"--config", ms[from].cfg}); err != nil {
		t.Fatalf("export: %v\n%s", err, out.String())
	}
	t.Logf("%s", strings.TrimSpace(out.String()))
	if !strings.Contains(out.String(), "export id "+edrys[from].id) {
		t.Errorf("the export is not what the dry run read (%s)", edrys[from].id)
	}
	for i, m := range ms {
		if i == from {
			continue
		}
		if err := os.CopyFS(filepath.Join(m.dataDir, "version-2"), os.DirFS(filepath.Join(ms[from].dataDir, "version-2"))); err != nil {
			t.Fatal(err)
		}
	}
	step("exported member %d and copied its version-2 to the others in %v", ms[from].id, time.Since(exportStart).Round(time.Millisecond))
	zkStart := time.Now()
	leader = startZooKeeper()
	up = time.Since(zkStart)
	back := waitSession("switch back to ZooKeeper")
	step("ZooKeeper ensemble up %v after its start (member %d leads); the client had its session back %v after the start, %v after zkraft stopped",
		up.Round(time.Millisecond), ms[leader].id, back.Sub(zkStart).Round(time.Millisecond), back.Sub(zkraftStopped).Round(time.Millisecond))
	if c.SessionID() != sid || expired.Load() {
		t.Fatalf("on ZooKeeper again: session %#x (expired %v), want %#x", c.SessionID(), expired.Load(), sid)
	}
	checkEphemerals("back on ZooKeeper")
	for _, m := range ms {
		got := dumpMember(t, m.addr())
		for _, d := range zktest.Compare(final, got, notFromZooKeeper, 20) {
			t.Errorf("ZooKeeper member %d after the way back: %s", m.id, d)
		}
		sameConfig(t, fmt.Sprintf("ZooKeeper member %d after the way back", m.id), final, got)
		if !m.zk.LogContains("currentEpoch not found! Creating with a reasonable default") {
			t.Errorf("ZooKeeper member %d did not create its currentEpoch from the snapshot, as docs/migration.md says", m.id)
		}
		if m.zk.LogContains("Digests are not matching") {
			t.Errorf("ZooKeeper member %d found a digest mismatch:\n%s", m.id, m.zk.Log(30))
		}
	}
	retryOp(t, "set /app/config", func() error { _, err := admin.Set("/app/config", []byte("v3"), -1); return err })
	waitEvent(t, dataW, zk.EventNodeDataChanged, "/app/config")
	step("ZooKeeper 3.8 serves zkraft's tree (%d znodes) on all 3 members; same session, its ephemerals, watch fired", len(final))
}

// TestImportEnsembleChecks: the checks that keep the members of an
// ensemble from starting on different imports, on the fixtures (no
// ZooKeeper needed). Members 1 and 3 hold ZooKeeper data, member 2 none.
func TestImportEnsembleChecks(t *testing.T) {
	base := t.TempDir()
	var lines []string
	for i := 1; i <= 3; i++ {
		lines = append(lines, fmt.Sprintf("server.%d=127.0.0.1:%d:%d:participant;127.0.0.1:%d", i, 12887+i, 13887+i, 12180+i))
	}
	cfgs := make([]string, 4)
	dataDirs := make([]string, 4)
	for i := 1; i <= 3; i++ {
		dataDirs[i] = filepath.Join(base, strconv.Itoa(i), "data")
		os.MkdirAll(dataDirs[i], 0o755)
		os.WriteFile(filepath.Join(dataDirs[i], "myid"), []byte(strconv.Itoa(i)), 0o644)
		cfgs[i] = filepath.Join(base, strconv.Itoa(i), "zoo.cfg")
		os.WriteFile(cfgs[i], []byte("tickTime=2000\ndataDir="+dataDirs[i]+"\n"+strings.Join(lines, "\n")+"\n"), 0o644)
	}
	for _, i := range []int{1, 3} {
		if err := os.CopyFS(filepath.Join(dataDirs[i], "version-2"), os.DirFS(filepath.Join(fixtures, "plain", "data", "version-2"))); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := importCmd(&out, []string{"--config", cfgs[1], "--dry-run"}); err != nil {
		t.Fatal(err)
	}
	g := reImportID.FindStringSubmatch(out.String())
	if g == nil {
		t.Fatalf("no import id:\n%s", out.String())
	}
	id := g[1]
	if _, err := os.Stat(filepath.Join(dataDirs[1], "state")); err == nil {
		t.Fatal("--dry-run wrote state")
	}
	if err := importCmd(io.Discard, []string{"--config", cfgs[1]}); err == nil || !strings.Contains(err.Error(), "--expect") {
		t.Errorf("without --expect: %v", err)
	}
	wrong := "0x1/0000000000000000"
	if err := importCmd(io.Discard, []string{"--config", cfgs[1], "--expect", wrong}); !errors.Is(err, errImportMismatch) {
		t.Errorf("--expect %s: %v", wrong, err)
	}
	if _, err := os.Stat(filepath.Join(dataDirs[1], "state")); err == nil {
		t.Fatal("a refused import wrote state")
	}
	// zkraft serve would start member 3 on an empty tree: refused.
	quietLog := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := checkServeImported(&server.Config{DataDir: dataDirs[3], ReplicaID: 3}, quietLog); err == nil || !strings.Contains(err.Error(), "no zkraft store for member 3") {
		t.Errorf("serve on ZooKeeper data without import: %v", err)
	}
	// Member 1 in place; member 2 (no ZooKeeper data of its own) from a copy.
	if err := importCmd(io.Discard, []string{"--config", cfgs[1], "--expect", id}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := importCmd(&out, []string{"--config", cfgs[2], "--zk-data-dir", dataDirs[1], "--expect", id}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "own ZooKeeper data was not compared") {
		t.Errorf("member 2 has no ZooKeeper data; the import says:\n%s", out.String())
	}
	for i := 1; i <= 2; i++ {
		out.Reset()
		if err := importCmd(&out, []string{"--config", cfgs[i], "--show"}); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("shard-1-replica-%d: import id %s", i, id); !strings.Contains(out.String(), want) {
			t.Errorf("member %d --show: %s, want %q", i, out.String(), want)
		}
		src, err := raftsm.ReadImportSource(filepath.Join(dataDirs[i], "state"), 1, uint64(i))
		if err != nil || src == nil || src.ID() != id {
			t.Errorf("member %d: import source %+v, %v", i, src, err)
		}
		if err := checkServeImported(&server.Config{DataDir: dataDirs[i], ReplicaID: uint64(i)}, quietLog); err != nil {
			t.Errorf("member %d: serve after import: %v", i, err)
		}
	}
	// A standalone import records its source too.
	plainDir := t.TempDir()
	if err := importCmd(io.Discard, append(fixtureArgs("plain"), "--data-dir", plainDir)); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := importCmd(&out, []string{"--data-dir", plainDir, "--show"}); err != nil || !strings.Contains(out.String(), "import id "+id) {
		t.Errorf("--show of a standalone import: %v %s", err, out.String())
	}
}
