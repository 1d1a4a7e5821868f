// Command sidebyside measures zkraft beside Apache ZooKeeper 3.8 the way
// their users would: with a standard client (go-zookeeper, the same
// client cost for both), the shapes real clients have (S sessions, each a
// *zk.Conn shared by k goroutines that each do one synchronous request at
// a time) and servers it starts itself as separate processes on loopback
// (standalone or 3 members, fresh data directories for every run, fsync
// on, the same zoo.cfg for both).
//
// Runs alternate between the systems (ZooKeeper, zkraft, ZooKeeper, ...),
// each cell (members x shape x workload) is measured -pairs times, and the
// table shows medians: throughput, p50/p99/p99.9 latency, each server's
// CPU seconds per thousand operations (utime+stime from /proc, summed over
// an ensemble's members) and this load generator's own, and the ratios
// zkraft/ZooKeeper. Every run goes to the JSON with the machine, versions,
// commit and settings, so that reports can be made again from it;
// results.html beside it draws the medians, ZooKeeper beside zkraft, as
// throughput and latency charts per shape (plot.go; -html-from redraws it
// from a results.json).
//
//	go run ./scripts/sidebyside -smoke
//	go run ./scripts/sidebyside -members 1 -shapes 64x1,8x8 -workloads set-own,get -pairs 3 -duration 5s
//	go run ./scripts/sidebyside -members 1,3 -pairs 3     # every shape and workload
//	go run ./scripts/sidebyside -html-from /tmp/sidebyside-.../results.json
//
// It prints figures; it asserts nothing on time. Errors are counted per
// request and reported per run and cell.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zkraft/zkraft/internal/launch"
)

// shape is S sessions x k requests in flight per session.
type shape struct {
	Sessions   int `json:"sessions"`
	PerSession int `json:"per_session"`
}

func (s shape) String() string { return fmt.Sprintf("%dx%d", s.Sessions, s.PerSession) }

func parseShapes(s string) ([]shape, error) {
	var out []shape
	for _, f := range splitList(s) {
		a, b, ok := strings.Cut(f, "x")
		n, err1 := strconv.Atoi(a)
		k, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || n < 1 || k < 1 || n*k > 100_000 {
			return nil, fmt.Errorf("-shapes: %q is not SESSIONSxPER_SESSION", f)
		}
		out = append(out, shape{n, k})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-shapes: none given")
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		out = append(out, strings.TrimSpace(f))
	}
	return out
}

// options are the parsed flags.
type options struct {
	systems        []launch.System
	members        []int
	connect        string
	shapes         []shape
	workloads      []*workload
	pairs          int
	order          string
	duration       time.Duration
	warmup         time.Duration
	valueSize      int
	znodes         int
	children       int
	watchers       int
	watchTimeout   time.Duration
	sessionTimeout time.Duration
	startTimeout   time.Duration
	maxOps         int64
	out            string
	work           string // the servers' directories
	zkraftBin      string
	zkraftGiven    bool
	zkraftFlags    []string
	zkHeap         string
	java           string
	zkJar          string
	keep           bool
	smoke          bool
	failOnError    bool
	value          []byte
	// htmlFrom: only render results.html from this results.json.
	htmlFrom string
}

