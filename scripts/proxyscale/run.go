package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/internal/launch"
	xproc "github.com/zkraft/zkraft/internal/proc"
)

// watchPath is the znode every session of the scale phase watches.
const watchPath = "/proxyscale-watch"

type member struct {
	*proc
	client, proxy string
}

// group is processes whose resident memory is summed.
type group struct {
	name  string
	procs []*proc
}

func (g group) rss() int64 {
	var n int64
	for _, p := range g.procs {
		if p.Cmd.ProcessState == nil { // still running
			n += xproc.RSSKB(p.Cmd.Process.Pid)
		}
	}
	return n
}

type run struct {
	*cfg
	dir, self string
	members   []*member
	leader    *member
	pxs       []*proc
	pxAddrs   []string
	pxAdmins  []string // the proxies' AdminServers, for their upstream figures
	// proxyKiB is the proxies' RSS per idle session in the proxied CPU
	// window, against ZooKeeper's (-zk) at the end.
	proxyKiB float64
	// ephCreated is how many the last openLoad's sessions created.
	ephCreated int
}

func (c *cfg) run() error {
	dir, err := os.MkdirTemp("", "proxyscale-")
	if err != nil {
		return err
	}
	if os.Getenv("PROXYSCALE_KEEP") == "" { // keep the logs
		defer os.RemoveAll(dir)
	}
	r := &run{cfg: c, dir: dir}
	defer r.stopAll()
	if r.self, err = os.Executable(); err != nil {
		return err
	}
	if err := r.startEnsemble(); err != nil {
		return err
	}
	fmt.Printf("proxyscale: 3 members, %d proxies, %d load processes; %d sessions in the CPU windows, %d in the scale phase (timeout %v); load average %s\n",
		c.proxies, c.loaders, c.cpuSessions, c.sessions, c.timeout, xproc.LoadAvg())
	if c.proxyProcs > 0 || c.loadProcs > 0 {
		fmt.Printf("proxyscale: GOMAXPROCS of each proxy %d, of each load process %d (0: Go's default)\n", c.proxyProcs, c.loadProcs)
	}
	if c.watchOnly || c.killOnly {
		if err := r.startProxies(); err != nil {
			return err
		}
		var memberProcs []*proc
		for _, m := range r.members {
			memberProcs = append(memberProcs, m.proc)
		}
		return r.scale(group{"proxies", r.pxs}, group{"members", memberProcs})
	}
	fmt.Printf("  %-9s leader CPU %5.1f%% of a core over %v with no sessions   load average %s\n", "baseline", r.leaderCPU(c.idle), c.idle, xproc.LoadAvg())

	if err := r.startProxies(); err != nil {
		return err
	}
	var memberProcs []*proc
	var clientAddrs []string
	for _, m := range r.members {
		memberProcs = append(memberProcs, m.proc)
		clientAddrs = append(clientAddrs, m.client)
	}
	members, proxies := group{"members", memberProcs}, group{"proxies", r.pxs}
	windows := []func() error{
		func() error { return r.cpuWindow("direct", clientAddrs, members) },
		func() error { return r.cpuWindow("proxied", r.pxAddrs, proxies, members) },
	}
	if c.proxiedFirst {
		slices.Reverse(windows)
	}
	for _, w := range windows {
		if err := w(); err != nil {
			return err
		}
	}
	// Fresh proxies for the scale phase, so that their memory per session
	// is not the CPU window's (a Go process's memory, once grown, stays).
	for _, p := range r.pxs {
		p.Stop()
	}
	r.pxs, r.pxAddrs, r.pxAdmins = nil, nil, nil
	if err := r.startProxies(); err != nil {
		return err
	}
	if err := r.scale(group{"proxies", r.pxs}, members); err != nil {
		return err
	}
	if c.zk {
		return r.zooKeeper()
	}
	return nil
}

func (r *run) stopAll() {
	for _, p := range r.pxs {
		p.Stop()
	}
	for _, m := range r.members {
		m.Stop()
	}
}

func (r *run) port() int {
	p, err := freeport.Get()
	if err != nil {
		log.Fatal(err)
	}
	return p
}

