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
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	flag.Parse()
	if *sessions > 15000 {
		log.Fatal("proxyfanout: keep under 15,000 sessions (the open-file limit is about 20,000)")
	}
	if err := run(*sessions, *proxies, *rounds, *wait, *bin); err != nil {
		log.Fatal(err)
	}
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
	member, err := xproc.Start("", filepath.Join(dir, "member.log"), bin, "serve", "--config", cfgPath, "--log-level", "warn", "--proxy-port", strconv.Itoa(proxyPort))
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
		order := []int{2, 1}
		if r%2 == 1 {
			order = []int{1, 2}
		}
		for _, v := range order {
			if err := round(dir, bin, member, client, proxyPort, w, v, sessions, proxies, wait); err != nil {
				return fmt.Errorf("round %d, version %d: %w", r+1, v, err)
			}
		}
	}
	return nil
}

func round(dir, bin string, member *proc, client string, proxyPort int, w *bench.Conn, version, sessions, proxies int, wait time.Duration) error {
	var addrs []string
	var ps []*proc
	defer func() {
		for _, p := range ps {
			p.Stop()
		}
	}()
	for i := range proxies {
		addr := fmt.Sprintf("127.0.0.1:%d", port())
		p, err := xproc.Start("", filepath.Join(dir, fmt.Sprintf("proxy%d-v%d.log", i, version)), bin, "proxy",
			"--members", fmt.Sprintf("127.0.0.1:%d", proxyPort), "--client-addr", addr, "--log-level", "warn",
			"--upstream-version", strconv.Itoa(version))
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
		mu  sync.Mutex
		at  []int64 // unix nanos each notification arrived
		got atomic.Int64
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
						mu.Lock()
						at = append(at, now)
						mu.Unlock()
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
	c0 := xproc.CPUTicks(pid)
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
	c1 := xproc.CPUTicks(pid)
	time.Sleep(200 * time.Millisecond) // late duplicates, if any, are counted
	// Latency from the acknowledgement; a notification that came before
	// it counts as 0.
	// (From the write's sending too: a member that queues every
	// session's notification before it answers the write acknowledges it
	// late, and most notifications come before the acknowledgement.)
	mu.Lock()
	ls := make([]time.Duration, 0, len(at))
	fromSend := make([]time.Duration, 0, len(at))
	early := 0
	for _, t := range at {
		d := time.Duration(t - ack.UnixNano())
		if d < 0 {
			d, early = 0, early+1
		}
		ls = append(ls, d)
		fromSend = append(fromSend, time.Duration(t-sent.UnixNano()))
	}
	mu.Unlock()
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
	fmt.Printf("  version %d: delivered %d (%d before the ack, counted 0), lost %d, p50 %v p99 %v max %v from the ack (write %v; from its sending p50 %v p99 %v); member CPU %d ms; member before: %s; load average %s\n",
		version, delivered, early, lost, pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), maxLat.Round(time.Millisecond),
		ack.Sub(sent).Round(time.Millisecond), sendPct(0.50), sendPct(0.99), (c1-c0)*10, wchs, xproc.LoadAvg())
	if delivered > int64(sessions) {
		return errors.New("more notifications than sessions: a watch fired twice")
	}
	return nil
}
