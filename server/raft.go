package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/client"

	"github.com/zkraft/zkraft/fleet"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
)

// raftReplica is the replica over a Dragonboat shard: the one place in
// the server that proposes to, reads from and changes the membership of a
// NodeHost's shard, and the only one that sees Dragonboat's request
// states and Lookup results.
type raftReplica struct {
	nh      *dragonboat.NodeHost
	shardID uint64
	srv     *Server // configuration and counters
	cell    *cell   // its leader as last reported, for retries
	// noop is the shard's no-op client session, made once: Dragonboat
	// lets one be used by many goroutines at once.
	noop *client.Session
}

func newRaftReplica(nh *dragonboat.NodeHost, shardID uint64, srv *Server, cl *cell) *raftReplica {
	return &raftReplica{nh: nh, shardID: shardID, srv: srv, cell: cl, noop: nh.GetNoOPSession(shardID)}
}

var _ replica = (*raftReplica)(nil)

// raftProposal is a proposal's Dragonboat request state.
type raftProposal struct{ rs *dragonboat.RequestState }

func (p raftProposal) ready() bool { return len(p.rs.ResultC()) > 0 }

func (p raftProposal) wait(done <-chan struct{}) (*raftsm.Reply, error) {
	select {
	case r := <-p.rs.ResultC():
		p.rs.Release()
		return replyOf(r)
	case <-done:
		return nil, net.ErrClosed
	}
}

func (r *raftReplica) propose(cmd *raftsm.Command) (proposal, error) {
	rs, err := r.proposeRS(cmd)
	if err != nil {
		return nil, err
	}
	return raftProposal{rs}, nil
}

func (r *raftReplica) proposeRS(cmd *raftsm.Command) (*dragonboat.RequestState, error) {
	buf := cmdBufs.get(cmd.EncodedSize())
	data := raftsm.AppendCommand((*buf)[:0], cmd)
	r.srv.counters.proposal(len(data))
	rs, err := r.nh.Propose(r.noop, data, r.srv.cfg.ProposalTimeout)
	// Propose copied data into its log entry (its payload encoding)
	// before it returned: the buffer is free again.
	cmdBufs.put(buf)
	return rs, err
}

// proposeRetry proposes again whenever the leader changes before the
// result arrives (it may have gone to a leader that died).
func (r *raftReplica) proposeRetry(cmd *raftsm.Command, done <-chan struct{}) (rep *raftsm.Reply, retried bool, err error) {
	c := r.cell
	deadline := time.NewTimer(r.srv.cfg.ProposalTimeout)
	defer deadline.Stop()
	for attempt := 0; ; attempt++ {
		changed := c.leaderChanged()
		rs, err := r.proposeRS(cmd)
		if err != nil {
			return nil, attempt > 0, err
		}
		// An attempt that neither completes nor sees a leader change within
		// a few election timeouts is proposed again: it may have gone to a
		// leader that died without this member noticing yet.
		retry := time.NewTimer(r.srv.leaderGrace())
		select {
		case <-retry.C:
			continue
		case res := <-rs.ResultC():
			retry.Stop()
			rs.Release()
			rep, err := replyOf(res)
			if err != nil && res.Dropped() && attempt < 20 {
				// No leader yet: wait for one, then try again.
				if !c.waitServing(r.srv.leaderGrace(), done) {
					return nil, attempt > 0, err
				}
				continue
			}
			return rep, attempt > 0, err
		case <-changed:
			// Try again with the new leader.
			retry.Stop()
		case <-deadline.C:
			retry.Stop()
			return nil, attempt > 0, fmt.Errorf("%w: timeout", errNotCompleted)
		case <-done:
			retry.Stop()
			return nil, attempt > 0, net.ErrClosed
		}
	}
}

var errNotCompleted = errors.New("server: proposal not completed")