// startEnsemble starts three members (zoo.cfg as ZooKeeper's, a proxy
// port each) and finds the leader.
func (r *run) startEnsemble() error {
	if r.bin == "" {
		r.bin = filepath.Join(r.dir, "zkraft")
		out, err := exec.Command("go", "build", "-o", r.bin, "./cmd/zkraft").CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build: %v: %s", err, out)
		}
	}
	type ports struct{ client, peer, election, proxy int }
	ps := make([]ports, 3)
	for i := range ps {
		ps[i] = ports{r.port(), r.port(), r.port(), r.port()}
	}
	var servers strings.Builder
	for i, p := range ps {
		fmt.Fprintf(&servers, "server.%d=127.0.0.1:%d:%d;127.0.0.1:%d\n", i+1, p.peer, p.election, p.client)
	}
	for i, p := range ps {
		md := filepath.Join(r.dir, fmt.Sprintf("m%d", i+1))
		if err := os.MkdirAll(filepath.Join(md, "data"), 0o755); err != nil {
			return err
		}
		os.WriteFile(filepath.Join(md, "data", "myid"), []byte(strconv.Itoa(i+1)), 0o644)
		cfg := fmt.Sprintf("tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=*\n%s",
			filepath.Join(md, "data"), p.client, servers.String())
		cfgPath := filepath.Join(md, "zoo.cfg")
		os.WriteFile(cfgPath, []byte(cfg), 0o644)
		if os.Getenv("PROXYSCALE_PPROF") != "" {
			a := fmt.Sprintf("127.0.0.1:%d", r.port())
			os.Setenv("ZKRAFT_PPROF_ADDR", a)
			fmt.Printf("proxyscale: member %d's profiles on http://%s/debug/pprof/\n", i+1, a)
		}
		level := "warn"
		if l := os.Getenv("PROXYSCALE_MEMBER_LOG"); l != "" {
			level = l // info: every session's handshake and expiry
		}
		args := []string{r.bin, "serve", "--config", cfgPath, "--log-level", level, "--proxy-port", strconv.Itoa(p.proxy)}
		if r.single {
			args = append(args, "--single-handshakes")
		}
		pr, err := xproc.Start(fmt.Sprintf("member %d", i+1), filepath.Join(md, "server.log"), args...)
		if err != nil {
			return err
		}
		r.members = append(r.members, &member{proc: pr, client: fmt.Sprintf("127.0.0.1:%d", p.client), proxy: fmt.Sprintf("127.0.0.1:%d", p.proxy)})
	}
	os.Unsetenv("ZKRAFT_PPROF_ADDR")
	for _, m := range r.members {
		if err := xproc.WaitPort(m.client, 60*time.Second); err != nil {
			return err
		}
	}
	for deadline := time.Now().Add(60 * time.Second); r.leader == nil && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		for _, m := range r.members {
			if strings.Contains(fourLetter(m.client, "srvr"), "Mode: leader") {
				r.leader = m
			}
		}
	}
	if r.leader == nil {
		return errors.New("no leader after 60s")
	}
	return nil
}

func (r *run) startProxies() error {
	var proxyAddrs []string
	for _, m := range r.members {
		proxyAddrs = append(proxyAddrs, m.proxy)
	}
	for i := range r.proxies {
		a, admin := fmt.Sprintf("127.0.0.1:%d", r.port()), fmt.Sprintf("127.0.0.1:%d", r.port())
		if os.Getenv("PROXYSCALE_PPROF") != "" {
			pa := fmt.Sprintf("127.0.0.1:%d", r.port())
			os.Setenv("ZKRAFT_PPROF_ADDR", pa)
			fmt.Printf("proxyscale: proxy %d's profiles on http://%s/debug/pprof/\n", i, pa)
		}
		p, err := withProcs(r.proxyProcs, func() (*proc, error) {
			return xproc.Start(fmt.Sprintf("proxy %d", i), filepath.Join(r.dir, fmt.Sprintf("proxy%d.log", i)), r.bin, "proxy",
				"--members", strings.Join(proxyAddrs, ","), "--client-addr", a, "--admin-addr", admin, "--log-level", "info")
		})
		if err != nil {
			return err
		}
		r.pxs = append(r.pxs, p)
		r.pxAddrs = append(r.pxAddrs, a)
		r.pxAdmins = append(r.pxAdmins, admin)
	}
	os.Unsetenv("ZKRAFT_PPROF_ADDR")
	for _, a := range r.pxAddrs {
		if err := xproc.WaitPort(a, 30*time.Second); err != nil {
			return err
		}
	}
	time.Sleep(time.Second) // upstream connections
	return nil
}

// leaderCPU is the leader's CPU over d, in percent of a core.
func (r *run) leaderCPU(d time.Duration) float64 {
	pid := r.leader.Cmd.Process.Pid
	c0, t0 := xproc.CPUTicks(pid), time.Now()
	time.Sleep(d)
	return float64(xproc.CPUTicks(pid)-c0) / 100 / time.Since(t0).Seconds() * 100
}

