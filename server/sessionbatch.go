package server

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
)

// sessionBatcher gathers the handshakes of a cell's proxied channels
// (createSession and attach) into raftsm.KindSessions batches, so that
// thousands of sessions opening at once, or reattached at once by a proxy
// that lost its member, are a few entries of the log rather than one
// each (at load average 33, a proxy reattaching 3,627 kept sessions
// with one entry each sent 1,627 in 13.9 s and closed the rest at their
// timeout). Measured side by side at load 11 to 22, batches made the
// entries fewer but the reattach no faster (docs/proxy.md, Tests and
// figures): what they buy at higher load is not established.
//
// A handshake queues its op and waits; at most sessionProposers batches
// are in flight, each proposed by a goroutine that takes up to
// raftsm.MaxSessionOps queued ops and goes on while ops wait. A handshake
// that finds a proposer free is proposed at once (a batch of one is the
// single command, as before): batching adds no wait, it only gathers what
// queued behind the batches in flight. Each op gets the result its own
// command would have had (raftsm applies the batch op by op), so the
// handshake answers exactly as before: a wrong password never reaches the
// log (conn.reattach), an expired session gets SESSIONEXPIRED.
//
// Direct clients' handshakes do not use it: each proposes its own
// command, as before.
type sessionBatcher struct {
	cell *cell

	// batches, ops and largest are figures (mntr's and Prometheus's
	// zkraft_session_batches_total, zkraft_session_batch_ops_total,
	// zkraft_session_batch_largest).
	batches, ops, largest atomic.Int64
	// dropped counts the queued handshakes whose connection ended
	// before their batch was proposed (never proposed).
	dropped atomic.Int64

	// hold, when set (tests), is waited on by every proposer before it
	// takes its first batch.
	hold chan struct{}

	// mu guards the queue and the count of proposers.
	mu struct {
		sync.Mutex
		queue     []*sessionWait
		proposers int
	}
}

// sessionProposers bounds the batches in flight per cell: enough that a
// steady stream of handshakes (a load process's 64 in flight, say) is
// pipelined through the log as single handshakes were, few enough that a
// burst of thousands is a few dozen entries, far below Dragonboat's
// proposal queue.
const sessionProposers = 16

// sessionWait is one queued handshake's op and, once done is closed, its
// outcome.
type sessionWait struct {
	op raftsm.SessionOp
	// gone is the handshake's connection's end: closed before the op is
	// taken into a batch, the op is dropped, never proposed.
	gone    <-chan struct{}
	done    chan struct{}
	res     raftsm.SessionResult
	retried bool
	err     error
}

func newSessionBatcher(cl *cell) *sessionBatcher { return &sessionBatcher{cell: cl} }

// submit proposes op in the next batch and waits for its result (the
// error code and zxid its own command would have had); retried: the batch
// was proposed more than once (a create's NODEEXISTS may then be its own
// earlier attempt's). done closing gives up with net.ErrClosed (the op
// may still be applied, as a proposal given up may).
//
// gone is the channel's end (vconn.gone, closed when the proxy closes
// it): an op still queued when it closes is dropped, never proposed.
func (b *sessionBatcher) submit(op raftsm.SessionOp, done, gone <-chan struct{}) (raftsm.SessionResult, bool, error) {
	w := &sessionWait{op: op, gone: gone, done: make(chan struct{})}
	b.mu.Lock()
	b.mu.queue = append(b.mu.queue, w)
	start := b.mu.proposers < sessionProposers
	if start {
		b.mu.proposers++
	}
	b.mu.Unlock()
	if start && !b.cell.srv.routines.start(b.propose) {
		// The server is stopping: fail whatever waits (no proposer takes
		// it now).
		b.mu.Lock()
		b.mu.proposers--
		queue := b.mu.queue
		b.mu.queue = nil
		b.mu.Unlock()
		for _, q := range queue {
			q.err = net.ErrClosed
			close(q.done)
		}
	}
	select {
	case <-w.done:
		return w.res, w.retried, w.err
	case <-done:
		return raftsm.SessionResult{}, false, net.ErrClosed
	case <-gone:
		return raftsm.SessionResult{}, false, net.ErrClosed
	}
}

