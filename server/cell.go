package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4/raftio"

	"github.com/zkraft/zkraft/fleet"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/session"
)

// cell is one namespace: a Raft shard, its watch registry and its sessions
// as this member sees them.
type cell struct {
	srv       *Server
	name      string       // the cell's name in the fleet's map (fleet.DefaultCell for today's namespace)
	log       *slog.Logger // the member's logger, naming the cell
	rep       replica      // the shard: proposals, reads, membership (replica.go)
	shardID   uint64
	replicaID uint64

	zxid     atomic.Int64  // last zxid applied on this member
	leader   atomic.Bool   // this member leads the shard
	leaderID atomic.Uint64 // the shard's leader as last reported, 0 if none
	resets   atomic.Int64  // states installed from another replica's snapshot (conn.resetsAtAccept)
	// reqs are the request figures of the connections of the cell's
	// ports (srvr, stat, mntr; Prometheus with the cell label).
	reqs cellCounters

	// limits are the cell's quotas from the fleet's map (nil or zero
	// fields: unlimited); the default cell has none unless set.
	limits atomic.Pointer[fleet.Limits]
	rate   tokenBucket // MaxRequestRate (celllimits.go)

	// localReads: a local read is linearizable, so reads skip the
	// ReadIndex (reads.go). Set on a standalone member once a ReadIndex
	// has caught it up after its start: its replica is then the only
	// voter, it can only be leader, and a write is acknowledged only once
	// applied here, so the applied state holds every acknowledged write.
	localReads atomic.Bool

	leaderGen  atomic.Uint64 // bumps on every leader change, for the grace timer
	lastLeader atomic.Uint64 // the last leader known (never 0 once one was)
	servingMu  sync.Mutex
	servingCh  chan struct{} // closed when a leader becomes known
	changeCh   chan struct{} // closed at the next leader change
	ids        *session.IDGenerator
	alive      session.KeepAlives
	tracker    *session.Tracker
	watches    *registry
	resumables *resumables
	// sessions batches the handshakes of proxied channels
	// (sessionbatch.go).
	sessions *sessionBatcher

	// mu guards the session-to-connection table and the index of each
	// session's last keep-alive applied here (sent with expiries, so the
	// state machine can refuse one decided on a stale view).
	mu struct {
		sync.Mutex
		owners map[int64]*conn
		seen   map[int64]uint64
	}
}

var _ raftsm.EventSink = (*cell)(nil)

// newCell makes the member's side of the cell name, whose replica here is
// replicaID of shardID. Session ids take the member's id (myid) in their
// top byte, not the replica id: a cell's replica ids are allocated per cell
// and grow with moves, the member id stays within 1..254 and differs
// between the members that host a cell.
func newCell(s *Server, name string, shardID, replicaID uint64) *cell {
	c := &cell{
		srv:        s,
		name:       name,
		log:        s.log.With("cell", name),
		shardID:    shardID,
		replicaID:  replicaID,
		ids:        session.NewIDGenerator(uint8(s.cfg.ReplicaID), time.Now().UnixMilli()),
		tracker:    session.NewTracker(session.SystemClock{}, s.cfg.TickTime),
		watches:    newRegistry(),
		resumables: newResumables(),
	}
	c.rate.after = s.routines.afterFunc
	c.sessions = newSessionBatcher(c)
	c.mu.owners = map[int64]*conn{}
	c.mu.seen = map[int64]uint64{}
	return c
}

