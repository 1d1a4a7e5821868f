package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
)

// startServe runs "zkraft serve args..." as a process (the test binary
// running main) with an environment free of the caller's JVM flags, and
// waits until it serves on client.
func startServe(t *testing.T, dir, client string, args ...string) *zkraftProc {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "SERVER_JVMFLAGS", "JVMFLAGS", "ZOOCFGDIR", "ZOO_DATADIR_AUTOCREATE_DISABLE":
		default:
			env = append(env, kv)
		}
	}
	logPath := filepath.Join(dir, "serve.log")
	p := startProcEnv(t, logPath, os.O_TRUNC, env, append([]string{"serve"}, args...)...)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if p.exited() {
			t.Fatalf("zkraft exited:\n%s", tail(logPath, 20))
		}
		if strings.Contains(srvr(client), "Mode: standalone") {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("zkraft does not serve on %s:\n%s", client, tail(logPath, 20))
		}
	}
}

func srvr(addr string) string {
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(2 * time.Second))
	nc.Write([]byte("srvr"))
	var b strings.Builder
	sc := bufio.NewScanner(nc)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

// listeningPorts lists the TCP ports process pid listens on, from its
// socket descriptors and /proc/<pid>/net/tcp{,6}.
func listeningPorts(t *testing.T, pid int) []int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			port, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil {
				t.Fatal(err)
			}
			ports = append(ports, int(port))
		}
	}
	sort.Ints(ports)
	return ports
}

func connectSession(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, ev, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for deadline := time.After(15 * time.Second); c.State() != zk.StateHasSession; {
		select {
		case <-ev:
		case <-deadline:
			t.Fatalf("no session with %s", addr)
		}
	}
	return c
}

// TestZooCfgEndToEnd runs zkraft from ZooKeeper configurations as a user
// would: a standalone zoo.cfg opens the client and admin ports and no Raft
// port; extendedTypesEnabled, in zoo.cfg or as a -D flag of
// SERVER_JVMFLAGS in java.env beside it, lets a go-zookeeper client create
// TTL nodes; the 61st connection from one address is refused by default;
// and the settings that do nothing are named in the log.
func TestZooCfgEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts zkraft processes; skipped with -short")
	}
	dir := t.TempDir()
	client, admin, raft := freeport.Port(t), freeport.Port(t), freeport.Port(t)
	clientAddr := fmt.Sprintf("127.0.0.1:%d", client)
	cfgPath := filepath.Join(dir, "zoo.cfg")
	zooCfg := fmt.Sprintf(`# a ZooKeeper 3.8 standalone zoo.cfg (the Debian sample's keys)
tickTime=2000
initLimit=10
syncLimit=5
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.serverAddress=127.0.0.1
admin.serverPort=%d
autopurge.purgeInterval=1
`, filepath.Join(dir, "data"), client, admin)
	if err := os.WriteFile(cfgPath, []byte(zooCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ttl := func(c *zk.Conn, path string) error {
		_, err := c.CreateTTL(path, []byte("x"), zk.FlagTTL, zk.WorldACL(zk.PermAll), time.Hour)
		return err
	}

	// 1. With --raft-addr it listens there too (the listing sees it), and
	// without extended types a TTL create fails.
	p := startServe(t, dir, clientAddr, "--config", cfgPath, "--raft-addr", fmt.Sprintf("127.0.0.1:%d", raft))
	if got, want := listeningPorts(t, p.cmd.Process.Pid), sortedInts(client, admin, raft); !equalInts(got, want) {
		t.Errorf("with --raft-addr: listening on %v, want %v", got, want)
	}
	c := connectSession(t, clientAddr)
	if err := ttl(c, "/ttl-off"); err == nil {
		t.Error("a TTL node was created without extendedTypesEnabled")
	}
	c.Close()
	p.stop(syscall.SIGTERM)
	log, _ := os.ReadFile(p.log)
	for _, k := range []string{"initLimit", "syncLimit", "autopurge.purgeInterval"} {
		if !strings.Contains(string(log), "ZooKeeper setting has no effect in zkraft\" key="+k+" ") {
			t.Errorf("the log does not name %s:\n%s", k, log)
		}
	}

	// 2. java.env beside zoo.cfg turns on TTL nodes through SERVER_JVMFLAGS,
	// as zkServer.sh would; the same data directory restarts with no Raft
	// address and opens no Raft port.
	javaEnv := "# sourced by zkEnv.sh\nexport SERVER_JVMFLAGS=\"-Xmx512m -Dzookeeper.extendedTypesEnabled=true $SERVER_JVMFLAGS\"\n"
	if err := os.WriteFile(filepath.Join(dir, "java.env"), []byte(javaEnv), 0o644); err != nil {
		t.Fatal(err)
	}
	p = startServe(t, dir, clientAddr, "--config", cfgPath)
	if got, want := listeningPorts(t, p.cmd.Process.Pid), sortedInts(client, admin); !equalInts(got, want) {
		t.Errorf("standalone: listening on %v, want only the client and admin ports %v", got, want)
	}
	c = connectSession(t, clientAddr)
	if err := ttl(c, "/ttl-env"); err != nil {
		t.Errorf("TTL create with -Dzookeeper.extendedTypesEnabled=true in java.env: %v", err)
	}

	// maxClientCnxns defaults to 60: the session above and 59 more are
	// served, the 61st connection is closed at once.
	var held []net.Conn
	defer func() {
		for _, nc := range held {
			nc.Close()
		}
	}()
	for i := 0; i < 59; i++ {
		nc, err := net.DialTimeout("tcp", clientAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, nc)
	}
	for i, nc := range held {
		nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := nc.Read(make([]byte, 1)); err == nil || !isTimeout(err) {
			t.Fatalf("connection %d of 60 was not kept open: %v", i+2, err)
		}
	}
	nc, err := net.DialTimeout("tcp", clientAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := nc.Read(make([]byte, 1)); n != 0 || isTimeout(err) {
		t.Errorf("the 61st connection from 127.0.0.1 was not closed: %d bytes, %v", n, err)
	}
	nc.Close()
	held[0].Close()
	held = held[1:]
	ok := false
	for deadline := time.Now().Add(5 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ok = strings.Contains(srvr(clientAddr), "Mode: standalone")
	}
	if !ok {
		t.Error("no connection served once one of the 60 closed")
	}
	if _, _, err := c.Exists("/ttl-env"); err != nil {
		t.Errorf("the session after the refusals: %v", err)
	}
	c.Close()
	p.stop(syscall.SIGTERM)

	// 3. extendedTypesEnabled=true in zoo.cfg, no java.env.
	dir3 := t.TempDir()
	cfg3 := filepath.Join(dir3, "zoo.cfg")
	text3 := strings.Replace(zooCfg, filepath.Join(dir, "data"), filepath.Join(dir3, "data"), 1) + "extendedTypesEnabled=true\n"
	if err := os.WriteFile(cfg3, []byte(text3), 0o644); err != nil {
		t.Fatal(err)
	}
	p = startServe(t, dir3, clientAddr, "--config", cfg3)
	c = connectSession(t, clientAddr)
	if err := ttl(c, "/ttl-cfg"); err != nil {
		t.Errorf("TTL create with extendedTypesEnabled=true in zoo.cfg: %v", err)
	}
	if _, st, err := c.Exists("/ttl-cfg"); err != nil || st == nil || st.EphemeralOwner != 0 {
		t.Errorf("the TTL node: %+v %v", st, err)
	}
	c.Close()
	p.stop(syscall.SIGTERM)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func sortedInts(v ...int) []int {
	sort.Ints(v)
	return v
}

func equalInts(a, b []int) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}
