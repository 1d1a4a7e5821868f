package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	dbconfig "github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"

	"github.com/zkraft/zkraft/operator"
	"github.com/zkraft/zkraft/raftsm"
)

// opsState is what the operations side of a member (four-letter words,
// AdminServer, metrics, TLS, SASL) keeps beyond Config.
type opsState struct {
	commands *operator.Registry // the operator commands: ZooKeeper's and the member's own

	admin     *http.Server
	adminLn   net.Listener
	promSrv   *http.Server
	promLn    net.Listener
	secureLn  net.Listener
	tls       *tlsState
	saslUsers map[string]string

	peers peerListener

	snapLimit snapshotLimiter // the snapshot command's (snapshotstream.go)
}

// peerListener follows Dragonboat's connections to other members, which
// tells the leader which followers it reaches (synced_followers).
type peerListener struct {
	mu struct {
		sync.Mutex
		connected map[string]bool // raft address
	}
	snapshots atomic.Int64
}

var _ raftio.ISystemEventListener = (*peerListener)(nil)

func (p *peerListener) set(addr string, up bool) {
	p.mu.Lock()
	if p.mu.connected == nil {
		p.mu.connected = map[string]bool{}
	}
	p.mu.connected[addr] = up
	p.mu.Unlock()
}

func (p *peerListener) isConnected(addr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.connected[addr]
}

func (p *peerListener) NodeHostShuttingDown()             {}
func (p *peerListener) NodeUnloaded(raftio.NodeInfo)      {}
func (p *peerListener) NodeDeleted(raftio.NodeInfo)       {}
func (p *peerListener) NodeReady(raftio.NodeInfo)         {}
func (p *peerListener) MembershipChanged(raftio.NodeInfo) {}
func (p *peerListener) ConnectionEstablished(i raftio.ConnectionInfo) {
	if !i.SnapshotConnection {
		p.set(i.Address, true)
	}
}
func (p *peerListener) ConnectionFailed(i raftio.ConnectionInfo) {
	if !i.SnapshotConnection {
		p.set(i.Address, false)
	}
}
func (p *peerListener) SendSnapshotStarted(raftio.SnapshotInfo)   {}
func (p *peerListener) SendSnapshotCompleted(raftio.SnapshotInfo) {}
func (p *peerListener) SendSnapshotAborted(raftio.SnapshotInfo)   {}
func (p *peerListener) SnapshotReceived(raftio.SnapshotInfo)      {}
func (p *peerListener) SnapshotRecovered(raftio.SnapshotInfo)     {}
func (p *peerListener) SnapshotCreated(raftio.SnapshotInfo)       { p.snapshots.Add(1) }
func (p *peerListener) SnapshotCompacted(raftio.SnapshotInfo)     {}
func (p *peerListener) LogCompacted(raftio.EntryInfo)             {}
func (p *peerListener) LogDBCompacted(raftio.EntryInfo)           {}

// initOps prepares what New needs before the replica starts.
func (s *Server) initOps() error {
	s.outstanding.limit = s.cfg.GlobalOutstandingLimit
	s.ops.commands = operator.NewRegistry(s.ownCommands()...)
	m, err := newMetrics(s)
	if err != nil {
		return fmt.Errorf("server: metrics: %w", err)
	}
	s.metrics = m
	users, err := loadSASLUsers(s.cfg.SASL)
	if err != nil {
		return err
	}
	s.ops.saslUsers = users
	if s.cfg.TLS.SecureClientAddr != "" {
		st, err := newTLSState(s.cfg.TLS)
		if err != nil {
			return err
		}
		s.ops.tls = st
	}
	return nil
}

// tuneNodeHost adds the operations settings to Dragonboat's config: the
// connection listener, its metrics, and mutual TLS between members.
func (s *Server) tuneNodeHost(nhc *dbconfig.NodeHostConfig) {
	nhc.SystemEventListener = &s.ops.peers
	nhc.EnableMetrics = s.cfg.Metrics.Enabled
	if t := s.cfg.TLS; t.Quorum && !isStandaloneTransport(*nhc) {
		nhc.MutualTLS = true
		nhc.CAFile, nhc.CertFile, nhc.KeyFile = t.QuorumCAFile, t.QuorumCertFile, t.QuorumKeyFile
	}
}

