// Command proxyscale measures what the proxy tier takes off a cell
// (docs/proxy.md): it starts a 3-member zkraft ensemble with proxy ports on
// loopback, opens idle sessions from several load processes, first straight
// to the members, then through -proxies proxies, and prints for each the
// leader's CPU over an idle window (its keep-alive cost), the resident
// memory per idle session (members for direct sessions, proxies for
// proxied ones) and the sessions lost. It asserts nothing. Bounded: at most
// -sessions sessions (a load process and a proxy each hold under the
// open-file limit), every phase has a deadline.
//
//	go run ./scripts/proxyscale -sessions 2000 -proxies 6 -loaders 2 -idle 20s
//
// The load processes are this program re-executed with -load; their
// sessions are minimal Jute clients (handshake, then a ping every third of
// the timeout), so a load process costs far less per session than a full
// client library.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/jute"
)

func main() {
	load := flag.Bool("load", false, "run as a load process (internal)")
	addrs := flag.String("addrs", "", "load: comma-separated addresses to spread sessions over")
	sessions := flag.Int("sessions", 2000, "idle sessions in each phase")
	proxies := flag.Int("proxies", 6, "proxies in the proxied phase")
	loaders := flag.Int("loaders", 2, "load processes")
	idle := flag.Duration("idle", 20*time.Second, "the idle window measured in each phase")
	timeout := flag.Duration("session-timeout", 10*time.Second, "the sessions' timeout")
	bin := flag.String("zkraft", "", "zkraft binary (default: built into the work directory)")
	flag.Parse()
	if *load {
		runLoad(strings.Split(*addrs, ","), *sessions, *timeout)
		return
	}
	if *sessions/max(*loaders, 1) > 15000 || *sessions/max(*proxies, 1) > 15000 {
		log.Fatal("proxyscale: keep each load process and each proxy under 15,000 sessions (the open-file limit is about 20,000)")
	}
	if err := run(*sessions, *proxies, *loaders, *idle, *timeout, *bin); err != nil {
		log.Fatal(err)
	}
}

type proc struct {
	name string
	cmd  *exec.Cmd
}

func (p *proc) stop() {
	if p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-done
		}
	}
}

func start(name, logPath string, args ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &proc{name: name, cmd: cmd}, nil
}

func waitPort(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			nc.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s after %v", addr, d)
}

func fourLetter(addr, word string) string {
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return ""
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	nc.Write([]byte(word))
	b, _ := io.ReadAll(nc)
	return string(b)
}

// cpuTicks is a process's user and system time in clock ticks.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

// rssKB is a process's resident set in KiB.
func rssKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			n, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return n
		}
	}
	return 0
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

type member struct {
	*proc
	client, proxy string
}