// openLoad starts the load processes with n sessions spread over addrs and
// waits until every handshake is done; the first eph sessions of each
// create an ephemeral, and r.ephCreated counts those created.
func (r *run) openLoad(name string, addrs []string, n, eph int) ([]*loader, error) {
	var ls []*loader
	per := n / r.loaders
	t0 := time.Now()
	for i := range r.loaders {
		k := per
		if i == r.loaders-1 {
			k = n - per*(r.loaders-1)
		}
		// Each load process starts its sessions on its own address first,
		// so that the sessions spread evenly.
		rot := append(slices.Clone(addrs[i%len(addrs):]), addrs[:i%len(addrs)]...)
		if os.Getenv("PROXYSCALE_PPROF") != "" {
			pa := fmt.Sprintf("127.0.0.1:%d", r.port())
			os.Setenv("PROXYSCALE_LOAD_PPROF", pa)
			fmt.Printf("proxyscale: %s load process %d's profiles on http://%s/debug/pprof/\n", name, i, pa)
		}
		// Each load process dials from its own loopback address (main.go,
		// dialFrom), as clients on several hosts would.
		source := fmt.Sprintf("127.0.0.%d", 2+i%250)
		if r.oneSource {
			source = ""
		}
		l, err := withProcs(r.loadProcs, func() (*loader, error) {
			return startLoader(r.self, rot, k, r.timeout, r.handshakes, eph, r.watches, source, filepath.Join(r.dir, fmt.Sprintf("%s-load%d.log", name, i)))
		})
		os.Unsetenv("PROXYSCALE_LOAD_PPROF")
		if err != nil {
			return ls, err
		}
		ls = append(ls, l)
	}
	opened, failed := 0, 0
	r.ephCreated = 0
	for _, l := range ls {
		o, f, e, err := l.waitReady(10 * time.Minute)
		if err != nil {
			return ls, fmt.Errorf("%s: %w", name, err)
		}
		opened, failed, r.ephCreated = opened+o, failed+f, r.ephCreated+e
	}
	el := time.Since(t0)
	fmt.Printf("  %-9s %d sessions opened in %v (%.0f/s), %d handshakes failed   load average %s\n", name, opened, el.Round(100*time.Millisecond), float64(opened)/el.Seconds(), failed, xproc.LoadAvg())
	return ls, nil
}

func finishAll(ls []*loader) (lost, moved int) {
	for _, l := range ls {
		a, b := l.finish()
		lost, moved = lost+a, moved+b
	}
	return lost, moved
}

func perSession(groups []group, base map[string]int64, n int) string {
	var mem []string
	for _, g := range groups {
		mem = append(mem, fmt.Sprintf("%.1f KiB on the %s", float64(g.rss()-base[g.name])/float64(n), g.name))
	}
	return strings.Join(mem, ", ")
}

// cpuWindow opens cpuSessions idle sessions on addrs, measures the
// leader's CPU and the groups' memory per session, drops the sessions and
// waits for them to expire.
func (r *run) cpuWindow(name string, addrs []string, groups ...group) error {
	base := map[string]int64{}
	for _, g := range groups {
		base[g.name] = g.rss()
	}
	ls, err := r.openLoad(name, addrs, r.cpuSessions, 0)
	if err != nil {
		finishAll(ls)
		return err
	}
	time.Sleep(2 * time.Second) // the handshakes' proposals settle
	cpu := r.leaderCPU(r.idle)
	fmt.Printf("  %-9s leader CPU %5.1f%% of a core over %v   RSS per idle session: %s   load average %s\n",
		name, cpu, r.idle, perSession(groups, base, r.cpuSessions), xproc.LoadAvg())
	if groups[0].name == "proxies" {
		r.proxyKiB = float64(groups[0].rss()-base["proxies"]) / float64(r.cpuSessions)
		fmt.Printf("  %-9s proxies' upstream: %s\n", name, r.upstreamFigures())
	}
	lost, moved := finishAll(ls)
	fmt.Printf("  %-9s sessions lost %d, reconnected %d\n", name, lost, moved)
	// The sessions were dropped, not closed: let them expire before the
	// next window.
	time.Sleep(r.timeout + 5*time.Second)
	return nil
}