const (
	defaultShapes    = "64x1,256x1,8x8,16x16,4x16"
	smokeShapes      = "8x8"
	smokeWorkloads   = "set-own,get"
	defaultWorkloads = "all"
)

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("sidebyside", flag.ContinueOnError)
	system := fs.String("system", "both", "zookeeper, zkraft or both")
	members := fs.String("members", "1", "ensemble sizes, comma-separated (1: standalone, 3: three members on loopback)")
	connect := fs.String("connect", "all", "what the sessions' connect string lists: all (every member, as real clients), leader, or follower (one follower)")
	shapes := fs.String("shapes", defaultShapes, "SESSIONSxIN_FLIGHT_PER_SESSION, comma-separated")
	wl := fs.String("workloads", defaultWorkloads, "comma-separated, or all: "+strings.Join(workloadNames(), ", "))
	pairs := fs.Int("pairs", 3, "runs of each system per cell (the table shows medians)")
	order := fs.String("order", "ab", "ab: ZooKeeper then zkraft in every pair; abba: the first system alternates between pairs")
	duration := fs.Duration("duration", 10*time.Second, "measured duration of a run")
	warmup := fs.Duration("warmup", 5*time.Second, "warm-up of a run, not measured (the JVM needs its JIT warm)")
	valueSize := fs.Int("value-size", 1024, "bytes of every value written and of the pre-created znodes")
	znodes := fs.Int("znodes", 1000, "size of the pre-created set of set-random, get and mixed")
	children := fs.Int("children", 100, "children of the getChildren parent")
	watchers := fs.Int("watchers", 1000, "watching sessions of the watch workload (its shape, whatever -shapes says)")
	watchTimeout := fs.Duration("watch-timeout", 5*time.Second, "a notification later than this after the write's reply is lost")
	sessionTimeout := fs.Duration("session-timeout", 30*time.Second, "the sessions' requested timeout")
	startTimeout := fs.Duration("start-timeout", 90*time.Second, "how long an ensemble may take to serve")
	maxOps := fs.Int64("max-ops", 50_000_000, "bound on the requests (rounds, for watch) of one run")
	out := fs.String("out", "", "directory for results.json, results.md and results.html (default: a new directory under $TMPDIR)")
	zkraftBin := fs.String("zkraft-bin", "", "zkraft binary to run (default: go build ./cmd/zkraft of this repository)")
	zkraftFlags := fs.String("zkraft-flags", "", "extra flags for zkraft serve, space-separated (e.g. --read-mode sequential)")
	zkHeap := fs.String("zk-heap", "1000m", "ZooKeeper's JVM heap (-Xmx; zkServer.sh's default is 1000m)")
	java := fs.String("java", "", "java binary (default $JAVA or java)")
	zkJar := fs.String("zk-jar", launch.DefaultJar, "Apache ZooKeeper jar")
	keep := fs.Bool("keep", false, "keep every run's server logs (the data directories are removed)")
	failOnError := fs.Bool("fail-on-error", false, "exit with status 3 when a run failed or any request failed (for CI; time is never asserted)")
	htmlFrom := fs.String("html-from", "", "only write results.html (charts per shape) from this results.json, beside it, and exit")
	smoke := fs.Bool("smoke", false, "quick check for CI: -members 1 -shapes "+smokeShapes+" -workloads "+smokeWorkloads+" -pairs 1 -warmup 1s -duration 3s, unless given")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./scripts/sidebyside [flags]\n\nworkloads:\n")
		for _, w := range workloads {
			fmt.Fprintf(fs.Output(), "  %-14s %s (%s)\n", w.name, w.about, w.unit)
		}
		fmt.Fprintf(fs.Output(), "\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *smoke {
		def := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		def("members", func() { *members = "1" })
		def("shapes", func() { *shapes = smokeShapes })
		def("workloads", func() { *wl = smokeWorkloads })
		def("pairs", func() { *pairs = 1 })
		def("warmup", func() { *warmup = time.Second })
		def("duration", func() { *duration = 3 * time.Second })
	}

	o := &options{connect: *connect, pairs: *pairs, order: *order, duration: *duration, warmup: *warmup,
		valueSize: *valueSize, znodes: *znodes, children: *children, watchers: *watchers,
		watchTimeout: *watchTimeout, sessionTimeout: *sessionTimeout, startTimeout: *startTimeout,
		maxOps: *maxOps, out: *out, zkraftBin: *zkraftBin, zkraftGiven: *zkraftBin != "",
		zkraftFlags: strings.Fields(*zkraftFlags), zkHeap: *zkHeap, java: *java, zkJar: *zkJar,
		keep: *keep, smoke: *smoke, failOnError: *failOnError, htmlFrom: *htmlFrom}
	switch *system {
	case "both":
		o.systems = []launch.System{launch.ZooKeeper, launch.Zkraft}
	case "zookeeper":
		o.systems = []launch.System{launch.ZooKeeper}
	case "zkraft":
		o.systems = []launch.System{launch.Zkraft}
	default:
		return nil, fmt.Errorf("-system: %q (zookeeper, zkraft or both)", *system)
	}
	for _, m := range splitList(*members) {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 || n > 9 {
			return nil, fmt.Errorf("-members: %q (1..9)", m)
		}
		o.members = append(o.members, n)
	}
	var err error
	if o.shapes, err = parseShapes(*shapes); err != nil {
		return nil, err
	}
	names := splitList(*wl)
	if len(names) == 1 && names[0] == "all" {
		names = workloadNames()
	}
	for _, n := range names {
		w := workloadByName(n)
		if w == nil {
			return nil, fmt.Errorf("-workloads: unknown %q (known: %s)", n, strings.Join(workloadNames(), ", "))
		}
		o.workloads = append(o.workloads, w)
	}
	switch {
	case o.connect != "all" && o.connect != "leader" && o.connect != "follower":
		return nil, fmt.Errorf("-connect: %q (all, leader or follower)", o.connect)
	case o.connect == "follower" && contains(o.members, 1):
		return nil, fmt.Errorf("-connect follower needs ensembles (-members without 1)")
	case o.order != "ab" && o.order != "abba":
		return nil, fmt.Errorf("-order: %q (ab or abba)", o.order)
	case o.pairs < 1 || o.pairs > 100:
		return nil, fmt.Errorf("-pairs: %d (1..100)", o.pairs)
	case o.duration <= 0 || o.duration > time.Hour || o.warmup < 0 || o.warmup > time.Hour:
		return nil, fmt.Errorf("-duration and -warmup: want (0, 1h] and [0, 1h]")
	case o.valueSize < 0 || o.valueSize > 1<<20-1024:
		return nil, fmt.Errorf("-value-size: %d (0 .. jute.maxbuffer)", o.valueSize)
	case o.znodes < 1 || o.children < 0 || o.watchers < 1 || o.maxOps < 1:
		return nil, fmt.Errorf("-znodes, -watchers and -max-ops must be positive, -children not negative")
	}
	o.value = make([]byte, o.valueSize)
	for i := range o.value {
		o.value[i] = byte('a' + i%26)
	}
	return o, nil
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// cells lists what each pair measures, in order: the watch workload has
// one cell per ensemble size (its shape is -watchers x 1).
func (o *options) cells() []cell {
	var cs []cell
	for _, m := range o.members {
		for _, w := range o.workloads {
			if w.watch {
				cs = append(cs, cell{members: m, shape: shape{o.watchers, 1}, workload: w})
				continue
			}
			for _, s := range o.shapes {
				cs = append(cs, cell{members: m, shape: s, workload: w})
			}
		}
	}
	return cs
}

