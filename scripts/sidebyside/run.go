package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/bench"
	"github.com/zkraft/zkraft/internal/launch"
)

// Run is one measured run: one system, one ensemble started fresh for it,
// one shape and one workload. Every run is kept in the JSON.
type Run struct {
	Seq        int       `json:"seq"` // position in the sequence of runs
	Pair       int       `json:"pair"`
	System     string    `json:"system"`
	Members    int       `json:"members"`
	Connect    string    `json:"connect"`
	Addrs      []string  `json:"addrs"`           // the connect string the sessions used
	Targets    []int     `json:"connect_members"` // the member ids it lists
	Shape      string    `json:"shape"`
	Sessions   int       `json:"sessions"`
	PerSession int       `json:"per_session"`
	Workload   string    `json:"workload"`
	Unit       string    `json:"unit"`
	Start      time.Time `json:"start"`
	Load1      float64   `json:"load1_before"` // 1-minute load average before the run
	Version    string    `json:"server_version,omitempty"`
	Leader     int       `json:"leader,omitempty"` // member id
	PIDs       []int     `json:"pids,omitempty"`

	StartupS  float64 `json:"startup_s"` // process start to serving
	SetupS    float64 `json:"setup_s"`   // pre-created znodes and sessions
	WarmupS   float64 `json:"warmup_s"`
	DurationS float64 `json:"duration_s"` // the measured window

	Ops        int64              `json:"ops"` // completed without error in the window
	Throughput float64            `json:"throughput"`
	Latency    bench.Latency      `json:"latency"`
	ByOp       map[string]OpStats `json:"by_op,omitempty"`
	// Errors counts every failed request by error, over the whole run
	// (warm-up and wind-down included); ErrorsInWindow those that ended in
	// the measured window.
	Errors         map[string]int64 `json:"errors,omitempty"`
	ErrorsInWindow int64            `json:"errors_in_window"`
	// CutOff counts requests of the wind-down that failed only because the
	// harness closed their sessions (workers still waiting 15 s after the
	// window, e.g. lock waiters); they are not errors.
	CutOff int64 `json:"cut_off_at_end,omitempty"`

	// CPU seconds (user+system) in the measured window: the servers'
	// summed over the members, and this load generator's own.
	ServerCPUS        float64   `json:"server_cpu_s"`
	MemberCPUS        []float64 `json:"member_cpu_s,omitempty"`
	ServerCPUPerKOp   float64   `json:"server_cpu_s_per_kop"`
	ClientCPUS        float64   `json:"client_cpu_s"`
	ClientCPUPerKOp   float64   `json:"client_cpu_s_per_kop"`
	ServerRSSKiBEnd   int64     `json:"server_rss_kib_end,omitempty"` // summed over members
	Violations        int64     `json:"lock_exclusion_violations,omitempty"`
	Watch             *Watch    `json:"watch,omitempty"`
	Failed            string    `json:"failed,omitempty"` // why the run has no figures
	KeptDir           string    `json:"kept_dir,omitempty"`
	WorkersNotStopped int       `json:"workers_not_stopped,omitempty"`
}

// OpStats is one operation kind of a run.
type OpStats struct {
	Ops        int64         `json:"ops"`
	Throughput float64       `json:"throughput"`
	Latency    bench.Latency `json:"latency"`
}

// Watch is the fan-out workload's own figures.
type Watch struct {
	Watchers int   `json:"watchers"`
	Rounds   int64 `json:"rounds"` // measured rounds
	// Lost: armed watchers not notified within -watch-timeout of the
	// write's reply (all rounds). Late: notifications after that.
	Lost int64 `json:"lost"`
	Late int64 `json:"late"`
	// BeforeReply counts notifications that arrived before the writer had
	// the write's reply (latency recorded as 0).
	BeforeReply int64 `json:"before_reply"`
	ArmFailed   int64 `json:"arm_failed"`
	// FromSend is the latency from the write's send.
	FromSend bench.Latency `json:"from_write_send"`
}

// cell is what a run measures, apart from the system.
type cell struct {
	members  int
	shape    shape
	workload *workload
}

func (c cell) key() string {
	return fmt.Sprintf("%d/%s/%s", c.members, c.shape, c.workload.name)
}

// phases of a run; workers read it after each request.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseOver
)