// scale holds r.sessions through the proxies, then watches, writes and
// counts notifications, then kills a proxy.
func (r *run) scale(groups ...group) error {
	base := map[string]int64{}
	for _, g := range groups {
		base[g.name] = g.rss()
	}
	var addrs []string
	for _, m := range r.members {
		addrs = append(addrs, m.client)
	}
	w, err := launch.Session(context.Background(), addrs, 30*time.Second, 30*time.Second)
	if err != nil {
		return err
	}
	defer w.Close()
	if _, err := w.Create(watchPath, []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	if _, err := w.Create(ephemeralDir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	ls, err := r.openLoad("scale", r.pxAddrs, r.sessions, r.cfg.ephemerals)
	defer func() {
		for _, l := range ls {
			l.Stop()
		}
	}()
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	fmt.Printf("  %-9s RSS per session: %s; %d sessions created an ephemeral\n", "scale", perSession(groups, base, r.sessions), r.ephCreated)

	// Hold, a minute at a time, counting the sessions lost.
	t0, c0 := time.Now(), xproc.CPUTicks(r.leader.Cmd.Process.Pid)
	groupTicks := func() (proxies, load int64) {
		for _, p := range r.pxs {
			proxies += xproc.CPUTicks(p.Pid())
		}
		for _, l := range ls {
			load += xproc.CPUTicks(l.Pid())
		}
		return proxies, load
	}
	px0, ld0 := groupTicks()
	for time.Since(t0) < r.hold {
		time.Sleep(min(time.Minute, r.hold-time.Since(t0)))
		lost, moved, expired := 0, 0, 0
		for _, l := range ls {
			a, b, e := l.counts()
			lost, moved, expired = lost+a, moved+b, expired+e
		}
		fmt.Printf("  %-9s held %v: sessions lost %d (%d of them told expired), reconnects %d   load average %s\n", "scale", time.Since(t0).Round(time.Second), lost, expired, moved, xproc.LoadAvg())
		fmt.Printf("  %-9s proxies' upstream: %s\n", "scale", r.upstreamFigures())
	}
	cpu := float64(xproc.CPUTicks(r.leader.Cmd.Process.Pid)-c0) / 100 / time.Since(t0).Seconds() * 100
	fmt.Printf("  %-9s leader CPU %5.1f%% of a core over the hold with %d sessions through %d proxies\n", "scale", cpu, r.sessions, r.proxies)
	px1, ld1 := groupTicks()
	fmt.Printf("  %-9s over the hold (idle sessions: pings, keep-alives) the proxies used %.2f cores, the load processes %.2f\n", "scale",
		float64(px1-px0)/100/time.Since(t0).Seconds(), float64(ld1-ld0)/100/time.Since(t0).Seconds())

	if !r.killOnly {
		if err := r.watchPhase(w, ls, groups); err != nil {
			return err
		}
	}
	if r.watchOnly {
		lost, moved := finishAll(ls)
		ls = nil
		fmt.Printf("  %-9s sessions lost over the scale phase %d, reconnected elsewhere %d\n", "watch", lost, moved)
		return nil
	}
	return r.kills(w, ls)
}

// watchPhase has every session set a watch on one znode, writes it, and
// counts the notifications.
func (r *run) watchPhase(w *zk.Conn, ls []*loader, groups []group) error {
	watching := 0
	watchFrom := time.Now()
	for _, l := range ls {
		l.send("watch " + watchPath)
	}
	for _, l := range ls {
		t, err := l.line("watching ", 4*time.Minute)
		if err != nil {
			return err
		}
		var n int
		fmt.Sscanf(t, "watching %d", &n)
		watching += n
	}
	readsTook := time.Since(watchFrom)
	// The CPU over the second before the write is the processes'
	// background (pings, keep-alives), taken off the fan-out's figures.
	stopSampling, samples := r.sampleCPU(groups, ls)
	stopPerf := r.startPerf()
	defer stopPerf()
	time.Sleep(time.Second)
	sent := time.Now()
	_, err := w.Set(watchPath, []byte("1"), -1)
	for try := 1; err != nil && try < 3 && (errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrConnectionClosed)); try++ {
		// Setting the same data again is harmless; the notification
		// comes for the one that commits first, so its latency is
		// counted from the last try's acknowledgement (too low, not too
		// high), and said.
		fmt.Printf("  %-9s the write failed (%v): again   load average %s\n", "watch", err, xproc.LoadAvg())
		sent = time.Now()
		_, err = w.Set(watchPath, []byte("1"), -1)
	}
	if err != nil {
		stopSampling()
		return err
	}
	acked := time.Now()
	var lat []int64 // µs after the acknowledgement
	notified := 0
	for _, l := range ls {
		l.send("report " + strconv.FormatInt(acked.UnixNano(), 10))
	}
	for _, l := range ls {
		t, err := l.line("notified ", 2*time.Minute)
		if err != nil {
			return err
		}
		var n, m int
		fmt.Sscanf(t, "notified %d of %d", &n, &m)
		notified += n
		t, err = l.line("lat", 30*time.Second)
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(t)[1:] {
			v, _ := strconv.ParseInt(f, 10, 64)
			lat = append(lat, v)
		}
	}
	stopSampling()
	stopPerf()
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return time.Duration(lat[min(len(lat)-1, int(p*float64(len(lat))))]) * time.Microsecond
	}
	early := 0
	for _, v := range lat {
		if v < 0 {
			early++
		}
	}
	ackLag := acked.Sub(sent)
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	fmt.Printf("  %-9s watch on %s: %d of %d sessions watching (their reads took %v, at most %d in flight per load process), %d notified, %d lost   load average %s\n",
		"watch", watchPath, watching, r.sessions, readsTook.Round(100*time.Millisecond), r.watches, notified, watching-notified, xproc.LoadAvg())
	fmt.Printf("  %-9s from the write's acknowledgement (%s after its send): p50 %s p99 %s max %s (%d arrived before it); from its send: p50 %s p99 %s max %s\n",
		"watch", ms(ackLag), ms(q(0.5)), ms(q(0.99)), ms(q(1)), early, ms(q(0.5)+ackLag), ms(q(0.99)+ackLag), ms(q(1)+ackLag))

	if len(lat) > 0 {
		fmt.Printf("  %-9s CPU from the write to the last notification (%s): %s\n", "watch",
			ms(acked.Sub(sent)+q(1)), samples.per(sent, acked.Add(q(1)), notified))
	}
	fmt.Printf("  %-9s proxies' upstream: %s\n", "watch", r.upstreamFigures())
	for _, f := range r.fanoutFigures(acked) {
		fmt.Printf("  %-9s %s\n", "watch", f)
	}
	return nil
}

