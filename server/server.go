package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	dbconfig "github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"

	"github.com/zkraft/zkraft/fleet"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/znode"
)

// Server is one zkraft member: a Dragonboat NodeHost, the cells (shards) it
// hosts, and the client listener.
type Server struct {
	cfg Config
	log *slog.Logger
	nh  *dragonboat.NodeHost
	ln  net.Listener
	// raftNet is zkraft's Raft transport factory (raftnet.go); nil with
	// Dragonboat's transport or none (standalone).
	raftNet *raftNetFactory

	cell  *cell        // the default cell, served on the client listener
	fleet *fleetMember // the system shard and the other cells hosted here (fleet.go)

	// cellsMu guards cellsByShard: every cell with a replica on the
	// NodeHost, the default one too, for Dragonboat's events.
	cellsMu      sync.Mutex
	cellsByShard map[uint64]*cell

	started time.Time

	audit *auditLog // nil: off (audit.go)

	// Operations: figures, limits, admin, metrics, TLS and SASL (ops.go).
	counters    serverCounters
	metrics     *metrics
	outstanding outstandingLimit // the global outstanding-request limit (limits.go)
	ops         opsState

	connSeq atomic.Uint64 // numbers connections for raftsm.Command.Owner

	up upstreams // the proxies' listener and connections (upstream.go)

	// readHook, set by tests only, runs inside every client read, on the
	// read's snapshot, before it reads: a test holds a read there to apply
	// changes while it runs.
	readHook atomic.Pointer[func(op jute.OpCode)]

	// triggerHook, set by tests only, runs in a cell's Applied before each
	// change's watches are triggered, under the state machine's lock.
	triggerHook atomic.Pointer[func(zxid int64, path string)]

	ctx    context.Context
	cancel context.CancelFunc
	// routines owns every goroutine the server starts (goroutines.go).
	routines goroutines

	// mu guards the connection table (lock order: doc.go).
	mu struct {
		sync.Mutex
		conns       map[*conn]struct{}
		perIP       map[string]int
		perListener [2]int // plain, TLS (maxCnxns)
		closed      bool
	}
}

// leaderListener routes Dragonboat leader changes to the cells.
type leaderListener struct{ s atomic.Pointer[Server] }

func (l *leaderListener) LeaderUpdated(info raftio.LeaderInfo) {
	s := l.s.Load()
	if s == nil {
		return
	}
	if info.ShardID == fleet.SystemShardID {
		s.fleet.leaderID.Store(info.LeaderID)
		return
	}
	if c := s.cellOfShard(info.ShardID); c != nil {
		c.leaderUpdated(info)
	}
}

// registerCell makes c hear its shard's Dragonboat events; before its
// replica starts.
func (s *Server) registerCell(c *cell) {
	s.cellsMu.Lock()
	s.cellsByShard[c.shardID] = c
	s.cellsMu.Unlock()
}

func (s *Server) unregisterCell(c *cell) {
	s.cellsMu.Lock()
	if s.cellsByShard[c.shardID] == c {
		delete(s.cellsByShard, c.shardID)
	}
	s.cellsMu.Unlock()
}

func (s *Server) cellOfShard(shardID uint64) *cell {
	s.cellsMu.Lock()
	defer s.cellsMu.Unlock()
	return s.cellsByShard[shardID]
}

