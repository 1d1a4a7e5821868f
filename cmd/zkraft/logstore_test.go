package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
)

// The Raft log store tests start zkraft (this test binary running main)
// on data directories of each log store and check where the files are,
// that the data is kept, and that a member refuses, in one line, a store
// or a dataLogDir that contradicts what the directory holds.

// logStoreRun is a member started on dataDir (and logDir, if set) with
// the extra flags, from a working directory of the test's.
type logStoreRun struct {
	t               *testing.T
	work, addr      string
	dataDir, logDir string
	extra           []string
	member          *member
}

func (r *logStoreRun) args() []string {
	a := []string{"serve", "--data-dir", r.dataDir, "--client-addr", r.addr, "--log-level", "warn"}
	if r.logDir != "" {
		a = append(a, "--data-log-dir", r.logDir)
	}
	return append(a, r.extra...)
}

// serve starts the member and waits until it listens.
func (r *logStoreRun) serve() {
	r.t.Helper()
	r.member = startMember(r.t, r.work, r.args())
	if err := r.member.waitListening(r.addr, 30*time.Second); err != nil {
		r.t.Fatalf("zkraft %s: %v\n%s", strings.Join(r.args(), " "), err, r.member.stderr())
	}
}

// stop ends the member with SIGTERM.
func (r *logStoreRun) stop() {
	r.t.Helper()
	r.member.cmd.Process.Signal(syscall.SIGTERM)
	if err := r.member.wait(30 * time.Second); err != nil {
		r.t.Fatalf("stop: %v\n%s", err, r.member.stderr())
	}
}

// refused starts the member and wants it to exit non-zero within a bound,
// with one line on stderr that contains every one of want.
func (r *logStoreRun) refused(want ...string) string {
	r.t.Helper()
	m := startMember(r.t, r.work, r.args())
	err := m.wait(30 * time.Second)
	if err == nil {
		r.t.Fatalf("zkraft %s: exited 0; want a refusal\n%s", strings.Join(r.args(), " "), m.stderr())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		r.t.Fatalf("zkraft %s: %v (not a refusal)\n%s", strings.Join(r.args(), " "), err, m.stderr())
	}
	out := strings.TrimSpace(m.stderr())
	lines := strings.Split(out, "\n")
	last := lines[len(lines)-1]
	r.t.Logf("refused: %s", last)
	for _, w := range want {
		if !strings.Contains(last, w) {
			r.t.Errorf("zkraft %s: refusal %q does not name %q\nstderr:\n%s", strings.Join(r.args(), " "), last, w, out)
		}
	}
	if strings.Contains(out, "goroutine ") || strings.Contains(out, "panic:") {
		r.t.Errorf("zkraft %s: a panic trace on stderr:\n%s", strings.Join(r.args(), " "), out)
	}
	return last
}

// write creates path with data and wants it acknowledged.
func (r *logStoreRun) write(path, data string) {
	r.t.Helper()
	c := r.connect()
	defer c.Close()
	if _, err := c.Create(path, []byte(data), 0, zk.WorldACL(zk.PermAll)); err != nil {
		r.t.Fatalf("create %s: %v", path, err)
	}
}

// has wants path to hold data.
func (r *logStoreRun) has(path, data string) {
	r.t.Helper()
	c := r.connect()
	defer c.Close()
	got, _, err := c.Get(path)
	if err != nil || string(got) != data {
		r.t.Fatalf("get %s: %q, %v; want %q", path, got, err, data)
	}
}

func (r *logStoreRun) connect() *zk.Conn {
	r.t.Helper()
	c, ev, err := zk.Connect([]string{r.addr}, 10*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		r.t.Fatal(err)
	}
	deadline := time.After(15 * time.Second)
	for c.State() != zk.StateHasSession {
		select {
		case <-ev:
		case <-deadline:
			c.Close()
			r.t.Fatalf("no session on %s", r.addr)
		}
	}
	return c
}

// glob lists the matches of pattern under root.
func glob(t *testing.T, root string, pattern ...string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(append([]string{root}, pattern...)...))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// storeFiles reports the Raft log store directories found under dirs:
// tan's tandb/node-1-1 and the Pebble store's logdb-N.
func storeFiles(t *testing.T, dirs ...string) (tanNodes, pebbleShards []string) {
	t.Helper()
	for _, d := range dirs {
		for _, sub := range []string{"raft", "raft-wal"} {
			tanNodes = append(tanNodes, glob(t, d, sub, "*", "*", "tandb", "node-1-1")...)
			pebbleShards = append(pebbleShards, glob(t, d, sub, "*", "*", "logdb-*")...)
		}
	}
	return tanNodes, pebbleShards
}