// runner runs one Run.
type runner struct {
	o   *options
	run *Run
	c   cell
	ens *launch.Ensemble

	phase    atomic.Int32
	stopping atomic.Bool // the window is over: workers end after their request
	closing  atomic.Bool // sessions closed under workers that did not end
	issued   atomic.Int64

	sessMu   sync.Mutex
	sessErrs map[string]int64 // session events (disconnects, expiry)
}

// measure starts the servers for one run, runs it, stops them and
// returns the run (Failed set if it produced no figures).
func measure(ctx context.Context, o *options, seq, pair int, sys launch.System, c cell) *Run {
	run := &Run{
		Seq: seq, Pair: pair, System: string(sys), Members: c.members, Connect: o.connect,
		Shape: c.shape.String(), Sessions: c.shape.Sessions, PerSession: c.shape.PerSession,
		Workload: c.workload.name, Unit: c.workload.unit, Start: time.Now().UTC(), Load1: load1(),
	}
	dir := filepath.Join(o.work, fmt.Sprintf("%03d-%s-%d-%s-%s", seq, sys, c.members, c.shape, c.workload.name))
	ens, err := launch.New(launch.Config{
		System: sys, Members: c.members, Dir: dir,
		ZkraftBin: o.zkraftBin, ZkraftFlags: o.zkraftFlags,
		Heap: o.zkHeap, Java: o.java, Jar: o.zkJar,
	})
	if err != nil {
		run.Failed = err.Error()
		return run
	}
	r := &runner{o: o, run: run, c: c, ens: ens}
	defer func() {
		ens.Stop()
		switch {
		case ctx.Err() != nil:
			os.RemoveAll(dir) // cut short by a signal: not a result
		case o.keep || run.Failed != "":
			run.KeptDir = dir
			removeData(ens) // the logs are what tells why; the data can be large
		default:
			os.RemoveAll(dir)
		}
	}()
	t0 := time.Now()
	if err := ens.StartWait(ctx, o.startTimeout, 3); err != nil {
		run.Failed = "start: " + err.Error()
		return run
	}
	run.StartupS = time.Since(t0).Seconds()
	run.PIDs = ens.PIDs()
	run.Version = launch.Version(ens.Members[0].Addr())
	if l := ens.Leader(); l != nil && c.members > 1 {
		run.Leader = l.ID
	}
	if err := r.execute(ctx); err != nil {
		run.Failed = err.Error()
	}
	for _, pid := range ens.PIDs() {
		run.ServerRSSKiBEnd += launch.RSSKiB(pid)
	}
	return run
}

// removeData deletes the members' data directories, keeping their logs.
func removeData(ens *launch.Ensemble) {
	for _, m := range ens.Members {
		os.RemoveAll(m.DataDir())
	}
}

// addrs is the connect string of the run's sessions.
func (r *runner) addrs() ([]string, error) {
	switch r.o.connect {
	case "all":
		return r.ens.Addrs(), nil
	case "leader":
		if l := r.ens.Leader(); l != nil {
			return []string{l.Addr()}, nil
		}
		return nil, errors.New("no leader")
	case "follower":
		for _, m := range r.ens.Members {
			if launch.Mode(m.Addr()) == "follower" {
				return []string{m.Addr()}, nil
			}
		}
		return nil, errors.New("no follower (standalone?)")
	}
	return nil, fmt.Errorf("unknown -connect %q", r.o.connect)
}

func (r *runner) execute(ctx context.Context) error {
	o, run, w := r.o, r.run, r.c.workload
	addrs, err := r.addrs()
	if err != nil {
		return err
	}
	run.Addrs = addrs
	for _, m := range r.ens.Members {
		for _, a := range addrs {
			if a == m.Addr() {
				run.Targets = append(run.Targets, m.ID)
			}
		}
	}
	p := &plan{shape: r.c.shape, valueSize: o.valueSize, znodes: o.znodes, children: o.children, watchers: o.watchers, value: o.value}
	setupStart := time.Now()
	admin, err := launch.Session(ctx, addrs, 30*time.Second, o.sessionTimeout)
	if err != nil {
		return fmt.Errorf("setup session: %w", err)
	}
	defer admin.Close()
	if err := w.setup(ctx, admin, p); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	if w.watch {
		return r.runWatch(ctx, admin, addrs, p, setupStart)
	}
	conns, err := r.openSessions(ctx, addrs, p.shape.Sessions)
	defer closeAll(conns)
	if err != nil {
		return err
	}
	run.SetupS = time.Since(setupStart).Seconds()
	return r.drive(ctx, conns, p)
}