// startPerf starts perf record over the whole machine when -perf names
// a file; the function it returns stops it and waits for it to write.
func (r *run) startPerf() func() {
	if r.perf == "" {
		return func() {}
	}
	cmd := exec.Command("perf", "record", "-a", "-g", "-F", "1999", "-o", r.perf)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Printf("  %-9s perf: %v\n", "watch", err)
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
		})
	}
}

// fanoutFigures is each proxy's last fan-out (its upstream command's
// fanout_last_*), timed from the write's acknowledgement: when its Event
// was read, when its fan-out began and ended, and its sessions.
func (r *run) fanoutFigures(acked time.Time) []string {
	var out []string
	hc := http.Client{Timeout: 10 * time.Second}
	for i, a := range r.pxAdmins {
		resp, err := hc.Get("http://" + a + "/commands/upstream")
		if err != nil {
			out = append(out, fmt.Sprintf("proxy %d fan-out: %v", i, err))
			continue
		}
		var m map[string]any
		err = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if err != nil {
			continue
		}
		at := func(k string) string {
			v, _ := m[k].(float64)
			if v == 0 {
				return "-"
			}
			return fmt.Sprintf("%+.1f ms", float64(int64(v)-acked.UnixNano())/1e6)
		}
		n := func(k string) int { v, _ := m[k].(float64); return int(v) }
		out = append(out, fmt.Sprintf("proxy %d fan-out from the acknowledgement: Event read %s, began %s, ended %s; %d sessions, %d written whole by the fan-out, %d goroutines",
			i, at("fanout_last_read_unix_ns"), at("fanout_last_start_unix_ns"), at("fanout_last_end_unix_ns"), n("fanout_last_sessions"), n("fanout_last_direct"), n("fanout_last_workers")))
	}
	return out
}

