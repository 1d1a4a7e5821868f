// Command proxyfanout measures a watch's fan-out through the proxy tier
// (docs/proxy.md): it starts a standalone zkraft member with a proxy port
// and -proxies proxies on loopback (separate processes), opens -sessions
// sessions spread over the proxies, each sets a one-shot data watch on
// one znode, and a direct session writes it. For each round it prints the
// notifications delivered and lost (none within -wait), their latency
// from the write's acknowledgement (p50, p99, max), the member's watch
// count before the write (wchs) and the member's CPU time from the write
// to the last notification, once with shared watches (upstream protocol
// version 2) and once without (version 1: one watch per session on the
// member), alternating which goes first. It asserts nothing. Bounded: at
// most -sessions sessions (under the open-file limit), -rounds rounds,
// every wait has a deadline.
//
//	go run ./scripts/proxyfanout -sessions 10000 -proxies 6 -rounds 3
//
// The sessions are bench's minimal Jute clients, all in this process.
//
// -modes chooses what each round measures, in order (alternated every
// other round): 2 (shared watches), 1 (one watch per session on the
// member, through the proxies) and direct (the sessions straight to the
// member, no proxy: the member's own fan-out, which shows how fast this
// process reads the same count). Each round also prints the CPU time of
// the member, the proxies (summed) and this process from the write's
// sending to the last notification, and per notification. With -profile
// DIR the member and proxies serve pprof (ZKRAFT_PPROF_ADDR) and each
// round writes CPU profiles of every process over the fan-out into DIR.
//
//	go run ./scripts/proxyfanout -sessions 10000 -proxies 1 -modes 2,direct -profile /tmp/me/prof
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zkraft/zkraft/bench"
	"github.com/zkraft/zkraft/internal/fourlw"
	"github.com/zkraft/zkraft/internal/freeport"
	xproc "github.com/zkraft/zkraft/internal/proc"
	"github.com/zkraft/zkraft/jute"
)

func main() {
	sessions := flag.Int("sessions", 2000, "watching sessions")
	proxies := flag.Int("proxies", 6, "proxies")
	rounds := flag.Int("rounds", 3, "rounds (each measures version 2 and version 1)")
	wait := flag.Duration("wait", 30*time.Second, "how long a round waits for its notifications")
	bin := flag.String("zkraft", "", "zkraft binary (default: built into the work directory)")
	modeList := flag.String("modes", "2,1", "what each round measures, in order: 2 (shared watches), 1 (one watch per session upstream), direct (no proxy)")
	profile := flag.String("profile", "", "directory for CPU profiles of the member, the proxies and this process over each fan-out (default: none)")
	flag.Parse()
	modes = strings.Split(*modeList, ",")
	for _, m := range modes {
		if m != "1" && m != "2" && m != "direct" {
			log.Fatalf("proxyfanout: -modes: %q is not 1, 2 or direct", m)
		}
	}
	profileDir = *profile
	if *sessions > 15000 {
		log.Fatal("proxyfanout: keep under 15,000 sessions (the open-file limit is about 20,000)")
	}
	if err := run(*sessions, *proxies, *rounds, *wait, *bin); err != nil {
		log.Fatal(err)
	}
}

var (
	modes      []string
	profileDir string
)

// pprofAddrs are the pprof addresses of the member and the proxies of the
// current round (with -profile), by name.
var pprofAddrs = map[string]string{}

// startWithPprof starts a zkraft process serving pprof on a free port when
// -profile is set (ZKRAFT_PPROF_ADDR, read by serve and proxy).
func startWithPprof(name, logPath string, args ...string) (*proc, error) {
	if profileDir == "" {
		return xproc.Start(name, logPath, args...)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port())
	os.Setenv("ZKRAFT_PPROF_ADDR", addr)
	defer os.Unsetenv("ZKRAFT_PPROF_ADDR")
	pprofAddrs[name] = addr
	return xproc.Start(name, logPath, args...)
}

// profiles fetches a CPU profile of d from every process serving pprof
// and of this process, into profileDir with tag in their names; the
// returned function waits for them.
func profiles(tag string, d time.Duration) func() {
	if profileDir == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	for name, addr := range pprofAddrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d/time.Second)))
			if err != nil {
				log.Printf("profile of %s: %v", name, err)
				return
			}
			defer resp.Body.Close()
			f, err := os.Create(filepath.Join(profileDir, fmt.Sprintf("%s-%s.pprof", name, tag)))
			if err != nil {
				log.Printf("profile of %s: %v", name, err)
				return
			}
			defer f.Close()
			io.Copy(f, resp.Body)
		}()
	}
	f, err := os.Create(filepath.Join(profileDir, fmt.Sprintf("load-%s.pprof", tag)))
	if err == nil && pprof.StartCPUProfile(f) == nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(d)
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	time.Sleep(200 * time.Millisecond) // every profile has started
	return wg.Wait
}

