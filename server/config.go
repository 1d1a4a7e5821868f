package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/zkraft/zkraft/jute"
)

// ReadMode selects how reads are served.
type ReadMode int

const (
	// ReadLinearizable serves each read after a Raft ReadIndex: stronger
	// than ZooKeeper, and the default. A standalone member, the only voter
	// of its shard, reads locally once caught up at start: that is
	// linearizable there.
	ReadLinearizable ReadMode = iota
	// ReadSequential serves reads from the local replica as ZooKeeper does;
	// sync catches the member up.
	ReadSequential
)

// Member is one member of an ensemble, as a zoo.cfg server.N line gives it.
type Member struct {
	// ID is ZooKeeper's myid and the member's Raft replica id (1..254).
	ID uint64
	// RaftAddr is host:peerPort, where Raft traffic goes.
	RaftAddr string
	// ElectionAddr is host:electionPort; zkraft does not use it but keeps
	// it for /zookeeper/config.
	ElectionAddr string
	// ClientAddr is the address clients reach this member on.
	ClientAddr string
	// Observer marks a non-voting member.
	Observer bool
}

// Config configures a member. The zero value of each field is documented;
// call Validate (New does) to apply defaults.
type Config struct {
	// ClientAddr is the client listener address. Default 127.0.0.1:2181.
	ClientAddr string
	// ProxyAddr, if set, is where the member listens for zkraft proxies
	// (the upstream protocol, docs/proxy.md; zoo.cfg zkraft.proxyPort).
	// Empty: no proxy listener.
	ProxyAddr string
	// SingleHandshakes proposes each proxied channel's handshake as its
	// own command instead of in batches (raftsm.KindSessions,
	// sessionbatch.go): for a rolling upgrade from a version without
	// KindSessions, whose replicas stop on an entry they cannot decode,
	// until every replica of the cell runs this one. Default false:
	// batches.
	SingleHandshakes bool
	// DataDir holds the state machine and, unless LogDir is set, the Raft
	// log. Required.
	DataDir string
	// LogDir, if set, holds the Raft log (ZooKeeper's dataLogDir).
	LogDir string
	// RaftLogStore is the Raft log store of a new data directory
	// (logstore.go): LogStoreAuto (the zero value: an existing directory
	// keeps the store it has, a new one gets Pebble), LogStoreTan or
	// LogStorePebble. A store that contradicts the directory's is refused.
	RaftLogStore LogStoreKind
	// RaftAddr is this member's Raft address, where it listens for the
	// other members. In an ensemble it is the RaftAddr of this member's
	// entry in Members. A standalone member with no RaftAddr opens no Raft
	// port, as a standalone ZooKeeper opens no quorum port (transport.go);
	// with one it listens there, ready to be grown into an ensemble.
	RaftAddr string
	// RaftTransport is the Raft transport between members (raftnet.go):
	// RaftTransportAuto (the zero value) and RaftTransportDragonboat are
	// Dragonboat's TCP transport, RaftTransportZkraft is zkraft's own.
	// Both speak the same wire format, so members with either talk to each
	// other. A standalone member without a RaftAddr has no transport.
	RaftTransport RaftTransportKind
	// RaftListenAllIPs makes the Raft transport listen on every address
	// (0.0.0.0) at RaftAddr's port, while the other members still reach it
	// at RaftAddr (ZooKeeper's quorumListenOnAllIPs).
	RaftListenAllIPs bool
	// Members lists the ensemble. Empty means standalone: this member
	// alone. Otherwise it must contain ReplicaID.
	Members []Member
	// ShardID is the Raft shard that holds the namespace. Default 1.
	ShardID uint64
	// ReplicaID is this member's replica id in the shard (ZooKeeper's
	// myid). Default 1. It is also the top byte of session ids.
	ReplicaID uint64
	// TickTime is ZooKeeper's tickTime. Default 2s.
	TickTime time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound negotiated session
	// timeouts. Defaults 2 and 20 ticks.
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// MaxClientCnxns limits connections per client IP; 0 means no limit.
	// cmd/zkraft defaults it to ZooKeeper's 60.
	MaxClientCnxns int
	// MaxCnxns limits the connections of each client listener, the plain
	// and the TLS one counted apart (ZooKeeper's maxCnxns); 0 means no
	// limit.
	MaxCnxns int
	// MaxBuffer is the largest frame accepted (jute.maxbuffer). Default 0xfffff.
	MaxBuffer int
	// ReadMode selects linearizable (default) or sequential reads.
	ReadMode ReadMode
	// ExtendedTypes enables TTL nodes (zookeeper.extendedTypesEnabled).
	ExtendedTypes bool
	// ReconfigEnabled allows the reconfig op (ZooKeeper's
	// reconfigEnabled); it also needs WRITE on /zookeeper/config, which
	// only the super user has by default.
	ReconfigEnabled bool
	// Join starts this member as a new replica of an existing ensemble,
	// after the ensemble added it (reconfig -add); it takes no initial
	// membership from Members.
	Join bool
	// SuperDigest is ZooKeeper's
	// zookeeper.DigestAuthenticationProvider.superDigest ("super:<base64
	// sha1>"): a client that authenticates with the matching digest
	// credentials is the super user. Empty disables it.
	SuperDigest string
	// ContainerCheckInterval is how often the leader looks for empty
	// containers and expired TTL nodes (znode.container.checkIntervalMs).
	// Default 60s.
	ContainerCheckInterval time.Duration
	// DigestCheckInterval is how often the leader proposes its state's
	// digest for every replica to compare with its own (ZooKeeper 3.6+
	// compares digests with every transaction). Default 10s; negative:
	// never.
	DigestCheckInterval time.Duration
	// EnforceQuota makes hard quota limits fail writes with QUOTAEXCEEDED
	// (zookeeper.enforceQuota).
	EnforceQuota bool
	// FourLetterWords lists the enabled four-letter words; "*" enables all.
	// Default: srvr only, as ZooKeeper.
	FourLetterWords []string
	// RTT is Dragonboat's RTTMillisecond as a duration. Default 10ms.
	RTT time.Duration
	// ElectionRTT and HeartbeatRTT are in RTT units. Defaults 100 and 10
	// (1 s and 100 ms with the default RTT). The election timeout bounds
	// how long a leader's Raft step may stall (a slow fdatasync on a
	// shared disk, a starved process) before the leader steps down
	// (CheckQuorum) and its followers elect: 300 ms, the earlier default,
	// cost loaded 2-core machines an election every few seconds, each
	// one connections closed and requests waiting. 1 s is etcd's default
	// too; ZooKeeper tolerates syncLimit x tickTime (10 s by default).
	ElectionRTT  uint64
	HeartbeatRTT uint64
	// SnapshotEntries is how many log entries pass between Raft snapshots,
	// after which the log is compacted. Default 100000.
	SnapshotEntries uint64
	// HistoryMax and HistoryMaxAge bound the change history kept for
	// resumable watches (events, and age). Defaults 100000 events and no
	// age limit. Every member must use the same values.
	HistoryMax    int64
	HistoryMaxAge time.Duration
	// BlockCacheBytes sizes the state machine store's Pebble block cache.
	// 0 means raftsm.DefaultBlockCacheBytes (256 MiB).
	BlockCacheBytes int64
	// ProposalTimeout bounds how long a write may wait for Raft. Default 10s.
	ProposalTimeout time.Duration
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// AuditLog, if set, receives ZooKeeper's audit log
	// (zookeeper.audit.enable; audit.go). Nil: no audit log.
	AuditLog io.Writer

	// GlobalOutstandingLimit bounds the requests in process across all
	// connections (globalOutstandingLimit): when it is reached, a
	// connection with a request in process is not read until a slot frees
	// (one with none always is, as in ZooKeeper). Default 1000. See
	// limits.go.
	GlobalOutstandingLimit int
	// Admin, Metrics, TLS and SASL are the operations settings
	// (opsconfig.go).
	Admin   AdminConfig
	Metrics MetricsConfig
	TLS     TLSConfig
	SASL    SASLConfig
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("server: DataDir is required")
	}
	if c.ClientAddr == "" {
		c.ClientAddr = "127.0.0.1:2181"
	}
	switch c.RaftLogStore {
	case LogStoreAuto, LogStoreTan, LogStorePebble:
	default:
		return fmt.Errorf("server: Raft log store %q: auto, tan or pebble", c.RaftLogStore)
	}
	if _, err := ParseRaftTransportKind(string(c.RaftTransport)); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if c.ShardID == 0 {
		c.ShardID = 1
	}
	if c.ReplicaID == 0 {
		c.ReplicaID = 1
	}
	if c.ReplicaID > 254 {
		return fmt.Errorf("server: replica id %d above 254", c.ReplicaID)
	}
	if c.Join && len(c.Members) == 0 {
		return errors.New("server: joining an ensemble needs its members (the server.N lines)")
	}
	if c.MaxClientCnxns < 0 || c.MaxCnxns < 0 {
		return errors.New("server: connection limits must not be negative")
	}
	if len(c.Members) > 0 {
		seen := map[uint64]bool{}
		addrs := map[string]uint64{}
		var self *Member
		for i := range c.Members {
			m := &c.Members[i]
			if m.ID == 0 || m.ID > 254 {
				return fmt.Errorf("server: member id %d out of range 1..254", m.ID)
			}
			if seen[m.ID] {
				return fmt.Errorf("server: member id %d listed twice", m.ID)
			}
			seen[m.ID] = true
			if m.RaftAddr == "" {
				return fmt.Errorf("server: member %d has no peer address", m.ID)
			}
			if other, dup := addrs[m.RaftAddr]; dup {
				return fmt.Errorf("server: members %d and %d share peer address %s", other, m.ID, m.RaftAddr)
			}
			addrs[m.RaftAddr] = m.ID
			if m.ID == c.ReplicaID {
				self = m
			}
		}
		if self == nil {
			return fmt.Errorf("server: myid %d is not among the configured members", c.ReplicaID)
		}
		c.RaftAddr = self.RaftAddr
		voters := 0
		for _, m := range c.Members {
			if !m.Observer {
				voters++
			}
		}
		if voters == 0 {
			return errors.New("server: no voting member configured")
		}
	}
	if c.TickTime <= 0 {
		c.TickTime = 2 * time.Second
	}
	if c.MinSessionTimeout <= 0 {
		c.MinSessionTimeout = 2 * c.TickTime
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = 20 * c.TickTime
	}
	if c.MinSessionTimeout > c.MaxSessionTimeout {
		return fmt.Errorf("server: minSessionTimeout %v above maxSessionTimeout %v", c.MinSessionTimeout, c.MaxSessionTimeout)
	}
	if c.DigestCheckInterval == 0 {
		c.DigestCheckInterval = 10 * time.Second
	}
	if c.ContainerCheckInterval <= 0 {
		c.ContainerCheckInterval = 60 * time.Second
	}
	if c.SuperDigest != "" && !strings.Contains(c.SuperDigest, ":") {
		return fmt.Errorf("server: superDigest %q is not user:base64digest", c.SuperDigest)
	}
	if c.MaxBuffer <= 0 {
		c.MaxBuffer = jute.DefaultMaxBuffer
	}
	if c.FourLetterWords == nil {
		c.FourLetterWords = []string{"srvr"}
	}
	if c.RTT <= 0 {
		c.RTT = 10 * time.Millisecond
	}
	if c.ElectionRTT == 0 {
		c.ElectionRTT = 100
	}
	if c.HeartbeatRTT == 0 {
		c.HeartbeatRTT = 10
	}
	if c.ElectionRTT <= 2*c.HeartbeatRTT {
		return fmt.Errorf("server: electionRTT %d must exceed twice heartbeatRTT %d", c.ElectionRTT, c.HeartbeatRTT)
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = 100000
	}
	if c.ProposalTimeout <= 0 {
		c.ProposalTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c.validateOps()
}
