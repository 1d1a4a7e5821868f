package server

import (
	"context"

	"github.com/zkraft/zkraft/raftsm"
)

// replica is the replication layer as the connection pipeline (conn.go,
// reads.go, resumable.go, reconfig.go) and the cell's loops see it: it
// orders commands and serves reads of the applied state. They reach the
// shard only through it; raftReplica (raft.go) implements it over a
// Dragonboat shard, and TestPipelineOrderOverReplica drives the pipeline
// over a state machine applied in process, without Raft.
//
// An implementation keeps what the pipeline's ordering stands on: a
// command's events reach the cell (raftsm.EventSink) before its proposal
// completes, and a linearizable read sees every proposal completed before
// it started.
type replica interface {
	// propose submits cmd; its proposal completes once cmd is applied on
	// this member, or fails. It keeps nothing of cmd once it returns (the
	// reader reuses the request frame that cmd.Body points into).
	propose(cmd *raftsm.Command) (proposal, error)
	// proposeRetry proposes an idempotent cmd, and again whenever it may
	// have been lost (the leader changed), until it completes, the
	// proposal timeout passes, or done closes. retried: a duplicate may
	// have been applied.
	proposeRetry(cmd *raftsm.Command, done <-chan struct{}) (rep *raftsm.Reply, retried bool, err error)
	// startRead starts a linearizable read's round now, for a read that
	// runs later (read with the ticket); nil if it could not.
	startRead() readTicket
	// read runs q.fn on this member's applied state: a linearizable read
	// once the state holds every change committed before it started (t's
	// round, or its own when t is nil), a local one at once.
	read(t readTicket, q readQuery) error
	// membership is the shard's replicas; addReplica and removeReplica
	// change them, one at a time (changeID 0: whatever the current one).
	membership(ctx context.Context) (shardMembers, error)
	addReplica(ctx context.Context, id uint64, addr string, nonVoting bool, changeID uint64) error
	removeReplica(ctx context.Context, id uint64, changeID uint64) error
}

// proposal is a proposed command on its way through the log.
type proposal interface {
	// wait returns the command's reply once it is applied, net.ErrClosed
	// if done closes first.
	wait(done <-chan struct{}) (*raftsm.Reply, error)
	// ready reports whether wait would return at once (the reply has
	// arrived); the pipeline then answers it with the replies before it.
	ready() bool
}

// readTicket is a linearizable read's round started ahead of the read.
type readTicket interface{ isReadTicket() }

// readQuery is one read: fn runs on a view of the applied state.
type readQuery struct {
	fn           func(v raftsm.View) error
	linearizable bool
	// locked: fn runs under the state machine's lock, so the store stays
	// the view's state until it returns (raftsm.LockedReadFunc): what
	// opens the history at the view's zxid needs it.
	locked bool
}

// shardMembers are a shard's replicas by id, with their Raft addresses.
type shardMembers struct {
	voters, nonVoting map[uint64]string
	removed           map[uint64]bool
	changeID          uint64
}

// Read kinds for readValue.
var (
	localRead        = readQuery{}
	linearizableRead = readQuery{linearizable: true}
)

// readValue runs fn through r as a read of kind q (fn replaces q.fn) and
// returns what fn returned: a read's value leaves its closure here, typed,
// and no Lookup result is type-asserted anywhere in the server.
func readValue[T any](r replica, t readTicket, q readQuery, fn func(v raftsm.View) (T, error)) (T, error) {
	var out T
	q.fn = func(v raftsm.View) (err error) {
		out, err = fn(v)
		return err
	}
	err := r.read(t, q)
	return out, err
}

// proposeWait proposes and waits for the reply; done (nil: never) closing
// first gives up with net.ErrClosed (the command may still be applied).
func proposeWait(r replica, cmd *raftsm.Command, done <-chan struct{}) (*raftsm.Reply, error) {
	p, err := r.propose(cmd)
	if err != nil {
		return nil, err
	}
	return p.wait(done)
}
