package bench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// Workload names.
const (
	WorkWrite     = "write"
	WorkRead      = "read"
	WorkMixed     = "mixed"
	WorkCreateSeq = "create-seq"
	WorkMulti     = "multi"
	WorkWatch     = "watch"
	WorkSessions  = "sessions"
	WorkLock      = "lock"
)

// Workloads lists every workload in the order of the usage text.
var Workloads = []string{WorkWrite, WorkRead, WorkMixed, WorkCreateSeq, WorkMulti, WorkWatch, WorkSessions, WorkLock}

// Config is one benchmark run.
type Config struct {
	Addrs []string
	// Cells, if set, runs the workload against several zkraft cells (or
	// servers) at once, each with this configuration and its own
	// addresses, and reports each and their aggregate (cells.go). Addrs is
	// then unused.
	Cells    []Cell
	Workload string
	// Sessions is the number of sessions (connections); 0 picks the
	// workload's default (see defaultSessions).
	Sessions int
	// InFlight is the number of requests in flight in total, spread evenly
	// over the sessions (closed loop: a reply triggers the next request).
	InFlight int
	Duration time.Duration
	Warmup   time.Duration
	MaxOps   int64
	JSON     bool
	Quiet    bool
	Prefix   string
	// DeleteExisting removes a subtree left at Prefix by an earlier run.
	DeleteExisting bool

	ValueSize int
	Keys      int
	ReadRatio float64
	WriteOp   string // set or create
	MultiOps  int

	Watchers     int
	WatchTimeout time.Duration

	ServerPID         int
	SessionTimeout    time.Duration
	ConnectConcurrent int

	Hold        time.Duration
	LockTimeout time.Duration

	OpTimeout time.Duration
	Seed      uint64
}

// defaultSessions is the number of sessions used when -sessions is 0.
func defaultSessions(workload string) int {
	switch workload {
	case WorkWatch:
		return 100
	case WorkSessions:
		return 1000
	case WorkLock:
		return 8
	}
	return 4
}

const usageHead = `usage: zkraft bench [flags]

Runs one workload against a ZooKeeper-compatible server (zkraft, Apache
ZooKeeper, ...) for -warmup plus -duration and prints throughput and latency
percentiles (p50, p90, p99, p99.9, max), as text or with -json as JSON. It
creates its znodes under -prefix and removes them at the end.

Workloads (-workload):
  write       setData (-write-op set, over -keys znodes) or create (-write-op
              create, new znodes) with -value-size byte values
  read        getData over -keys existing znodes
  mixed       getData or setData over -keys znodes, -read-ratio reads
  create-seq  persistent sequential creates under one parent
  multi       multi of -multi-ops setData ops over -keys znodes
  watch       -watchers sessions each hold a data watch on one znode; one
              more session writes it; reports the time from the write's
              reply to each notification and counts lost ones (must be 0).
              ZooKeeper notifies a session once per path and event, so one
              watcher is one session.
  sessions    opens -sessions sessions and holds them for -duration with
              normal pings; counts unexpected expiries and disconnects;
              with -server-pid, reports the server's RSS (VmRSS) per session
  lock        -sessions clients contend for one lock (ephemeral sequential
              znode, watch on the predecessor); reports acquisitions/s,
              acquisition latency, and mutual-exclusion violations (must be 0)

In-flight requests (-inflight) count in total over all sessions, spread
evenly; each session keeps its share in flight (closed loop). -sessions 0
means: 4 for write/read/mixed/create-seq/multi, 100 for watch, 1000 for
sessions, 8 for lock. Every phase is bounded in time, every loop in count.

Flags:
`

