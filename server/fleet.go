package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	dbconfig "github.com/lni/dragonboat/v4/config"

	"github.com/zkraft/zkraft/fleet"
	"github.com/zkraft/zkraft/raftsm"
)

// fleetMember is this member's side of the fleet (docs/cells.md): its
// replica of the system shard, the cell map it applied last, and the cells
// the map places here beside the default one, each a replica on the
// member's one NodeHost served on its own client port.
//
// One goroutine, run, owns the hosted cells: it starts and stops their
// replicas and listeners as the map changes (and once a second, to retry a
// port that could not be bound and to activate a created cell). The map
// arrives through Applied, the system shard's event sink, which only stores
// it and wakes run.
type fleetMember struct {
	s *Server
	// running: this member runs a replica of the system shard (a voter of
	// the default cell that did not join by reconfig), once it opened.
	running  atomic.Bool
	latest   atomic.Pointer[fleet.Map]
	wake     chan struct{} // buffered 1
	leaderID atomic.Uint64 // the system shard's leader, 0 if none
	// importReply is the system shard's answer to this member's
	// ImportDefault, nil until it has one.
	importReply atomic.Pointer[fleet.Reply]

	// mu guards hosted. run changes it; the operator commands read it.
	// Lock order: mu, then a cell's locks, then Server.mu.
	mu struct {
		sync.Mutex
		hosted map[string]*hostedCell // by cell name, never the default cell
	}
}

var _ fleet.EventSink = (*fleetMember)(nil)

// hostedCell is a cell the map places on this member: its replica, its
// loops and its client listener.
type hostedCell struct {
	c         *cell
	spec      fleet.Cell // the map's record when the replica started
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the cell's loops and its accept loop
	ln        net.Listener   // nil while the port could not be bound
	lnErr     error          // why not
	lnPort    uint16
	tlsLn     net.Listener // the TLS port's, when the cell has one and the member serves TLS
	tlsWarned bool         // its trouble is logged once
	stopped   bool
	// move is the leader's progress on the cell's move (run's only): the
	// map version of the move and the zxid every new replica must have
	// reached before a replica is removed (0: not yet taken).
	move struct {
		version int64
		mark    int64
	}
}