// Applied takes the events of one Update (see raftsm.EventSink): watch
// notifications are queued on their connections before the proposers learn
// their results, so a client sees an event before any reply showing the
// change.
//
// The cell's zxid (what a ping's reply and the member-local reads carry) is
// published last, once every notification of the Update is queued: a
// client that saw zxid Z in any reply has been sent every notification of
// a change up to Z first, so a setWatches from Z after a reconnect misses
// nothing (go-zookeeper takes its last zxid from ping replies too).
func (c *cell) Applied(shardID uint64, zxid int64, events []raftsm.Event) {
	defer c.zxid.Store(zxid)
	c.resumables.applied(events)
	for i := range events {
		ev := &events[i]
		switch ev.Kind {
		case raftsm.EventWatch:
			if h := c.srv.triggerHook.Load(); h != nil {
				(*h)(ev.Zxid, ev.Path)
			}
			c.watches.trigger(ev.Zxid, ev.Type, ev.Path, ev.ACL)
		case raftsm.EventSessionCreated:
			c.tracker.Add(ev.Session, time.Duration(ev.Timeout)*time.Millisecond)
			c.seen(ev.Index, ev.Session)
		case raftsm.EventSessionClosed:
			c.srv.auditEphemerals(events[:i], ev) // audit.go
			c.tracker.Remove(ev.Session)
			c.mu.Lock()
			delete(c.mu.seen, ev.Session)
			owner := c.mu.owners[ev.Session]
			delete(c.mu.owners, ev.Session)
			c.mu.Unlock()
			if owner != nil {
				owner.sessionClosed()
			}
		case raftsm.EventReset:
			c.watches.reset(ev.Zxid)
			// The state came from another replica's snapshot: watches here
			// may have missed changes and sessions differ. Clients reconnect
			// (re-sending their watches) and the tracker is rebuilt. Only
			// the connections accepted before this reset are closed (see
			// conn.resetsAtAccept): one accepted since, which the closing
			// goroutine may find when it runs late, has seen only the new
			// state and keeps its connection.
			n := c.resets.Add(1)
			c.srv.routines.start(func() { c.srv.closeClientsBeforeReset(c, n) })
			c.srv.routines.start(c.reloadSessions)
		case raftsm.EventKeepAlive:
			c.tracker.Touch(ev.Sessions...)
			c.seen(ev.Index, ev.Sessions...)
		case raftsm.EventSessionAttached:
			// The session moved to another connection, here or on another
			// member: the connection that held it here is closed, as
			// ZooKeeper closes a moved session's old connection.
			c.tracker.Touch(ev.Session)
			c.seen(ev.Index, ev.Session)
			c.mu.Lock()
			old := c.mu.owners[ev.Session]
			if old != nil && old.owner != ev.Owner {
				delete(c.mu.owners, ev.Session)
			} else {
				old = nil
			}
			c.mu.Unlock()
			if old != nil {
				old.closeAfterFlush()
			}
		}
	}
}

func (c *cell) leaderUpdated(info raftio.LeaderInfo) {
	prev := c.leaderID.Swap(info.LeaderID)
	was := c.leader.Load()
	now := info.LeaderID == c.replicaID
	c.leader.Store(now)
	log := c.log
	if prev != info.LeaderID {
		log.Info("leader changed", "shard", c.shardID, "leader", info.LeaderID, "previous", prev, "term", info.Term)
		c.srv.metrics.leaderChanged(prev, info.LeaderID, info.Term)
	}
	if now && !was {
		// A new leader gives every session a full timeout before expiring
		// any: it reloads them from the state machine and extends them.
		c.srv.routines.start(c.reloadSessions)
	}
	if prev != info.LeaderID {
		c.notifyLeaderChange()
	}
	if info.LeaderID != 0 {
		if last := c.lastLeader.Swap(info.LeaderID); last != 0 && last != info.LeaderID {
			// Requests already on their way to the old leader would wait
			// for their timeout (its entries may be lost): connections
			// with requests in flight are closed now, so those clients
			// retry at once (idle ones stay). A leader that stepped down
			// (no leader for a while) and was elected again keeps its log,
			// so the requests it holds complete: nothing is closed then.
			c.srv.routines.start(func() { c.srv.closeBusyClients(c) })
		}
	}
	if info.LeaderID == 0 && prev != 0 {
		// Like a ZooKeeper follower that lost its leader, stop serving, but
		// only if no new leader shows up within a grace period: a normal
		// election is over sooner, and clients keep their connections
		// through it (requests wait for the leader). A member cut off for
		// longer closes its clients so they move to a member that can
		// answer.
		gen := c.leaderGen.Add(1)
		c.srv.routines.afterFunc(c.srv.leaderGrace(), func() {
			if c.leaderGen.Load() == gen && !c.serving() {
				c.srv.closeClients(c)
			}
		})
	} else if info.LeaderID != 0 {
		c.leaderGen.Add(1)
		c.notifyServing()
	}
}

// seen records the index of a keep-alive applied here for sessions.
func (c *cell) seen(index uint64, ids ...int64) {
	c.mu.Lock()
	for _, id := range ids {
		if index > c.mu.seen[id] {
			c.mu.seen[id] = index
		}
	}
	c.mu.Unlock()
}

