package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/bench"
)

// roundStart tells a watcher to arm for round k; done closes when the
// round is over.
type roundStart struct {
	k    int64
	done <-chan struct{}
}

type armed struct {
	k   int64
	err error
}

type arrival struct {
	k   int64
	at  time.Time
	ev  zk.Event
	idx int
}

// runWatch is the fan-out workload. Each round every watcher session sets
// a data watch on one znode (getData with watch, as a client that reads
// and watches), the writer (the set-up session) sets the znode, and the
// round waits until every armed watcher was notified or -watch-timeout
// passed since the write's reply. A notification's latency is from that
// reply to its arrival at the watcher's goroutine (0, counted apart, if it
// came first); the time from the write's send is kept too. An armed
// watcher not notified in time counts as lost.
func (r *runner) runWatch(ctx context.Context, writer *zk.Conn, addrs []string, p *plan, setupStart time.Time) error {
	o, run := r.o, r.run
	n := p.watchers
	path := root + "/watch"
	conns, err := r.openSessions(ctx, addrs, n)
	defer closeAll(conns)
	if err != nil {
		return err
	}
	run.SetupS = time.Since(setupStart).Seconds()

	arms := make(chan armed, 2*n)
	arrivals := make(chan arrival, 2*n)
	starts := make([]chan roundStart, n)
	var wg sync.WaitGroup
	for i, c := range conns {
		starts[i] = make(chan roundStart, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rs := range starts[i] {
				_, _, ch, err := c.GetW(path)
				arms <- armed{k: rs.k, err: err}
				if err != nil {
					continue
				}
				select {
				case ev := <-ch:
					arrivals <- arrival{k: rs.k, at: time.Now(), ev: ev, idx: i}
				case <-rs.done:
					// Not notified in this round: the next round arms a new
					// watch; a late event for this one shows up as late.
				}
			}
		}()
	}

	type winResult struct {
		w   *window
		err error
	}
	winCh := make(chan winResult, 1)
	go func() {
		w, err := r.window(ctx)
		winCh <- winResult{w, err}
	}()

	var fromReply, fromSend bench.Histogram
	st := &Watch{Watchers: n}
	var notified int64
	errCount := map[string]int64{}
	fail := func(err error) {
		name := errName(err)
		if _, ok := errCount[name]; !ok && len(errCount) >= 20 {
			name = "other errors"
		}
		errCount[name]++
		if r.phase.Load() == phaseMeasure {
			run.ErrorsInWindow++
		}
	}
	armTimeout := 30 * time.Second
	for k := int64(1); k <= o.maxOps && ctx.Err() == nil && r.phase.Load() != phaseOver; k++ {
	drain:
		for { // what an earlier round left: arrivals after its timeout
			select {
			case <-arms:
			case <-arrivals:
				st.Late++
			default:
				break drain
			}
		}
		done := make(chan struct{})
		want := 0
		for i := range starts {
			select {
			case starts[i] <- roundStart{k: k, done: done}:
				want++
			default: // still busy with an earlier round
				st.ArmFailed++
				fail(errors.New("watcher still busy with an earlier round"))
			}
		}
		armedOK := 0
		timer := time.NewTimer(armTimeout)
	arm:
		for got := 0; got < want; {
			select {
			case a := <-arms:
				if a.k != k {
					continue
				}
				got++
				if a.err != nil {
					st.ArmFailed++
					fail(fmt.Errorf("getData with watch: %w", a.err))
					continue
				}
				armedOK++
			case <-timer.C:
				st.ArmFailed += int64(want - got)
				fail(fmt.Errorf("%d watchers not armed within %v", want-got, armTimeout))
				break arm
			}
		}
		timer.Stop()
		sent := time.Now()
		_, err := writer.Set(path, p.value, -1)
		replied := time.Now()
		measured := r.phase.Load() == phaseMeasure
		if err != nil {
			fail(fmt.Errorf("setData: %w", err))
			close(done)
			if errors.Is(err, zk.ErrClosing) || errors.Is(err, zk.ErrConnectionClosed) {
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		got := 0
		timer = time.NewTimer(o.watchTimeout)
	collect:
		for got < armedOK {
			select {
			case a := <-arrivals:
				if a.k != k {
					st.Late++
					continue
				}
				got++
				if a.ev.Type != zk.EventNodeDataChanged {
					fail(fmt.Errorf("watch event %v (%v)", a.ev.Type, a.ev.Err))
					continue
				}
				d := a.at.Sub(replied)
				if d < 0 {
					st.BeforeReply++
					d = 0
				}
				if measured {
					fromReply.RecordDuration(d)
					fromSend.RecordDuration(a.at.Sub(sent))
					notified++
				}
			case <-timer.C:
				break collect
			}
		}
		timer.Stop()
		st.Lost += int64(armedOK - got)
		close(done)
		if measured {
			st.Rounds++
		}
	}
	res := <-winCh // the window ends on its own time even if the loop ended first
	r.stopping.Store(true)
	for _, s := range starts {
		close(s)
	}
	if !waitTimeout(&wg, 15*time.Second) {
		r.closing.Store(true)
		closeAll(conns)
		if !waitTimeout(&wg, 10*time.Second) {
			run.WorkersNotStopped = n
			return errors.New("watchers did not stop within 25 s")
		}
	}
	if res.err != nil {
		return res.err
	}
	for name, c := range errCount {
		r.countErr(name, c)
	}
	if st.Lost > 0 {
		r.countErr("watch: notification lost", st.Lost)
	}
	r.finish(res.w, uint64(notified), &fromReply)
	st.FromSend = fromSend.Summary()
	run.Watch = st
	return nil
}