// kills kills proxy 0 (and with -kill-member a follower) and counts the
// sessions lost, the reconnects and the ephemerals.
func (r *run) kills(w *zk.Conn, ls []*loader) error {
	// Kill one proxy: its sessions must resume on the others.
	lostK, movedK := 0, 0
	for _, l := range ls {
		a, b := l.count()
		lostK, movedK = lostK+a, movedK+b
	}
	resumed0 := make([]int, len(ls))
	for i, l := range ls {
		resumed0[i] = len(l.resumes())
	}
	killed := time.Now()
	r.pxs[0].Cmd.Process.Kill()
	r.pxs[0].Cmd.Wait()
	fmt.Printf("  %-9s killed proxy 0 (about %d sessions)   load average %s\n", "kill", r.sessions/r.proxies, xproc.LoadAvg())
	r.watchMoves("kill", ls, killed, lostK, movedK)
	var took []int64
	for i, l := range ls {
		took = append(took, l.resumes()[resumed0[i]:]...)
	}
	slices.Sort(took)
	if len(took) > 0 {
		q := func(p float64) time.Duration {
			return time.Duration(took[min(len(took)-1, int(p*float64(len(took))))]) * time.Millisecond
		}
		fmt.Printf("  %-9s each reconnect since the kill, from its connection's failure to its session answered elsewhere (%d): p50 %v p90 %v p99 %v max %v\n",
			"kill", len(took), q(0.5), q(0.9), q(0.99), q(1))
	}
	fmt.Printf("  %-9s proxies' upstream: %s\n", "kill", r.upstreamFigures())
	if r.killMember {
		// Kill the follower most proxies use: their sessions must be
		// reattached on the other members within their timeout.
		counts := map[string]int{}
		for _, a := range r.pxAdmins[1:] {
			if m := upstreamMember(a); m != "" {
				counts[m]++
			}
		}
		var victim *member
		for _, m := range r.members {
			if m != r.leader && (victim == nil || counts[m.proxy] > counts[victim.proxy]) {
				victim = m
			}
		}
		lost0, moved0 := 0, 0
		for _, l := range ls {
			a, b := l.count()
			lost0, moved0 = lost0+a, moved0+b
		}
		killedAt := time.Now()
		victim.Cmd.Process.Kill()
		victim.Cmd.Wait()
		fmt.Printf("  %-9s killed member %s, a follower, upstream of %d of the %d live proxies (sessions lost so far %d, reconnects %d)   load average %s\n",
			"member", victim.proxy, counts[victim.proxy], len(r.pxAdmins)-1, lost0, moved0, xproc.LoadAvg())
		r.watchMoves("member", ls, killedAt, lost0, moved0)
		fmt.Printf("  %-9s proxies' upstream: %s\n", "member", r.upstreamFigures())
	}
	var lostE, expiredE, ephLost, starved int
	for _, l := range ls {
		c := l.countAll()
		lostE, expiredE, ephLost, starved = lostE+c.lost, expiredE+c.expired, ephLost+c.eph, starved+c.starved
	}
	kids, err := r.ephemerals(w)
	if err == nil {
		fmt.Printf("  %-9s ephemerals after the kill: %d of the %d created are there; %d of their sessions were lost, so %d missing unexplained (sessions lost over the phase: %d, %d told expired; pings answered late by the load processes' own starvation: %d)   load average %s\n",
			"kill", kids, r.ephCreated, ephLost, r.ephCreated-kids-ephLost, lostE, expiredE, starved, xproc.LoadAvg())
	} else {
		fmt.Printf("  %-9s ephemerals not counted: %v\n", "kill", err)
	}
	lost, moved := finishAll(ls)
	ls = nil
	fmt.Printf("  %-9s sessions lost over the whole scale phase %d, reconnected elsewhere %d\n", "kill", lost, moved)
	for i, m := range r.members {
		if m.Cmd.ProcessState == nil {
			fmt.Printf("  %-9s member %d's proxied handshakes: %s\n", "batches", i+1, sessionBatches(fourLetter(m.client, "mntr")))
		}
	}
	return nil
}

// ephemerals counts the load sessions' ephemerals, with w, or, when w's
// connection is lost (its own session may be moving: a storm), with a
// new session on the members, at most three times.
func (r *run) ephemerals(w *zk.Conn) (int, error) {
	kids, _, err := w.Children(ephemeralDir)
	if err == nil {
		return len(kids), nil
	}
	var addrs []string
	for _, m := range r.members {
		if m.Cmd.ProcessState == nil {
			addrs = append(addrs, m.client)
		}
	}
	for try := 0; try < 3; try++ {
		fmt.Printf("  %-9s counting the ephemerals: %v: with a new session\n", "kill", err)
		c, cerr := launch.Session(context.Background(), addrs, 30*time.Second, 30*time.Second)
		if cerr != nil {
			err = cerr
			continue
		}
		kids, _, err = c.Children(ephemeralDir)
		c.Close()
		if err == nil {
			return len(kids), nil
		}
	}
	return 0, err
}

// upstreamMember is the member a proxy's upstream connection is to, ""
// when it has none or does not answer.
func upstreamMember(admin string) string {
	hc := http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + admin + "/commands/upstream")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var m map[string]any
	if json.NewDecoder(resp.Body).Decode(&m) != nil || m["connected"] != true {
		return ""
	}
	s, _ := m["member"].(string)
	return s
}