// New starts a member: it opens (or creates) the data directories, starts
// the Raft replica, waits until the shard has a leader, and listens for
// clients. Close stops it.
func New(cfg Config) (*Server, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	cfg = s.cfg
	QuietRaftLogs()

	for _, d := range []string{cfg.DataDir, cfg.LogDir} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	ll := &leaderListener{}
	nhc, err := NodeHostConfig(cfg)
	if err != nil {
		return nil, err
	}
	nhc.RaftEventListener = ll
	s.tuneNodeHost(&nhc)
	s.raftNet, _ = nhc.Expert.TransportFactory.(*raftNetFactory)
	stateStore := DataDirsOf(cfg).StateStore(cfg.ShardID, cfg.ReplicaID)
	rep, err := checkDataDir(nhc, stateStore, s.log)
	if err != nil {
		return nil, err
	}
	if err := checkRecordedRaftAddr(nhc); err != nil {
		return nil, err
	}
	var nh *dragonboat.NodeHost
	if err := raftCall(func() (err error) {
		nh, err = dragonboat.NewNodeHost(nhc)
		if err == nil && nh == nil {
			// NewNodeHost recovers some of its panics and returns
			// neither a NodeHost nor an error.
			err = errors.New("dragonboat: NewNodeHost stopped on a panic it recovered")
		}
		return err
	}); err != nil {
		return nil, raftFailure(nhc, err)
	}
	s.nh = nh

	c := newCell(s, fleet.DefaultCell, cfg.ShardID, cfg.ReplicaID)
	c.rep = newRaftReplica(nh, cfg.ShardID, s, c)
	s.cell = c
	s.registerCell(c)
	ll.s.Store(s)
	rc, smCfg := ReplicaConfig(cfg, c)
	members := map[uint64]dragonboat.Target{}
	join := false
	if len(cfg.Members) == 0 {
		members[cfg.ReplicaID] = nhc.RaftAddress
	} else {
		for _, m := range cfg.Members {
			if !m.Observer {
				members[m.ID] = m.RaftAddr
			}
		}
		if cfg.Join {
			join = true
			members = map[uint64]dragonboat.Target{}
		}
		if s.self().Observer {
			// An observer is a non-voting replica: the leader adds it
			// (see reconcileMembers) and it joins with no initial members.
			rc.IsNonVoting = true
			join = true
			members = map[uint64]dragonboat.Target{}
		}
	}
	gate := newOpenGate()
	if err := raftCall(func() error {
		return nh.StartOnDiskReplica(members, join, gate.factory(raftsm.NewFactory(smCfg)), rc)
	}); err != nil {
		var p *recoveredPanic
		if !errors.As(err, &p) {
			nh.Close()
		}
		if errors.Is(err, dragonboat.ErrInvalidShardSettings) {
			return nil, fmt.Errorf("server: start shard %d: %w: the Raft log in %s was first started with other members "+
				"than this configuration lists, and Dragonboat keeps to them (change an ensemble with reconfig). "+
				"A standalone member grows into an ensemble as an ensemble of one: standaloneEnabled=false and one "+
				"server.N line with the Raft address it was started with, then reconfig -add the others and start them with --join",
				cfg.ShardID, err, raftLogPlace(nhc))
		}
		return nil, raftFailure(nhc, fmt.Errorf("start shard %d: %w", cfg.ShardID, err))
	}
	if err := awaitOpen(nh, nhc, gate, cfg.ShardID, cfg.ReplicaID, rep); err != nil {
		nh.Close()
		return nil, err
	}
	if s.standalone() {
		// Standalone: serve once the single replica leads, as ZooKeeper
		// serves once its database is loaded. A member of an ensemble
		// listens at once and refuses clients until a leader is known.
		if err := s.waitReady(30 * time.Second); err != nil {
			nh.Close()
			return nil, err
		}
		// One ReadIndex, which waits until the replica has applied every
		// entry committed before this start (a restart replays the log's
		// tail); after it local reads are linearizable (cell.localReads).
		noop := readQuery{fn: func(raftsm.View) error { return nil }, linearizable: true}
		if err := c.rep.read(nil, noop); err != nil {
			nh.Close()
			return nil, fmt.Errorf("server: first read: %w", err)
		}
		c.localReads.Store(true)
	}

	ln, err := net.Listen("tcp", cfg.ClientAddr)
	if err != nil {
		nh.Close()
		return nil, fmt.Errorf("server: listen %s: %w", cfg.ClientAddr, err)
	}
	s.ln = ln
	if err := s.startOps(); err != nil {
		ln.Close()
		s.routines.stop()
		s.cancel()
		s.routines.wait()
		nh.Close()
		return nil, err
	}
	if err := s.startUpstream(); err != nil {
		ln.Close()
		s.stopOps()
		nh.Close()
		return nil, err
	}
	s.routines.start(func() { s.acceptLoop(ln, c) })
	s.routines.start(func() { c.sessionLoop(s.ctx) })
	s.routines.start(func() { c.sweepLoop(s.ctx) })
	s.routines.start(func() { c.membershipLoop(s.ctx) })
	s.routines.start(func() { c.checkImportLoop(s.ctx) })
	if cfg.DigestCheckInterval > 0 {
		s.routines.start(func() { c.digestLoop(s.ctx) })
	}
	// The system shard beside the default cell, and the cells the map
	// places here (fleet.go): after the default cell serves, so that a
	// fleet without a quorum of upgraded members keeps serving it, and
	// without holding up New.
	s.routines.start(func() { s.startFleet(nhc) })
	raftListen := "none (standalone)"
	if !isStandaloneTransport(nhc) {
		raftListen = nhc.GetListenAddress()
	}
	s.auditServer(auditStart, "success")
	s.log.Info("serving", "client", ln.Addr().String(), "raft", raftListen,
		"shard", cfg.ShardID, "replica", cfg.ReplicaID, "dataDir", cfg.DataDir,
		"startup", time.Since(s.started).Round(time.Millisecond).String())
	return s, nil
}