// order is the systems of pair p (1-based).
func (o *options) orderOf(p int) []launch.System {
	s := append([]launch.System(nil), o.systems...)
	if o.order == "abba" && p%2 == 0 {
		for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
			s[i], s[j] = s[j], s[i]
		}
	}
	return s
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err == flag.ErrHelp {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		os.Exit(2)
	}
	if o.htmlFrom != "" {
		out := filepath.Join(filepath.Dir(o.htmlFrom), "results.html")
		if err := writeHTMLReport(o.htmlFrom, out); err != nil {
			fmt.Fprintln(os.Stderr, "sidebyside:", err)
			os.Exit(1)
		}
		logf("report: %s", out)
		return
	}
	// Every server dies with us: on return, on a panic of this goroutine
	// here, on a signal below, and (Pdeathsig) on any other death.
	defer launch.KillAll()
	defer func() {
		if p := recover(); p != nil {
			launch.KillAll()
			panic(p)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		logf("%v: stopping after the current run's clean-up (again to kill everything now)", s)
		cancel()
		<-sig
		launch.KillAll()
		os.Exit(130)
	}()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		launch.KillAll()
		code := 1
		if e, ok := err.(*exitError); ok {
			code = e.code
		}
		os.Exit(code)
	}
	if ctx.Err() != nil {
		os.Exit(130)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sidebyside: "+format+"\n", args...)
}

