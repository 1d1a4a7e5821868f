package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/zkraft/zkraft/internal/launch"
)

// Results is the JSON: how the runs were made, a summary per cell, and
// every run.
type Results struct {
	Meta    *Meta      `json:"meta"`
	Summary []*Summary `json:"summary,omitempty"`
	Runs    []*Run     `json:"runs"`
	// Interrupted: a signal ended the sequence early.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Meta says where, when, with what and how.
type Meta struct {
	Harness  string    `json:"harness"`
	Command  []string  `json:"command"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	Machine  Machine   `json:"machine"`
	Versions Versions  `json:"versions"`
	Commit   Commit    `json:"commit"`
	Settings Settings  `json:"settings"`
	// Servers are examples of what each system was started with (ports
	// differ from run to run).
	Servers map[string]ServerSetup `json:"servers"`
}

type Machine struct {
	Hostname  string `json:"hostname"`
	CPU       string `json:"cpu"`
	CPUs      int    `json:"cpus"`
	MemKiB    int64  `json:"mem_kib"`
	Kernel    string `json:"kernel"`
	OpenFiles uint64 `json:"open_files_limit"`
}

type Versions struct {
	Go               string            `json:"go"`
	GoZookeeper      string            `json:"go_zookeeper"`
	Java             string            `json:"java"`
	ZooKeeperPackage string            `json:"zookeeper_package"`
	Srvr             map[string]string `json:"srvr,omitempty"` // "Zookeeper version:" by system, from the runs
}

type Commit struct {
	Hash    string `json:"hash"`
	Subject string `json:"subject"`
	Branch  string `json:"branch"`
	Dirty   bool   `json:"dirty"` // uncommitted or untracked files in the tree zkraft was built from
	Binary  string `json:"binary,omitempty"`
}

type Settings struct {
	Systems        []launch.System `json:"systems"`
	Members        []int           `json:"members"`
	Connect        string          `json:"connect"`
	Shapes         []shape         `json:"shapes"`
	Workloads      []string        `json:"workloads"`
	Pairs          int             `json:"pairs"`
	Order          string          `json:"order"`
	WarmupS        float64         `json:"warmup_s"`
	DurationS      float64         `json:"duration_s"`
	ValueSize      int             `json:"value_size"`
	Znodes         int             `json:"znodes"`
	Children       int             `json:"children"`
	Watchers       int             `json:"watchers"`
	WatchTimeoutS  float64         `json:"watch_timeout_s"`
	SessionTimeout float64         `json:"session_timeout_s"`
	MaxOps         int64           `json:"max_ops"`
	Smoke          bool            `json:"smoke"`
	ZkHeap         string          `json:"zookeeper_heap"`
	ZkraftFlags    []string        `json:"zkraft_flags,omitempty"`
	FreshServers   string          `json:"fresh_servers"`
}

type ServerSetup struct {
	Standalone     []string `json:"command_standalone"`
	ZooCfg         string   `json:"zoo_cfg_standalone"`
	EnsembleZooCfg string   `json:"zoo_cfg_3_members_member_1"`
}

// describe gathers the meta data of a run of the harness.
func describe(o *options) *Meta {
	m := &Meta{Harness: "scripts/sidebyside", Command: os.Args, Started: time.Now().UTC()}
	m.Machine.Hostname, _ = os.Hostname()
	m.Machine.CPUs = runtime.NumCPU()
	m.Machine.CPU = cpuModel()
	m.Machine.MemKiB = memKiB()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Machine.Kernel = strings.TrimSpace(string(b))
	}
	m.Machine.OpenFiles = openFilesLimit()
	m.Versions.Go = runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/go-zookeeper/zk" {
				m.Versions.GoZookeeper = d.Version
			}
		}
	}
	java := o.java
	if java == "" {
		java = os.Getenv("JAVA")
	}
	if java == "" {
		java = "java"
	}
	if b, err := exec.Command(java, "-version").CombinedOutput(); err == nil {
		m.Versions.Java = strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\n", "; ")), " ")
	}
	if b, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "zookeeper").Output(); err == nil {
		m.Versions.ZooKeeperPackage = string(b)
	}
	if root, err := launch.ModuleRoot(); err == nil {
		git := func(args ...string) string {
			b, _ := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
			return strings.TrimSpace(string(b))
		}
		m.Commit.Hash = git("rev-parse", "HEAD")
		m.Commit.Subject = git("log", "-1", "--format=%s")
		m.Commit.Branch = git("rev-parse", "--abbrev-ref", "HEAD")
		m.Commit.Dirty = git("status", "--porcelain") != ""
	}
	if o.zkraftGiven {
		m.Commit.Binary = o.zkraftBin + " (given with -zkraft-bin: the commit is the harness's, not necessarily the binary's)"
	}
	var wl []string
	for _, w := range o.workloads {
		wl = append(wl, w.name)
	}
	m.Settings = Settings{Systems: o.systems, Members: o.members, Connect: o.connect, Shapes: o.shapes,
		Workloads: wl, Pairs: o.pairs, Order: o.order, WarmupS: o.warmup.Seconds(), DurationS: o.duration.Seconds(),
		ValueSize: o.valueSize, Znodes: o.znodes, Children: o.children, Watchers: o.watchers,
		WatchTimeoutS: o.watchTimeout.Seconds(), SessionTimeout: o.sessionTimeout.Seconds(), MaxOps: o.maxOps,
		Smoke: o.smoke, ZkHeap: o.zkHeap, ZkraftFlags: o.zkraftFlags,
		FreshServers: "every run: new processes, new data directories, removed afterwards"}
	m.Servers = map[string]ServerSetup{}
	for _, sys := range o.systems {
		var s ServerSetup
		dir, err := os.MkdirTemp("", "sidebyside-describe-")
		if err != nil {
			continue
		}
		cfg := launch.Config{System: sys, Dir: dir, ZkraftBin: o.zkraftBin, ZkraftFlags: o.zkraftFlags,
			Heap: o.zkHeap, Java: o.java, Jar: o.zkJar}
		if e, err := launch.New(cfg); err == nil {
			s.Standalone = e.Members[0].Command()
			s.ZooCfg = e.ZooCfg()
		}
		cfg.Members = 3
		if e, err := launch.New(cfg); err == nil {
			s.EnsembleZooCfg = e.ZooCfg()
		}
		os.RemoveAll(dir)
		m.Servers[string(sys)] = s
	}
	return m
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func memKiB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var n int64
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			fmt.Sscanf(strings.TrimSpace(v), "%d", &n)
		}
	}
	return n
}

// Summary is one cell: the medians of each system's runs and the ratios.
type Summary struct {
	Members  int                    `json:"members"`
	Connect  string                 `json:"connect"`
	Shape    string                 `json:"shape"`
	Workload string                 `json:"workload"`
	Unit     string                 `json:"unit"`
	Systems  map[string]*SysSummary `json:"systems"`
	// Ratio is zkraft/ZooKeeper of the medians; PairRatios the throughput
	// ratio of each pair whose two runs both have figures.
	Ratio      *Ratio    `json:"ratio_zkraft_over_zookeeper,omitempty"`
	PairRatios []float64 `json:"pair_throughput_ratios,omitempty"`
}

// SysSummary holds the medians of one system's runs of a cell (failed
// runs left out and counted).
type SysSummary struct {
	Runs            int     `json:"runs"`
	Failed          int     `json:"failed"`
	Throughput      float64 `json:"throughput"`
	P50Us           float64 `json:"p50_us"`
	P99Us           float64 `json:"p99_us"`
	P999Us          float64 `json:"p99_9_us"`
	ServerCPUPerKOp float64 `json:"server_cpu_s_per_kop"`
	ClientCPUPerKOp float64 `json:"client_cpu_s_per_kop"`
	Errors          int64   `json:"errors"` // summed over the runs
	Lost            int64   `json:"watch_lost,omitempty"`
}

type Ratio struct {
	Throughput   float64 `json:"throughput"`
	P99          float64 `json:"p99"`
	ServerCPUPer float64 `json:"server_cpu_per_op"`
}

func summarize(o *options, runs []*Run) []*Summary {
	var out []*Summary
	for _, c := range o.cells() {
		s := &Summary{Members: c.members, Connect: o.connect, Shape: c.shape.String(), Workload: c.workload.name,
			Unit: c.workload.unit, Systems: map[string]*SysSummary{}}
		byPair := map[int]map[string]*Run{}
		for _, sys := range o.systems {
			var ok []*Run
			ss := &SysSummary{}
			for _, r := range runs {
				if r.System != string(sys) || r.Members != c.members || r.Shape != s.Shape || r.Workload != s.Workload {
					continue
				}
				ss.Runs++
				for _, n := range r.Errors {
					ss.Errors += n
				}
				if r.Watch != nil {
					ss.Lost += r.Watch.Lost
				}
				if r.Failed != "" {
					ss.Failed++
					continue
				}
				ok = append(ok, r)
				if byPair[r.Pair] == nil {
					byPair[r.Pair] = map[string]*Run{}
				}
				byPair[r.Pair][r.System] = r
			}
			if ss.Runs == 0 {
				continue
			}
			med := func(f func(*Run) float64) float64 {
				var v []float64
				for _, r := range ok {
					v = append(v, f(r))
				}
				return median(v)
			}
			ss.Throughput = med(func(r *Run) float64 { return r.Throughput })
			ss.P50Us = med(func(r *Run) float64 { return r.Latency.P50Us })
			ss.P99Us = med(func(r *Run) float64 { return r.Latency.P99Us })
			ss.P999Us = med(func(r *Run) float64 { return r.Latency.P999Us })
			ss.ServerCPUPerKOp = med(func(r *Run) float64 { return r.ServerCPUPerKOp })
			ss.ClientCPUPerKOp = med(func(r *Run) float64 { return r.ClientCPUPerKOp })
			s.Systems[string(sys)] = ss
		}
		if len(s.Systems) == 0 {
			continue
		}
		z, r := s.Systems[string(launch.ZooKeeper)], s.Systems[string(launch.Zkraft)]
		if z != nil && r != nil && z.Runs > z.Failed && r.Runs > r.Failed {
			s.Ratio = &Ratio{Throughput: ratio(r.Throughput, z.Throughput), P99: ratio(r.P99Us, z.P99Us),
				ServerCPUPer: ratio(r.ServerCPUPerKOp, z.ServerCPUPerKOp)}
		}
		pairs := sortedKeysInt(byPair)
		for _, p := range pairs {
			z, r := byPair[p][string(launch.ZooKeeper)], byPair[p][string(launch.Zkraft)]
			if z != nil && r != nil {
				s.PairRatios = append(s.PairRatios, round2(ratio(r.Throughput, z.Throughput)))
			}
		}
		out = append(out, s)
	}
	return out
}

func sortedKeysInt[V any](m map[int]V) []int {
	var k []int
	for i := range m {
		k = append(k, i)
	}
	sort.Ints(k)
	return k
}

// median of v (NaN if empty); the mean of the middle two for an even count.
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// ms formats microseconds as milliseconds with sensible digits.
func ms(us float64) string {
	if math.IsNaN(us) {
		return "-"
	}
	v := us / 1000
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

func sig3(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.3g", v)
}

func ratioStr(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func progressLine(r *Run) string {
	head := fmt.Sprintf("pair %d %s %d member(s) %s %s", r.Pair, r.System, r.Members, r.Shape, r.Workload)
	if r.Failed != "" {
		return head + ": FAILED: " + firstLine(r.Failed)
	}
	var errs int64
	for _, n := range r.Errors {
		errs += n
	}
	l := r.Latency
	s := fmt.Sprintf("%s: %.0f %s/s, p50 %s p99 %s p99.9 %s ms, server CPU %s s/kop, client %s s/kop, %d errors (load %.1f)",
		head, r.Throughput, r.Unit, ms(l.P50Us), ms(l.P99Us), ms(l.P999Us), sig3(r.ServerCPUPerKOp), sig3(r.ClientCPUPerKOp), errs, r.Load1)
	if r.Watch != nil {
		s += fmt.Sprintf("; %d rounds, %d lost, %d before the reply", r.Watch.Rounds, r.Watch.Lost, r.Watch.BeforeReply)
	}
	return s
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// markdown is the report: a header that says how, the table of medians,
// and what went wrong.
func (res *Results) markdown(o *options) string {
	m := res.Meta
	var b strings.Builder
	zk, zr := string(launch.ZooKeeper), string(launch.Zkraft)
	fmt.Fprintf(&b, "## Side-by-side: zkraft and Apache ZooKeeper (scripts/sidebyside)\n\n")
	dirty := ""
	if m.Commit.Dirty {
		dirty = ", with uncommitted changes"
	}
	fmt.Fprintf(&b, "- %s UTC, %v; %s: %s, %d CPUs, %.1f GiB, Linux %s\n", m.Started.Format("2006-01-02 15:04"),
		m.Finished.Sub(m.Started).Round(time.Second), m.Machine.Hostname, m.Machine.CPU, m.Machine.CPUs, float64(m.Machine.MemKiB)/(1<<20), m.Machine.Kernel)
	commit := "unknown (not run from the repository)"
	if m.Commit.Hash != "" {
		commit = fmt.Sprintf("%.10s (%s)%s", m.Commit.Hash, m.Commit.Subject, dirty)
	}
	if m.Commit.Binary != "" {
		commit += ", binary given with -zkraft-bin"
	}
	fmt.Fprintf(&b, "- zkraft: commit %s; ZooKeeper: %s (Debian %s), %s, -Xmx%s\n",
		commit, m.Versions.Srvr[zk], m.Versions.ZooKeeperPackage, javaShort(m.Versions.Java), o.zkHeap)
	fmt.Fprintf(&b, "- client: go-zookeeper %s (%s), one process; shape SxK: S sessions, each one *zk.Conn shared by K goroutines doing one synchronous request at a time\n",
		m.Versions.GoZookeeper, m.Versions.Go)
	fmt.Fprintf(&b, "- method: fresh servers and data directories for every run; warm-up %v excluded, %v measured; %d pair(s), order %s; values %d B; connect string: %s; fsync on (ZooKeeper forceSync=yes, zkraft always); same zoo.cfg (tickTime 2000); both log at warn\n",
		o.warmup, o.duration, o.pairs, o.order, o.valueSize, o.connect)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range res.Runs {
		lo, hi = math.Min(lo, r.Load1), math.Max(hi, r.Load1)
	}
	if res.Interrupted {
		fmt.Fprintf(&b, "- interrupted after %d runs\n", len(res.Runs))
	}
	if len(res.Runs) > 0 {
		fmt.Fprintf(&b, "- 1-minute load average before the runs: %.1f to %.1f (other processes on the machine count too)\n", lo, hi)
	}
	fmt.Fprintf(&b, "- medians over the pairs; ratio = zkraft / ZooKeeper of the medians (throughput: higher is better; p99 and CPU/op: lower is better); per pair: each pair's throughput ratio; CPU: server user+system seconds per 1000 operations in the measured window, summed over the members; client: the load generator's own\n\n")
	fmt.Fprintf(&b, "| members | shape | workload | ZooKeeper | zkraft | ratio | per pair | ZooKeeper p50 / p99 / p99.9 ms | zkraft p50 / p99 / p99.9 ms | p99 ratio | ZooKeeper CPU s/kop | zkraft CPU s/kop | CPU/op ratio | client CPU s/kop ZK / zkraft | errors ZK / zkraft |\n")
	fmt.Fprintf(&b, "|---:|---|---|---:|---:|---:|---|---|---|---:|---:|---:|---:|---|---|\n")
	get := func(s *Summary, sys string) *SysSummary {
		if v := s.Systems[sys]; v != nil {
			return v
		}
		return &SysSummary{Throughput: math.NaN(), P50Us: math.NaN(), P99Us: math.NaN(), P999Us: math.NaN(),
			ServerCPUPerKOp: math.NaN(), ClientCPUPerKOp: math.NaN()}
	}
	for _, s := range res.Summary {
		z, r := get(s, zk), get(s, zr)
		rt := &Ratio{math.NaN(), math.NaN(), math.NaN()}
		if s.Ratio != nil {
			rt = s.Ratio
		}
		var pr []string
		for _, p := range s.PairRatios {
			pr = append(pr, fmt.Sprintf("%.2f", p))
		}
		fail := func(x *SysSummary) string {
			out := fmt.Sprint(x.Errors)
			if x.Lost > 0 {
				out += fmt.Sprintf(" (%d lost)", x.Lost)
			}
			if x.Failed > 0 {
				out += fmt.Sprintf(", %d of %d runs failed", x.Failed, x.Runs)
			}
			return out
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s %s/s | %s | %s | %s | %s / %s / %s | %s / %s / %s | %s | %s | %s | %s | %s / %s | %s / %s |\n",
			s.Members, s.Shape, s.Workload, num(z.Throughput), s.Unit, num(r.Throughput), ratioStr(rt.Throughput), strings.Join(pr, " "),
			ms(z.P50Us), ms(z.P99Us), ms(z.P999Us), ms(r.P50Us), ms(r.P99Us), ms(r.P999Us), ratioStr(rt.P99),
			sig3(z.ServerCPUPerKOp), sig3(r.ServerCPUPerKOp), ratioStr(rt.ServerCPUPer),
			sig3(z.ClientCPUPerKOp), sig3(r.ClientCPUPerKOp), fail(z), fail(r))
	}
	var notes []string
	for _, r := range res.Runs {
		head := fmt.Sprintf("run %d (pair %d, %s, %d member(s), %s, %s)", r.Seq, r.Pair, r.System, r.Members, r.Shape, r.Workload)
		if r.Failed != "" {
			notes = append(notes, fmt.Sprintf("%s failed: %s", head, firstLine(r.Failed)))
		}
		if len(r.Errors) > 0 {
			var e []string
			for _, k := range sortedKeys(r.Errors) {
				e = append(e, fmt.Sprintf("%d× %s", r.Errors[k], k))
			}
			notes = append(notes, fmt.Sprintf("%s errors: %s", head, strings.Join(e, "; ")))
		}
		if w := r.Watch; w != nil && r.Failed == "" {
			notes = append(notes, fmt.Sprintf("%s watch: %d watchers, %d rounds, %d lost, %d late, %d notifications before the write's reply (counted as 0); from the write's send p50 %s p99 %s ms",
				head, w.Watchers, w.Rounds, w.Lost, w.Late, w.BeforeReply, ms(w.FromSend.P50Us), ms(w.FromSend.P99Us)))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			b.WriteString("- " + n + "\n")
		}
	}
	fmt.Fprintf(&b, "\nEvery run, with per-member CPU, by-operation figures and the settings: %s\n", filepath.Join(o.out, "results.json"))
	return b.String()
}

func javaShort(v string) string {
	// "openjdk version "17.0.15" 2025-04-15; OpenJDK Runtime ..."
	if i := strings.IndexByte(v, ';'); i >= 0 {
		return strings.TrimSpace(v[:i])
	}
	return v
}
