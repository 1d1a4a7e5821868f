package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
)

// The damaged-data-files tests start zkraft (this test binary running
// main, see TestMain) on a copy of a data directory one of whose files was
// damaged after a member wrote acknowledged data and stopped. Each start
// must end one of two ways: the member serves and every acknowledged write
// is there, or it exits non-zero within a bound with one line on stderr,
// naming the damaged file, and no panic trace.

// damageSeed is a data directory written by a member that then stopped,
// with what its clients saw acknowledged. It is kept as JSON beside the
// directory (see damageSeeds).
type damageSeed struct {
	Name       string            // "stopped" or "killed" ("tan-stopped", "tan-killed" on tan)
	LogStore   string            // --raft-log-store: "pebble" ("" in older seeds) or "tan"
	Dir        string            // the data directory; copied for each case, never started itself
	Config     string            // its zoo.cfg (damageZooCfg)
	ClientAddr string            // a standalone member: no Raft port
	Acked      map[string]string // path -> data of every acknowledged write
	// AckSeq is the order in which each path's last write was
	// acknowledged (1 .. Acks).
	AckSeq map[string]int
	Acks   int
	// Pending holds the data of writes in flight when the member was
	// killed: each may or may not have been applied.
	Pending map[string]string
}

// damageZooCfg is the seeds' zoo.cfg: a small snapCount, so that the
// data directory holds Dragonboat snapshots and a compacted Raft log, and
// no AdminServer. The data directory and client address are flags.
const damageZooCfg = "tickTime=2000\nsnapCount=100\nadmin.enableServer=false\n"

// serveArgs are the arguments a member of s is started with. The seeds
// are on the Pebble log store, whose files these cases damage (tan is the
// default for a new data directory; its files have cases of their own).
func (s *damageSeed) serveArgs(dataDir string) []string {
	store := s.LogStore
	if store == "" {
		store = "pebble"
	}
	return []string{"serve", "--config", s.Config, "--data-dir", dataDir, "--client-addr", s.ClientAddr, "--log-level", "warn", "--raft-log-store=" + store}
}

var seeds struct {
	sync.Mutex
	root   string
	byName map[string]*damageSeed
}

// damageSeeds returns the two seeds, written once per test binary:
// "stopped" ends with SIGTERM, "killed" with SIGKILL while writes flow.
// ZKRAFT_DAMAGE_SEEDS names a directory that keeps them between runs
// (while changing the damage cases).
func damageSeeds(t *testing.T) []*damageSeed {
	t.Helper()
	return damageSeedsOn(t, "pebble")
}

// damageSeedsOn returns the two seeds on the Raft log store store
// ("pebble" or "tan"; the tan seeds' names start with "tan-").
func damageSeedsOn(t *testing.T, store string) []*damageSeed {
	t.Helper()
	seeds.Lock()
	defer seeds.Unlock()
	if seeds.root == "" {
		seeds.root = os.Getenv("ZKRAFT_DAMAGE_SEEDS")
		if seeds.root == "" {
			dir, err := os.MkdirTemp("", "zkraft-damage-seeds-")
			if err != nil {
				t.Fatal(err)
			}
			seeds.root = dir
			cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		}
		seeds.byName = map[string]*damageSeed{}
	}
	var out []*damageSeed
	for _, v := range []struct {
		name string
		kill bool
	}{{"stopped", false}, {"killed", true}} {
		name := v.name
		if store != "pebble" {
			name = store + "-" + name
		}
		s := seeds.byName[name]
		if s == nil {
			s = writeDamageSeed(t, seeds.root, name, store, v.kill)
			seeds.byName[name] = s
		}
		out = append(out, s)
	}
	return out
}

// cleanups run after the tests (TestMain).
var cleanups []func()