func newLogStoreRun(t *testing.T, work, data, log string, extra ...string) *logStoreRun {
	return &logStoreRun{t: t, work: work, addr: freeport.Addr(t), dataDir: data, logDir: log, extra: extra}
}

// TestRaftLogStoreChoice: --raft-log-store=tan gives a new data directory
// tan, its files where dataLogDir puts them, which it keeps with no flag; a
// new directory with no flag (or --raft-log-store=pebble) gets the Pebble
// store, which it keeps; a flag that contradicts the directory's store is
// refused, naming both.
func TestRaftLogStoreChoice(t *testing.T) {
	work := t.TempDir()

	// A new directory, --raft-log-store=tan: tan, under dataDir/raft.
	tanDir := filepath.Join(work, "tan")
	r := newLogStoreRun(t, work, tanDir, "", "--raft-log-store=tan")
	r.serve()
	r.write("/on-tan", "1")
	r.stop()
	tanNodes, pebble := storeFiles(t, tanDir)
	if len(tanNodes) != 1 || len(pebble) != 0 || !strings.HasPrefix(tanNodes[0], filepath.Join(tanDir, "raft")+string(filepath.Separator)) {
		t.Fatalf("a new data directory: tan %v, pebble %v; want tan's node-1-1 under %s/raft and no logdb", tanNodes, pebble, tanDir)
	}
	if logs := glob(t, tanNodes[0], "*.log"); len(logs) == 0 {
		t.Errorf("%s holds no tan log file", tanNodes[0])
	}
	r.extra = []string{"--raft-log-store=pebble"}
	r.refused("--raft-log-store=pebble", "tan", "--raft-log-store=auto")
	r.extra = []string{"--raft-log-store=tan"}
	r.serve()
	r.has("/on-tan", "1")
	r.stop()
	r.extra = nil // auto keeps the directory's tan
	r.serve()
	r.has("/on-tan", "1")
	r.stop()
	if again, pebble := storeFiles(t, tanDir); len(again) != 1 || len(pebble) != 0 {
		t.Fatalf("a tan directory started with no flag: tan %v, pebble %v", again, pebble)
	}

	// A new directory with dataLogDir: tan under dataLogDir/raft-wal,
	// nothing of it under dataDir.
	walData, walLog := filepath.Join(work, "wal-data"), filepath.Join(work, "wal-log")
	r = newLogStoreRun(t, work, walData, walLog, "--raft-log-store=tan")
	r.serve()
	r.write("/on-wal", "2")
	r.stop()
	inData, _ := storeFiles(t, walData)
	inLog, pebble := storeFiles(t, walLog)
	if len(inData) != 0 || len(inLog) != 1 || len(pebble) != 0 || !strings.Contains(inLog[0], filepath.Join("raft-wal")) {
		t.Fatalf("with dataLogDir: tan under dataDir %v, under dataLogDir %v, pebble %v; want tan only under %s/raft-wal", inData, inLog, pebble, walLog)
	}
	r.serve()
	r.has("/on-wal", "2")
	r.stop()

	// A new directory with no flag: the Pebble store (the default since
	// 2026-12-03), kept with no flag and with --raft-log-store=pebble; tan
	// refused.
	pebDir := filepath.Join(work, "pebble")
	r = newLogStoreRun(t, work, pebDir, "")
	r.serve()
	r.write("/on-pebble", "3")
	r.stop()
	tanNodes, pebble = storeFiles(t, pebDir)
	if len(tanNodes) != 0 || len(pebble) == 0 {
		t.Fatalf("--raft-log-store=pebble: tan %v, pebble %v; want logdb shards only", tanNodes, pebble)
	}
	r.extra = []string{"--raft-log-store=pebble"}
	r.serve()
	r.has("/on-pebble", "3")
	r.stop()
	r.extra = nil
	if tanNodes, _ = storeFiles(t, pebDir); len(tanNodes) != 0 {
		t.Fatalf("a Pebble directory started with no flag grew a tan log: %v", tanNodes)
	}
	r.extra = []string{"--raft-log-store=tan"}
	r.refused("--raft-log-store=tan", "pebble", "sharded-pebble")
	r.extra = []string{"--raft-log-store=sideways"}
	r.refused("--raft-log-store", "auto, tan or pebble")
}