// leaderChanged returns a channel closed at the next leader change.
func (c *cell) leaderChanged() <-chan struct{} {
	c.servingMu.Lock()
	defer c.servingMu.Unlock()
	if c.changeCh == nil {
		c.changeCh = make(chan struct{})
	}
	return c.changeCh
}

func (c *cell) notifyLeaderChange() {
	c.servingMu.Lock()
	ch := c.changeCh
	c.changeCh = nil
	c.servingMu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// notifyServing wakes whoever waits for a leader.
func (c *cell) notifyServing() {
	c.servingMu.Lock()
	ch := c.servingCh
	c.servingCh = nil
	c.servingMu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// waitServing waits until the cell knows a leader, up to limit.
func (c *cell) waitServing(limit time.Duration, done <-chan struct{}) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for !c.serving() {
		c.servingMu.Lock()
		if c.servingCh == nil {
			c.servingCh = make(chan struct{})
		}
		ch := c.servingCh
		c.servingMu.Unlock()
		if c.serving() {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return c.serving()
		case <-done:
			return false
		}
	}
	return true
}

// reloadSessions gives the tracker every stored session with a full
// timeout from now, then extends the sessions it already had.
func (c *cell) reloadSessions() {
	type loaded struct {
		sessions []raftsm.SessionInfo
		applied  uint64
	}
	v, err := readValue(c.rep, nil, localRead, func(v raftsm.View) (loaded, error) {
		ss, err := v.Sessions()
		return loaded{ss, v.Applied()}, err
	})
	if err != nil {
		c.log.Warn("reload sessions", "shard", c.shardID, "err", err)
		c.tracker.ExtendAll()
		return
	}
	sessions := v.sessions
	for _, s := range sessions {
		c.tracker.Add(s.ID, time.Duration(s.Timeout)*time.Millisecond)
		// Every keep-alive stored so far is at or below this index: the
		// fresh full timeout starts from this view.
		c.seen(v.applied, s.ID)
	}
	c.tracker.ExtendAll()
	c.log.Info("sessions reloaded with a full timeout", "shard", c.shardID, "sessions", len(sessions))
}

// serving reports whether the cell knows a leader, i.e. can serve clients.
func (c *cell) serving() bool { return c.leaderID.Load() != 0 }

// sessionLoop proposes keep-alive batches and, on the leader, expiries.
func (c *cell) sessionLoop(ctx context.Context) {
	interval := c.srv.cfg.TickTime / 2
	if interval < 10*time.Millisecond {
		interval = 10 * time.Millisecond
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	// A member whose loop did not run for longer than an election timeout
	// (its process was paused, or starved of CPU) may have been replaced
	// as leader without knowing it yet: its tracker missed every
	// keep-alive applied meanwhile, and an expiry it proposed now would be
	// forwarded to the new leader and applied. So it first gives every
	// session a full timeout, as a new leader does.
	stall := interval + time.Duration(c.srv.cfg.ElectionRTT)*c.srv.cfg.RTT
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		gap := now.Sub(last)
		last = now
		if ids := c.alive.Drain(); len(ids) > 0 {
			c.proposeAsync(&raftsm.Command{Kind: raftsm.KindKeepAlive, Sessions: ids, Time: time.Now().UnixMilli()})
		}
		if !c.leader.Load() {
			continue
		}
		if gap > stall {
			c.tracker.ExtendAll()
			c.log.Info("session loop stalled: sessions extended by a full timeout", "shard", c.shardID, "stalled", gap.Round(time.Millisecond).String())
			continue
		}
		var expire []int64
		for _, id := range c.tracker.Expired() {
			if c.tracker.MarkClosing(id) {
				expire = append(expire, id)
			}
		}
		if len(expire) > 0 {
			c.log.Info("expiring sessions", "shard", c.shardID, "sessions", hexIDs(expire))
			seen := make([]int64, len(expire))
			c.mu.Lock()
			for i, id := range expire {
				seen[i] = int64(c.mu.seen[id])
			}
			c.mu.Unlock()
			c.proposeAsync(&raftsm.Command{Kind: raftsm.KindExpireSessions, Sessions: expire, Seen: seen, Time: time.Now().UnixMilli()})
		}
	}
}

// sweepLoop is ZooKeeper's ContainerManager: on the leader, every check
// interval, it proposes the deletion of empty containers that have had a
// child and of expired TTL nodes (op deleteContainer, session 0).
func (c *cell) sweepLoop(ctx context.Context) {
	c.onLeaderEvery(ctx, c.srv.cfg.ContainerCheckInterval, func() {
		now := time.Now().UnixMilli()
		paths, err := readValue(c.rep, nil, localRead, func(v raftsm.View) ([]string, error) {
			return v.SweepCandidates(now, maxSweepPerInterval)
		})
		if err != nil {
			c.log.Warn("container sweep", "err", err)
			return
		}
		for _, p := range paths {
			c.proposeAsync(&raftsm.Command{Kind: raftsm.KindRequest, Op: jute.OpDeleteContainer, Time: now,
				Body: jute.Marshal(&jute.DeleteContainerRequest{Path: p})})
		}
	})
}

// onLeaderEvery runs fn every interval while this member leads the shard,
// until ctx is done.
func (c *cell) onLeaderEvery(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c.leader.Load() {
			fn()
		}
	}
}