// openSessions opens n sessions (32 at a time), each with the run's
// connect string, and syncs each with root so that a member that is
// behind has applied the set-up before the load starts.
func (r *runner) openSessions(ctx context.Context, addrs []string, n int) ([]*zk.Conn, error) {
	conns := make([]*zk.Conn, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var has atomic.Bool
			cb := func(ev zk.Event) {
				if ev.Type != zk.EventSession {
					return
				}
				switch ev.State {
				case zk.StateHasSession:
					has.Store(true)
				case zk.StateDisconnected, zk.StateExpired, zk.StateAuthFailed:
					if has.Load() && !r.stopping.Load() {
						r.sessionEvent("session " + ev.State.String())
					}
				}
			}
			c, err := launch.Session(ctx, addrs, 60*time.Second, r.o.sessionTimeout, zk.WithEventCallback(cb))
			if err == nil {
				if _, err = c.Sync(root); err != nil {
					c.Close()
					c = nil
				}
			}
			conns[i], errs[i] = c, err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return conns, fmt.Errorf("session %d of %d: %w", i+1, n, err)
		}
	}
	return conns, nil
}

func closeAll(conns []*zk.Conn) {
	var wg sync.WaitGroup
	for _, c := range conns {
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
	}
	wg.Wait()
}

func (r *runner) sessionEvent(name string) {
	r.sessMu.Lock()
	defer r.sessMu.Unlock()
	if r.sessErrs == nil {
		r.sessErrs = map[string]int64{}
	}
	r.sessErrs[name]++
}

// counts is one worker's tally.
type counts struct {
	hists    []bench.Histogram // by kind, measured window only
	ops      []int64
	errs     map[string]int64
	inWindow int64
	cutOff   int64 // failed because the harness closed the session
}

func (k *counts) fail(err error, measured bool) {
	if k.errs == nil {
		k.errs = map[string]int64{}
	}
	name := errName(err)
	if _, ok := k.errs[name]; !ok && len(k.errs) >= 20 {
		name = "other errors"
	}
	k.errs[name]++
	if measured {
		k.inWindow++
	}
}

// drive runs the workers of a load workload through warm-up and the
// measured window and fills the run's figures.
func (r *runner) drive(ctx context.Context, conns []*zk.Conn, p *plan) error {
	w := r.c.workload
	kinds := w.kinds
	if kinds == nil {
		kinds = []string{w.name}
	}
	var holders, violations atomic.Int64
	workers := make([]*worker, 0, p.workers())
	for s, c := range conns {
		for k := 0; k < p.shape.PerSession; k++ {
			idx := s*p.shape.PerSession + k
			wk := &worker{idx: idx, conn: c, p: p, rng: rand.New(rand.NewPCG(uint64(idx), 0x5b5)),
				holders: &holders, violations: &violations}
			if w.prepare != nil {
				w.prepare(wk)
			}
			workers = append(workers, wk)
		}
	}
	tallies := make([]*counts, len(workers))
	var wg sync.WaitGroup
	for i, wk := range workers {
		k := &counts{hists: make([]bench.Histogram, len(kinds)), ops: make([]int64, len(kinds))}
		tallies[i] = k
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(wk, k)
		}()
	}
	win, err := r.window(ctx)
	r.stopping.Store(true)
	// Workers finish the request they are in; a lock waiter may wait on a
	// notification: closing the sessions ends it (the sessions close
	// anyway once the run is over).
	if !waitTimeout(&wg, 15*time.Second) {
		r.closing.Store(true)
		closeAll(conns)
		if !waitTimeout(&wg, 10*time.Second) {
			r.run.WorkersNotStopped = len(workers)
			return errors.New("workers did not stop within 25 s")
		}
	}
	if err != nil {
		return err
	}
	all := make([]bench.Histogram, len(kinds))
	ops := make([]int64, len(kinds))
	var total bench.Histogram
	run := r.run
	for _, k := range tallies {
		for i := range kinds {
			all[i].Merge(&k.hists[i])
			total.Merge(&k.hists[i])
			ops[i] += k.ops[i]
		}
		for name, n := range k.errs {
			r.countErr(name, n)
		}
		run.ErrorsInWindow += k.inWindow
		run.CutOff += k.cutOff
	}
	r.finish(win, total.Count(), &total)
	if len(kinds) > 1 {
		run.ByOp = map[string]OpStats{}
		for i, name := range kinds {
			run.ByOp[name] = OpStats{Ops: ops[i], Throughput: float64(ops[i]) / win.secs, Latency: all[i].Summary()}
		}
	}
	run.Violations = violations.Load()
	if run.Violations > 0 {
		r.countErr("lock: mutual exclusion violated", run.Violations)
	}
	return nil
}