func run(ctx context.Context, o *options) error {
	if err := checkFiles(o); err != nil {
		return err
	}
	if o.out == "" {
		d, err := os.MkdirTemp("", "sidebyside-"+time.Now().UTC().Format("20060102-150405")+"-")
		if err != nil {
			return err
		}
		o.out = d
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	// The servers' directories: removed after each run, except the logs
	// of failed runs (and of every run with -keep), which the JSON names.
	o.work = filepath.Join(o.out, "servers")
	if err := os.MkdirAll(o.work, 0o755); err != nil {
		return err
	}
	defer func() {
		if !o.zkraftGiven {
			os.Remove(o.zkraftBin)
		}
		os.Remove(o.work) // only if empty
	}()
	if contains2(o.systems, launch.Zkraft) && o.zkraftBin == "" {
		o.zkraftBin = filepath.Join(o.work, "zkraft")
		logf("building zkraft")
		if err := launch.BuildZkraft(o.zkraftBin); err != nil {
			return err
		}
	}
	res := &Results{Meta: describe(o)}
	cells := o.cells()
	total := len(cells) * o.pairs * len(o.systems)
	per := o.warmup + o.duration + 4*time.Second
	logf("%d runs (%d cells x %d pairs x %d systems), about %v; results in %s",
		total, len(cells), o.pairs, len(o.systems), (time.Duration(total) * per).Round(time.Minute), o.out)
	seq := 0
loop:
	for p := 1; p <= o.pairs; p++ {
		for _, c := range cells {
			for _, sys := range o.orderOf(p) {
				if ctx.Err() != nil {
					break loop
				}
				seq++
				r := measure(ctx, o, seq, p, sys, c)
				if ctx.Err() != nil && r.Failed != "" {
					break loop // cut short by a signal: not a result
				}
				res.Runs = append(res.Runs, r)
				logf("[%d/%d] %s", seq, total, progressLine(r))
				if err := res.write(o.out); err != nil {
					return err
				}
			}
		}
	}
	res.Meta.Finished = time.Now().UTC()
	res.Interrupted = ctx.Err() != nil
	res.Meta.Versions.Srvr = map[string]string{}
	for _, r := range res.Runs {
		if r.Version != "" {
			res.Meta.Versions.Srvr[r.System] = r.Version
		}
	}
	res.Summary = summarize(o, res.Runs)
	if err := res.write(o.out); err != nil {
		return err
	}
	table := res.markdown(o)
	if err := os.WriteFile(filepath.Join(o.out, "results.md"), []byte(table), 0o644); err != nil {
		return err
	}
	fmt.Print(table)
	if err := os.WriteFile(filepath.Join(o.out, "results.html"), []byte(res.html()), 0o644); err != nil {
		return err
	}
	logf("all runs: %s; charts: %s", filepath.Join(o.out, "results.json"), filepath.Join(o.out, "results.html"))
	if o.failOnError {
		failed, errs := 0, int64(0)
		for _, r := range res.Runs {
			if r.Failed != "" {
				failed++
			}
			for _, n := range r.Errors {
				errs += n
			}
		}
		if failed > 0 || errs > 0 {
			return &exitError{3, fmt.Errorf("-fail-on-error: %d of %d runs failed, %d errors", failed, len(res.Runs), errs)}
		}
	}
	return nil
}

// exitError carries an exit status other than 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func contains2(s []launch.System, v launch.System) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func openFilesLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}

// checkFiles fails early when the sessions of the largest cell would not
// fit under the open-file limit.
func checkFiles(o *options) error {
	limit := openFilesLimit()
	need := 0
	for _, c := range o.cells() {
		need = max(need, c.shape.Sessions+2)
	}
	if limit > 0 && uint64(need+200) > limit {
		return fmt.Errorf("%d sessions need more open files than the limit of %d", need, limit)
	}
	return nil
}

// write saves res as results.json (through a temporary file, so that a
// reader never sees half of it).
func (res *Results) write(dir string) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".results.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "results.json"))
}
