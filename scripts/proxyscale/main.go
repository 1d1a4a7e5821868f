// Command proxyscale measures what the proxy tier takes off a cell
// (docs/proxy.md): it starts a 3-member zkraft ensemble with proxy ports on
// loopback, opens idle sessions from several load processes, first straight
// to the members, then through -proxies proxies, and prints for each the
// leader's CPU over an idle window (its keep-alive cost), the resident
// memory per idle session (members for direct sessions, proxies for
// proxied ones); then it kills one proxy and counts the sessions lost and
// those that reconnected elsewhere with their id and password. It asserts
// nothing. Bounded: at most
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
	proxiedFirst := flag.Bool("proxied-first", false, "measure through the proxies first (a member's memory, once grown, stays: alternate the order)")
	flag.Parse()
	if *load {
		runLoad(strings.Split(*addrs, ","), *sessions, *timeout)
		return
	}
	if *sessions/max(*loaders, 1) > 15000 || *sessions/max(*proxies, 1) > 15000 {
		log.Fatal("proxyscale: keep each load process and each proxy under 15,000 sessions (the open-file limit is about 20,000)")
	}
	if err := run(*sessions, *proxies, *loaders, *idle, *timeout, *bin, *proxiedFirst); err != nil {
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

func run(sessions, proxies, loaders int, idle, timeout time.Duration, bin string, proxiedFirst bool) error {
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

	// phase opens the sessions on addrs, measures the idle window, then
	// runs after (if any) and waits a session timeout before it counts the
	// sessions lost.
	phase := func(name string, addrs []string, groups []group, after func()) error {
		base := map[*proc]int64{}
		for _, g := range groups {
			for _, p := range g.procs {
				base[p] = rssKB(p.cmd.Process.Pid)
			}
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
		var mem []string
		for _, g := range groups {
			var rss int64
			for _, p := range g.procs {
				rss += rssKB(p.cmd.Process.Pid) - base[p]
			}
			mem = append(mem, fmt.Sprintf("%.1f KiB on the %s", float64(rss)/float64(sessions), g.name))
		}
		cpu := float64(c1-c0) / 100 / t1.Sub(t0).Seconds() * 100
		fmt.Printf("  %-8s leader CPU %5.1f%% of a core over %v   RSS per idle session: %s   load average %s\n",
			name, cpu, t1.Sub(t0).Round(time.Second), strings.Join(mem, ", "), loadavg())
		if after != nil {
			after()
			time.Sleep(timeout + 5*time.Second)
		}
		lost, moved := 0, 0
		for _, l := range ls {
			a, b := l.finish()
			lost, moved = lost+a, moved+b
		}
		fmt.Printf("  %-8s sessions lost %d, reconnected elsewhere %d\n", name, lost, moved)
		return nil
	}

	{
		pid := leader.cmd.Process.Pid
		c0, t0 := cpuTicks(pid), time.Now()
		time.Sleep(idle)
		cpu := float64(cpuTicks(pid)-c0) / 100 / time.Since(t0).Seconds() * 100
		fmt.Printf("  %-8s leader CPU %5.1f%% of a core over %v with no sessions   load average %s\n", "baseline", cpu, idle, loadavg())
	}
	var memberProcs []*proc
	var clientAddrs, proxyAddrs []string
	for _, m := range members {
		memberProcs = append(memberProcs, m.proc)
		clientAddrs = append(clientAddrs, m.client)
		proxyAddrs = append(proxyAddrs, m.proxy)
	}
	direct := func() error {
		if err := phase("direct", clientAddrs, []group{{"members", memberProcs}}, nil); err != nil {
			return err
		}
		// The direct sessions were dropped, not closed: let them expire
		// before the next window.
		time.Sleep(timeout + 5*time.Second)
		return nil
	}
	if !proxiedFirst {
		if err := direct(); err != nil {
			return err
		}
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
	err = phase("proxied", pxAddrs, []group{{"proxies", pxs}, {"members", memberProcs}}, func() {
		// Kill one proxy (SIGKILL): its sessions must resume on the others.
		pxs[0].cmd.Process.Kill()
		fmt.Printf("  killed proxy 0 (about %d sessions)\n", sessions/proxies)
	})
	if err != nil || !proxiedFirst {
		return err
	}
	time.Sleep(timeout + 5*time.Second)
	return direct()
}

// group is processes whose resident memory is summed.
type group struct {
	name  string
	procs []*proc
}

type loader struct {
	*proc
	out   *bufio.Scanner
	stdin io.WriteCloser
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

// finish ends the load process and returns the sessions it lost and the
// reconnects it made.
func (l *loader) finish() (lost, moved int) {
	l.stdin.Close()
	for l.out.Scan() {
		if _, err := fmt.Sscanf(l.out.Text(), "lost %d moved %d", &lost, &moved); err == nil {
			return lost, moved
		}
	}
	return -1, -1
}

// runLoad opens n sessions spread over addrs, says "ready", keeps them
// alive with pings until stdin closes, and says how many it lost (expired,
// or no address took them back within their timeout) and how many moved
// (reconnected elsewhere with their id and password, as a client does when
// its server dies).
func runLoad(addrs []string, n int, timeout time.Duration) {
	var lost, moved atomic.Int64
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
			at := i % len(addrs)
			nc, resp, err := handshake(addrs[at], &jute.ConnectRequest{TimeOut: int32(timeout / time.Millisecond), Passwd: make([]byte, 16)})
			<-sem
			ready.Done()
			if err != nil {
				fmt.Fprintln(os.Stderr, "handshake:", err)
				lost.Add(1)
				return
			}
			to := time.Duration(resp.TimeOut) * time.Millisecond
			ping := jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing})
			var buf [64]byte
			for {
				select {
				case <-stop:
					nc.Close()
					return
				case <-time.After(to / 3):
				}
				nc.SetDeadline(time.Now().Add(to / 2))
				_, err := nc.Write(ping)
				if err == nil {
					_, err = io.ReadFull(nc, buf[:20]) // length + ping reply header
				}
				if err == nil {
					continue
				}
				// Reconnect elsewhere with the session, within its timeout.
				nc.Close()
				nc = nil
				deadline := time.Now().Add(to)
				for try := 1; nc == nil && time.Now().Before(deadline); try++ {
					next := addrs[(at+try)%len(addrs)]
					c, r, err := handshake(next, &jute.ConnectRequest{TimeOut: resp.TimeOut, SessionID: resp.SessionID, Passwd: resp.Passwd})
					switch {
					case err == nil && r.SessionID == resp.SessionID:
						nc, at = c, (at+try)%len(addrs)
						moved.Add(1)
					case err == nil:
						c.Close()
						fmt.Fprintf(os.Stderr, "session %#x expired\n", resp.SessionID)
						lost.Add(1)
						return
					default:
						time.Sleep(100 * time.Millisecond)
					}
				}
				if nc == nil {
					fmt.Fprintf(os.Stderr, "session %#x: no address took it back within %v\n", resp.SessionID, to)
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
	fmt.Printf("lost %d moved %d\n", lost.Load(), moved.Load())
}

// handshake connects and sends req; the response, whose session id 0
// means expired.
func handshake(addr string, req *jute.ConnectRequest) (net.Conn, *jute.ConnectResponse, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := nc.Write(jute.AppendFrame(nil, req)); err != nil {
		nc.Close()
		return nil, nil, err
	}
	var lenBuf [4]byte
	if _, err := io.ReadFull(nc, lenBuf[:]); err != nil {
		nc.Close()
		return nil, nil, err
	}
	body := make([]byte, int(lenBuf[0])<<24|int(lenBuf[1])<<16|int(lenBuf[2])<<8|int(lenBuf[3]))
	if _, err := io.ReadFull(nc, body); err != nil {
		nc.Close()
		return nil, nil, err
	}
	resp := new(jute.ConnectResponse)
	if err := jute.Unmarshal(body, resp); err != nil {
		nc.Close()
		return nil, nil, err
	}
	if req.SessionID == 0 && resp.SessionID == 0 {
		nc.Close()
		return nil, nil, errors.New("connect refused")
	}
	return nc, resp, nil
}
