package faulttest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zkraft/zkraft/internal/freeport"
)

// member is one zkraft process of the ensemble under test.
type member struct {
	id         int
	dir        string // holds zoo.cfg, data/ and stderr.log
	host       string // the member's address: in its namespace, or 127.0.0.1
	clientPort int
	peerPort   int
	elecPort   int
	ns         string // network namespace to run in; "" runs in the test's own

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	paused  bool
	starts  int
	lastErr error // how the last process ended
}

func (m *member) clientAddr() string {
	return net.JoinHostPort(m.host, strconv.Itoa(m.clientPort))
}

func (m *member) String() string { return fmt.Sprintf("member %d (%s)", m.id, m.clientAddr()) }

// cluster runs the members as real processes of the zkraft binary.
type cluster struct {
	t       *testing.T
	bin     string
	dir     string
	tick    time.Duration
	members []*member
	lab     *netLab // nil when the members run on 127.0.0.1
}

// buildBinary compiles ./cmd/zkraft into dir.
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "zkraft")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/zkraft/zkraft/cmd/zkraft")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/zkraft: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) int {
	t.Helper()
	return freeport.Port(t)
}

// newCluster writes the configs of n members. With lab set, member i runs
// in lab's namespace i on its own address with the standard ports;
// otherwise all run on 127.0.0.1 with free ports.
func newCluster(t *testing.T, bin, dir string, n int, tick time.Duration, lab *netLab) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: bin, dir: dir, tick: tick, lab: lab}
	for i := 1; i <= n; i++ {
		m := &member{id: i, dir: filepath.Join(dir, fmt.Sprintf("member%d", i))}
		if lab != nil {
			m.host, m.ns = lab.addr(i), lab.nsName(i)
			m.clientPort, m.peerPort, m.elecPort = 2181, 2888, 3888
		} else {
			m.host = "127.0.0.1"
			m.clientPort, m.peerPort, m.elecPort = freePort(t), freePort(t), freePort(t)
		}
		c.members = append(c.members, m)
	}
	var servers strings.Builder
	for _, m := range c.members {
		fmt.Fprintf(&servers, "server.%d=%s:%d:%d:participant;%s\n", m.id, m.host, m.peerPort, m.elecPort, m.clientAddr())
	}
	for _, m := range c.members {
		data := filepath.Join(m.dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintf("%d\n", m.id)), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf("tickTime=%d\ndataDir=%s\n4lw.commands.whitelist=*\n%s",
			tick.Milliseconds(), data, servers.String())
		if err := os.WriteFile(filepath.Join(m.dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (c *cluster) member(id int) *member { return c.members[id-1] }

func (c *cluster) clientAddrs() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.clientAddr())
	}
	return out
}

