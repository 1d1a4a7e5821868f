package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
)

// Result is the outcome of one run. Latencies are in microseconds.
type Result struct {
	Workload string   `json:"workload"`
	Addrs    []string `json:"addrs"`
	Sessions int      `json:"sessions"`
	// InFlight is the total number of requests kept in flight (load
	// workloads), spread over the sessions.
	InFlight  int            `json:"inflight,omitempty"`
	Params    map[string]any `json:"params,omitempty"`
	Start     time.Time      `json:"start"`
	WarmupS   float64        `json:"warmup_s"`
	DurationS float64        `json:"duration_s"` // the measured window
	// Ops counts what Unit names, completed in the measured window.
	Ops        int64   `json:"ops"`
	Unit       string  `json:"unit"`
	Throughput float64 `json:"throughput"` // Ops per second
	// Errors counts error replies and failures by name, over the whole run.
	Errors  map[string]int64   `json:"errors,omitempty"`
	Latency Latency            `json:"latency"`
	ByOp    map[string]OpStats `json:"by_op,omitempty"`

	// watch
	Rounds        int64    `json:"rounds,omitempty"`
	Notifications int64    `json:"notifications,omitempty"`
	Lost          *int64   `json:"lost_notifications,omitempty"`
	Late          int64    `json:"late_notifications,omitempty"`
	FromSend      *Latency `json:"notify_from_write_send,omitempty"`

	// sessions
	Opened         int64    `json:"sessions_opened,omitempty"`
	OpenFailed     int64    `json:"sessions_failed_to_open,omitempty"`
	Expired        *int64   `json:"unexpected_expiries,omitempty"`
	Disconnected   int64    `json:"unexpected_disconnects,omitempty"`
	PingLatency    *Latency `json:"ping_latency,omitempty"`
	RSSBeforeKB    int64    `json:"rss_before_kb,omitempty"`
	RSSOpenKB      int64    `json:"rss_open_kb,omitempty"`
	RSSEndKB       int64    `json:"rss_end_kb,omitempty"`
	RSSMaxKB       int64    `json:"rss_max_kb,omitempty"`
	RSSPerSessionB int64    `json:"rss_per_session_bytes,omitempty"`

	// lock
	Violations *int64 `json:"mutual_exclusion_violations,omitempty"`

	SetupS   float64 `json:"setup_s"`
	CleanupS float64 `json:"cleanup_s"`
}

// OpStats is the part of a run of one operation type.
type OpStats struct {
	Ops        int64   `json:"ops"`
	Throughput float64 `json:"throughput"`
	Latency    Latency `json:"latency"`
}

func i64(v int64) *int64 { return &v }

func lat(h *Histogram) *Latency {
	l := h.Summary()
	return &l
}

// runner holds what every workload shares.
type runner struct {
	ctx   context.Context
	cfg   *Config
	log   io.Writer
	res   *Result
	admin *Conn

	errMu sync.Mutex
}

// logf prints a progress line unless -q.
func (r *runner) logf(format string, args ...any) {
	if r.cfg.Quiet || r.log == nil {
		return
	}
	fmt.Fprintf(r.log, "bench: "+format+"\n", args...)
}

// addErr counts one error under name.
func (r *runner) addErr(name string, n int64) {
	if n == 0 {
		return
	}
	r.errMu.Lock()
	if r.res.Errors == nil {
		r.res.Errors = map[string]int64{}
	}
	r.res.Errors[name] += n
	r.errMu.Unlock()
}

