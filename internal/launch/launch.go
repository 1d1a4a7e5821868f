// Package launch starts ZooKeeper-compatible servers as child processes on
// loopback, for the programs under scripts/ that measure zkraft beside
// Apache ZooKeeper: Apache ZooKeeper 3.8 (java with the Debian package's
// jar) and zkraft (a binary built from this repository, see BuildZkraft),
// standalone or as an ensemble listed in zoo.cfg server.N lines, each
// member with its own directory, myid and data directory.
//
// Both systems read the same zoo.cfg (Config.zooCfg writes it); what only
// one of them has goes on its command line: the JVM heap and
// zookeeper.forceSync=yes (ZooKeeper's default, written out) for
// ZooKeeper, and the log level for both.
//
// The caller must:
//
//  1. New, then Start and Wait (or StartWait, which retries with new ports
//     when another process took one): Wait returns once every member
//     serves, that is it answers conf naming its own data directory (not
//     another server on a reused port), srvr reports a serving mode with
//     exactly one leader in an ensemble, and a client session opens on it
//     (ZooKeeper answers ruok before it accepts sessions);
//  2. Stop the ensemble when done, and call KillAll on a signal. Children
//     are also sent SIGKILL by the kernel when this process dies
//     (Pdeathsig), so a panic in any goroutine leaves no server behind.
//
// It talks to the servers over TCP and /proc only, never in process.
package launch

import (
	"bytes"
	"context"
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
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/internal/logtail"
)

// System names a server implementation.
type System string

const (
	ZooKeeper System = "zookeeper"
	Zkraft    System = "zkraft"
)

// DefaultJar is the Apache ZooKeeper jar of the Debian package.
const DefaultJar = "/usr/share/java/zookeeper.jar"

// Config describes an ensemble. Zero values take the defaults written on
// each field.
type Config struct {
	System  System
	Members int    // 1 (default): standalone; more: an ensemble
	Dir     string // required: member i lives in Dir/m<i>

	ZkraftBin   string   // required for zkraft
	ZkraftFlags []string // extra flags for `zkraft serve`, after --config

	Java      string   // default $JAVA, else java
	Jar       string   // default DefaultJar
	Heap      string   // JVM -Xmx; default 1000m, zkServer.sh's default heap
	JavaFlags []string // extra JVM flags (e.g. -Dzookeeper.x=y)

	// LogLevel is both systems' log level: zkraft's --log-level, ZooKeeper's
	// log4j root level. Default warn.
	LogLevel string
	// ExtraCfg are zoo.cfg lines (key=value) added for both systems.
	ExtraCfg []string
}

func (c *Config) defaults() error {
	if c.Members == 0 {
		c.Members = 1
	}
	if c.Members < 1 || c.Members > 9 {
		return fmt.Errorf("launch: %d members (want 1..9)", c.Members)
	}
	if c.Dir == "" {
		return errors.New("launch: no directory")
	}
	switch c.System {
	case Zkraft:
		if c.ZkraftBin == "" {
			return errors.New("launch: no zkraft binary")
		}
	case ZooKeeper:
		if c.Java == "" {
			c.Java = os.Getenv("JAVA")
		}
		if c.Java == "" {
			c.Java = "java"
		}
		if c.Jar == "" {
			c.Jar = DefaultJar
		}
		if c.Heap == "" {
			c.Heap = "1000m"
		}
	default:
		return fmt.Errorf("launch: unknown system %q (zookeeper or zkraft)", c.System)
	}
	if c.LogLevel == "" {
		c.LogLevel = "warn"
	}
	return nil
}

// Ensemble is a set of members started from one Config.
type Ensemble struct {
	cfg     Config
	Members []*Member
}

// Member is one server process and its directory.
type Member struct {
	ID                                 int
	ClientPort, PeerPort, ElectionPort int
	Dir                                string // zoo.cfg, logs and data/

	e  *Ensemble
	mu struct {
		sync.Mutex
		p *proc // nil until started
	}
}