// ReplicaConfig is the Raft configuration and the state machine
// configuration of cfg's replica (cfg with its defaults applied): New
// starts the replica with them, and so do the offline commands (export)
// that start it without serving clients, so that both apply the log under
// the same rules. sink receives the applied events (nil: nobody).
func ReplicaConfig(cfg Config, sink raftsm.EventSink) (dbconfig.Config, raftsm.Config) {
	smCfg := raftsm.Config{
		Dir:             DataDirsOf(cfg).State(),
		Options:         znode.Options{ExtendedTypes: cfg.ExtendedTypes, EnforceQuota: cfg.EnforceQuota},
		Sink:            sink,
		HistoryMax:      cfg.HistoryMax,
		HistoryMaxAge:   int64(cfg.HistoryMaxAge / time.Millisecond),
		BlockCacheBytes: cfg.BlockCacheBytes,
		SnapshotEntries: cfg.SnapshotEntries,
	}
	rc := dbconfig.Config{
		ShardID:            cfg.ShardID,
		ReplicaID:          cfg.ReplicaID,
		CheckQuorum:        true,
		PreVote:            true,
		ElectionRTT:        cfg.ElectionRTT,
		HeartbeatRTT:       cfg.HeartbeatRTT,
		SnapshotEntries:    cfg.SnapshotEntries,
		CompactionOverhead: cfg.SnapshotEntries / 5,
		MaxInMemLogSize:    256 << 20,
	}
	return rc, smCfg
}

// newServer is a member's state before it has a replica or a listener:
// its configuration (validated), connection table and operations.
func newServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("member", cfg.ReplicaID), started: time.Now(), audit: newAuditLog(cfg.AuditLog)}
	s.mu.conns = map[*conn]struct{}{}
	s.mu.perIP = map[string]int{}
	s.cellsByShard = map[uint64]*cell{}
	s.fleet = &fleetMember{s: s, wake: make(chan struct{}, 1)}
	s.fleet.mu.hosted = map[string]*hostedCell{}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := s.initOps(); err != nil {
		return nil, err
	}
	return s, nil
}

// waitReady waits until the shard has a leader.
func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		// The cell learns of the leader from Dragonboat's event; wait for
		// that too, or the first clients would be refused as "no leader".
		if _, _, ok, err := s.nh.GetLeaderID(s.cfg.ShardID); err == nil && ok && s.cell.serving() {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("server: shard %d has no leader after %v", s.cfg.ShardID, limit)
}

func (s *Server) standalone() bool { return len(s.cfg.Members) == 0 }

// leaderGrace is how long a member without a leader keeps its clients and
// holds their requests: a few election timeouts.
func (s *Server) leaderGrace() time.Duration {
	return 3 * time.Duration(s.cfg.ElectionRTT) * s.cfg.RTT
}

// readRetry is how long a read waits for its ReadIndex before asking
// again: one election timeout. A ReadIndex takes a heartbeat's round trip,
// but one can be lost on the way without a result (seen on a member that
// had just joined by reconfig: the first never completed, the one asked
// after it took 30 ms), and waiting leaderGrace for it then outlasted a
// client's read timeout (two thirds of a 4 s session's).
func (s *Server) readRetry() time.Duration {
	return time.Duration(s.cfg.ElectionRTT) * s.cfg.RTT
}