// zooKeeper measures Apache ZooKeeper 3.8's memory per idle session with
// the same load processes: cpuSessions sessions on a standalone server.
func (r *run) zooKeeper() error {
	e, err := launch.New(launch.Config{System: launch.ZooKeeper, Dir: filepath.Join(r.dir, "zk")})
	if err != nil {
		return err
	}
	if err := e.StartWait(context.Background(), 90*time.Second, 3); err != nil {
		return err
	}
	defer e.Stop()
	pid := e.PIDs()[0]
	base := xproc.RSSKB(pid)
	ls, err := r.openLoad("zookeeper", e.Addrs(), r.cpuSessions, 0)
	if err != nil {
		finishAll(ls)
		return err
	}
	time.Sleep(2*time.Second + r.idle)
	zkKiB := float64(xproc.RSSKB(pid)-base) / float64(r.cpuSessions)
	fmt.Printf("  %-9s Apache ZooKeeper 3.8 standalone (-Xmx1000m): RSS per idle session %.1f KiB   load average %s\n", "zookeeper", zkKiB, xproc.LoadAvg())
	if r.proxyKiB > 0 && zkKiB > 0 {
		fmt.Printf("  %-9s a proxy's RSS per idle session %.1f KiB is %.2fx ZooKeeper's %.1f KiB (%d sessions each; goal: at most 0.5x)\n", "zookeeper", r.proxyKiB, r.proxyKiB/zkKiB, zkKiB, r.cpuSessions)
	}
	lost, moved := finishAll(ls)
	fmt.Printf("  %-9s sessions lost %d, reconnected %d\n", "zookeeper", lost, moved)
	return nil
}

