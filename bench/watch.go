package bench

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
)

// watcher is one watching session.
type watcher struct {
	c       *Conn
	armed   atomic.Int64 // round whose watch is set, 0 if none
	arrival atomic.Int64 // nanotime of this round's notification, 0 if none
}

// runWatch: every round each watcher sets a data watch on one znode
// (getData with watch), then the admin session writes the znode and the
// round waits until every watcher was notified or -watch-timeout passed.
// The latency of a notification is the time from the write's reply to its
// arrival (0 if it arrived first: a server may notify before it answers);
// the time from the write's send is reported too. A notification that does
// not arrive within the round counts as lost.
func (r *runner) runWatch() error {
	cfg := r.cfg
	node := cfg.Prefix + "/watch"
	value := make([]byte, cfg.ValueSize)
	setup := time.Now()
	if err := r.create(node, value, jute.FlagPersistent); err != nil {
		return err
	}
	r.res.Unit = "notifications"
	r.res.Params["watchers"] = cfg.Watchers
	r.res.Params["value_size"] = cfg.ValueSize

	n := cfg.Watchers
	ws := make([]*watcher, n)
	var round atomic.Int64
	var received, late, other atomic.Int64
	allIn := make(chan struct{}, 1)
	var expected atomic.Int64
	r.logf("opening %d watching sessions", n)
	conns, failed, _, err := r.dialAll(n, func(i int) ConnOptions {
		w := &watcher{}
		ws[i] = w
		return ConnOptions{OnWatch: func(ev *jute.WatcherEvent, at int64) {
			if ev.Type != jute.EventNodeDataChanged || ev.Path != node {
				other.Add(1)
				return
			}
			if cur := round.Load(); w.armed.CompareAndSwap(cur, 0) && cur != 0 {
				w.arrival.Store(at)
				if received.Add(1) == expected.Load() {
					select {
					case allIn <- struct{}{}:
					default:
					}
				}
				return
			}
			late.Add(1)
		}}
	})
	defer func() { r.closeAll(conns) }()
	if failed > 0 {
		return fmt.Errorf("%d of %d sessions failed to open: %w", failed, n, err)
	}
	for i, c := range conns {
		ws[i].c = c
	}
	r.res.SetupS = time.Since(setup).Seconds()
	r.logf("%s: warm-up %v, duration %v", cfg.describe(), cfg.Warmup, cfg.Duration)

	var fromReply, fromSend Histogram
	var rounds, notified, lost, armFailed int64
	win := r.newWindow()
	get := &jute.GetDataRequest{Path: node, Watch: true}
	set := &jute.SetDataRequest{Path: node, Data: value, Version: -1}
	armedCh := make(chan struct{}, 1)
	for k := int64(1); k <= cfg.MaxOps && r.ctx.Err() == nil && !win.over(nanotime()); k++ {
		round.Store(k)
		received.Store(0)
		// Arm: one getData with watch per watcher, all in flight at once.
		var replies, armed atomic.Int64
		for _, w := range ws {
			w.arrival.Store(0)
			w := w
			err := w.c.Send(jute.OpGetData, get, func(rep *Reply) {
				if rep.Err == jute.ErrOK {
					w.armed.Store(k)
					armed.Add(1)
				}
				if replies.Add(1) == int64(n) {
					select {
					case armedCh <- struct{}{}:
					default:
					}
				}
			})
			if err != nil {
				replies.Add(1)
			}
		}
		if replies.Load() < int64(n) {
			t := time.NewTimer(cfg.OpTimeout)
			select {
			case <-armedCh:
			case <-t.C:
			}
			t.Stop()
		}
		select { // drop a stale signal
		case <-armedCh:
		default:
		}
		if a := armed.Load(); a < int64(n) {
			armFailed += int64(n) - a
		}
		exp := armed.Load()
		expected.Store(exp)
		select {
		case <-allIn:
		default:
		}
		// Write and wait for the notifications.
		sent := nanotime()
		var replyAt atomic.Int64
		wrote := make(chan jute.ErrCode, 1)
		if err := r.admin.Send(jute.OpSetData, set, func(rep *Reply) {
			replyAt.Store(rep.At)
			wrote <- rep.Err
		}); err != nil {
			return fmt.Errorf("setData %s: %w", node, err)
		}
		t := time.NewTimer(cfg.OpTimeout)
		select {
		case code := <-wrote:
			t.Stop()
			if code != jute.ErrOK {
				return fmt.Errorf("setData %s: %w", node, code)
			}
		case <-t.C:
			return fmt.Errorf("setData %s: no reply within %v", node, cfg.OpTimeout)
		}
		if received.Load() < exp {
			t := time.NewTimer(cfg.WatchTimeout)
			select {
			case <-allIn:
			case <-t.C:
			}
			t.Stop()
		}
		round.Store(-k) // later arrivals count as late
		at := replyAt.Load()
		measured := win.in(at)
		got := int64(0)
		for _, w := range ws {
			if a := w.arrival.Load(); a != 0 {
				got++
				if measured {
					fromReply.Record(a - at)
					fromSend.Record(a - sent)
				}
			}
			w.armed.Store(0)
		}
		lost += exp - got
		if measured {
			rounds++
			notified += got
		}
	}
	if win.over(nanotime()) || r.ctx.Err() != nil {
		r.wait(win) // fixes the end if cancelled
	} else {
		win.end.Store(max(nanotime(), win.warmEnd))
	}
	secs := win.measured()
	r.res.DurationS = secs
	r.res.Rounds = rounds
	r.res.Ops = notified
	r.res.Notifications = notified
	if secs > 0 {
		r.res.Throughput = float64(notified) / secs
	}
	r.res.Latency = fromReply.Summary()
	r.res.FromSend = lat(&fromSend)
	r.res.Lost = i64(lost)
	r.res.Late = late.Load()
	r.addErr("watch not set (getData failed)", armFailed)
	r.addErr("unexpected events", other.Load())
	return nil
}
