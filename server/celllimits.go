package server

import (
	"errors"
	"math"
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

// tokenBucket is a cell's request-rate limit: rate tokens a second, as
// many at most in the bucket. A rate of 0 admits everything.
//
// A request that finds no token waits until its debt is paid, rounded up
// to the next point of the rateGrid grid of wall-clock time, and every
// request due at one point waits on one channel, closed by one timer:
// the requests let go together, from every connection of the cell on
// this member (and, the members' clocks agreeing, on its other members)
// reach the cell's shard together and share Raft appends, messages and
// fsyncs on each replica. Let go one by one, evenly spaced, each takes
// its own: a cell held at 600 writes/s made its 3 members fsync 750 to
// 1,170 times a second, 510 to 540 on a 20 ms grid, and a cell held at
// 180 made them fsync 89-96 times a second on the 20 ms grid, 20-22 on
// its 100 ms one (docs/cells.md, "Where a neighbour held at its rate
// costs", "The release grid follows the rate"). The rate is kept: the
// debts are the same, only the moment each is let go moves, by less than
// one step of the grid.
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
		// release holds each grid point (Unix nanoseconds) that requests
		// wait for; its timer closes its channel and removes it.
		release map[int64]*ratePoint
		// epoch is the last point let go (0: none yet) and share the
		// tokens each connection let go there may then take at once
		// (rateTurn).
		epoch int64
		share int
	}
}

// ratePoint is a grid point requests wait for: n of them on ch, retry of
// which have not taken their token yet (rateTurn).
type ratePoint struct {
	ch    chan struct{}
	n     int
	retry int
}

// rateTurn is one connection's part in its cell's bucket (its reader's
// alone: no lock). Requests let go together at a point come back at once
// with the next request of each connection, and the tokens the bucket
// refilled while they waited for the point would go to the first to come
// back, request after request (a connection's requests are pipelined):
// a cell held to 60 a second per member with 2 connections there, on a
// 100 ms grid, gave one of them five of every six tokens, and its p99 of
// 0.55 s rose to 1.0-1.6 s. So a connection let go at a point takes at
// most its share of the tokens left there (those tokens over the requests
// let go, rounded up) at once; past it, its next request waits for the
// next point without a token and takes one there.
type rateTurn struct {
	epoch int64 // the point this connection was last let go at
	took  int   // the requests it took at once since
}

func (b *tokenBucket) setRate(r int64) { b.rate.Store(r) }

// limited reports whether a rate is set (wait may then block).
func (b *tokenBucket) limited() bool { return b.rate.Load() > 0 }

// wait takes a token, waiting until one is there or done closes (false).
// turn is the connection's (nil: a caller without one, never held to a
// share).
func (b *tokenBucket) wait(done <-chan struct{}, turn *rateTurn) bool {
	r := b.rate.Load()
	if r <= 0 {
		return true
	}
	clock := b.now
	if clock == nil {
		clock = time.Now
	}
	released := false // let go at a point without a token: take it, uncounted
	for {
		b.mu.Lock()
		now := clock()
		b.refillLocked(now, r)
		wall := now.UnixNano()
		grid := int64(rateGrid(r))
		if !released && turn != nil && b.mu.epoch != 0 && turn.epoch == b.mu.epoch && turn.took >= b.mu.share {
			// Past its share of the point it was let go at: the next
			// point, no token taken.
			point := wall/grid*grid + grid
			if !b.waitLocked(point, wall, true, clock, r, turn, done) {
				return false
			}
			released = true
			continue
		}
		b.mu.tokens-- // taken now, or owed: a debt is waited off below
		debt := -b.mu.tokens
		if debt <= 0 {
			if !released && turn != nil && b.mu.epoch != 0 && turn.epoch == b.mu.epoch {
				turn.took++
			}
			b.mu.Unlock()
			return true
		}
		// The grid point at or after the debt is paid: from the same
		// reading of the clock, so the wait is the debt's and less than
		// one grid step more whatever the wall clock does between two
		// requests.
		due := wall + int64(debt/float64(r)*float64(time.Second))
		point := (due + grid - 1) / grid * grid
		return b.waitLocked(point, wall, false, clock, r, turn, done)
	}
}

// waitLocked waits for point (Unix nanoseconds, after wall), the first
// request due there starting its timer; it unlocks mu. retry: the request
// has not taken its token.
func (b *tokenBucket) waitLocked(point, wall int64, retry bool, clock func() time.Time, r int64, turn *rateTurn, done <-chan struct{}) bool {
	pt, waiting := b.mu.release[point]
	if !waiting {
		if b.mu.release == nil {
			b.mu.release = map[int64]*ratePoint{}
		}
		pt = &ratePoint{ch: make(chan struct{})}
		b.mu.release[point] = pt
	}
	pt.n++
	if retry {
		pt.retry++
	}
	b.mu.Unlock()
	if !waiting {
		// The first request due at point starts its timer (not under mu:
		// a leaf lock). It sets the share of the tokens left there of
		// each connection let go.
		fire := func() {
			b.mu.Lock()
			delete(b.mu.release, point)
			b.refillLocked(clock(), r)
			b.mu.epoch = point
			b.mu.share = max(1, int(math.Ceil((b.mu.tokens-float64(pt.retry))/float64(pt.n))))
			b.mu.Unlock()
			close(pt.ch)
		}
		if !b.after(time.Duration(point-wall), fire) {
			fire()
		}
	}
	select {
	case <-pt.ch:
		if turn != nil {
			turn.epoch, turn.took = point, 0
		}
		return true
	case <-done:
		return false
	}
}

// refillLocked adds the tokens of the time since the last reading of the
// clock (a full bucket at the first).
func (b *tokenBucket) refillLocked(now time.Time, r int64) {
	if b.mu.at.IsZero() {
		b.mu.tokens, b.mu.at = float64(r), now
	}
	if now.After(b.mu.at) {
		b.mu.tokens = min(float64(r), b.mu.tokens+now.Sub(b.mu.at).Seconds()*float64(r))
		b.mu.at = now
	}
}