// ParseArgs parses the command line of zkraft bench. Usage and flag errors
// go to stderr.
func ParseArgs(args []string, stderr io.Writer) (*Config, error) {
	cfg := &Config{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHead)
		fs.PrintDefaults()
	}
	addr := fs.String("addr", "127.0.0.1:2181", "comma-separated server addresses; sessions are spread over them round-robin")
	fs.StringVar(&cfg.Workload, "workload", WorkWrite, "workload: "+strings.Join(Workloads, ", "))
	fs.IntVar(&cfg.Sessions, "sessions", 0, "number of sessions (0: the workload's default)")
	fs.IntVar(&cfg.InFlight, "inflight", 64, "requests in flight in total, spread evenly over the sessions")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "measured duration")
	fs.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "warm-up before measuring (load runs, nothing recorded)")
	fs.Int64Var(&cfg.MaxOps, "max-ops", 100_000_000, "stop after this many operations (warm-up included)")
	fs.BoolVar(&cfg.JSON, "json", false, "print the result as JSON")
	fs.BoolVar(&cfg.Quiet, "q", false, "no progress messages on stderr")
	fs.StringVar(&cfg.Prefix, "prefix", "/zkraft-bench", "znode subtree the benchmark creates and removes")
	fs.BoolVar(&cfg.DeleteExisting, "delete-existing", false, "remove a subtree already at -prefix (left by an interrupted run) instead of failing")
	fs.IntVar(&cfg.ValueSize, "value-size", 1024, "bytes per written value")
	fs.IntVar(&cfg.Keys, "keys", 1000, "number of znodes read and written (read, mixed, write -write-op set, multi)")
	fs.Float64Var(&cfg.ReadRatio, "read-ratio", 0.9, "share of reads in the mixed workload (0..1)")
	fs.StringVar(&cfg.WriteOp, "write-op", "set", "write workload operation: set (setData) or create")
	fs.IntVar(&cfg.MultiOps, "multi-ops", 10, "operations per multi")
	fs.IntVar(&cfg.Watchers, "watchers", 0, "watch workload: number of watching sessions (0: -sessions)")
	fs.DurationVar(&cfg.WatchTimeout, "watch-timeout", 10*time.Second, "watch workload: wait at most this long for a round's notifications before counting the missing ones as lost")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "sessions workload: pid of the server process, to report its RSS from /proc/<pid>/status")
	fs.DurationVar(&cfg.SessionTimeout, "session-timeout", 10*time.Second, "session timeout requested")
	fs.IntVar(&cfg.ConnectConcurrent, "connect-concurrency", 32, "session handshakes in progress at once when opening sessions")
	fs.DurationVar(&cfg.Hold, "hold", 0, "lock workload: how long the holder keeps the lock")
	fs.DurationVar(&cfg.LockTimeout, "lock-timeout", 10*time.Second, "lock workload: give up one acquisition after this long")
	fs.DurationVar(&cfg.OpTimeout, "op-timeout", 10*time.Second, "timeout of each set-up, clean-up and synchronous request")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed (key choice)")
	fs.Func("cell", "NAME=addr,addr: drive this cell too (repeat for several; each gets the whole workload, run at once; -addr is then unused)", func(v string) error {
		name, addrs, ok := strings.Cut(v, "=")
		if !ok || name == "" || addrs == "" {
			return fmt.Errorf("want NAME=addr[,addr...], got %q", v)
		}
		c := Cell{Name: name}
		for _, a := range strings.Split(addrs, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.Addrs = append(c.Addrs, a)
			}
		}
		cfg.Cells = append(cfg.Cells, c)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, a := range strings.Split(*addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Addrs = append(cfg.Addrs, a)
		}
	}
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// normalize fills defaults and checks the configuration.
func (c *Config) normalize() error {
	if len(c.Addrs) == 0 {
		return errors.New("-addr: no address")
	}
	known := false
	for _, w := range Workloads {
		known = known || w == c.Workload
	}
	if !known {
		return fmt.Errorf("-workload %q: want one of %s", c.Workload, strings.Join(Workloads, ", "))
	}
	if c.Workload == WorkWatch && c.Watchers > 0 {
		c.Sessions = c.Watchers
	}
	if c.Sessions == 0 {
		c.Sessions = defaultSessions(c.Workload)
	}
	if c.Workload == WorkWatch {
		c.Watchers = c.Sessions
	}
	switch {
	case c.Sessions < 1 || c.Sessions > 1_000_000:
		return fmt.Errorf("-sessions %d: want 1..1000000", c.Sessions)
	case c.InFlight < 1 || c.InFlight > 1_000_000:
		return fmt.Errorf("-inflight %d: want 1..1000000", c.InFlight)
	case c.Duration <= 0 || c.Duration > 24*time.Hour:
		return fmt.Errorf("-duration %v: want more than 0 and at most 24h", c.Duration)
	case c.Warmup < 0 || c.Warmup > time.Hour:
		return fmt.Errorf("-warmup %v: want 0..1h", c.Warmup)
	case c.MaxOps < 1:
		return fmt.Errorf("-max-ops %d: want at least 1", c.MaxOps)
	case c.ValueSize < 0 || c.ValueSize > 1<<20:
		return fmt.Errorf("-value-size %d: want 0..1048576", c.ValueSize)
	case c.Keys < 1 || c.Keys > 10_000_000:
		return fmt.Errorf("-keys %d: want 1..10000000", c.Keys)
	case c.ReadRatio < 0 || c.ReadRatio > 1:
		return fmt.Errorf("-read-ratio %v: want 0..1", c.ReadRatio)
	case c.WriteOp != "set" && c.WriteOp != "create":
		return fmt.Errorf("-write-op %q: want set or create", c.WriteOp)
	case c.MultiOps < 1 || c.MultiOps > 10_000:
		return fmt.Errorf("-multi-ops %d: want 1..10000", c.MultiOps)
	case c.WatchTimeout <= 0:
		return fmt.Errorf("-watch-timeout %v: want more than 0", c.WatchTimeout)
	case c.SessionTimeout < time.Second:
		return fmt.Errorf("-session-timeout %v: want at least 1s", c.SessionTimeout)
	case c.ConnectConcurrent < 1:
		return fmt.Errorf("-connect-concurrency %d: want at least 1", c.ConnectConcurrent)
	case c.Hold < 0 || c.LockTimeout <= 0 || c.OpTimeout <= 0:
		return errors.New("-hold, -lock-timeout and -op-timeout must be positive")
	case c.ServerPID < 0:
		return fmt.Errorf("-server-pid %d", c.ServerPID)
	}
	if c.isLoad() && c.InFlight < c.Sessions {
		return fmt.Errorf("-inflight %d is less than -sessions %d: every session needs at least one request in flight", c.InFlight, c.Sessions)
	}
	p := c.Prefix
	if p == "" || p[0] != '/' || p == "/" || path.Clean(p) != p || p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return fmt.Errorf("-prefix %q: want an absolute, clean znode path other than / and /zookeeper", p)
	}
	return nil
}

// isLoad reports whether the workload is a closed-loop request load whose
// in-flight count -inflight sets.
func (c *Config) isLoad() bool {
	switch c.Workload {
	case WorkWrite, WorkRead, WorkMixed, WorkCreateSeq, WorkMulti:
		return true
	}
	return false
}

// perSession returns how many of the InFlight requests session i keeps in
// flight.
func (c *Config) perSession(i int) int {
	n := c.InFlight / c.Sessions
	if i < c.InFlight%c.Sessions {
		n++
	}
	return n
}