// TestRaftLogStoreUpgradeAndMove: a data directory with the Pebble log
// store, as every zkraft before tan wrote it (an old binary's fixture, and
// one written with --raft-log-store=pebble), keeps working and keeps its
// store; a tan log whose dataLogDir changed is refused with where the log
// is, and serves again once it is moved there.
func TestRaftLogStoreUpgradeAndMove(t *testing.T) {
	work := t.TempDir()

	// A data directory an older zkraft wrote (testdata/format1, commit
	// 6366337, long before tan): it serves on its Pebble store and grows
	// no tan log.
	fixture := filepath.Join(work, "format1")
	if err := os.MkdirAll(fixture, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-C", fixture, "-xzf", "testdata/format1/datadir.tar.gz").CombinedOutput(); err != nil {
		t.Fatalf("untar: %v\n%s", err, out)
	}
	r := newLogStoreRun(t, work, filepath.Join(fixture, "data"), "", "--raft-addr", format1RaftAddr)
	r.serve()
	r.has("/deep"+repeat("/d", 49), "49")
	r.stop()
	if tanNodes, pebble := storeFiles(t, r.dataDir); len(tanNodes) != 0 || len(pebble) == 0 {
		t.Fatalf("the format 1 data directory: tan %v, pebble %v; want its Pebble store only", tanNodes, pebble)
	}

	// Before: the Pebble store, in dataDir and dataLogDir (its WAL), as
	// written with --raft-log-store=pebble, which is the NodeHost
	// configuration of the zkraft before tan (no log store factory).
	oldData, oldLog := filepath.Join(work, "old-data"), filepath.Join(work, "old-log")
	r = newLogStoreRun(t, work, oldData, oldLog, "--raft-log-store=pebble")
	r.serve()
	r.write("/before", "old")
	r.stop()
	if _, err := os.Stat(filepath.Join(oldData, "raft", "zkraft-raft-log")); err == nil {
		t.Errorf("a Pebble data directory has tan's record")
	}
	r.extra = nil // upgraded: the default, auto
	r.serve()
	r.has("/before", "old")
	r.write("/after", "new")
	r.stop()
	r.serve()
	r.has("/after", "new")
	r.stop()
	if tanNodes, pebble := storeFiles(t, oldData, oldLog); len(tanNodes) != 0 || len(pebble) == 0 {
		t.Fatalf("the upgraded Pebble directory: tan %v, pebble %v", tanNodes, pebble)
	}

	// A tan log under dataLogDir L1, started with L2, then with none.
	data, l1, l2 := filepath.Join(work, "data"), filepath.Join(work, "l1"), filepath.Join(work, "l2")
	r = newLogStoreRun(t, work, data, l1, "--raft-log-store=tan")
	r.serve()
	r.write("/moved", "kept")
	r.stop()
	inL1, _ := storeFiles(t, l1)
	if len(inL1) != 1 {
		t.Fatalf("tan under %s: %v", l1, inL1)
	}
	tandb := filepath.Dir(inL1[0])
	r.logDir = l2
	r.refused(tandb, filepath.Join(l2, "raft-wal"), "dataLogDir "+l1)
	if moved, _ := storeFiles(t, l2); len(moved) != 0 {
		t.Fatalf("the refused start made a tan log under %s: %v", l2, moved)
	}
	r.logDir = ""
	r.refused(tandb, filepath.Join(data, "raft"), "dataLogDir is not set")

	// The operator moves the log to L2 as the refusal says: it serves.
	rel, err := filepath.Rel(filepath.Join(l1, "raft-wal"), tandb)
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(l2, "raft-wal", rel)
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tandb, to); err != nil {
		t.Fatal(err)
	}
	r.logDir = l2
	r.serve()
	r.has("/moved", "kept")
	r.stop()
	// And L1, now empty of the log, is refused, naming L2.
	r.logDir = l1
	r.refused(to, "dataLogDir "+l2)
}

// TestTanLogBelowApplied: a tan log that ends below the index the state
// machine applied (here: the replica's tan directory put back as it was
// before the last run's writes) is refused, naming tan's directory of the
// replica, not the Pebble store's raft-wal.
func TestTanLogBelowApplied(t *testing.T) {
	work := t.TempDir()
	data := filepath.Join(work, "data")
	r := newLogStoreRun(t, work, data, "", "--raft-log-store=tan")
	r.serve()
	r.write("/first", "1")
	r.stop()
	tanNodes, _ := storeFiles(t, data)
	if len(tanNodes) != 1 {
		t.Fatalf("tan's node-1-1: %v", tanNodes)
	}
	node := tanNodes[0]
	saved := filepath.Join(work, "node-1-1.saved")
	copyDir(t, node, saved)
	r.serve()
	for i := 0; i < 50; i++ {
		r.write(fmt.Sprintf("/second-%d", i), "2")
	}
	r.stop()
	if err := os.RemoveAll(node); err != nil {
		t.Fatal(err)
	}
	copyDir(t, saved, node)
	line := r.refused(node, "the Raft log ends at index", "tan")
	if strings.Contains(line, "raft-wal") {
		t.Errorf("the refusal names raft-wal, where tan keeps nothing: %s", line)
	}
}

// copyDir copies the regular files of dir (one level) to to.
func copyDir(t *testing.T, dir, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			t.Fatalf("%s: %s is not a regular file", dir, e.Name())
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