// work is one worker's loop, bounded by -max-ops (over the run) and by
// the end of the run.
func (r *runner) work(wk *worker, k *counts) {
	op := r.c.workload.op
	for !r.stopping.Load() && r.issued.Add(1) <= r.o.maxOps {
		t0 := time.Now()
		kind, lat, err := op(wk)
		if lat <= 0 {
			lat = time.Since(t0)
		}
		measured := r.phase.Load() == phaseMeasure
		if err != nil && r.closing.Load() {
			k.cutOff++
			return
		}
		if err != nil {
			k.fail(err, measured)
			if errors.Is(err, zk.ErrClosing) || errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) {
				time.Sleep(10 * time.Millisecond) // do not spin on a broken session
			}
			continue
		}
		if measured {
			k.hists[kind].RecordDuration(lat)
			k.ops[kind]++
		}
	}
}

// window is the measured window: its length and the CPU used in it.
type window struct {
	secs       float64
	serverCPU  []float64 // by member
	clientCPU  float64
	cpuReadErr error
}

// window waits out the warm-up, opens the measured window, waits out the
// duration and closes it; CPU is read at both edges.
func (r *runner) window(ctx context.Context) (*window, error) {
	o := r.o
	r.run.WarmupS = o.warmup.Seconds()
	if !sleepCtx(ctx, o.warmup) {
		return nil, ctx.Err()
	}
	cpu0, err0 := r.serverCPU()
	c0 := launch.SelfCPUSeconds()
	t0 := time.Now()
	r.phase.Store(phaseMeasure)
	ok := sleepCtx(ctx, o.duration)
	r.phase.Store(phaseOver)
	t1 := time.Now()
	cpu1, err1 := r.serverCPU()
	c1 := launch.SelfCPUSeconds()
	if !ok {
		return nil, ctx.Err()
	}
	w := &window{secs: t1.Sub(t0).Seconds(), clientCPU: c1 - c0, cpuReadErr: errors.Join(err0, err1)}
	for i := range cpu1 {
		if i < len(cpu0) {
			// /proc counts in 10 ms ticks: round away the float noise.
			w.serverCPU = append(w.serverCPU, math.Round((cpu1[i]-cpu0[i])*100)/100)
		}
	}
	return w, nil
}

// serverCPU reads each member's CPU seconds.
func (r *runner) serverCPU() ([]float64, error) {
	var out []float64
	var errs []error
	for _, m := range r.ens.Members {
		s, err := launch.CPUSeconds(m.PID())
		if err != nil {
			errs = append(errs, fmt.Errorf("member %d: %w", m.ID, err))
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}

// finish fills throughput, latency and CPU from the window.
func (r *runner) finish(win *window, ops uint64, lat *bench.Histogram) {
	run := r.run
	run.DurationS = win.secs
	run.Ops = int64(ops)
	if win.secs > 0 {
		run.Throughput = float64(ops) / win.secs
	}
	run.Latency = lat.Summary()
	run.MemberCPUS = win.serverCPU
	for _, s := range win.serverCPU {
		run.ServerCPUS += s
	}
	run.ServerCPUS = math.Round(run.ServerCPUS*100) / 100
	run.ClientCPUS = win.clientCPU
	if ops > 0 {
		run.ServerCPUPerKOp = run.ServerCPUS / (float64(ops) / 1000)
		run.ClientCPUPerKOp = run.ClientCPUS / (float64(ops) / 1000)
	}
	if win.cpuReadErr != nil {
		r.countErr("reading server CPU: "+errName(win.cpuReadErr), 1)
	}
	r.sessMu.Lock()
	for name, n := range r.sessErrs {
		r.countErr(name, n)
	}
	r.sessMu.Unlock()
}

func (r *runner) countErr(name string, n int64) {
	if n == 0 {
		return
	}
	if r.run.Errors == nil {
		r.run.Errors = map[string]int64{}
	}
	r.run.Errors[name] += n
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// sleepCtx sleeps d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscanf(string(b), "%f", &l)
	return l
}

func sortedKeys[V any](m map[string]V) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}