// self is this member's entry in Members (ensemble mode only).
func (s *Server) self() Member {
	for _, m := range s.cfg.Members {
		if m.ID == s.cfg.ReplicaID {
			return m
		}
	}
	return Member{ID: s.cfg.ReplicaID, RaftAddr: s.cfg.RaftAddr, ClientAddr: s.cfg.ClientAddr}
}

// closeBusyClients closes the connections of a cell that have requests in
// flight.
func (s *Server) closeBusyClients(c *cell) {
	s.mu.Lock()
	var conns []*conn
	for cn := range s.mu.conns {
		if cn.cell == c && cn.inflight.Load() > 0 {
			conns = append(conns, cn)
		}
	}
	s.mu.Unlock()
	if len(conns) > 0 {
		s.log.Info("leader changed: closing connections with requests in flight", "shard", c.shardID, "connections", len(conns))
	}
	for _, cn := range conns {
		cn.close()
	}
}

// closeClients closes every client connection of a cell (it lost its leader).
func (s *Server) closeClients(c *cell) {
	if n := s.closeClientsOf(c, func(*conn) bool { return true }); n > 0 {
		s.log.Info("no leader: closing client connections", "shard", c.shardID, "connections", n)
	}
}

// closeClientsBeforeReset closes the client connections of a cell that it
// accepted before its resets-th reset (a state installed from a snapshot).
func (s *Server) closeClientsBeforeReset(c *cell, resets int64) {
	if n := s.closeClientsOf(c, func(cn *conn) bool { return cn.resetsAtAccept < resets }); n > 0 {
		s.log.Info("state installed from a snapshot: closing client connections", "shard", c.shardID, "connections", n)
	}
}

// closeClientsOf closes the connections of cell c that pick chooses and
// returns how many.
func (s *Server) closeClientsOf(c *cell, pick func(*conn) bool) int {
	s.mu.Lock()
	var conns []*conn
	for cn := range s.mu.conns {
		if cn.cell == c && pick(cn) {
			conns = append(conns, cn)
		}
	}
	s.mu.Unlock()
	for _, cn := range conns {
		cn.close()
	}
	return len(conns)
}

// Addr is the client listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// acceptLoop accepts the clients of cell c on ln until ln closes.
func (s *Server) acceptLoop(ln net.Listener, cl *cell) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c, ok := s.register(nc, cl)
		if !ok {
			nc.Close()
			continue
		}
		if !s.routines.start(c.serve) {
			nc.Close()
			s.unregister(c)
		}
	}
}

func remoteIP(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, _ := net.SplitHostPort(nc.RemoteAddr().String())
	return host
}

func (s *Server) register(nc net.Conn, cl *cell) (*conn, bool) {
	ip := remoteIP(nc)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, false
	}
	if s.cfg.MaxClientCnxns > 0 && s.mu.perIP[ip] >= s.cfg.MaxClientCnxns {
		s.warnTooManyConnections(ip)
		s.counters.connRejected.Add(1)
		return nil, false
	}
	_, secure := nc.(*tls.Conn)
	if s.cfg.MaxCnxns > 0 && s.mu.perListener[listenerIndex(secure)] >= s.cfg.MaxCnxns {
		if now, last := time.Now().UnixNano(), s.counters.lastFloodLog.Load(); now-last >= int64(time.Second) &&
			s.counters.lastFloodLog.CompareAndSwap(last, now) {
			s.log.Warn("too many connections: refused", "ip", ip, "maxCnxns", s.cfg.MaxCnxns, "secure", secure)
		}
		s.counters.connRejected.Add(1)
		return nil, false
	}
	c := newConn(s, cl, nc, ip)
	s.mu.conns[c] = struct{}{}
	s.mu.perIP[ip]++
	s.mu.perListener[listenerIndex(secure)]++
	return c, true
}

// listenerIndex indexes the per-listener connection counts (maxCnxns):
// ZooKeeper counts its plain and its secure factory apart.
func listenerIndex(secure bool) int {
	if secure {
		return 1
	}
	return 0
}

func (s *Server) unregister(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.conns[c]; !ok {
		return
	}
	delete(s.mu.conns, c)
	if s.mu.perIP[c.ip]--; s.mu.perIP[c.ip] <= 0 {
		delete(s.mu.perIP, c.ip)
	}
	_, secure := c.nc.(*tls.Conn)
	s.mu.perListener[listenerIndex(secure)]--
}