// checkImportLoop makes sure the ensemble compares import records: a member
// whose state was imported and not yet compared proposes its record (to
// whichever member leads); every replica checks it against its own and one
// that differs stops instead of diverging (raftsm.KindCheckImport).
func (c *cell) checkImportLoop(ctx context.Context) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		type rec struct {
			b       []byte
			checked bool
		}
		r, err := readValue(c.rep, nil, localRead, func(v raftsm.View) (rec, error) {
			b, checked, err := v.ImportRecord()
			return rec{b, checked}, err
		})
		if err == nil {
			if r.b == nil || r.checked {
				return
			}
			if c.waitServing(c.srv.leaderGrace(), ctx.Done()) {
				rep, _, err := c.rep.proposeRetry(&raftsm.Command{Kind: raftsm.KindCheckImport, Body: r.b, Time: time.Now().UnixMilli()}, ctx.Done())
				if err == nil && rep.Err == jute.ErrOK {
					c.log.Info("import record compared across the ensemble", "shard", c.shardID)
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// digestLoop makes the ensemble compare its replicas' states: on the
// leader, every DigestCheckInterval, it proposes its digest after the last
// entry it applied (raftsm.KindCheckDigest); a replica whose digest after
// that entry differs stops instead of serving a different tree.
func (c *cell) digestLoop(ctx context.Context) {
	c.onLeaderEvery(ctx, c.srv.cfg.DigestCheckInterval, func() {
		type at struct{ index, digest uint64 }
		a, err := readValue(c.rep, nil, localRead, func(v raftsm.View) (at, error) {
			return at{v.Applied(), v.Digest()}, nil
		})
		if err != nil {
			return
		}
		c.proposeAsync(&raftsm.Command{Kind: raftsm.KindCheckDigest, Body: raftsm.DigestCheck(a.index, a.digest), Time: time.Now().UnixMilli()})
	})
}

// maxSweepPerInterval bounds the deletions one sweep proposes.
const maxSweepPerInterval = 1000

func hexIDs(ids []int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = fmt.Sprintf("0x%x", id)
	}
	return out
}

// proposeAsync proposes a command whose result nobody waits for.
func (c *cell) proposeAsync(cmd *raftsm.Command) {
	p, err := c.rep.propose(cmd)
	if err != nil {
		c.log.Warn("propose", "kind", cmd.Kind.String(), "err", err)
		return
	}
	c.srv.routines.start(func() {
		// Stopping (ctx done): nobody needs to know.
		if _, err := p.wait(c.srv.ctx.Done()); err != nil && c.srv.ctx.Err() == nil {
			c.log.Warn("proposal not completed", "kind", cmd.Kind.String(), "err", err)
		}
	})
}

// attach makes cn the connection of session id on this member, closing the
// one it replaces.
func (c *cell) attach(id int64, cn *conn) {
	c.mu.Lock()
	old := c.mu.owners[id]
	c.mu.owners[id] = cn
	c.mu.Unlock()
	if old != nil && old != cn {
		old.close()
	}
}

// detachAndClose closes the connection that holds session id on this member.
func (c *cell) detachAndClose(id int64) {
	c.mu.Lock()
	old := c.mu.owners[id]
	delete(c.mu.owners, id)
	c.mu.Unlock()
	if old != nil {
		old.close()
	}
}

func (c *cell) detach(id int64, cn *conn) {
	c.mu.Lock()
	if c.mu.owners[id] == cn {
		delete(c.mu.owners, id)
	}
	c.mu.Unlock()
}