func run(sessions, proxies, loaders int, idle, timeout time.Duration, bin string) error {
	dir, err := os.MkdirTemp("", "proxyscale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "zkraft")
		out, err := exec.Command("go", "build", "-o", bin, "./cmd/zkraft").CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build: %v: %s", err, out)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	port := func() int {
		p, err := freeport.Get()
		if err != nil {
			log.Fatal(err)
		}
		return p
	}
	// A 3-member ensemble, zoo.cfg as ZooKeeper's.
	type ports struct{ client, peer, election, proxy int }
	ps := make([]ports, 3)
	for i := range ps {
		ps[i] = ports{port(), port(), port(), port()}
	}
	var servers strings.Builder
	for i, p := range ps {
		fmt.Fprintf(&servers, "server.%d=127.0.0.1:%d:%d;127.0.0.1:%d\n", i+1, p.peer, p.election, p.client)
	}
	var members []*member
	defer func() {
		for _, m := range members {
			m.stop()
		}
	}()
	for i, p := range ps {
		md := filepath.Join(dir, fmt.Sprintf("m%d", i+1))
		if err := os.MkdirAll(filepath.Join(md, "data"), 0o755); err != nil {
			return err
		}
		os.WriteFile(filepath.Join(md, "data", "myid"), []byte(strconv.Itoa(i+1)), 0o644)
		cfg := fmt.Sprintf("tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=*\n%s",
			filepath.Join(md, "data"), p.client, servers.String())
		cfgPath := filepath.Join(md, "zoo.cfg")
		os.WriteFile(cfgPath, []byte(cfg), 0o644)
		pr, err := start(fmt.Sprintf("member %d", i+1), filepath.Join(md, "server.log"), bin, "serve", "--config", cfgPath, "--log-level", "warn", "--proxy-port", strconv.Itoa(p.proxy))
		if err != nil {
			return err
		}
		members = append(members, &member{proc: pr, client: fmt.Sprintf("127.0.0.1:%d", p.client), proxy: fmt.Sprintf("127.0.0.1:%d", p.proxy)})
	}
	for _, m := range members {
		if err := waitPort(m.client, 60*time.Second); err != nil {
			return err
		}
	}
	var leader *member
	for deadline := time.Now().Add(60 * time.Second); leader == nil && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		for _, m := range members {
			if strings.Contains(fourLetter(m.client, "srvr"), "Mode: leader") {
				leader = m
			}
		}
	}
	if leader == nil {
		return errors.New("no leader after 60s")
	}
	fmt.Printf("proxyscale: %d idle sessions (timeout %v) from %d load processes, idle window %v; load average %s\n", sessions, timeout, loaders, idle, loadavg())

	phase := func(name string, addrs []string, measure []*proc) error {
		base := map[*proc]int64{}
		for _, p := range measure {
			base[p] = rssKB(p.cmd.Process.Pid)
		}
		var ls []*loader
		defer func() {
			for _, l := range ls {
				l.stop()
			}
		}()
		per := sessions / loaders
		for i := range loaders {
			n := per
			if i == loaders-1 {
				n = sessions - per*(loaders-1)
			}
			l, err := startLoader(self, addrs, n, timeout, filepath.Join(dir, fmt.Sprintf("%s-load%d.log", name, i)))
			if err != nil {
				return err
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			if err := l.waitReady(5 * time.Minute); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		time.Sleep(2 * time.Second) // the handshakes' proposals settle
		pid := leader.cmd.Process.Pid
		c0, t0 := cpuTicks(pid), time.Now()
		time.Sleep(idle)
		c1, t1 := cpuTicks(pid), time.Now()
		var rss int64
		for _, p := range measure {
			rss += rssKB(p.cmd.Process.Pid) - base[p]
		}
		lost := 0
		for _, l := range ls {
			lost += l.lost()
		}
		cpu := float64(c1-c0) / 100 / t1.Sub(t0).Seconds() * 100
		fmt.Printf("  %-8s leader CPU %5.1f%% of a core over %v   memory per idle session %5.1f KiB (RSS of %d process(es))   sessions lost %d   load average %s\n",
			name, cpu, t1.Sub(t0).Round(time.Second), float64(rss)/float64(sessions), len(measure), lost, loadavg())
		return nil
	}

	var memberProcs []*proc
	var clientAddrs, proxyAddrs []string
	for _, m := range members {
		memberProcs = append(memberProcs, m.proc)
		clientAddrs = append(clientAddrs, m.client)
		proxyAddrs = append(proxyAddrs, m.proxy)
	}
	if err := phase("direct", clientAddrs, memberProcs); err != nil {
		return err
	}
	var pxs []*proc
	var pxAddrs []string
	defer func() {
		for _, p := range pxs {
			p.stop()
		}
	}()
	for i := range proxies {
		a := fmt.Sprintf("127.0.0.1:%d", port())
		p, err := start(fmt.Sprintf("proxy %d", i), filepath.Join(dir, fmt.Sprintf("proxy%d.log", i)), bin, "proxy",
			"--members", strings.Join(proxyAddrs, ","), "--client-addr", a, "--log-level", "warn")
		if err != nil {
			return err
		}
		pxs = append(pxs, p)
		pxAddrs = append(pxAddrs, a)
	}
	for _, a := range pxAddrs {
		if err := waitPort(a, 30*time.Second); err != nil {
			return err
		}
	}
	time.Sleep(time.Second) // upstream connections
	return phase("proxied", pxAddrs, pxs)
}

type loader struct {
	*proc
	out    *bufio.Scanner
	stdin  io.WriteCloser
	result chan int
}

func startLoader(self string, addrs []string, n int, timeout time.Duration, logPath string) (*loader, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-load", "-addrs", strings.Join(addrs, ","), "-sessions", strconv.Itoa(n), "-session-timeout", timeout.String())
	cmd.Stderr = f
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &loader{proc: &proc{name: "load", cmd: cmd}, out: bufio.NewScanner(stdout), stdin: stdin}, nil
}

func (l *loader) waitReady(d time.Duration) error {
	ok := make(chan error, 1)
	go func() {
		for l.out.Scan() {
			if l.out.Text() == "ready" {
				ok <- nil
				return
			}
		}
		ok <- errors.New("a load process ended before its sessions were ready")
	}()
	select {
	case err := <-ok:
		return err
	case <-time.After(d):
		return fmt.Errorf("a load process was not ready after %v", d)
	}
}

// lost ends the load process and returns the sessions it lost.
func (l *loader) lost() int {
	l.stdin.Close()
	for l.out.Scan() {
		if n, ok := strings.CutPrefix(l.out.Text(), "lost "); ok {
			v, _ := strconv.Atoi(n)
			return v
		}
	}
	return -1
}

// runLoad opens n sessions spread over addrs, says "ready", keeps them
// alive with pings until stdin closes, and says how many it lost (closed
// by the server or unanswered).
func runLoad(addrs []string, n int, timeout time.Duration) {
	var lost atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // handshakes in flight
	var ready sync.WaitGroup
	for i := range n {
		ready.Add(1)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			nc, to, err := handshake(addrs[i%len(addrs)], timeout)
			<-sem
			ready.Done()
			if err != nil {
				fmt.Fprintln(os.Stderr, "handshake:", err)
				lost.Add(1)
				return
			}
			defer nc.Close()
			interval := to / 3
			ping := jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing})
			var buf [64]byte
			for {
				select {
				case <-stop:
					return
				case <-time.After(interval):
				}
				nc.SetDeadline(time.Now().Add(to))
				if _, err := nc.Write(ping); err != nil {
					lost.Add(1)
					return
				}
				if _, err := io.ReadFull(nc, buf[:20]); err != nil { // length + ping reply header
					lost.Add(1)
					return
				}
			}
		}()
	}
	ready.Wait()
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	close(stop)
	wg.Wait()
	fmt.Printf("lost %d\n", lost.Load())
}

func handshake(addr string, timeout time.Duration) (net.Conn, time.Duration, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, 0, err
	}
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	req := &jute.ConnectRequest{TimeOut: int32(timeout / time.Millisecond), Passwd: make([]byte, 16)}
	if _, err := nc.Write(jute.AppendFrame(nil, req)); err != nil {
		nc.Close()
		return nil, 0, err
	}
	var lenBuf [4]byte
	if _, err := io.ReadFull(nc, lenBuf[:]); err != nil {
		nc.Close()
		return nil, 0, err
	}
	body := make([]byte, int(lenBuf[0])<<24|int(lenBuf[1])<<16|int(lenBuf[2])<<8|int(lenBuf[3]))
	if _, err := io.ReadFull(nc, body); err != nil {
		nc.Close()
		return nil, 0, err
	}
	resp := new(jute.ConnectResponse)
	if err := jute.Unmarshal(body, resp); err != nil || resp.SessionID == 0 {
		nc.Close()
		return nil, 0, fmt.Errorf("connect refused: %v", err)
	}
	return nc, time.Duration(resp.TimeOut) * time.Millisecond, nil
}
