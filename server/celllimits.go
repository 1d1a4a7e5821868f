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

// tokenBucket is a cell's request-rate limit: rate tokens a second, as
// many at most in the bucket. A rate of 0 admits everything.
type tokenBucket struct {
	rate atomic.Int64
	mu   struct {
		sync.Mutex
		tokens float64
		at     time.Time
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
	b.mu.Lock()
	now := time.Now()
	if b.mu.at.IsZero() {
		b.mu.tokens, b.mu.at = float64(r), now
	}
	b.mu.tokens = min(float64(r), b.mu.tokens+now.Sub(b.mu.at).Seconds()*float64(r))
	b.mu.at = now
	b.mu.tokens-- // taken now, or owed: a debt is waited off below
	debt := -b.mu.tokens
	b.mu.Unlock()
	if debt <= 0 {
		return true
	}
	t := time.NewTimer(time.Duration(debt / float64(r) * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