// writeDamageSeed writes a seed: a first run of creates and setData,
// stopped with SIGTERM, then a second run (whose start flushes the first
// run's writes from the Pebble WALs into tables), stopped with SIGTERM or,
// if kill, with SIGKILL while the writes flow.
func writeDamageSeed(t *testing.T, root, name, store string, kill bool) *damageSeed {
	t.Helper()
	saved := filepath.Join(root, name, "seed.json")
	if b, err := os.ReadFile(saved); err == nil {
		var s damageSeed
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	s := &damageSeed{
		Name:       name,
		LogStore:   store,
		Dir:        filepath.Join(root, name, "data"),
		Config:     filepath.Join(root, name, "zoo.cfg"),
		ClientAddr: freeport.Addr(t),
		Acked:      map[string]string{},
		AckSeq:     map[string]int{},
		Pending:    map[string]string{},
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Config, []byte(damageZooCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for run := 0; run < 2; run++ {
		last := run == 1
		m := startMember(t, filepath.Join(root, name), s.serveArgs(s.Dir))
		if err := m.waitListening(s.ClientAddr, 20*time.Second); err != nil {
			t.Fatalf("seed %s run %d: %v\n%s", name, run, err, m.stderr())
		}
		s.load(t, run, last && kill, func() { m.cmd.Process.Signal(syscall.SIGKILL) })
		if !(last && kill) {
			m.cmd.Process.Signal(syscall.SIGTERM)
		}
		if err := m.wait(20 * time.Second); err != nil && !(last && kill) {
			t.Fatalf("seed %s run %d: stop: %v\n%s", name, run, err, m.stderr())
		}
	}
	t.Logf("seed %s: %d acknowledged writes, %d in flight at the kill", name, len(s.Acked), len(s.Pending))
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(saved, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// load writes from 8 clients: each creates its nodes and sets the data of
// every other one. With kill, killFn is called once 300 writes of this run
// have been acknowledged, while the writers go on, and each writer stops
// at its first failure.
func (s *damageSeed) load(t *testing.T, run int, kill bool, killFn func()) {
	t.Helper()
	conn, _, err := zk.Connect([]string{s.ClientAddr}, 10*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var mu sync.Mutex
	var killOnce sync.Once
	var firstErr error
	count := 0
	ack := func(p, data string) {
		mu.Lock()
		defer mu.Unlock()
		s.Acked[p] = data
		s.Acks++
		s.AckSeq[p] = s.Acks
		delete(s.Pending, p)
		count++
		if kill && count == 300 {
			killOnce.Do(killFn)
		}
	}
	begin := func(p, data string) {
		mu.Lock()
		defer mu.Unlock()
		s.Pending[p] = data
	}
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	parent := fmt.Sprintf("/damage-%d", run)
	if _, err := conn.Create(parent, []byte("parent"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create %s: %v", parent, err)
	}
	ack(parent, "parent")
	const writers, perWriter = 8, 120
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				p := fmt.Sprintf("%s/w%d-%04d", parent, w, i)
				data := fmt.Sprintf("run %d writer %d node %d", run, w, i)
				begin(p, data)
				if _, err := conn.Create(p, []byte(data), 0, zk.WorldACL(zk.PermAll)); err != nil {
					if !kill {
						fail(fmt.Errorf("create %s: %w", p, err))
					}
					return
				}
				ack(p, data)
				if i%2 == 1 {
					data += " set"
					begin(p, data)
					if _, err := conn.Set(p, []byte(data), 0); err != nil {
						if !kill {
							fail(fmt.Errorf("set %s: %w", p, err))
						}
						return
					}
					ack(p, data)
				}
			}
		}(w)
	}
	wg.Wait()
	if kill {
		killOnce.Do(killFn) // in case fewer than 300 were acknowledged
	}
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// member is a zkraft process whose stderr is kept.
type member struct {
	cmd  *exec.Cmd
	done chan struct{}
	exit error
	mu   sync.Mutex
	err  bytes.Buffer
}

func (m *member) Write(b []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err.Write(b)
}

func (m *member) stderr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err.String()
}

func startMember(t *testing.T, dir string, args []string) *member {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	cmd.Dir = dir
	m := &member{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = m
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		m.exit = cmd.Wait()
		close(m.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-m.done
	})
	return m
}

// errExited: the member exited before it listened.
var errExited = errors.New("exited")

// waitListening waits until the member accepts connections on addr.
func (m *member) waitListening(addr string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		select {
		case <-m.done:
			return fmt.Errorf("%w: %v", errExited, m.exit)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not listening on %s after %v", addr, bound)
}

func (m *member) wait(bound time.Duration) error {
	select {
	case <-m.done:
		return m.exit
	case <-time.After(bound):
		m.cmd.Process.Kill()
		<-m.done
		return fmt.Errorf("still running after %v: killed", bound)
	}
}

// fileKind names the kind of a data directory's file from its path
// relative to the directory; "" for the LOCK files (empty, only locked).
func fileKind(rel string) string {
	base := filepath.Base(rel)
	top := strings.SplitN(rel, string(filepath.Separator), 2)[0]
	pebbleKind := func(store string) string {
		switch {
		case strings.HasSuffix(base, ".log"):
			return store + " WAL"
		case strings.HasSuffix(base, ".sst"):
			return store + " sst"
		case strings.HasPrefix(base, "MANIFEST-"):
			return store + " MANIFEST"
		case base == "CURRENT":
			return store + " CURRENT"
		case strings.HasPrefix(base, "OPTIONS-"):
			return store + " OPTIONS"
		}
		return ""
	}
	k := ""
	switch {
	case base == "LOCK":
		return ""
	case strings.Contains(rel, string(filepath.Separator)+"tandb"+string(filepath.Separator)):
		return tanKind(rel)
	case base == "zkraft-raft-log": // the tandb directory the member opened (server/logstore.go)
		k = top + "/" + base
	case base == "dragonboat.ds" || base == "NODEHOST.ID":
		k = top + "/" + base
	case top == "raft" && strings.Contains(rel, "snapshot-"):
		k = "snapshot " + base
		if strings.HasSuffix(base, ".gbsnap") {
			k = "snapshot data"
		}
	case top == "raft" || top == "raft-wal":
		k = pebbleKind("Raft log")
	case top == "state" && base == "ZKRAFT-APPLIED":
		k = "state applied mark"
	case top == "state":
		k = pebbleKind("state")
	}
	if k == "" {
		k = "unknown " + rel
	}
	return k
}

// damageTargets picks one file of each kind in dir: the newest (highest
// numbered) non-empty one, in the Raft log store's shard that holds the
// member's Raft shard (logdb-1).
func damageTargets(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := pickTargets(t, dir)
	for _, k := range []string{"raft/dragonboat.ds", "raft-wal/dragonboat.ds", "raft/NODEHOST.ID",
		"Raft log WAL", "Raft log sst", "Raft log MANIFEST", "Raft log CURRENT", "Raft log OPTIONS",
		"snapshot data", "snapshot snapshot.metadata",
		"state sst", "state MANIFEST", "state CURRENT", "state OPTIONS", "state applied mark"} {
		if out[k] == "" {
			t.Fatalf("the seed has no %s file: the test would not cover it", k)
		}
	}
	return out
}

// pickTargets is damageTargets without the list of kinds it must find.
func pickTargets(t *testing.T, dir string) map[string]string {
	t.Helper()
	byKind := map[string][]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.Contains(rel, "logdb-") && !strings.Contains(rel, "logdb-1"+string(filepath.Separator)) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if k := fileKind(rel); k != "" && info.Size() > 0 {
			byKind[k] = append(byKind[k], rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, files := range byKind {
		if strings.HasPrefix(k, "unknown ") {
			t.Fatalf("a file of a kind the test does not know: %s", files[0])
		}
		sort.Strings(files) // Pebble's numbers and Dragonboat's indexes are zero-padded
		out[k] = files[len(files)-1]
	}
	return out
}

// damage is one way to damage a file.
type damage struct {
	name  string
	apply func(b []byte) []byte
}

var damages = []damage{
	{"truncated to 0", func(b []byte) []byte { return nil }},
	{"truncated to half", func(b []byte) []byte { return b[:len(b)/2] }},
	{"last 8 bytes cut", func(b []byte) []byte { return b[:max(len(b)-8, 0)] }},
	{"8 bytes flipped mid-file", func(b []byte) []byte {
		b = bytes.Clone(b)
		for i := len(b) / 2; i < len(b)/2+8 && i < len(b); i++ {
			b[i] ^= 0xff
		}
		return b
	}},
}

// outcome is how a start on a damaged data directory ended.
type outcome struct {
	served  bool
	missing []string // acknowledged writes not read back (served)
	line    string   // stderr's last line (exited)
	problem string   // why the outcome breaks the rule; "" if it keeps it
}

func (o outcome) String() string {
	s := "exits: " + o.line
	if o.served {
		s = fmt.Sprintf("serves, %d acknowledged writes missing", len(o.missing))
		if len(o.missing) == 0 {
			s = "serves, all acknowledged writes present"
		}
	}
	if o.problem != "" {
		s += " [BROKEN: " + o.problem + "]"
	}
	return s
}

// startDamaged copies the seed, damages rel with d, starts the member on
// the copy and judges how the start ended.
func startDamaged(t *testing.T, s *damageSeed, rel string, d damage) outcome {
	t.Helper()
	caseDir := t.TempDir()
	dataDir := filepath.Join(caseDir, "data")
	if err := os.CopyFS(dataDir, os.DirFS(s.Dir)); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dataDir, rel)
	b, err := os.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, d.apply(b), 0o644); err != nil {
		t.Fatal(err)
	}
	m := startMember(t, caseDir, s.serveArgs(dataDir))
	const bound = 20 * time.Second
	if err := m.waitListening(s.ClientAddr, bound); err != nil {
		if !errors.Is(err, errExited) {
			m.cmd.Process.Kill()
			<-m.done
			return outcome{problem: "hangs: " + err.Error(), line: lastLine(m.stderr())}
		}
		return judgeExit(m, rel)
	}
	o := outcome{served: true, missing: verifyDamaged(t, s)}
	m.cmd.Process.Signal(syscall.SIGTERM)
	if err := m.wait(bound); err != nil {
		o.problem = "stop: " + err.Error()
	}
	if len(o.missing) > 0 {
		o.problem = "acknowledged writes lost"
	}
	if strings.Contains(m.stderr(), "panic") {
		o.problem = "panic: " + firstLines(m.stderr(), 3)
	}
	return o
}

// judgeExit judges a member that exited: non-zero, one line on stderr
// that names the damaged file, no panic.
func judgeExit(m *member, rel string) outcome {
	stderr := strings.TrimRight(m.stderr(), "\n")
	o := outcome{line: lastLine(stderr)}
	var ee *exec.ExitError
	switch {
	case m.exit == nil:
		o.problem = "exit status 0"
	case !errors.As(m.exit, &ee) || ee.ExitCode() <= 0:
		o.problem = "ended by " + m.exit.Error()
	case strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine "):
		o.problem = "panic trace: " + firstLines(stderr, 3)
	case strings.Contains(stderr, "\n"):
		o.problem = "more than one line on stderr: " + firstLines(stderr, 4)
	case !strings.HasPrefix(stderr, "zkraft: "):
		o.problem = "not zkraft's error line"
	case !strings.Contains(stderr, rel):
		o.problem = "the error does not name " + rel
	}
	return o
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

// verifyDamaged reads back every acknowledged write and returns the paths
// that are missing or hold other data (a write in flight at the kill may
// have replaced an acknowledged value: it is accepted too).
func verifyDamaged(t *testing.T, s *damageSeed) []string {
	t.Helper()
	conn, _, err := zk.Connect([]string{s.ClientAddr}, 10*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	paths := make([]string, 0, len(s.Acked))
	for p := range s.Acked {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var mu sync.Mutex
	var missing []string
	var wg sync.WaitGroup
	const readers = 8
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := r; i < len(paths); i += readers {
				p := paths[i]
				data, _, err := conn.Get(p)
				if err == nil && (string(data) == s.Acked[p] || string(data) == s.Pending[p]) {
					continue
				}
				mu.Lock()
				missing = append(missing, p)
				if len(missing) <= 3 {
					t.Logf("acknowledged %s: got %q, %v; want %q", p, data, err, s.Acked[p])
				}
				mu.Unlock()
			}
		}(r)
	}
	wg.Wait()
	return missing
}

// tornManifest lists the damages that leave the state machine's MANIFEST
// readable up to a record that is cut short or damaged: Pebble takes that
// record for the end of the file and opens an older version of the store
// without an error. Only a digest of the tree kept with the applied index
// can tell; TestDamagedStateMachineManifest has these cases.
var tornManifest = map[string]bool{"truncated to half": true, "last 8 bytes cut": true, "8 bytes flipped mid-file": true}

// TestDamagedDataFiles damages each kind of file of a member's data
// directory in each way (after a clean stop and after SIGKILL) and checks
// how the member starts: it serves every acknowledged write, or it exits
// with one line naming the file.
//
// The state machine's store has no WAL (raftsm's liveOptions; what its
// WAL file holds after a clean close is an empty trailer): after SIGKILL
// the newest WAL of the Raft log holds the only copy of the writes applied
// since the store's last flush. A damage that cuts them off leaves a log
// that ends below the state machine's applied mark (raftsm/mark.go), and
// the member refuses it, naming the WAL; ZooKeeper serves its tree without
// the writes of a transaction log cut short, and refuses only one whose
// checksum fails. No case may serve without an acknowledged write.
func TestDamagedDataFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts zkraft about 120 times; skipped with -short")
	}
	for _, s := range damageSeeds(t) {
		targets := damageTargets(t, s.Dir)
		kinds := make([]string, 0, len(targets))
		for k := range targets {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			for _, d := range damages {
				if k == "state MANIFEST" && tornManifest[d.name] {
					continue
				}
				t.Run(s.Name+"/"+k+"/"+d.name, func(t *testing.T) {
					start := time.Now()
					o := startDamaged(t, s, targets[k], d)
					t.Logf("%s (%s) %s: %v (%v)", k, targets[k], d.name, o, time.Since(start).Round(time.Millisecond))
					if o.problem != "" {
						t.Errorf("%s %s: %v", targets[k], d.name, o)
					}
				})
			}
		}
	}
}