// selfCPU is this process's user and system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// proc is a child process (internal/proc).
type proc = xproc.Proc

func fourLetter(addr, word string) string {
	s, _ := fourlw.Ask(addr, word, 5*time.Second)
	return s
}

func port() int {
	p, err := freeport.Get()
	if err != nil {
		log.Fatal(err)
	}
	return p
}

func run(sessions, proxies, rounds int, wait time.Duration, bin string) error {
	dir, err := os.MkdirTemp("", "proxyfanout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "zkraft")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/zkraft").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v: %s", err, out)
		}
	}
	clientPort, proxyPort := port(), port()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return err
	}
	cfg := fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=*\n",
		filepath.Join(dir, "data"), clientPort)
	cfgPath := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	if profileDir != "" {
		if err := os.MkdirAll(profileDir, 0o755); err != nil {
			return err
		}
	}
	member, err := startWithPprof("member", filepath.Join(dir, "member.log"), bin, "serve", "--config", cfgPath, "--log-level", "warn", "--proxy-port", strconv.Itoa(proxyPort))
	if err != nil {
		return err
	}
	defer member.Stop()
	client := fmt.Sprintf("127.0.0.1:%d", clientPort)
	if err := xproc.WaitPort(client, 60*time.Second); err != nil {
		return err
	}
	w, err := bench.Dial(client, bench.ConnOptions{SessionTimeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer w.Close(time.Second)
	var cr jute.CreateResponse
	if err := w.Do(jute.OpCreate, &jute.CreateRequest{Path: "/fan", Data: []byte("0"), ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}}, &cr, 10*time.Second); err != nil {
		return err
	}
	fmt.Printf("proxyfanout: %d sessions through %d proxies watch /fan on a standalone member; load average %s\n", sessions, proxies, xproc.LoadAvg())
	for r := range rounds {
		order := slices.Clone(modes)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, m := range order {
			if err := round(dir, bin, member, client, proxyPort, w, m, r+1, sessions, proxies, wait); err != nil {
				return fmt.Errorf("round %d, mode %s: %w", r+1, m, err)
			}
		}
	}
	return nil
}