// startOps starts the secure client listener, the AdminServer and the
// metrics endpoint. On error it stops what it started.
func (s *Server) startOps() error {
	// Count the tree once now rather than on the first srvr or mntr (an
	// ensemble member whose replica is not ready yet counts on first use).
	s.routines.start(func() { s.cell.treeCounts() })
	if s.ops.tls != nil {
		ln, err := net.Listen("tcp", s.cfg.TLS.SecureClientAddr)
		if err != nil {
			return fmt.Errorf("server: listen %s (secureClientPort): %w", s.cfg.TLS.SecureClientAddr, err)
		}
		s.ops.secureLn = ln
		s.routines.start(func() { s.secureAcceptLoop(ln, s.cell) })
		if s.cfg.TLS.Reload && s.cfg.TLS.Config == nil {
			tc := s.ops.tls
			s.routines.start(func() { s.tlsReloadLoop(tc) })
		}
		s.log.Info("serving TLS", "secureClient", ln.Addr().String(), "clientAuth", s.cfg.TLS.ClientAuth)
	}
	if s.cfg.Metrics.Enabled {
		ln, err := net.Listen("tcp", s.cfg.Metrics.Addr)
		if err != nil {
			s.stopOps()
			return fmt.Errorf("server: listen %s (metricsProvider.httpPort): %w", s.cfg.Metrics.Addr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", s.metricsHandler())
		s.ops.promLn = ln
		s.ops.promSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		s.routines.start(func() { s.ops.promSrv.Serve(ln) })
		s.log.Info("serving metrics", "addr", ln.Addr().String())
	}
	if s.cfg.Admin.Enabled {
		// Like ZooKeeper's AdminServer, a port that cannot be bound is
		// logged and the member serves without it.
		ln, err := net.Listen("tcp", s.cfg.Admin.Addr)
		if err != nil {
			s.log.Error("admin server not started", "addr", s.cfg.Admin.Addr, "err", err)
		} else {
			s.ops.adminLn = ln
			s.ops.admin = &http.Server{Handler: s.adminHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: s.cfg.Admin.IdleTimeout}
			s.routines.start(func() { s.ops.admin.Serve(ln) })
			s.log.Info("serving admin", "addr", ln.Addr().String(), "commands", s.cfg.Admin.CommandURL)
		}
	}
	return nil
}

// stopOps closes the listeners startOps opened; Close then waits for their
// goroutines.
func (s *Server) stopOps() {
	if s.ops.secureLn != nil {
		s.ops.secureLn.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, h := range []*http.Server{s.ops.admin, s.ops.promSrv} {
		if h != nil {
			if err := h.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				s.log.Debug("http shutdown", "err", err)
			}
			h.Close()
		}
	}
}

// AdminAddr is the AdminServer's address, nil when it is not running.
func (s *Server) AdminAddr() net.Addr {
	if s.ops.adminLn == nil {
		return nil
	}
	return s.ops.adminLn.Addr()
}

// MetricsAddr is the metrics endpoint's address, nil when it is off.
func (s *Server) MetricsAddr() net.Addr {
	if s.ops.promLn == nil {
		return nil
	}
	return s.ops.promLn.Addr()
}

// SecureAddr is the TLS client listener's address, nil when it is off.
func (s *Server) SecureAddr() net.Addr {
	if s.ops.secureLn == nil {
		return nil
	}
	return s.ops.secureLn.Addr()
}

// Figures are the numbers srvr, stat, mntr and the metrics share.
func (s *cellView) Figures() operator.Figures {
	f := operator.Figures{Mode: s.cellMode(), Zxid: s.cell.zxid.Load()}
	nodes, eph, size := s.cell.treeCounts()
	f.NodeCount, f.Ephemerals, f.DataSize = nodes+1, eph, size
	f.Watches = s.cell.watches.total()
	f.Connections = len(s.conns())
	f.Outstanding = s.outstandingRequests()
	f.Sessions = s.cell.tracker.Len()
	f.Uptime = time.Since(s.started).Milliseconds()
	cc := &s.cell.reqs
	f.Received, f.Sent = cc.received.Load(), cc.sent.Load()
	f.MinLat, f.AvgLat, f.MaxLat, _, _ = cc.all.get()
	f.OpenFDs, f.MaxFDs = fdCounts()
	f.Voters = 1
	if !s.standalone() {
		f.Voters = 0
		for _, m := range s.cfg.Members {
			if !m.Observer {
				f.Voters++
			}
		}
	}
	if f.Mode == "leader" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if m, err := s.cell.rep.membership(ctx); err == nil {
			f.Voters = len(m.voters)
			for id, addr := range m.voters {
				if id == s.cfg.ReplicaID {
					continue
				}
				f.Learners++
				if s.ops.peers.isConnected(addr) {
					f.SyncedFollowers++
				}
			}
			for _, addr := range m.nonVoting {
				f.Learners++
				f.Observers++
				if s.ops.peers.isConnected(addr) {
					f.SyncedNonVot++
				}
			}
		}
	}
	c := &s.counters
	f.Reads, f.Writes = cc.reads.snap(), cc.writes.snap()
	f.Responses, f.Proposals = cc.resp.snap(), c.proposals.snap()
	f.AuthFailed, f.ConnRejected, f.LargeRequestsRejected = c.authFailed.Load(), c.connRejected.Load(), c.largeRequestsRejected.Load()
	f.TLSHandshakes, f.TLSHandshakeFailed = c.tlsHandshakes.Load(), c.tlsHandshakeFailed.Load()
	f.Throttled, f.StalledClosed, f.BytesReceived = c.throttled.Load(), c.stalledClosed.Load(), cc.bytesReceived.Load()
	sb := s.cell.sessions
	f.SessionBatches, f.SessionBatchOps, f.SessionBatchLargest, f.SessionBatchDropped = sb.batches.Load(), sb.ops.Load(), sb.largest.Load(), sb.dropped.Load()
	return f
}

func fdCounts() (open, max int64) {
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		open = int64(len(ents))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		max = int64(lim.Cur)
	}
	return open, max
}

// storeFigures are the state machine's store figures, nil if the replica
// cannot be read.
func (s *cellView) storeFigures() *raftsm.StoreFigures {
	f, err := readValue(s.cell.rep, nil, localRead, func(v raftsm.View) (*raftsm.StoreFigures, error) {
		return v.StoreFigures(), nil
	})
	if err != nil {
		return nil
	}
	return f
}
