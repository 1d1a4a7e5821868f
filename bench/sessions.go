package bench

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
)

// ReadRSS returns the resident set size of process pid in KiB, from the
// VmRSS line of /proc/<pid>/status.
func ReadRSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseVmRSS(f)
}

func parseVmRSS(f interface{ Read([]byte) (int, error) }) (int64, error) {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
		}
		return strconv.ParseInt(fields[0], 10, 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no VmRSS line")
}

// heldSession is one session of the sessions workload.
type heldSession struct {
	mu sync.Mutex
	c  *Conn
}

// runSessions opens -sessions sessions, holds them for the duration with
// the client's normal pings (every third of the session timeout when
// idle), and closes them. A session whose connection ends unexpectedly is
// re-attached once on the same address: if the server says it expired, it
// counts as an unexpected expiry, otherwise as a disconnect. The reported
// throughput is the rate at which the sessions were opened; the latency is
// the handshake's. With -server-pid the server's RSS is sampled before,
// after opening, every second while holding, and at the end.
func (r *runner) runSessions() error {
	cfg := r.cfg
	n := cfg.Sessions
	r.res.Unit = "sessions opened"
	r.res.Params["session_timeout_ms"] = cfg.SessionTimeout.Milliseconds()
	rss := func() int64 {
		if cfg.ServerPID == 0 {
			return 0
		}
		kb, err := ReadRSS(cfg.ServerPID)
		if err != nil {
			r.addErr("reading RSS: "+errName(err), 1)
			return 0
		}
		return kb
	}
	var holding atomic.Bool
	var shuttingDown atomic.Bool
	var expired, disconnected, reattachFailed atomic.Int64
	var pings SyncHistogram
	var reattach sync.WaitGroup
	held := make([]*heldSession, n)
	for i := range held {
		held[i] = &heldSession{}
	}
	var opts func(i int) ConnOptions
	opts = func(i int) ConnOptions {
		return ConnOptions{
			OnPing: func(rtt int64) {
				if holding.Load() {
					pings.Record(rtt)
				}
			},
			OnClose: func(err error) {
				if err == nil || shuttingDown.Load() {
					return
				}
				h := held[i]
				h.mu.Lock()
				old := h.c
				h.mu.Unlock()
				if old == nil {
					return
				}
				reattach.Add(1)
				go func() {
					defer reattach.Done()
					o := opts(i)
					o.SessionID, o.Passwd = old.SessionID, old.Passwd
					o.SessionTimeout, o.DialTimeout = cfg.SessionTimeout, cfg.OpTimeout
					c, derr := Dial(cfg.Addrs[i%len(cfg.Addrs)], o)
					switch {
					case errors.Is(derr, jute.ErrSessionExpired):
						expired.Add(1)
					case derr != nil:
						disconnected.Add(1)
						reattachFailed.Add(1)
					default:
						disconnected.Add(1)
					}
					h.mu.Lock()
					h.c = c // nil if the re-attach failed
					h.mu.Unlock()
					if c != nil && shuttingDown.Load() {
						c.Close(cfg.OpTimeout)
					}
				}()
			},
		}
	}

	before := rss()
	r.res.RSSBeforeKB = before
	r.logf("%s: opening", cfg.describe())
	t0 := time.Now()
	conns, failed, hs, ferr := r.dialAll(n, opts)
	openS := time.Since(t0).Seconds()
	var opened int64
	for i, c := range conns {
		if c != nil {
			opened++
			held[i].mu.Lock()
			held[i].c = c
			held[i].mu.Unlock()
		}
	}
	r.res.SetupS = openS
	r.res.Opened = opened
	r.res.OpenFailed = failed
	if failed > 0 {
		r.logf("%d sessions failed to open: %v", failed, ferr)
		r.addErr("open: "+errName(ferr), failed)
	}
	r.res.Ops = opened
	if openS > 0 {
		r.res.Throughput = float64(opened) / openS
	}
	r.res.Latency = hs.Summary()
	r.res.RSSOpenKB = rss()
	r.logf("opened %d sessions in %.1f s; holding for %v", opened, openS, cfg.Duration)

	// Hold. The warm-up does not apply: the sessions are the load.
	holding.Store(true)
	start := nanotime()
	end := start + int64(cfg.Duration)
	maxRSS := r.res.RSSOpenKB
	for nanotime() < end && r.ctx.Err() == nil {
		t := time.NewTimer(time.Duration(min(end-nanotime(), int64(time.Second))))
		select {
		case <-r.ctx.Done():
		case <-t.C:
		}
		t.Stop()
		maxRSS = max(maxRSS, rss())
	}
	holding.Store(false)
	r.res.DurationS = time.Duration(nanotime() - start).Seconds()
	r.res.RSSEndKB = rss()
	r.res.RSSMaxKB = max(maxRSS, r.res.RSSEndKB)
	if cfg.ServerPID != 0 && opened > 0 && r.res.RSSEndKB > 0 {
		r.res.RSSPerSessionB = (r.res.RSSEndKB - before) * 1024 / opened
	}

	shuttingDown.Store(true)
	if !waitGroup(&reattach, cfg.OpTimeout+time.Second) {
		r.addErr("re-attach still running at the end", 1)
	}
	final := make([]*Conn, 0, n)
	for _, h := range held {
		h.mu.Lock()
		if h.c != nil {
			final = append(final, h.c)
		}
		h.mu.Unlock()
	}
	r.logf("closing %d sessions", len(final))
	r.closeAll(final)
	r.res.Expired = i64(expired.Load())
	r.res.Disconnected = disconnected.Load()
	r.addErr("re-attach failed", reattachFailed.Load())
	r.res.PingLatency = lat(pings.Snapshot())
	return nil
}
