package bench

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
)

// runLock: -sessions clients run the lock recipe of the ZooKeeper
// documentation on one lock znode. Each acquisition creates an ephemeral
// sequential child, lists the children, and if its child is not the lowest
// watches the next lower one (exists with watch) and waits for it to go.
// The holder keeps the lock for -hold and deletes its child. Latency is from
// the create's send to the acquisition; a holder count checks mutual
// exclusion.
func (r *runner) runLock() error {
	cfg := r.cfg
	dir := cfg.Prefix + "/lock"
	setup := time.Now()
	if err := r.create(dir, nil, jute.FlagPersistent); err != nil {
		return err
	}
	r.res.Unit = "acquisitions"
	r.res.Params["hold_ms"] = float64(cfg.Hold) / 1e6

	n := cfg.Sessions
	events := make([]chan string, n)
	conns, failed, _, err := r.dialAll(n, func(i int) ConnOptions {
		ch := make(chan string, 64)
		events[i] = ch
		return ConnOptions{OnWatch: func(ev *jute.WatcherEvent, _ int64) {
			select {
			case ch <- ev.Path:
			default: // a full channel only holds stale paths
			}
		}}
	})
	defer func() { r.closeAll(conns) }()
	if failed > 0 {
		return fmt.Errorf("%d of %d sessions failed to open: %w", failed, n, err)
	}
	r.res.SetupS = time.Since(setup).Seconds()
	r.logf("%s: warm-up %v, duration %v", cfg.describe(), cfg.Warmup, cfg.Duration)

	win := r.newWindow()
	var holders, violations, issued atomic.Int64
	var mu sync.Mutex
	var all Histogram
	var acquired int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var h Histogram
			var count int64
			c, evs := conns[i], events[i]
			for !win.over(nanotime()) && issued.Add(1) <= cfg.MaxOps {
				t0 := nanotime()
				me, ok, err := r.acquire(c, evs, dir, t0+int64(cfg.LockTimeout))
				if err != nil {
					r.addErr("lock: "+errName(err), 1)
				}
				if ok {
					at := nanotime()
					if holders.Add(1) != 1 {
						violations.Add(1)
					}
					if cfg.Hold > 0 {
						time.Sleep(cfg.Hold)
					}
					holders.Add(-1)
					if win.in(at) {
						h.Record(at - t0)
						count++
					}
				}
				if me != "" {
					if err := c.Do(jute.OpDelete, &jute.DeleteRequest{Path: me, Version: -1}, nil, cfg.OpTimeout); err != nil && !errors.Is(err, jute.ErrNoNode) {
						r.addErr("unlock: "+errName(err), 1)
					}
				}
				if c.Err() != nil {
					r.addErr("lock session lost", 1)
					return
				}
			}
			mu.Lock()
			all.Merge(&h)
			acquired += count
			mu.Unlock()
		}()
	}
	r.wait(win)
	if !waitGroup(&wg, cfg.LockTimeout+2*cfg.OpTimeout) {
		return errors.New("lock clients did not stop")
	}
	secs := win.measured()
	r.res.DurationS = secs
	r.res.Ops = acquired
	if secs > 0 {
		r.res.Throughput = float64(acquired) / secs
	}
	r.res.Latency = all.Summary()
	r.res.Violations = i64(violations.Load())
	return nil
}

// acquire runs one acquisition: it returns the path of its lock child (to
// be deleted) and whether the lock was acquired before deadline.
func (r *runner) acquire(c *Conn, evs chan string, dir string, deadline int64) (string, bool, error) {
	to := r.cfg.OpTimeout
	var cr jute.CreateResponse
	err := c.Do(jute.OpCreate, &jute.CreateRequest{Path: dir + "/lock-", ACL: openACL, Flags: jute.FlagEphemeralSequential}, &cr, to)
	if err != nil {
		return "", false, err
	}
	me := cr.Path
	name := me[strings.LastIndexByte(me, '/')+1:]
	for attempt := 0; attempt < 100_000; attempt++ {
		var gc jute.GetChildrenResponse
		if err := c.Do(jute.OpGetChildren, &jute.GetChildrenRequest{Path: dir}, &gc, to); err != nil {
			return me, false, err
		}
		sort.Strings(gc.Children) // same prefix, 10-digit counters
		idx := sort.SearchStrings(gc.Children, name)
		if idx == len(gc.Children) || gc.Children[idx] != name {
			return me, false, fmt.Errorf("own lock node %s missing", me)
		}
		if idx == 0 {
			return me, true, nil
		}
		pred := dir + "/" + gc.Children[idx-1]
		err := c.Do(jute.OpExists, &jute.ExistsRequest{Path: pred, Watch: true}, nil, to)
		if errors.Is(err, jute.ErrNoNode) {
			continue
		}
		if err != nil {
			return me, false, err
		}
		// Wait for the predecessor's event; stale events of earlier
		// predecessors are skipped.
		for {
			left := deadline - nanotime()
			if left <= 0 {
				return me, false, errors.New("lock timeout")
			}
			t := time.NewTimer(time.Duration(left))
			select {
			case p := <-evs:
				t.Stop()
				if p != pred {
					continue
				}
			case <-c.Done():
				t.Stop()
				return me, false, c.Err()
			case <-t.C:
				return me, false, errors.New("lock timeout")
			}
			break
		}
	}
	return me, false, errors.New("too many attempts")
}