// propose proposes the queued ops, a batch at a time, until none is
// left.
func (b *sessionBatcher) propose() {
	if b.hold != nil {
		<-b.hold
	}
	for {
		b.mu.Lock()
		n := min(len(b.mu.queue), raftsm.MaxSessionOps)
		if n == 0 {
			b.mu.queue = nil // the backing array of a burst goes with it
			b.mu.proposers--
			b.mu.Unlock()
			return
		}
		batch := b.mu.queue[:n:n]
		b.mu.queue = b.mu.queue[n:]
		b.mu.Unlock()
		if batch = b.live(batch); len(batch) > 0 {
			b.run(batch)
		}
	}
}

// live drops from batch the ops whose connection ended while they queued
// (their handshake gave up: submit returned net.ErrClosed) and returns
// the others. An attach proposed for a channel that is gone would move
// the session to nobody and close the connection that holds it now: in a
// reconnect storm, clients that gave up on a slow address and reconnected
// elsewhere lost that new connection to their own abandoned attach.
func (b *sessionBatcher) live(batch []*sessionWait) []*sessionWait {
	kept := batch[:0]
	for _, w := range batch {
		if w.gone != nil && isClosed(w.gone) {
			b.dropped.Add(1)
			w.err = net.ErrClosed
			close(w.done)
			continue
		}
		kept = append(kept, w)
	}
	return kept
}

// run proposes one batch and hands each op its result. A batch of one is
// proposed as its own command (KindCreateSession or KindAttach).
func (b *sessionBatcher) run(batch []*sessionWait) {
	b.batches.Add(1)
	b.ops.Add(int64(len(batch)))
	for {
		cur := b.largest.Load()
		if int64(len(batch)) <= cur || b.largest.CompareAndSwap(cur, int64(len(batch))) {
			break
		}
	}
	now := time.Now().UnixMilli()
	var cmd *raftsm.Command
	if len(batch) == 1 {
		op := batch[0].op
		cmd = &raftsm.Command{Kind: raftsm.KindCreateSession, Session: op.Session, Timeout: op.Timeout, Owner: op.Owner, Time: now}
		if op.Attach {
			cmd = &raftsm.Command{Kind: raftsm.KindAttach, Session: op.Session, Owner: op.Owner, Time: now}
		}
	} else {
		ops := make(raftsm.SessionOps, len(batch))
		for i, w := range batch {
			ops[i] = w.op
		}
		cmd = &raftsm.Command{Kind: raftsm.KindSessions, Time: now, Body: jute.Marshal(&ops)}
	}
	// Creates and attaches are idempotent as the single commands are
	// (a create's id is this member's own), so the batch may be proposed
	// again across a leader change.
	// The server's context ends the proposals of a stopping server (the
	// batch's handshakes then fail, as their own proposals would have).
	rep, retried, err := b.cell.rep.proposeRetry(cmd, b.cell.srv.ctx.Done())
	results := make(raftsm.SessionResults, len(batch))
	if err == nil {
		if len(batch) == 1 {
			results[0] = raftsm.SessionResult{Err: rep.Err, Zxid: rep.Zxid}
		} else if err = jute.Unmarshal(rep.Body, &results); err == nil && len(results) != len(batch) {
			err = errBatchReply
		}
	}
	for i, w := range batch {
		w.retried, w.err = retried, err
		if err == nil {
			w.res = results[i]
		}
		close(w.done)
	}
}

// errBatchReply: a KindSessions reply without one result per op.
var errBatchReply = errors.New("server: a sessions batch's reply does not match its ops")

// channelGone is the end of c's channel (vconn.gone); nil for a socket.
func (c *conn) channelGone() <-chan struct{} {
	if v, ok := c.nc.(*vconn); ok {
		return v.gone
	}
	return nil
}

// batched is whether c's handshakes go through the cell's batcher: a
// proxy's channel.
func (c *conn) batched() bool {
	_, ok := c.nc.(*vconn)
	return ok && c.cell.sessions != nil && !c.srv.cfg.SingleHandshakes
}