// errName names an error for Result.Errors.
func errName(err error) string {
	var code jute.ErrCode
	if errors.As(err, &code) {
		return code.Error()
	}
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// Run runs one benchmark. Progress goes to log (may be nil). Cancelling ctx
// ends the measurement early; set-up and clean-up still run (bounded).
func Run(ctx context.Context, cfg *Config, log io.Writer) (*Result, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	r := &runner{ctx: ctx, cfg: cfg, log: log, res: &Result{
		Workload: cfg.Workload,
		Addrs:    cfg.Addrs,
		Sessions: cfg.Sessions,
		Start:    time.Now().UTC(),
		WarmupS:  cfg.Warmup.Seconds(),
		Params:   map[string]any{},
	}}
	admin, err := Dial(cfg.Addrs[0], ConnOptions{SessionTimeout: cfg.SessionTimeout, DialTimeout: cfg.OpTimeout})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Addrs[0], err)
	}
	r.admin = admin
	defer admin.Close(cfg.OpTimeout)

	// The subtree must not exist, unless told to remove it.
	err = admin.Do(jute.OpExists, &jute.ExistsRequest{Path: cfg.Prefix}, nil, cfg.OpTimeout)
	switch {
	case err == nil && !cfg.DeleteExisting:
		return nil, fmt.Errorf("%s already exists (left by an interrupted run?); remove it or pass -delete-existing", cfg.Prefix)
	case err == nil:
		r.logf("removing existing %s", cfg.Prefix)
		if err := r.deleteTree(cfg.Prefix, nil); err != nil {
			return nil, err
		}
	case !errors.Is(err, jute.ErrNoNode):
		return nil, fmt.Errorf("exists %s: %w", cfg.Prefix, err)
	}
	if err := r.create(cfg.Prefix, nil, jute.FlagPersistent); err != nil {
		return nil, err
	}
	var tracked []string // leaves the workload knows it created
	defer func() {
		t := time.Now()
		if err := r.deleteTree(cfg.Prefix, tracked); err != nil {
			r.logf("clean-up of %s: %v", cfg.Prefix, err)
			r.addErr("cleanup: "+errName(err), 1)
		}
		r.res.CleanupS = time.Since(t).Seconds()
	}()

	switch cfg.Workload {
	case WorkWrite, WorkRead, WorkMixed, WorkCreateSeq, WorkMulti:
		tracked, err = r.runLoad()
	case WorkWatch:
		err = r.runWatch()
	case WorkSessions:
		err = r.runSessions()
	case WorkLock:
		err = r.runLock()
	}
	if err != nil {
		return nil, err
	}
	return r.res, nil
}

// create creates one znode with the open ACL.
func (r *runner) create(path string, data []byte, flags int32) error {
	err := r.admin.Do(jute.OpCreate, &jute.CreateRequest{Path: path, Data: data, ACL: openACL, Flags: flags}, nil, r.cfg.OpTimeout)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}

var openACL = []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}