// proc is one run of a member's process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been waited for
	err  error         // Wait's result, set before done is closed
}

// New checks cfg, picks free loopback ports and writes every member's
// directory (zoo.cfg, myid, an empty data directory). Nothing runs yet.
func New(cfg Config) (*Ensemble, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	e := &Ensemble{cfg: cfg}
	for i := 1; i <= cfg.Members; i++ {
		e.Members = append(e.Members, &Member{ID: i, Dir: filepath.Join(cfg.Dir, fmt.Sprintf("m%d", i)), e: e})
	}
	if err := e.prepare(); err != nil {
		return nil, err
	}
	return e, nil
}

// Config returns the configuration with its defaults filled in.
func (e *Ensemble) Config() Config { return e.cfg }

// prepare picks new ports and rewrites every member's directory from
// scratch (the data directory is emptied).
func (e *Ensemble) prepare() error {
	for _, m := range e.Members {
		for _, p := range []*int{&m.ClientPort, &m.PeerPort, &m.ElectionPort} {
			port, err := freeport.Get()
			if err != nil {
				return err
			}
			*p = port
		}
	}
	for _, m := range e.Members {
		if err := os.RemoveAll(m.Dir); err != nil {
			return err
		}
		if err := os.MkdirAll(m.DataDir(), 0o755); err != nil {
			return err
		}
		if e.cfg.Members > 1 {
			if err := os.WriteFile(filepath.Join(m.DataDir(), "myid"), []byte(strconv.Itoa(m.ID)+"\n"), 0o644); err != nil {
				return err
			}
		}
		if err := os.WriteFile(m.CfgPath(), []byte(e.zooCfg(m)), 0o644); err != nil {
			return err
		}
		if e.cfg.System == ZooKeeper {
			if err := os.WriteFile(filepath.Join(m.Dir, "log4j.properties"), []byte(log4j(m.LogPath(), e.cfg.LogLevel)), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// zooCfg is member m's zoo.cfg, the same keys for both systems.
func (e *Ensemble) zooCfg(m *Member) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=2000\ninitLimit=10\nsyncLimit=5\n")
	fmt.Fprintf(&b, "dataDir=%s\n", m.DataDir())
	fmt.Fprintf(&b, "clientPort=%d\nclientPortAddress=127.0.0.1\n", m.ClientPort)
	// No per-address connection limit (ZooKeeper's default is 60): the
	// load generator opens every session from 127.0.0.1.
	fmt.Fprintf(&b, "maxClientCnxns=0\n")
	fmt.Fprintf(&b, "admin.enableServer=false\n4lw.commands.whitelist=*\n")
	if e.cfg.Members > 1 {
		for _, o := range e.Members {
			fmt.Fprintf(&b, "server.%d=127.0.0.1:%d:%d:participant;127.0.0.1:%d\n", o.ID, o.PeerPort, o.ElectionPort, o.ClientPort)
		}
	}
	for _, l := range e.cfg.ExtraCfg {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// ZooCfg returns the zoo.cfg written for the first member, for reports.
func (e *Ensemble) ZooCfg() string { return e.zooCfg(e.Members[0]) }

func log4j(file, level string) string {
	return fmt.Sprintf(`log4j.rootLogger=%s, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=%s
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%%d{ISO8601} - %%-5p [%%t:%%C{1}@%%L] - %%m%%n
`, strings.ToUpper(level), file)
}

// DataDir is the member's data directory.
func (m *Member) DataDir() string { return filepath.Join(m.Dir, "data") }

// CfgPath is the member's zoo.cfg.
func (m *Member) CfgPath() string { return filepath.Join(m.Dir, "zoo.cfg") }

// LogPath is the member's server log.
func (m *Member) LogPath() string { return filepath.Join(m.Dir, "server.log") }

// Addr is the member's client address.
func (m *Member) Addr() string { return fmt.Sprintf("127.0.0.1:%d", m.ClientPort) }

// Command returns the command line that starts the member.
func (m *Member) Command() []string {
	c := &m.e.cfg
	if c.System == Zkraft {
		args := []string{c.ZkraftBin, "serve", "--config", m.CfgPath(), "--log-level", c.LogLevel}
		if c.Members == 1 {
			// A standalone zoo.cfg has no peer port: zkraft's own Raft
			// address would default to 127.0.0.1:2888.
			args = append(args, "--raft-addr", fmt.Sprintf("127.0.0.1:%d", m.PeerPort))
		}
		return append(args, c.ZkraftFlags...)
	}
	cp := m.Dir + ":" + c.Jar
	// zookeeper.jar's manifest names its dependencies; slf4j-log4j12 and
	// log4j 1.2 give it a logger that writes the member's server.log.
	for _, j := range []string{"slf4j-log4j12.jar", "log4j-1.2.jar"} {
		if p := filepath.Join(filepath.Dir(c.Jar), j); fileExists(p) {
			cp += ":" + p
		}
	}
	args := []string{c.Java, "-Xmx" + c.Heap,
		"-Dzookeeper.forceSync=yes", // the default, written out: fsync before acknowledging
		"-Dlog4j.configuration=file:" + filepath.Join(m.Dir, "log4j.properties"),
		"-Dzookeeper.log.dir=" + m.Dir,
	}
	args = append(args, c.JavaFlags...)
	// QuorumPeerMain runs standalone when zoo.cfg lists no servers, as
	// zkServer.sh does.
	return append(args, "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", m.CfgPath())
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// live holds every process started here and not yet reaped, for KillAll.
var live struct {
	sync.Mutex
	procs map[*proc]struct{}
}

// KillAll sends SIGKILL to every server process this package started and
// that has not ended yet. It is for signal handlers and deferred clean-up.
func KillAll() {
	live.Lock()
	defer live.Unlock()
	for p := range live.procs {
		killGroup(p.cmd.Process.Pid)
	}
}

// killGroup kills pid's process group (Setpgid made it the leader).
func killGroup(pid int) {
	syscall.Kill(-pid, syscall.SIGKILL)
	syscall.Kill(pid, syscall.SIGKILL)
}

// Start starts the member's process (again, after Kill or Stop) on its
// existing directory; its output is appended to its log.
func (m *Member) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.p != nil && !m.mu.p.exited() {
		return fmt.Errorf("launch: member %d is running", m.ID)
	}
	argv := m.Command()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = m.Dir
	name := m.LogPath()
	if m.e.cfg.System == ZooKeeper {
		name = filepath.Join(m.Dir, "stdout.log") // log4j writes server.log itself
	}
	out, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that a ctrl-C at the terminal reaches only
	// us (we stop the servers in order); SIGKILL when we die. Pdeathsig
	// follows the thread that forked, which the Go runtime does not end
	// unless a goroutine exits locked to it (nothing here does).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("launch: start member %d: %w", m.ID, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	live.Lock()
	if live.procs == nil {
		live.procs = map[*proc]struct{}{}
	}
	live.procs[p] = struct{}{}
	live.Unlock()
	go func() {
		p.err = cmd.Wait()
		out.Close()
		live.Lock()
		delete(live.procs, p)
		live.Unlock()
		close(p.done)
	}()
	m.mu.p = p
	return nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (m *Member) proc() *proc {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.p
}

// Running reports whether the member's process is alive.
func (m *Member) Running() bool {
	p := m.proc()
	return p != nil && !p.exited()
}

// PID is the member's process id (0 if it never started).
func (m *Member) PID() int {
	if p := m.proc(); p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// Kill sends SIGKILL and waits for the process to end.
func (m *Member) Kill() {
	p := m.proc()
	if p == nil || p.exited() {
		return // a reaped pid may belong to someone else by now
	}
	killGroup(p.cmd.Process.Pid)
	<-p.done
}

// Stop asks the process to end (SIGTERM), waits up to grace, then kills it.
func (m *Member) Stop(grace time.Duration) {
	p := m.proc()
	if p == nil || p.exited() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		m.Kill()
	}
}

// exitError describes how the member's process ended, or nil if it runs.
func (m *Member) exitError() error {
	p := m.proc()
	if p == nil || !p.exited() {
		return nil
	}
	return fmt.Errorf("member %d (%s) exited: %v; log:\n%s", m.ID, m.Addr(), p.err, m.LogTail(30))
}

// LogTail returns the last n lines of the member's logs.
func (m *Member) LogTail(n int) string { return logtail.Tail(m.Dir, n, "stdout.log", "server.log") }

// Addrs are the members' client addresses, in member order.
func (e *Ensemble) Addrs() []string {
	var a []string
	for _, m := range e.Members {
		a = append(a, m.Addr())
	}
	return a
}

// PIDs are the running members' process ids.
func (e *Ensemble) PIDs() []int {
	var pids []int
	for _, m := range e.Members {
		if m.Running() {
			pids = append(pids, m.PID())
		}
	}
	return pids
}

// Start starts every member.
func (e *Ensemble) Start() error {
	for _, m := range e.Members {
		if err := m.Start(); err != nil {
			e.Stop()
			return err
		}
	}
	return nil
}

// Stop stops every member (SIGTERM, SIGKILL after 10 s).
func (e *Ensemble) Stop() {
	var wg sync.WaitGroup
	for _, m := range e.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Stop(10 * time.Second)
		}()
	}
	wg.Wait()
}

// errExited marks a member that ended while we waited for it.
var errExited = errors.New("a member exited")

// StartWait starts the ensemble and waits until it serves. A member that
// exits during start-up (typically: another process took one of its ports
// between the pick and the bind) makes it pick new ports, wipe the
// directories and try again, at most attempts times.
func (e *Ensemble) StartWait(ctx context.Context, timeout time.Duration, attempts int) error {
	var err error
	for a := 0; a < max(attempts, 1); a++ {
		if a > 0 {
			if err = e.prepare(); err != nil {
				return err
			}
		}
		if err = e.Start(); err != nil {
			return err
		}
		if err = e.Wait(ctx, timeout); err == nil {
			return nil
		}
		e.Stop()
		if !errors.Is(err, errExited) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// Wait waits until every running member serves (see the package doc) or
// timeout passes. A member that is not running is an error.
func (e *Ensemble) Wait(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var state []string
	for {
		for _, m := range e.Members {
			if err := m.exitError(); err != nil {
				return fmt.Errorf("%w: %v", errExited, err)
			}
			if !m.Running() {
				return fmt.Errorf("launch: member %d is not running", m.ID)
			}
		}
		ok, s := e.serving()
		state = s
		if ok {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("launch: %s did not serve within %v (%s)", e.cfg.System, timeout, strings.Join(state, ", "))
		}
		sleep(ctx, 20*time.Millisecond)
	}
	for _, m := range e.Members {
		left := time.Until(deadline)
		if left < time.Second {
			left = time.Second
		}
		c, err := Session(ctx, []string{m.Addr()}, left, 10*time.Second)
		if err != nil {
			return fmt.Errorf("launch: member %d serves but opens no session: %w", m.ID, err)
		}
		c.Close()
	}
	return nil
}

// serving reports whether every member answers as ours and in a serving
// mode with one leader among them, and each member's state.
func (e *Ensemble) serving() (bool, []string) {
	var state []string
	leaders, ok := 0, true
	for _, m := range e.Members {
		conf, _ := FourLetter(m.Addr(), "conf", time.Second)
		if !strings.Contains(conf, "dataDir="+m.DataDir()) {
			ok = false
			state = append(state, fmt.Sprintf("member %d: not ours or not serving", m.ID))
			continue
		}
		mode := Mode(m.Addr())
		state = append(state, fmt.Sprintf("member %d: %q", m.ID, mode))
		switch {
		case e.cfg.Members == 1 && mode == "standalone":
		case e.cfg.Members > 1 && mode == "leader":
			leaders++
		case e.cfg.Members > 1 && mode == "follower":
		default:
			ok = false
		}
	}
	return ok && (e.cfg.Members == 1 || leaders == 1), state
}

// Leader returns the member whose srvr says leader (a standalone member
// leads itself), or nil.
func (e *Ensemble) Leader() *Member {
	for _, m := range e.Members {
		if !m.Running() {
			continue
		}
		switch Mode(m.Addr()) {
		case "leader", "standalone":
			return m
		}
	}
	return nil
}

// WaitLeader polls srvr on the running members other than skip until one
// says leader, for at most limit; nil if none did.
func (e *Ensemble) WaitLeader(skip *Member, limit time.Duration) *Member {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		for _, m := range e.Members {
			if m == skip || !m.Running() {
				continue
			}
			if Mode(m.Addr()) == "leader" {
				return m
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// FourLetter sends a four-letter word to addr and returns the answer.
func FourLetter(addr, word string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(word)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, io.EOF) {
		return string(b), err
	}
	return string(b), nil
}

// Mode is the "Mode:" srvr reports at addr (leader, follower, standalone,
// observer), or "" if it does not answer or does not serve.
func Mode(addr string) string {
	return srvrField(addr, "Mode: ")
}

// Version is the "Zookeeper version:" srvr reports at addr, or "".
func Version(addr string) string {
	return srvrField(addr, "Zookeeper version: ")
}

func srvrField(addr, prefix string) string {
	w, err := FourLetter(addr, "srvr", time.Second)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(w, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// quiet drops go-zookeeper's log lines (reconnect attempts while a server
// starts).
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// Session opens a go-zookeeper session on addrs and waits, at most wait,
// until it has a session. opts are go-zookeeper's options (zk.With...),
// applied after a quiet logger.
func Session(ctx context.Context, addrs []string, wait, sessionTimeout time.Duration, opts ...func(*zk.Conn)) (*zk.Conn, error) {
	// zk's option type is unexported: one function applies them all.
	all := func(c *zk.Conn) {
		zk.WithLogInfo(false)(c)
		zk.WithLogger(quiet{})(c)
		for _, o := range opts {
			o(c)
		}
	}
	c, _, err := zk.Connect(addrs, sessionTimeout, all)
	if err != nil {
		return nil, err
	}
	if err := WaitSession(ctx, c, wait); err != nil {
		c.Close()
		return nil, fmt.Errorf("%v: %w", addrs, err)
	}
	return c, nil
}

// WaitSession waits, at most wait, until c has a session.
func WaitSession(ctx context.Context, c *zk.Conn, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for c.State() != zk.StateHasSession {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no session within %v (state %v)", wait, c.State())
		}
		sleep(ctx, 5*time.Millisecond)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// BuildZkraft builds ./cmd/zkraft of the module in the working directory
// (or above it) into out.
func BuildZkraft(out string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", out, "./cmd/zkraft")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/zkraft: %v\n%s", err, b)
	}
	return nil
}

// ModuleRoot is the directory of the go.mod above the working directory.
func ModuleRoot() (string, error) {
	b, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(b))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the zkraft module (run from the repository)")
	}
	return filepath.Dir(mod), nil
}

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 for user space whatever the kernel's HZ.
const userHZ = 100

// CPUSeconds returns the user plus system CPU time pid has used (all its
// threads), from /proc/<pid>/stat.
func CPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return float64(ut+st) / userHZ, nil
}

// SelfCPUSeconds is this process's user plus system CPU time
// (getrusage, microsecond resolution).
func SelfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// RSSKiB returns pid's resident set size in KiB (0 if unknown).
func RSSKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}