// Applied stores the map and wakes run; it runs under the system shard's
// state machine lock and must not block.
func (f *fleetMember) Applied(m *fleet.Map, _ []fleet.Event) {
	f.latest.Store(m)
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// fleetVoters are the system shard's initial members: the default cell's
// voters at bootstrap (a standalone member alone).
func (s *Server) fleetVoters(raftAddr string) map[uint64]dragonboat.Target {
	if s.standalone() {
		return map[uint64]dragonboat.Target{s.cfg.ReplicaID: raftAddr}
	}
	out := map[uint64]dragonboat.Target{}
	for _, m := range s.cfg.Members {
		if !m.Observer {
			out[m.ID] = m.RaftAddr
		}
	}
	return out
}

// startFleet starts this member's replica of the system shard on the
// NodeHost, if it is one of the shard's voters. A system shard that fails
// to open is logged and the member serves the default cell without cells.
func (s *Server) startFleet(nhc dbconfig.NodeHostConfig) {
	f := s.fleet
	if s.ctx.Err() != nil {
		return // closed meanwhile
	}
	// A member that joined by reconfig, and an observer, run a non-voting
	// replica of the system shard: a voter's member adds it (growLoop), so
	// it learns the map and hosts the cells placed on it; it does not vote
	// on the map.
	learner := s.cfg.Join || s.self().Observer
	rc := dbconfig.Config{
		ShardID:            fleet.SystemShardID,
		ReplicaID:          s.cfg.ReplicaID,
		CheckQuorum:        true,
		PreVote:            true,
		ElectionRTT:        s.cfg.ElectionRTT,
		HeartbeatRTT:       s.cfg.HeartbeatRTT,
		SnapshotEntries:    1000,
		CompactionOverhead: 100,
		IsNonVoting:        learner,
	}
	initial := s.fleetVoters(nhc.RaftAddress)
	if learner {
		initial = nil
	}
	gate := newOpenGate()
	gate.verdict <- nil
	factory := gate.factory(fleet.NewFactory(fleet.Config{Dir: filepath.Join(s.cfg.DataDir, "state"), Sink: f}))
	if err := raftCall(func() error {
		return s.nh.StartOnDiskReplica(initial, learner, factory, rc)
	}); err != nil {
		s.log.Error("cells: the system shard did not start; serving the default cell only", "err", err)
		return
	}
	if res := <-gate.opened; res.err != nil {
		s.log.Error("cells: the system shard's store did not open; serving the default cell only",
			"dir", fleet.StoreDir(filepath.Join(s.cfg.DataDir, "state"), fleet.SystemShardID, s.cfg.ReplicaID), "err", res.err)
		s.nh.StopReplica(fleet.SystemShardID, s.cfg.ReplicaID)
		return
	}
	f.running.Store(true)
	if learner {
		s.log.Info("cells: this member runs a non-voting replica of the system shard (it joined by reconfig or observes): it hosts cells once a voter's member adds it")
		s.routines.start(func() { f.joinLoop(nhc.RaftAddress) })
	} else {
		s.routines.start(func() { f.importLoop(nhc.RaftAddress) })
	}
	s.routines.start(f.run)
}

// joinLoop is a learner's (a member that joined by reconfig, or an
// observer): once its replica of the system shard has the map, it proposes
// addMember for itself if the map does not have it yet (a member that
// joined after the bootstrap), so that cells can be placed on it.
func (f *fleetMember) joinLoop(raftAddr string) {
	s := f.s
	self := s.self()
	spec := fleet.MemberSpec{ID: s.cfg.ReplicaID, RaftAddr: raftAddr, ClientHost: clientHostOf(self.ClientAddr, raftAddr)}
	for s.ctx.Err() == nil {
		if m := f.latest.Load(); m != nil {
			if _, ok := m.Member(spec.ID); ok {
				return
			}
			ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ProposalTimeout)
			rep, err := f.propose(ctx, &fleet.AddMember{Member: spec})
			cancel()
			switch {
			case err == nil && rep.OK():
				s.log.Info("cells: this member is in the fleet's map", "version", rep.Version, "clientHost", spec.ClientHost)
				return
			case err == nil:
				s.log.Warn("cells: the fleet's map refused this member; it hosts no cell", "reply", rep.String())
				return
			}
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// growSystemShard is the system shard's leader's duty: every member of the
// default cell (voter or observer, by reconfig or at bootstrap) that has no
// replica of the system shard gets a non-voting one (replica id = member
// id), one membership change a round. None Dragonboat has removed
// (member_remove) is added back; member_promote makes one a voter
// (cellcmds.go).
func (f *fleetMember) growSystemShard() {
	s := f.s
	if f.leaderID.Load() != s.cfg.ReplicaID {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	def, err := s.cell.rep.membership(ctx)
	if err != nil {
		return
	}
	sys, err := systemShard{s.nh}.membership(ctx)
	if err != nil {
		return
	}
	for _, ms := range []map[uint64]string{def.voters, def.nonVoting} {
		ids := make([]uint64, 0, len(ms))
		for id := range ms {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			_, v := sys.voters[id]
			_, nv := sys.nonVoting[id]
			if v || nv || sys.removed[id] {
				continue
			}
			err := systemShard{s.nh}.addNonVoting(ctx, id, ms[id], sys.changeID)
			s.log.Info("cells: a member of the ensemble added to the system shard as a non-voting replica", "member", id, "raftAddr", ms[id], "err", err)
			return
		}
	}
}

// clientHostOf is the client host the map records for a member: the host
// of its client address unless that is empty or a wildcard, else the host
// of its Raft address. Every member derives it from the same zoo.cfg line,
// so they propose the same ImportDefault.
func clientHostOf(clientAddr, raftAddr string) string {
	if h, _, err := net.SplitHostPort(clientAddr); err == nil && h != "" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
			return h
		}
	}
	h, _, _ := net.SplitHostPort(raftAddr)
	return h
}

func portOfAddr(addr string) uint16 {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return 0
	}
	return uint16(n)
}

// importDefault is today's configuration as the map's bootstrap.
func (s *Server) importDefault(raftAddr string) *fleet.ImportDefault {
	// The ports bound (a configured port 0 is the one the kernel chose).
	c := &fleet.ImportDefault{ShardID: s.cfg.ShardID, ClientPort: portOfAddr(s.ln.Addr().String())}
	if a := s.SecureAddr(); a != nil {
		c.TLSPort = portOfAddr(a.String())
	}
	if s.standalone() {
		c.Members = []fleet.MemberSpec{{ID: s.cfg.ReplicaID, RaftAddr: raftAddr, ClientHost: clientHostOf(s.cfg.ClientAddr, raftAddr)}}
		c.Placement.Voters = []uint64{s.cfg.ReplicaID}
		return c
	}
	for _, m := range s.cfg.Members {
		c.Members = append(c.Members, fleet.MemberSpec{ID: m.ID, RaftAddr: m.RaftAddr, ClientHost: clientHostOf(m.ClientAddr, m.RaftAddr)})
		if m.Observer {
			c.Placement.Observers = append(c.Placement.Observers, m.ID)
		} else {
			c.Placement.Voters = append(c.Placement.Voters, m.ID)
		}
	}
	slices.Sort(c.Placement.Voters)
	slices.Sort(c.Placement.Observers)
	return c
}

// importLoop proposes ImportDefault until the system shard answers it. It
// changes nothing once the default cell is imported, so every member
// proposes it at every start.
func (f *fleetMember) importLoop(raftAddr string) {
	cmd := f.s.importDefault(raftAddr)
	for f.s.ctx.Err() == nil {
		rep, err := f.propose(f.s.ctx, cmd)
		if err == nil {
			f.importReply.Store(&rep)
			switch {
			case rep.OK() && rep.Changed:
				f.s.log.Info("cells: the fleet's map imported this configuration", "version", rep.Version, "shard", cmd.ShardID)
			case rep.OK():
			default:
				f.s.log.Warn("cells: the fleet's map refused this configuration; no cell can be placed until it is fixed "+
					"(each member needs its own client host: docs/cells.md, Ports)", "code", rep.Code.String(), "detail", rep.Detail)
			}
			return
		}
		select {
		case <-f.s.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// errNoFleet: this member runs no replica of the system shard.
var errNoFleet = errors.New("server: this member runs no replica of the system shard (cells are not available here)")

// propose proposes a command to the system shard and waits for its reply.
// Dropped proposals (no leader yet) are proposed again until ctx ends:
// every command is safe to repeat (a create repeated is ok, a change
// repeated is refused as a stale version).
func (f *fleetMember) propose(ctx context.Context, cmd fleet.Command) (fleet.Reply, error) {
	if !f.running.Load() {
		return fleet.Reply{}, errNoFleet
	}
	b := fleet.Encode(cmd, time.Now().UnixMilli())
	for {
		pctx, cancel := context.WithTimeout(ctx, f.s.cfg.ProposalTimeout)
		rep, err := systemShard{f.s.nh}.propose(pctx, b)
		cancel()
		if err == nil {
			return rep, nil
		}
		if !errors.Is(err, dragonboat.ErrShardNotReady) && !errors.Is(err, dragonboat.ErrSystemBusy) &&
			!errors.Is(err, dragonboat.ErrTimeout) && !errors.Is(err, dragonboat.ErrAborted) {
			return fleet.Reply{}, err
		}
		select {
		case <-ctx.Done():
			return fleet.Reply{}, fmt.Errorf("%w (%v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readMap reads the map linearizably.
func (f *fleetMember) readMap(ctx context.Context) (*fleet.Map, error) {
	if !f.running.Load() {
		return nil, errNoFleet
	}
	ctx, cancel := context.WithTimeout(ctx, f.s.cfg.ProposalTimeout)
	defer cancel()
	return systemShard{f.s.nh}.readMap(ctx)
}

// run keeps the hosted cells equal to what the map places here, until the
// member stops; then it stops them all.
func (f *fleetMember) run() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-f.s.ctx.Done():
			f.stopAll()
			return
		case <-f.wake:
		case <-t.C:
		}
		if m := f.latest.Load(); m != nil {
			f.reconcile(m)
		}
		f.growSystemShard()
	}
}

// reconcile starts the replicas and listeners of the cells m places here
// and stops (and, for a cell deleted or moved away, removes) the others.
func (f *fleetMember) reconcile(m *fleet.Map) {
	self := f.s.cfg.ReplicaID
	if d, ok := m.Cell(fleet.DefaultCell); ok && d.ShardID == f.s.cell.shardID {
		f.s.cell.setLimits(d.Limits)
	}
	want := map[string]fleet.Cell{}
	for _, c := range m.CellsOn(self) {
		if c.Name != fleet.DefaultCell && c.Serves(self) {
			want[c.Name] = c
		}
	}
	f.mu.Lock()
	var stop []*hostedCell
	for name, h := range f.mu.hosted {
		if c, ok := want[name]; !ok || c.ShardID != h.spec.ShardID {
			stop = append(stop, h)
			delete(f.mu.hosted, name)
		}
	}
	f.mu.Unlock()
	for _, h := range stop {
		// A cell still in the map under the same shard but not served
		// here (deleting, or moved away) and a cell gone from the map
		// alike: this member's replica is done with.
		f.stopCell(h, true)
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c := want[name]
		f.mu.Lock()
		h := f.mu.hosted[name]
		f.mu.Unlock()
		if h == nil {
			var err error
			if h, err = f.startCell(m, c); err != nil {
				f.s.log.Error("cells: replica not started", "cell", c.Name, "shard", c.ShardID, "err", err)
				continue
			}
			f.mu.Lock()
			f.mu.hosted[name] = h
			f.mu.Unlock()
		}
		f.listen(h, c)
		if h.c.leader.Load() {
			f.leaderDuties(m, h, c)
		}
	}
}

// startCell starts this member's replica of c and the cell's loops.
func (f *fleetMember) startCell(m *fleet.Map, c fleet.Cell) (*hostedCell, error) {
	s := f.s
	self := s.cfg.ReplicaID
	rid, _ := c.ReplicaOf(self)
	cl := newCell(s, c.Name, c.ShardID, rid)
	cl.rep = newRaftReplica(s.nh, c.ShardID, s, cl)
	cl.setLimits(c.Limits)
	// The default cell's configuration (ReplicaConfig), on the cell's
	// shard and this member's replica of it.
	cc := s.cfg
	cc.ShardID, cc.ReplicaID = c.ShardID, rid
	rc, smCfg := ReplicaConfig(cc, cl)
	// A voter of the placement the cell was created with starts with
	// those voters as the shard's initial members (Dragonboat ignores
	// them once the replica has state); an observer joins, with no
	// initial members, once the leader added it (leaderDuties).
	members := map[uint64]dragonboat.Target{}
	join := !slices.Contains(c.Placement.Voters, self)
	if join {
		rc.IsNonVoting = slices.Contains(c.Placement.Observers, self) || slices.Contains(c.Target.Observers, self)
	} else {
		for _, v := range c.Placement.Voters {
			x, ok := m.Member(v)
			r, ok2 := c.ReplicaOf(v)
			if !ok || !ok2 {
				return nil, fmt.Errorf("voter %d is not in the map", v)
			}
			members[r] = x.RaftAddr
		}
	}
	gate := newOpenGate()
	f.s.registerCell(cl)
	if err := raftCall(func() error {
		return s.nh.StartOnDiskReplica(members, join, gate.factory(raftsm.NewFactory(smCfg)), rc)
	}); err != nil {
		f.s.unregisterCell(cl)
		return nil, err
	}
	// The cell's store has no WAL of its own either: its Raft log must
	// reach its applied mark, as the default cell's must (checkStores).
	gate.verdict <- checkCellLog(s, c.ShardID, rid, DataDirsOf(s.cfg).StateStore(c.ShardID, rid))
	if res := <-gate.opened; res.err != nil {
		s.nh.StopReplica(c.ShardID, rid)
		f.s.unregisterCell(cl)
		return nil, fmt.Errorf("open its store: %w", res.err)
	}
	h := &hostedCell{c: cl, spec: c}
	h.ctx, h.cancel = context.WithCancel(s.ctx)
	h.start(s, func() { cl.sessionLoop(h.ctx) })
	h.start(s, func() { cl.sweepLoop(h.ctx) })
	// A replica zkraft import --cell filled compares its import record
	// with the cell's other replicas, as an imported default cell does.
	h.start(s, func() { cl.checkImportLoop(h.ctx) })
	if s.cfg.DigestCheckInterval > 0 {
		h.start(s, func() { cl.digestLoop(h.ctx) })
	}
	cl.log.Info("cell replica started", "shard", c.ShardID, "replica", rid, "join", join, "state", c.State.String())
	return h, nil
}

// start runs fn as one of the cell's goroutines (the server's, counted in
// wg too, so stopCell can wait for them).
func (h *hostedCell) start(s *Server, fn func()) {
	h.wg.Add(1)
	if !s.routines.start(func() {
		defer h.wg.Done()
		fn()
	}) {
		h.wg.Done() // the server is stopping
	}
}

// listen binds the cell's client port on the member's client listen host
// if it is not bound yet. A port that cannot be bound (another process has
// it) is logged, reported by the operator commands and retried: the member
// does not stop.
func (f *fleetMember) listen(h *hostedCell, c fleet.Cell) {
	f.mu.Lock()
	h.spec = c
	f.mu.Unlock()
	h.c.setLimits(c.Limits)
	host, _, _ := net.SplitHostPort(f.s.cfg.ClientAddr)
	f.listenTLS(h, c, host)
	if h.ln != nil && h.lnPort == c.ClientPort {
		return
	}
	if h.ln != nil {
		h.ln.Close()
		h.ln = nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(c.ClientPort)))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if h.lnErr == nil || h.lnErr.Error() != err.Error() {
			h.c.log.Error("cell not served: its client port cannot be bound (retried every second)", "addr", addr, "err", err)
		}
		f.mu.Lock()
		h.lnErr = err
		f.mu.Unlock()
		return
	}
	f.mu.Lock()
	h.ln, h.lnErr, h.lnPort = ln, nil, c.ClientPort
	f.mu.Unlock()
	h.start(f.s, func() { f.s.acceptLoop(ln, h.c) })
	h.c.log.Info("serving cell", "client", ln.Addr().String(), "shard", c.ShardID)
}

// listenTLS binds the cell's TLS port, with the member's TLS settings
// (its secure client port's stores), when the cell has one and the member
// serves TLS; a cell with a TLS port on a member without TLS is logged.
func (f *fleetMember) listenTLS(h *hostedCell, c fleet.Cell, host string) {
	if c.TLSPort == 0 || h.tlsLn != nil {
		return
	}
	if f.s.ops.tls == nil {
		if h.tlsWarned {
			return
		}
		h.tlsWarned = true
		h.c.log.Warn("cell's TLS port not served: this member has no secure client port configured (ssl.keyStore.location)", "tlsPort", c.TLSPort)
		return
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(c.TLSPort)))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if !h.tlsWarned {
			h.tlsWarned = true
			h.c.log.Error("cell's TLS port cannot be bound (retried every second)", "addr", addr, "err", err)
		}
		return
	}
	f.mu.Lock()
	h.tlsLn = ln
	f.mu.Unlock()
	h.start(f.s, func() { f.s.secureAcceptLoop(ln, h.c) })
	h.c.log.Info("serving cell over TLS", "secureClient", ln.Addr().String())
}

// leaderDuties is what the member of a cell's leader does for the map: it
// adds the placement's observers as non-voting replicas and activates a
// created cell once its shard runs.
func (f *fleetMember) leaderDuties(m *fleet.Map, h *hostedCell, c fleet.Cell) {
	ctx, cancel := context.WithTimeout(f.s.ctx, 5*time.Second)
	defer cancel()
	if len(c.Placement.Observers) > 0 {
		mem, err := h.c.rep.membership(ctx)
		if err == nil {
			for _, o := range c.Placement.Observers {
				rid, _ := c.ReplicaOf(o)
				x, ok := m.Member(o)
				if _, in := mem.nonVoting[rid]; in || !ok {
					continue
				}
				if err := h.c.rep.addReplica(ctx, rid, x.RaftAddr, true, mem.changeID); err != nil {
					h.c.log.Warn("cells: add observer", "member", o, "replica", rid, "err", err)
				}
				break // one change per round: the membership's change id moved
			}
		}
	}
	if c.State == fleet.CellMoving {
		f.moveDuties(ctx, m, h, c)
		return
	}
	f.removeStrays(ctx, h, c)
	if c.State == fleet.CellCreating {
		rep, err := f.propose(ctx, &fleet.ActivateCell{Name: c.Name, Expect: c.Updated})
		switch {
		case err != nil:
			h.c.log.Warn("cells: activate", "err", err)
		case rep.OK():
			h.c.log.Info("cell active", "version", rep.Version)
		default:
			h.c.log.Debug("cells: activate refused", "reply", rep.String())
		}
	}
}

// removeStrays takes out of the cell's shard, one membership change a
// round, a replica the map does not give the cell: one a move added before
// it was aborted (abortMove retires its id; its member stops and removes
// it). Left in, an added voter whose member removed its replica would
// count in the shard's quorum and never answer. A replica is a stray only
// by a linearizable read of the map, so a member whose copy of the map
// lags (it has not seen the beginMove that added the replica) removes
// nothing the map still gives: an id the map no longer gives is retired
// and never given again.
func (f *fleetMember) removeStrays(ctx context.Context, h *hostedCell, c fleet.Cell) {
	mem, err := h.c.rep.membership(ctx)
	if err != nil {
		return
	}
	stray := func(c fleet.Cell) (uint64, bool) {
		in := map[uint64]bool{}
		for _, r := range c.Replicas {
			in[r.ID] = true
		}
		var ids []uint64
		for _, ms := range []map[uint64]string{mem.voters, mem.nonVoting} {
			for id := range ms {
				if !in[id] && id < c.NextReplica {
					ids = append(ids, id)
				}
			}
		}
		if len(ids) == 0 {
			return 0, false
		}
		return slices.Min(ids), true
	}
	if _, ok := stray(c); !ok {
		return
	}
	m, err := f.readMap(ctx)
	if err != nil {
		return
	}
	cur, ok := m.Cell(c.Name)
	if !ok || cur.ShardID != c.ShardID {
		return
	}
	id, ok := stray(cur)
	if !ok {
		return
	}
	err = h.c.rep.removeReplica(ctx, id, mem.changeID)
	h.c.log.Info("cells: a replica the map does not give the cell removed from its shard (an aborted move's)", "replica", id, "err", err)
}

// stopCell stops a hosted cell's listener, connections, loops and
// replica; remove also deletes the replica's Raft log and store.
func (f *fleetMember) stopCell(h *hostedCell, remove bool) {
	s := f.s
	h.cancel()
	f.mu.Lock()
	if h.ln != nil {
		h.ln.Close()
	}
	if h.tlsLn != nil {
		h.tlsLn.Close()
	}
	h.stopped = true
	f.mu.Unlock()
	s.closeClients(h.c)
	h.wg.Wait()
	if err := s.nh.StopReplica(h.c.shardID, h.c.replicaID); err != nil && !errors.Is(err, dragonboat.ErrShardNotFound) {
		h.c.log.Warn("cells: stop replica", "err", err)
	}
	s.unregisterCell(h.c)
	if !remove {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		err := s.nh.SyncRemoveData(ctx, h.c.shardID, h.c.replicaID)
		if err == nil {
			break
		}
		if !errors.Is(err, dragonboat.ErrShardNotStopped) {
			h.c.log.Warn("cells: remove the replica's Raft data", "err", err)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	dir := raftsm.StoreDir(filepath.Join(s.cfg.DataDir, "state"), h.c.shardID, h.c.replicaID)
	if err := os.RemoveAll(dir); err != nil {
		h.c.log.Warn("cells: remove the replica's store", "dir", dir, "err", err)
	}
	h.c.log.Info("cell replica removed from this member", "shard", h.c.shardID, "replica", h.c.replicaID)
}

// stopAll stops every hosted cell (the member is stopping; their data stays).
func (f *fleetMember) stopAll() {
	f.mu.Lock()
	hs := make([]*hostedCell, 0, len(f.mu.hosted))
	for _, h := range f.mu.hosted {
		hs = append(hs, h)
	}
	f.mu.hosted = map[string]*hostedCell{}
	f.mu.Unlock()
	for _, h := range hs {
		f.stopCell(h, false)
	}
}

// hostedCell is the hosted cell name, nil if none.
func (f *fleetMember) hostedCell(name string) *hostedCell {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.hosted[name]
}

// hostedState is what the operator commands show of a hosted cell: the
// map's record as the replica last saw it, its listener's address (nil
// while not bound) and why it is not bound.
func (f *fleetMember) hostedState(name string) (spec fleet.Cell, addr net.Addr, lnErr error, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.mu.hosted[name]
	if h == nil {
		return fleet.Cell{}, nil, nil, false
	}
	if h.ln != nil {
		addr = h.ln.Addr()
	}
	return h.spec, addr, h.lnErr, true
}

// moveDuties drives a move (docs/cells.md, Moves) from the member of the
// cell's leader, one Dragonboat membership change per round: it adds the
// target's new voters and observers (their members start their replicas
// with join as soon as the map gives them one), waits until every new
// replica answers srvr on its cell port with a zxid at least the leader's
// once all were added (caught up), removes the replicas the target drops
// (handing the leadership to a target voter first if its own is one), and
// proposes finishMove once the shard's membership is the target's.
func (f *fleetMember) moveDuties(ctx context.Context, m *fleet.Map, h *hostedCell, c fleet.Cell) {
	self := f.s.cfg.ReplicaID
	mem, err := h.c.rep.membership(ctx)
	if err != nil {
		return
	}
	if h.move.version != c.Updated {
		h.move.version, h.move.mark = c.Updated, 0
	}
	addrOf := func(member uint64) string {
		x, _ := m.Member(member)
		return x.RaftAddr
	}
	for _, v := range c.Target.Voters {
		rid, _ := c.ReplicaOf(v)
		if _, ok := mem.voters[rid]; ok {
			continue
		}
		err := h.c.rep.addReplica(ctx, rid, addrOf(v), false, mem.changeID)
		h.c.log.Info("move: voter added", "member", v, "replica", rid, "err", err)
		return
	}
	for _, o := range c.Target.Observers {
		rid, _ := c.ReplicaOf(o)
		if _, ok := mem.nonVoting[rid]; ok {
			continue
		}
		err := h.c.rep.addReplica(ctx, rid, addrOf(o), true, mem.changeID)
		h.c.log.Info("move: observer added", "member", o, "replica", rid, "err", err)
		return
	}
	if h.move.mark == 0 {
		h.move.mark = max(h.c.zxid.Load(), 1)
	}
	for _, n := range c.Target.Members() {
		if c.Placement.Has(n) || n == self {
			continue
		}
		x, _ := m.Member(n)
		addr := net.JoinHostPort(x.ClientHost, strconv.Itoa(int(c.ClientPort)))
		if z, ok := srvrZxid(addr); !ok || z < h.move.mark {
			h.c.log.Debug("move: waiting for a new replica to catch up", "member", n, "zxid", z, "want", h.move.mark)
			return
		}
	}
	for _, r := range c.Replicas {
		if c.Target.Has(r.Member) {
			continue
		}
		_, voter := mem.voters[r.ID]
		_, observer := mem.nonVoting[r.ID]
		if !voter && !observer {
			continue
		}
		if r.Member == self {
			to, _ := c.ReplicaOf(c.Target.Voters[0])
			err := f.s.nh.RequestLeaderTransfer(c.ShardID, to)
			h.c.log.Info("move: leadership handed to a replica of the target before this one is removed", "to", to, "err", err)
			return
		}
		err := h.c.rep.removeReplica(ctx, r.ID, mem.changeID)
		h.c.log.Info("move: replica removed", "member", r.Member, "replica", r.ID, "err", err)
		return
	}
	rep, err := f.propose(ctx, &fleet.FinishMove{Name: c.Name, Expect: c.Updated})
	if err == nil && rep.OK() {
		h.c.log.Info("move finished", "voters", c.Target.Voters, "observers", c.Target.Observers, "version", rep.Version)
	}
}

// srvrZxid asks the member at addr for its zxid (srvr).
func srvrZxid(addr string) (int64, bool) {
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, false
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := nc.Write([]byte("srvr")); err != nil {
		return 0, false
	}
	b, _ := io.ReadAll(io.LimitReader(nc, 4096))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Zxid: 0x"); ok {
			z, err := strconv.ParseInt(strings.TrimSpace(v), 16, 64)
			return z, err == nil
		}
	}
	return 0, false
}