func replyOf(r dragonboat.RequestResult) (*raftsm.Reply, error) {
	if !r.Completed() {
		switch {
		case r.Timeout():
			return nil, fmt.Errorf("%w: timeout", errNotCompleted)
		case r.Dropped():
			return nil, fmt.Errorf("%w: dropped", errNotCompleted)
		case r.Terminated():
			return nil, fmt.Errorf("%w: terminated", errNotCompleted)
		case r.Rejected():
			return nil, fmt.Errorf("%w: rejected", errNotCompleted)
		}
		return nil, errNotCompleted
	}
	rep := new(raftsm.Reply)
	if err := jute.Unmarshal(r.GetResult().Data, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// raftTicket is a ReadIndex asked for ahead of the read it serves.
type raftTicket struct{ rs *dragonboat.RequestState }

func (*raftTicket) isReadTicket() {}

// startRead asks for a ReadIndex now; nil if it could not be asked (the
// read then takes the ordinary path).
func (r *raftReplica) startRead() readTicket {
	rs, err := r.nh.ReadIndex(r.shardID, r.srv.cfg.ProposalTimeout)
	if err != nil {
		return nil
	}
	return &raftTicket{rs: rs}
}

// lookup is q as the state machine's Lookup takes it.
func (q readQuery) lookup() any {
	if q.locked {
		return raftsm.LockedReadFunc(func(v raftsm.View) (any, error) { return nil, q.fn(v) })
	}
	return raftsm.ReadFunc(func(v raftsm.View) (any, error) { return nil, q.fn(v) })
}

// read runs q after the ticket's ReadIndex, falling back to a read with
// its own (and its retries) if the ticket did not complete; a local read
// is a StaleRead.
func (r *raftReplica) read(t readTicket, q readQuery) error {
	fn := q.lookup()
	if !q.linearizable {
		_, err := r.nh.StaleRead(r.shardID, fn)
		return err
	}
	if rt, ok := t.(*raftTicket); ok && rt != nil {
		changed := r.cell.leaderChanged()
		select {
		case res := <-rt.rs.ResultC():
			if res.Completed() {
				_, err := r.nh.ReadLocalNode(rt.rs, fn)
				rt.rs.Release()
				return err
			}
			rt.rs.Release()
		case <-changed:
		case <-time.After(r.srv.readRetry()):
		}
	}
	return r.readIndex(fn)
}

// readIndex runs fn after a ReadIndex of its own. A ReadIndex is
// idempotent: if the leader changes (or one that died is still believed
// alive), or it does not complete within readRetry, it asks again.
func (r *raftReplica) readIndex(fn any) error {
	deadline := time.Now().Add(r.srv.cfg.ProposalTimeout)
	for {
		changed := r.cell.leaderChanged()
		rs, err := r.nh.ReadIndex(r.shardID, r.srv.cfg.ProposalTimeout)
		if err != nil {
			return err
		}
		retry := time.NewTimer(r.srv.readRetry())
		select {
		case res := <-rs.ResultC():
			retry.Stop()
			if res.Completed() {
				_, err := r.nh.ReadLocalNode(rs, fn)
				rs.Release()
				return err
			}
			rs.Release()
			if !res.Dropped() || time.Now().After(deadline) || !r.cell.waitServing(r.srv.leaderGrace(), nil) {
				return fmt.Errorf("%w: read index", errNotCompleted)
			}
		case <-changed:
			retry.Stop()
		case <-retry.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: read index timeout", errNotCompleted)
		}
	}
}

func (r *raftReplica) membership(ctx context.Context) (shardMembers, error) {
	m, err := r.nh.SyncGetShardMembership(ctx, r.shardID)
	if err != nil {
		return shardMembers{}, err
	}
	out := shardMembers{voters: map[uint64]string{}, nonVoting: map[uint64]string{}, removed: map[uint64]bool{}, changeID: m.ConfigChangeID}
	for id, addr := range m.Nodes {
		out.voters[id] = addr
	}
	for id, addr := range m.NonVotings {
		out.nonVoting[id] = addr
	}
	for id := range m.Removed {
		out.removed[id] = true
	}
	return out, nil
}

func (r *raftReplica) addReplica(ctx context.Context, id uint64, addr string, nonVoting bool, changeID uint64) error {
	if nonVoting {
		return r.nh.SyncRequestAddNonVoting(ctx, r.shardID, id, addr, changeID)
	}
	return r.nh.SyncRequestAddReplica(ctx, r.shardID, id, addr, changeID)
}

func (r *raftReplica) removeReplica(ctx context.Context, id uint64, changeID uint64) error {
	return r.nh.SyncRequestDeleteReplica(ctx, r.shardID, id, changeID)
}

// systemShard is the member's way to the system shard (the fleet's map):
// beside raftReplica, the only Dragonboat proposals and reads of the
// server, and the one place that sees the map's Lookup result.
type systemShard struct{ nh *dragonboat.NodeHost }

// propose proposes an encoded fleet command and waits for its result.
func (s systemShard) propose(ctx context.Context, b []byte) (fleet.Reply, error) {
	res, err := s.nh.SyncPropose(ctx, s.nh.GetNoOPSession(fleet.SystemShardID), b)
	if err != nil {
		return fleet.Reply{}, err
	}
	return fleet.ParseResult(res)
}

// membership is the system shard's membership.
func (s systemShard) membership(ctx context.Context) (shardMembers, error) {
	return (&raftReplica{nh: s.nh, shardID: fleet.SystemShardID}).membership(ctx)
}

// addNonVoting adds a member's replica (replica id = member id) to the
// system shard as a non-voting one.
func (s systemShard) addNonVoting(ctx context.Context, id uint64, addr string, changeID uint64) error {
	return s.nh.SyncRequestAddNonVoting(ctx, fleet.SystemShardID, id, addr, changeID)
}

// promote makes the member's non-voting replica (replica id = member id)
// of the system shard a voter.
func (s systemShard) promote(ctx context.Context, id uint64, addr string, changeID uint64) error {
	return s.nh.SyncRequestAddReplica(ctx, fleet.SystemShardID, id, addr, changeID)
}

// remove takes the member's replica out of the system shard.
func (s systemShard) remove(ctx context.Context, id uint64, changeID uint64) error {
	return s.nh.SyncRequestDeleteReplica(ctx, fleet.SystemShardID, id, changeID)
}

// readMap reads the map linearizably.
func (s systemShard) readMap(ctx context.Context) (*fleet.Map, error) {
	v, err := s.nh.SyncRead(ctx, fleet.SystemShardID, fleet.MapQuery{})
	if err != nil {
		return nil, err
	}
	return v.(*fleet.Map), nil
}