func round(dir, bin string, member *proc, client string, proxyPort int, w *bench.Conn, mode string, rnd, sessions, proxies int, wait time.Duration) error {
	var addrs []string
	var ps []*proc
	defer func() {
		for _, p := range ps {
			p.Stop()
		}
		for name := range pprofAddrs {
			if name != "member" {
				delete(pprofAddrs, name)
			}
		}
	}()
	if mode == "direct" {
		proxies = 0
		addrs = append(addrs, client)
	}
	for i := range proxies {
		addr := fmt.Sprintf("127.0.0.1:%d", port())
		p, err := startWithPprof(fmt.Sprintf("proxy%d", i), filepath.Join(dir, fmt.Sprintf("proxy%d-v%s-r%d.log", i, mode, rnd)), bin, "proxy",
			"--members", fmt.Sprintf("127.0.0.1:%d", proxyPort), "--client-addr", addr, "--log-level", "warn",
			"--upstream-version", mode)
		if err != nil {
			return err
		}
		ps = append(ps, p)
		addrs = append(addrs, addr)
	}
	for _, a := range addrs {
		if err := xproc.WaitPort(a, 30*time.Second); err != nil {
			return err
		}
	}
	time.Sleep(time.Second) // the proxies' upstream connections

	var (
		// at: when each session's notification arrived (Unix ns, 0
		// before), stored by its reader without a lock shared by all;
		// twice counts sessions notified more than once.
		at    = make([]atomic.Int64, sessions)
		got   atomic.Int64
		twice atomic.Int64
	)
	conns := make([]*bench.Conn, sessions)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= sessions {
					return
				}
				c, err := bench.Dial(addrs[i%len(addrs)], bench.ConnOptions{SessionTimeout: 30 * time.Second, DialTimeout: 20 * time.Second,
					OnWatch: func(ev *jute.WatcherEvent, _ int64) {
						now := time.Now().UnixNano()
						if ev.Path != "/fan" || ev.Type != jute.EventNodeDataChanged {
							return
						}
						got.Add(1)
						if !at[i].CompareAndSwap(0, now) {
							twice.Add(1)
						}
					}})
				if err != nil {
					failed.Add(1)
					continue
				}
				conns[i] = c
				var resp jute.GetDataResponse
				if err := c.Do(jute.OpGetData, &jute.GetDataRequest{Path: "/fan", Watch: true}, &resp, 20*time.Second); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close(time.Second)
			}
		}
	}()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d sessions failed to connect or set their watch", n)
	}
	wchs := strings.ReplaceAll(strings.TrimSpace(fourLetter(client, "wchs")), "\n", ", ")
	pid := member.Cmd.Process.Pid
	waitProfiles := profiles(fmt.Sprintf("v%s-r%d", mode, rnd), 2*time.Second)
	proxyTicks := func() (t int64) {
		for _, p := range ps {
			t += xproc.CPUTicks(p.Pid())
		}
		return t
	}
	c0, p0, s0 := xproc.CPUTicks(pid), proxyTicks(), selfCPU()
	var sr jute.SetDataResponse
	sent := time.Now()
	if err := w.Do(jute.OpSetData, &jute.SetDataRequest{Path: "/fan", Data: []byte(strconv.FormatInt(sent.UnixNano(), 10)), Version: -1}, &sr, 10*time.Second); err != nil {
		return err
	}
	ack := time.Now()
	deadline := ack.Add(wait)
	for got.Load() < int64(sessions) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	c1, p1, s1 := xproc.CPUTicks(pid), proxyTicks(), selfCPU()
	time.Sleep(200 * time.Millisecond) // late duplicates, if any, are counted
	waitProfiles()
	// Latency from the acknowledgement; a notification that came before
	// it counts as 0.
	// (From the write's sending too: a member that queues every
	// session's notification before it answers the write acknowledges it
	// late, and most notifications come before the acknowledgement.)
	ls := make([]time.Duration, 0, len(at))
	fromSend := make([]time.Duration, 0, len(at))
	early := 0
	for i := range at {
		t := at[i].Load()
		if t == 0 {
			continue
		}
		d := time.Duration(t - ack.UnixNano())
		if d < 0 {
			d, early = 0, early+1
		}
		ls = append(ls, d)
		fromSend = append(fromSend, time.Duration(t-sent.UnixNano()))
	}
	slices.Sort(ls)
	slices.Sort(fromSend)
	sendPct := func(q float64) time.Duration {
		if len(fromSend) == 0 {
			return 0
		}
		return fromSend[min(len(fromSend)-1, int(q*float64(len(fromSend))))].Round(time.Millisecond)
	}
	pct := func(q float64) time.Duration {
		if len(ls) == 0 {
			return 0
		}
		return ls[min(len(ls)-1, int(q*float64(len(ls))))]
	}
	delivered := got.Load()
	lost := max(0, int64(sessions)-delivered)
	var maxLat time.Duration
	if len(ls) > 0 {
		maxLat = ls[len(ls)-1]
	}
	perNote := func(d time.Duration) string {
		if delivered == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f µs", float64(d.Microseconds())/float64(delivered))
	}
	memberCPU, proxyCPU, loadCPU := time.Duration(c1-c0)*10*time.Millisecond, time.Duration(p1-p0)*10*time.Millisecond, s1-s0
	fmt.Printf("  mode %s: delivered %d (%d before the ack, counted 0), lost %d, p50 %v p99 %v max %v from the ack (write %v; from its sending p50 %v p99 %v); member before: %s; load average %s\n",
		mode, delivered, early, lost, pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), maxLat.Round(time.Millisecond),
		ack.Sub(sent).Round(time.Millisecond), sendPct(0.50), sendPct(0.99), wchs, xproc.LoadAvg())
	fmt.Printf("    CPU from the write to the last notification: member %v (%s per notification), proxies %v (%s), this process %v (%s), all %v (%s)\n",
		memberCPU, perNote(memberCPU), proxyCPU, perNote(proxyCPU), loadCPU.Round(time.Millisecond), perNote(loadCPU),
		(memberCPU + proxyCPU + loadCPU).Round(time.Millisecond), perNote(memberCPU+proxyCPU+loadCPU))
	if n := twice.Load(); n > 0 || delivered > int64(sessions) {
		return fmt.Errorf("%d sessions notified more than once: a watch fired twice", n)
	}
	return nil
}
