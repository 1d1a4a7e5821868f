package server

import (
	"sync"
	"sync/atomic"
	"time"
)

// goroutines owns every goroutine the server starts (etcd's GoAttach): the
// go statements and time.AfterFunc calls of this package are in this file
// only (TestGoroutinesHaveOneOwner checks it). start counts a goroutine and
// refuses one once stop has been called; afterFunc does the same for a
// timer's function, and stop cancels the timers that have not fired; wait
// returns once every goroutine counted has ended. Server.Close calls stop,
// ends what runs (cancels the context, closes listeners and connections),
// then wait, before it closes the NodeHost.
//
// A caller whose goroutine is refused does what the goroutine would have
// done that still matters once the server stops (release, close), or
// nothing.
type goroutines struct {
	// mu is held for reading while a goroutine is counted in, for writing
	// by stop: after stop returns, no start succeeds.
	mu struct {
		sync.RWMutex
		stopped bool
	}
	wg      sync.WaitGroup
	running atomic.Int64 // counted and not yet ended

	// timers are the afterFunc timers that have not fired: whoever takes
	// one out (its function when it fires, or stop) ends its count.
	timers struct {
		sync.Mutex
		set map[*time.Timer]struct{}
	}
}

// start runs fn on a new goroutine unless the server is stopping; false:
// refused, fn does not run.
func (g *goroutines) start(fn func()) bool {
	if !g.add() {
		return false
	}
	go func() {
		defer g.done()
		fn()
	}()
	return true
}

func (g *goroutines) add() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.mu.stopped {
		return false
	}
	g.wg.Add(1)
	g.running.Add(1)
	return true
}

func (g *goroutines) done() {
	g.running.Add(-1)
	g.wg.Done()
}

// afterFunc runs fn on its own goroutine after d, unless stop comes first;
// false: refused, the server is stopping.
func (g *goroutines) afterFunc(d time.Duration, fn func()) bool {
	// Under mu's read lock until the timer is in timers: stop, which takes
	// mu, then finds it there.
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.mu.stopped {
		return false
	}
	g.wg.Add(1)
	g.running.Add(1)
	g.timers.Lock()
	defer g.timers.Unlock()
	if g.timers.set == nil {
		g.timers.set = map[*time.Timer]struct{}{}
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		// t is read under timers' lock, held by afterFunc until t is set.
		g.timers.Lock()
		_, mine := g.timers.set[t]
		delete(g.timers.set, t)
		g.timers.Unlock()
		if !mine {
			return // stop took it, and ended its count
		}
		defer g.done()
		fn()
	})
	g.timers.set[t] = struct{}{}
	return true
}

// stop refuses new goroutines and cancels the timers that have not fired.
func (g *goroutines) stop() {
	g.mu.Lock()
	g.mu.stopped = true
	g.mu.Unlock()
	g.timers.Lock()
	pending := g.timers.set
	g.timers.set = nil
	g.timers.Unlock()
	for t := range pending {
		t.Stop()
		g.done()
	}
}

// wait waits for every goroutine counted; call stop first, and end what
// they wait for.
func (g *goroutines) wait() { g.wg.Wait() }

// count is the number of goroutines counted and not yet ended (pending
// timers included).
func (g *goroutines) count() int64 { return g.running.Load() }