// upstreamFigures sums the proxies' upstream command (their AdminServer):
// reconnects, how each silent-looking upstream was judged
// (docs/proxy.md, Liveness), and the sessions kept across upstream
// losses.
func (r *run) upstreamFigures() string {
	keys := []string{"connects", "member_silent", "member_slow", "reader_starved", "keepalive_unwritten", "sessions_detached", "sessions_reattached", "sessions_not_reattached", "sessions_detached_expired",
		"handshakes_queued", "handshakes_refused_busy", "handshakes_refused_after_wait", "handshakes_client_gone"}
	sum := map[string]float64{}
	lateMax, answered := 0.0, 0
	hc := http.Client{Timeout: 10 * time.Second}
	for _, a := range r.pxAdmins {
		if a == r.pxAdmins[0] && r.pxs[0].Cmd.ProcessState != nil {
			continue // the killed proxy
		}
		resp, err := hc.Get("http://" + a + "/commands/upstream")
		if err != nil {
			continue
		}
		var m map[string]any
		err = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if err != nil {
			continue
		}
		answered++
		for _, k := range keys {
			if v, ok := m[k].(float64); ok {
				sum[k] += v
			}
		}
		if v, ok := m["reader_late_max_ms"].(float64); ok {
			lateMax = max(lateMax, v)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d answered", answered, len(r.pxAdmins))
	for _, k := range keys {
		fmt.Fprintf(&b, ", %s %.0f", k, sum[k])
	}
	fmt.Fprintf(&b, ", reader late at most %.0f ms", lateMax)
	return b.String()
}

// The machine's columns of cpuSamples (MachineTicks).
const (
	machineBusy  = "machine busy"
	machineIdle  = "machine idle"
	machineSteal = "machine steal"
)

// cpuSamples are the CPU ticks of process groups (and of the load
// processes, named "load"), sampled every 10 ms.
type cpuSamples struct {
	mu    sync.Mutex
	names []string
	at    []time.Time
	ticks [][]int64 // per sample, per name
}

// sampleCPU samples the groups' and the load processes' CPU until the
// returned function is called.
func (r *run) sampleCPU(groups []group, ls []*loader) (func(), *cpuSamples) {
	s := &cpuSamples{}
	pids := map[string][]int{}
	for _, g := range groups {
		s.names = append(s.names, g.name)
		for _, p := range g.procs {
			pids[g.name] = append(pids[g.name], p.Pid())
		}
	}
	s.names = append(s.names, "load processes")
	for _, l := range ls {
		pids["load processes"] = append(pids["load processes"], l.Pid())
	}
	// The whole machine's busy, idle and stolen time last: whether the
	// fan-out had both cores, and what else took them.
	s.names = append(s.names, machineBusy, machineIdle, machineSteal)
	take := func() {
		row := make([]int64, len(s.names))
		for i, n := range s.names[:len(s.names)-3] {
			for _, pid := range pids[n] {
				row[i] += xproc.CPUTicks(pid)
			}
		}
		row[len(row)-3], row[len(row)-2], row[len(row)-1] = xproc.MachineTicks()
		s.mu.Lock()
		s.at = append(s.at, time.Now())
		s.ticks = append(s.ticks, row)
		s.mu.Unlock()
	}
	take()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for n := 0; n < 30000; n++ { // at most 5 minutes
			select {
			case <-stop:
				return
			case <-t.C:
				take()
			}
		}
	}()
	return func() { close(stop); <-done }, s
}

// per is each group's CPU time from the last sample before from to the
// first after to, in all and per notification (of n), less its
// background: its rate from the first sample to from.
func (s *cpuSamples) per(from, to time.Time, n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, j := 0, len(s.at)-1
	for k, t := range s.at {
		if !t.After(from) {
			i = k
		}
	}
	for k := len(s.at) - 1; k >= 0; k-- {
		if !s.at[k].Before(to) {
			j = k
		}
	}
	window := s.at[j].Sub(s.at[i])
	idle := s.at[i].Sub(s.at[0])
	var b strings.Builder
	var all, allNet float64 // ms
	for x, name := range s.names {
		d := float64(s.ticks[j][x]-s.ticks[i][x]) * 10
		if name == machineBusy || name == machineIdle || name == machineSteal {
			continue
		}
		bg := 0.0
		if idle > 0 {
			bg = float64(s.ticks[i][x]-s.ticks[0][x]) * 10 * window.Seconds() / idle.Seconds()
		}
		all, allNet = all+d, allNet+d-bg
		fmt.Fprintf(&b, "%s %.0f ms, %.0f ms above their background (%.1f µs per notification); ", name, d, d-bg, (d-bg)*1000/float64(max(n, 1)))
	}
	fmt.Fprintf(&b, "all %.0f ms, %.0f ms above the background (%.1f µs per notification; over %v)", all, allNet, allNet*1000/float64(max(n, 1)), window.Round(time.Millisecond))
	m := len(s.names) - 3
	fmt.Fprintf(&b, "; the machine: busy %.0f ms, idle %.0f ms, stolen %.0f ms",
		float64(s.ticks[j][m]-s.ticks[i][m])*10, float64(s.ticks[j][m+1]-s.ticks[i][m+1])*10, float64(s.ticks[j][m+2]-s.ticks[i][m+2])*10)
	return b.String()
}

// watchMoves counts the load processes' reconnects and sessions lost once
// a second for a session timeout and 5 s after a kill at t0 (lost0 and
// moved0 the counts just before it), and prints when the kill's
// reconnects reached half, 90 % and all of what they came to: how fast
// the killed process's sessions came back.
func (r *run) watchMoves(name string, ls []*loader, t0 time.Time, lost0, moved0 int) {
	type point struct {
		at    time.Duration
		moved int
	}
	var pts []point
	for deadline := t0.Add(r.timeout + 5*time.Second); time.Now().Before(deadline); {
		time.Sleep(time.Second)
		p := point{at: time.Since(t0)}
		for _, l := range ls {
			_, b := l.count()
			p.moved += b
		}
		p.moved -= moved0
		pts = append(pts, p)
	}
	if len(pts) == 0 {
		return
	}
	last := pts[len(pts)-1]
	when := func(frac float64) time.Duration {
		for _, p := range pts {
			if float64(p.moved) >= float64(last.moved)*frac {
				return p.at
			}
		}
		return last.at
	}
	lost := 0
	for _, l := range ls {
		a, _ := l.count()
		lost += a
	}
	d := func(x time.Duration) string { return x.Round(100 * time.Millisecond).String() }
	fmt.Printf("  %-9s %d reconnects after the kill, counted each second: half by %s, 90%% by %s, all by %s; %d sessions lost since the kill   load average %s\n",
		name, last.moved, d(when(0.5)), d(when(0.9)), d(when(1)), lost-lost0, xproc.LoadAvg())
}

// sessionBatches is what a member's mntr says of its proxied channels'
// handshakes proposed in batches (server's session batcher), or that it
// says nothing (a binary from before it).
func sessionBatches(mntr string) string {
	var batches, ops, largest string
	for _, l := range strings.Split(mntr, "\n") {
		k, v, _ := strings.Cut(l, "\t")
		switch k {
		case "zk_zkraft_session_batches_total":
			batches = v
		case "zk_zkraft_session_batch_ops_total":
			ops = v
		case "zk_zkraft_session_batch_largest":
			largest = v
		}
	}
	if batches == "" {
		return "no batch figures (a member without the session batcher)"
	}
	return fmt.Sprintf("%s in %s proposals, the largest of %s", ops, batches, largest)
}