// pipeline sends n requests over c, at most window in flight. gen returns the
// request for index i; check (may be nil) judges each reply and returns an
// error to stop. Without check, any error reply stops. The whole is bounded:
// it fails when no reply arrives for r.cfg.OpTimeout.
func (r *runner) pipeline(c *Conn, n, window int, gen func(i int) (jute.OpCode, jute.Record), check func(i int, rep *Reply) error) error {
	if window < 1 {
		window = 1
	}
	sem := make(chan struct{}, window)
	var mu sync.Mutex
	var first error
	setErr := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	getErr := func() error {
		mu.Lock()
		defer mu.Unlock()
		return first
	}
	timer := time.NewTimer(r.cfg.OpTimeout)
	defer timer.Stop()
	acquire := func() error {
		select {
		case sem <- struct{}{}:
			return nil
		default:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(r.cfg.OpTimeout)
		select {
		case sem <- struct{}{}:
			return nil
		case <-timer.C:
			return fmt.Errorf("no reply for %v (%d requests in flight)", r.cfg.OpTimeout, window)
		}
	}
	for i := 0; i < n; i++ {
		if err := acquire(); err != nil {
			return err
		}
		if err := getErr(); err != nil {
			return err
		}
		op, req := gen(i)
		err := c.Send(op, req, func(rep *Reply) {
			var err error
			if check != nil {
				err = check(i, rep)
			} else if rep.Err != jute.ErrOK {
				err = fmt.Errorf("%v: %w", op, rep.Err)
			}
			if err != nil {
				setErr(err)
			}
			<-sem
		})
		if err != nil {
			return err
		}
	}
	for i := 0; i < window; i++ {
		if err := acquire(); err != nil {
			return err
		}
	}
	return getErr()
}

// deleteTree removes path and everything below it: first the leaves in
// known (ignoring those already gone), then the rest level by level.
func (r *runner) deleteTree(path string, known []string) error {
	const window = 256
	ignoreNoNode := func(_ int, rep *Reply) error {
		if rep.Err != jute.ErrOK && rep.Err != jute.ErrNoNode {
			return fmt.Errorf("delete: %w", rep.Err)
		}
		return nil
	}
	if len(known) > 0 {
		r.logf("deleting %d znodes", len(known))
		req := &jute.DeleteRequest{Version: -1}
		err := r.pipeline(r.admin, len(known), window, func(i int) (jute.OpCode, jute.Record) {
			req.Path = known[i]
			return jute.OpDelete, req
		}, ignoreNoNode)
		if err != nil {
			return err
		}
	}
	// Breadth first: levels[d] holds the znodes at depth d below path.
	levels := [][]string{{path}}
	total := 0
	for d := 0; d < 64; d++ {
		cur := levels[d]
		var next []string
		var mu sync.Mutex
		req := &jute.GetChildrenRequest{}
		err := r.pipeline(r.admin, len(cur), window, func(i int) (jute.OpCode, jute.Record) {
			req.Path = cur[i]
			return jute.OpGetChildren, req
		}, func(i int, rep *Reply) error {
			if rep.Err == jute.ErrNoNode {
				return nil
			}
			if rep.Err != jute.ErrOK {
				return fmt.Errorf("getChildren %s: %w", cur[i], rep.Err)
			}
			var resp jute.GetChildrenResponse
			if err := jute.Unmarshal(rep.Body, &resp); err != nil {
				return err
			}
			mu.Lock()
			for _, ch := range resp.Children {
				next = append(next, cur[i]+"/"+ch)
			}
			mu.Unlock()
			return nil
		})
		if err != nil {
			return err
		}
		total += len(next)
		if len(next) == 0 || total > 50_000_000 {
			break
		}
		sort.Strings(next)
		levels = append(levels, next)
	}
	for d := len(levels) - 1; d >= 0; d-- {
		cur := levels[d]
		req := &jute.DeleteRequest{Version: -1}
		err := r.pipeline(r.admin, len(cur), window, func(i int) (jute.OpCode, jute.Record) {
			req.Path = cur[i]
			return jute.OpDelete, req
		}, ignoreNoNode)
		if err != nil {
			return err
		}
	}
	return nil
}

// dialAll opens n sessions, at most cfg.ConnectConcurrent handshakes at once,
// session i on address i mod len(addrs). opts(i) gives session i's options.
// It returns the sessions (nil where the open failed), the number of
// failures, the first error, and the handshake latencies.
func (r *runner) dialAll(n int, opts func(i int) ConnOptions) ([]*Conn, int64, *Histogram, error) {
	conns := make([]*Conn, n)
	var failed atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var hist Histogram
	work := make(chan int)
	var wg sync.WaitGroup
	workers := min(r.cfg.ConnectConcurrent, n)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				o := opts(i)
				if o.OnClose == nil {
					o.OnClose = func(err error) {
						if err != nil {
							msg := err.Error()
							if i := strings.LastIndex(msg, ": "); i >= 0 && strings.Contains(msg, "tcp ") {
								msg = msg[i+2:] // without the addresses
							}
							r.addErr("connection lost: "+msg, 1)
						}
					}
				}
				if o.SessionTimeout == 0 {
					o.SessionTimeout = r.cfg.SessionTimeout
				}
				if o.DialTimeout == 0 {
					o.DialTimeout = r.cfg.OpTimeout
				}
				t := nanotime()
				c, err := Dial(r.cfg.Addrs[i%len(r.cfg.Addrs)], o)
				d := nanotime() - t
				mu.Lock()
				if err != nil {
					failed.Add(1)
					if firstErr == nil {
						firstErr = err
					}
				} else {
					conns[i] = c
					hist.Record(d)
				}
				mu.Unlock()
			}
		}()
	}
	lastLog := time.Now()
	for i := 0; i < n; i++ {
		if r.ctx.Err() != nil {
			break
		}
		work <- i
		if n >= 1000 && time.Since(lastLog) > 2*time.Second {
			r.logf("opened %d of %d sessions", i, n)
			lastLog = time.Now()
		}
	}
	close(work)
	wg.Wait()
	return conns, failed.Load(), &hist, firstErr
}