func (s *Server) connCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.conns)
}

// Close stops the listener, closes every connection, stops the replica
// and waits for everything the server started.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.routines.stop()
	s.cancel()
	err := s.ln.Close()
	s.stopOps()
	s.stopUpstream()
	for _, c := range conns {
		c.close()
	}
	s.routines.wait()
	s.nh.Close()
	s.auditServer(auditStop, "invoked")
	s.log.Info("stopped")
	return err
}

// lastZxid is the last zxid applied on this member.
func (s *Server) lastZxid() int64 { return s.cell.zxid.Load() }

// NodeHostConfig is the Dragonboat NodeHost configuration of cfg's data
// dirs and Raft address, for the server and for the offline commands
// (export) that start its replica. cfg must have its defaults applied. A
// standalone cfg without a RaftAddr gets the transport that listens on
// nothing, and the address its data directory recorded (transport.go).
// The Raft log store is the one the data directory holds, tan for a new
// one, or cfg.RaftLogStore (logstore.go); the error refuses a store that
// contradicts the directory, or a tan log that is not under cfg's
// dataLogDir, with what to do.
func NodeHostConfig(cfg Config) (dbconfig.NodeHostConfig, error) {
	dirs := DataDirsOf(cfg)
	store, err := chooseLogStore(cfg)
	if err != nil {
		return dbconfig.NodeHostConfig{}, err
	}
	nhc := dbconfig.NodeHostConfig{
		NodeHostDir:    dirs.Raft(),
		WALDir:         dirs.RaftWAL(),
		RTTMillisecond: uint64(cfg.RTT / time.Millisecond),
		RaftAddress:    cfg.RaftAddr,
		Expert:         dbconfig.GetDefaultExpertConfig(),
	}
	// The Raft log store's memtables are 64 MiB (Dragonboat's "medium"
	// config; memtables start at 256 KiB and grow, so the idle shards of
	// the sharded log store stay small): with 16 MiB, most entries were
	// flushed to a table and compacted before the log was compacted past
	// them; with 64 MiB more of them die in the memtable. scripts/sidebyside
	// 8x8 multi4: 16.6 -> 11.9 KiB written per multi (of 4 KiB of values),
	// median of 5-6 runs; CPU within the noise.
	nhc.Expert.LogDB = dbconfig.GetMediumMemLogDBConfig()
	if store == LogStoreTan {
		// tan (logstore.go) takes only the write buffer size of the
		// LogDB config, and zkraft's factory sets its own.
		nhc.Expert.LogDBFactory = tanFactory{inWAL: cfg.LogDir != ""}
	}
	if len(cfg.Members) == 0 && cfg.RaftAddr == "" {
		nhc.RaftAddress = standaloneRaftAddr
		if addr, ok := recordedRaftAddr(nhc.NodeHostDir); ok {
			nhc.RaftAddress = addr
		}
		nhc.Expert.TransportFactory = noNetTransportFactory{}
	} else {
		if cfg.RaftTransport == RaftTransportZkraft {
			nhc.Expert.TransportFactory = newRaftNetFactory()
		}
		if cfg.RaftListenAllIPs {
			if _, port, err := net.SplitHostPort(cfg.RaftAddr); err == nil {
				nhc.ListenAddress = net.JoinHostPort("0.0.0.0", port)
			}
		}
	}
	return nhc, nil
}

// checkRecordedRaftAddr refuses, with what to do, a Raft address other
// than the one the data directory was first started with: Dragonboat
// would refuse it as "not the owner of the data directory".
func checkRecordedRaftAddr(nhc dbconfig.NodeHostConfig) error {
	addr, ok := recordedRaftAddr(nhc.NodeHostDir)
	if !ok || sameRaftAddr(addr, nhc.RaftAddress) {
		return nil
	}
	return fmt.Errorf("server: the Raft data in %s was first started with Raft address %s, and this member is configured with %s: "+
		"Dragonboat does not let a member's Raft address change. Start it with %s (--raft-addr, or the peer address of its server.N line; "+
		"a standalone member needs none). To move this data into an ensemble at other addresses, zkraft export it and zkraft import the export "+
		"on every member (docs/migration.md)", nhc.NodeHostDir, addr, nhc.RaftAddress, addr)
}