// start starts member m's process; its stderr is appended to stderr.log.
func (c *cluster) start(m *member) {
	c.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		c.t.Fatalf("%v already running", m)
	}
	logf, err := os.OpenFile(filepath.Join(m.dir, "stderr.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	m.starts++
	fmt.Fprintf(logf, "=== faulttest: start %d of member %d at %s\n", m.starts, m.id, time.Now().Format(time.RFC3339Nano))
	args := []string{c.bin, "--config", filepath.Join(m.dir, "zoo.cfg")}
	if m.ns != "" {
		args = append([]string{"ip", "netns", "exec", m.ns}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The member dies with the test process, whatever ends it. ip netns
	// exec execs the binary, so the signal reaches zkraft itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		c.t.Fatalf("start %v: %v", m, err)
	}
	exited := make(chan struct{})
	m.cmd, m.exited, m.paused = cmd, exited, false
	go func() {
		err := cmd.Wait()
		logf.Close()
		m.mu.Lock()
		m.lastErr = err
		m.mu.Unlock()
		close(exited)
	}()
}

// running reports whether m's process is up (possibly paused).
func (m *member) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

func (m *member) isPaused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused
}

// signal sends sig to m's process.
func (c *cluster) signal(m *member, sig syscall.Signal) {
	c.t.Helper()
	m.mu.Lock()
	cmd := m.cmd
	m.mu.Unlock()
	if cmd == nil {
		c.t.Fatalf("%v is not running", m)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %v to %v: %v", sig, m, err)
	}
}

// kill SIGKILLs m and waits for the process to be gone. It returns when
// the signal was sent.
func (c *cluster) kill(m *member) time.Time {
	c.t.Helper()
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	if cmd == nil {
		c.t.Fatalf("%v is not running", m)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	sent := time.Now()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		c.t.Fatalf("%v did not exit after SIGKILL", m)
	}
	m.mu.Lock()
	m.cmd, m.paused = nil, false
	m.mu.Unlock()
	return sent
}

func (c *cluster) pause(m *member) {
	c.t.Helper()
	c.signal(m, syscall.SIGSTOP)
	m.mu.Lock()
	m.paused = true
	m.mu.Unlock()
}

func (c *cluster) resume(m *member) {
	c.t.Helper()
	c.signal(m, syscall.SIGCONT)
	m.mu.Lock()
	m.paused = false
	m.mu.Unlock()
}

// killAll ends every member (for cleanup).
func (c *cluster) killAll() {
	for _, m := range c.members {
		m.mu.Lock()
		cmd, exited := m.cmd, m.exited
		m.mu.Unlock()
		if cmd == nil {
			continue
		}
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
		m.mu.Lock()
		m.cmd = nil
		m.mu.Unlock()
	}
}

// unexpectedExits lists members whose process ended without the test
// killing it.
func (c *cluster) unexpectedExits() []string {
	var out []string
	for _, m := range c.members {
		m.mu.Lock()
		cmd, exited := m.cmd, m.exited
		m.mu.Unlock()
		if cmd == nil {
			continue
		}
		select {
		case <-exited:
			m.mu.Lock()
			out = append(out, fmt.Sprintf("%v exited on its own: %v", m, m.lastErr))
			m.mu.Unlock()
		default:
		}
	}
	return out
}

// logTail returns the last n lines of m's stderr.log.
func (m *member) logTail(n int) string {
	data, err := os.ReadFile(filepath.Join(m.dir, "stderr.log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// status is what srvr reports.
type status struct {
	mode    string // leader, follower, ... ; "" when not serving
	zxid    int64
	serving bool
}

var errNotServing = errors.New("not currently serving requests")

// srvrPoll is how often the leader is polled for with srvr while one is
// awaited (health checks poll five times slower). srvr is not free in
// zkraft: it counts every znode under the state machine's read lock,
// holding up applies meanwhile; polling it hard on a large tree stalls the
// ensemble (see the test's notes on soaks).
const srvrPoll = 25 * time.Millisecond

// srvr asks m for its status with the four-letter word.
func srvr(addr string, timeout time.Duration) (status, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return status{}, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(timeout))
	if _, err := nc.Write([]byte("srvr")); err != nil {
		return status{}, err
	}
	out, err := io.ReadAll(nc)
	if err != nil {
		return status{}, err
	}
	if bytes.Contains(out, []byte("not currently serving")) {
		return status{}, errNotServing
	}
	var st status
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Mode":
			st.mode = v
		case "Zxid":
			n, err := strconv.ParseInt(strings.TrimPrefix(v, "0x"), 16, 64)
			if err != nil {
				return status{}, fmt.Errorf("srvr: zxid %q", v)
			}
			st.zxid = n
		}
	}
	if st.mode == "" {
		return status{}, fmt.Errorf("srvr: no mode in %q", out)
	}
	st.serving = true
	return st, nil
}

// statuses asks every member that is running and not paused.
func (c *cluster) statuses(skip func(*member) bool) map[int]status {
	type res struct {
		id int
		st status
		ok bool
	}
	ch := make(chan res, len(c.members))
	n := 0
	for _, m := range c.members {
		if !m.running() || m.isPaused() || (skip != nil && skip(m)) {
			continue
		}
		n++
		go func(m *member) {
			st, err := srvr(m.clientAddr(), 2*time.Second)
			ch <- res{m.id, st, err == nil}
		}(m)
	}
	out := map[int]status{}
	for range n {
		r := <-ch
		if r.ok {
			out[r.id] = r.st
		}
	}
	return out
}

// leader returns the one member that reports itself leader among those
// reachable (skip excludes members, e.g. one cut off), or 0.
func (c *cluster) leader(skip func(*member) bool) int {
	leader := 0
	for id, st := range c.statuses(skip) {
		if st.mode == "leader" {
			if leader != 0 {
				return 0 // two claim it: not settled yet
			}
			leader = id
		}
	}
	return leader
}

// waitLeader polls until a leader other than not is reported, returning it
// and when it was first seen.
func (c *cluster) waitLeader(limit time.Duration, not int, skip func(*member) bool) (int, time.Time, error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if l := c.leader(skip); l != 0 && l != not {
			return l, time.Now(), nil
		}
		time.Sleep(srvrPoll)
	}
	return 0, time.Time{}, fmt.Errorf("no leader (other than %d) within %v", not, limit)
}

// waitHealthy waits until every member runs, serves, exactly one leads,
// and every member has applied at least what the leader had when the wait
// began.
func (c *cluster) waitHealthy(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var target int64 = -1
	var last map[int]status
	for time.Now().Before(deadline) {
		sts := c.statuses(nil)
		last = sts
		leaders := 0
		var lz int64
		for _, st := range sts {
			if st.mode == "leader" {
				leaders++
				lz = st.zxid
			}
		}
		if len(sts) == len(c.members) && leaders == 1 {
			if target < 0 {
				target = lz
			}
			caught := true
			for _, st := range sts {
				if st.zxid < target {
					caught = false
				}
			}
			if caught {
				return nil
			}
		}
		time.Sleep(5 * srvrPoll)
	}
	return fmt.Errorf("ensemble not healthy within %v: %v", limit, last)
}