// closeAll closes the sessions in parallel (bounded) and counts failures.
func (r *runner) closeAll(conns []*Conn) {
	work := make(chan *Conn)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := 0; w < min(r.cfg.ConnectConcurrent, len(conns)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				if err := c.Close(r.cfg.OpTimeout); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	for _, c := range conns {
		if c != nil {
			work <- c
		}
	}
	close(work)
	wg.Wait()
	r.addErr("closeSession failed", failed.Load())
}

// window holds the measurement window in nanotime: [warmEnd, end).
type window struct {
	warmEnd int64
	end     atomic.Int64
}

func (r *runner) newWindow() *window {
	now := nanotime()
	w := &window{warmEnd: now + int64(r.cfg.Warmup)}
	w.end.Store(w.warmEnd + int64(r.cfg.Duration))
	return w
}

// in reports whether t lies in the measured window.
func (w *window) in(t int64) bool { return t >= w.warmEnd && t < w.end.Load() }

// over reports whether t is at or after the end of the window.
func (w *window) over(t int64) bool { return t >= w.end.Load() }

// wait blocks until the end of the window or ctx's end, whichever comes
// first, and then fixes the window's end.
func (r *runner) wait(w *window) {
	for {
		now := nanotime()
		left := w.end.Load() - now
		if left <= 0 {
			return
		}
		t := time.NewTimer(time.Duration(min(left, int64(time.Second))))
		select {
		case <-r.ctx.Done():
			t.Stop()
			now = nanotime()
			if now < w.warmEnd {
				now = w.warmEnd
			}
			if now < w.end.Load() {
				w.end.Store(now)
			}
			return
		case <-t.C:
		}
	}
}

// measured returns the length of the window in seconds (0 if it ended in
// the warm-up).
func (w *window) measured() float64 {
	d := w.end.Load() - w.warmEnd
	if d < 0 {
		return 0
	}
	return time.Duration(d).Seconds()
}

// waitGroup waits for wg at most d; it reports whether wg finished.
func waitGroup(wg *sync.WaitGroup, d time.Duration) bool {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// describe returns a one-line description of the workload's parameters.
func (c *Config) describe() string {
	var b strings.Builder
	b.WriteString(c.Workload)
	switch c.Workload {
	case WorkWrite:
		op := "setData"
		if c.WriteOp == "create" {
			op = "create"
		}
		fmt.Fprintf(&b, " (%s, %d-byte values", op, c.ValueSize)
		if c.WriteOp == "set" {
			fmt.Fprintf(&b, ", %d znodes", c.Keys)
		}
		b.WriteString(")")
	case WorkRead:
		fmt.Fprintf(&b, " (getData, %d znodes of %d bytes)", c.Keys, c.ValueSize)
	case WorkMixed:
		fmt.Fprintf(&b, " (%.0f%% getData, setData, %d znodes of %d bytes)", c.ReadRatio*100, c.Keys, c.ValueSize)
	case WorkCreateSeq:
		fmt.Fprintf(&b, " (sequential creates under one parent, %d-byte values)", c.ValueSize)
	case WorkMulti:
		fmt.Fprintf(&b, " (multi of %d setData, %d-byte values, %d znodes)", c.MultiOps, c.ValueSize, c.Keys)
	case WorkWatch:
		fmt.Fprintf(&b, " (%d watching sessions on one znode)", c.Watchers)
	case WorkSessions:
		fmt.Fprintf(&b, " (%d sessions, timeout %v)", c.Sessions, c.SessionTimeout)
	case WorkLock:
		fmt.Fprintf(&b, " (%d contenders, hold %v)", c.Sessions, c.Hold)
	}
	return b.String()
}
