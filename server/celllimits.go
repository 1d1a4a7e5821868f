package server

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/fleet"
	"github.com/zkraft/zkraft/jute"
)

// A cell's limits (fleet.Limits, from the map; 0 is unlimited), enforced
// by the member that holds the client's connection, for that cell only:
//
//   - znodes and data bytes: a create (or multi) when the cell holds
//     MaxZnodes znodes, a create, setData or multi that would take its data
//     past MaxDataBytes, is answered QUOTAEXCEEDED, through an error txn as
//     ZooKeeper answers its own quota's refusals (it takes a zxid);
//   - sessions: a new session when the cell has MaxSessions is refused (the
//     connection closes, as ZooKeeper closes one it will not serve);
//   - watches: a read that may set a watch when the cell has MaxWatches
//     closes its connection;
//   - request rate: each of the cell's connections takes a token from the
//     cell's bucket (MaxRequestRate a second, as many in a burst) before a
//     request is read on; without one it waits, so an over-eager cell
//     slows only its own clients.
//
// The counts are the member's view (the cell's figures as applied here),
// checked before proposing: writes in flight when a limit is reached may
// take the cell a little past it. Exact limits would be checked in the
// state machine.

// errWatchLimit closes a connection whose read would pass the cell's
// watch limit.
var errWatchLimit = errors.New("server: the cell has its maximum of watches")

// cellLimits returns the cell's limits (zero: none).
func (c *cell) cellLimits() fleet.Limits {
	if l := c.limits.Load(); l != nil {
		return *l
	}
	return fleet.Limits{}
}

// setLimits replaces the cell's limits.
func (c *cell) setLimits(l fleet.Limits) {
	if cur := c.limits.Load(); cur != nil && *cur == l {
		return
	}
	c.limits.Store(&l)
	c.rate.setRate(l.MaxRequestRate)
}

// isCreate says whether op adds a znode.
func isCreate(op jute.OpCode) bool {
	switch op {
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
		return true
	}
	return false
}

// overQuota says whether a write of op with body is over the cell's znode
// or data limits.
func (c *cell) overQuota(op jute.OpCode, body []byte) bool {
	l := c.cellLimits()
	grows := isCreate(op) || op == jute.OpMulti
	adds := grows || op == jute.OpSetData
	if (l.MaxZnodes == 0 || !grows) && (l.MaxDataBytes == 0 || !adds) {
		return false
	}
	nodes, _, size := c.treeCounts()
	if l.MaxZnodes > 0 && grows && nodes >= l.MaxZnodes {
		return true
	}
	return l.MaxDataBytes > 0 && adds && size+int64(len(body)) > l.MaxDataBytes
}

// sessionsFull says whether the cell has reached its session limit.
func (c *cell) sessionsFull() bool {
	l := c.cellLimits()
	return l.MaxSessions > 0 && int64(c.tracker.Len()) >= l.MaxSessions
}

// watchesFull says whether the cell has reached its watch limit on this
// member.
func (c *cell) watchesFull() bool {
	l := c.cellLimits()
	return l.MaxWatches > 0 && c.watches.entries.Load() >= l.MaxWatches
}

// The grid of wall-clock time on which the requests a cell's request rate
// holds back are let go (tokenBucket.wait): rateGridBatch requests' worth
// of the rate, at least rateGridMin and at most rateGridMax, so that a
// cell held to a low rate still lets several requests go at each point
// (one Raft append, one round of messages and one fsync on each replica
// for all of them) and none moves by more than rateGridMax. The grid is a
// function of the rate alone, and a cell's rate is the same on each of its
// members: their points coincide, as their clocks do.
const (
	rateGridMin   = 20 * time.Millisecond
	rateGridMax   = 100 * time.Millisecond
	rateGridBatch = 8
)

// rateGrid returns the release grid of a rate of r requests a second (r > 0).
func rateGrid(r int64) time.Duration {
	return min(rateGridMax, max(rateGridMin, time.Duration(rateGridBatch*int64(time.Second)/r)))
}

type tokenBucket struct {
	rate atomic.Int64
	// now is time.Now when nil; after is the server's routines.afterFunc
	// (set by newCell). Tests replace both. after false: refused, the
	// server stops, and the requests due go at once.
	now   func() time.Time
	after func(d time.Duration, fn func()) bool
	mu    struct {
		sync.Mutex
		tokens float64
		at     time.Time
		// release holds the channel of each grid point (Unix
		// nanoseconds) that requests wait for; its timer closes and
		// removes it.
		release map[int64]chan struct{}
	}
}

func (b *tokenBucket) setRate(r int64) { b.rate.Store(r) }

// limited reports whether a rate is set (wait may then block).
func (b *tokenBucket) limited() bool { return b.rate.Load() > 0 }

// wait takes a token, waiting until one is there or done closes (false).
func (b *tokenBucket) wait(done <-chan struct{}) bool {
	r := b.rate.Load()
	if r <= 0 {
		return true
	}
	clock := b.now
	if clock == nil {
		clock = time.Now
	}
	b.mu.Lock()
	now := clock()
	if b.mu.at.IsZero() {
		b.mu.tokens, b.mu.at = float64(r), now
	}
	b.mu.tokens = min(float64(r), b.mu.tokens+now.Sub(b.mu.at).Seconds()*float64(r))
	b.mu.at = now
	b.mu.tokens-- // taken now, or owed: a debt is waited off below
	debt := -b.mu.tokens
	if debt <= 0 {
		b.mu.Unlock()
		return true
	}
	// The grid point at or after the debt is paid: from the same reading
	// of the clock, so the wait is the debt's and less than one grid step
	// more whatever the wall clock does between two requests.
	wall := now.UnixNano()
	due := wall + int64(debt/float64(r)*float64(time.Second))
	grid := int64(rateGrid(r))
	point := (due + grid - 1) / grid * grid
	ch, waiting := b.mu.release[point]
	if !waiting {
		if b.mu.release == nil {
			b.mu.release = map[int64]chan struct{}{}
		}
		ch = make(chan struct{})
		b.mu.release[point] = ch
	}
	b.mu.Unlock()
	if !waiting {
		// The first request due at point starts its timer (not under mu:
		// a leaf lock).
		fire := func() {
			b.mu.Lock()
			delete(b.mu.release, point)
			b.mu.Unlock()
			close(ch)
		}
		if !b.after(time.Duration(point-wall), fire) {
			fire()
		}
	}
	select {
	case <-ch:
		return true
	case <-done:
		return false
	}
}
