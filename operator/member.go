package operator

import (
	"net/http"
	"time"
)

// Member is one cell of the implementer as an operator command sees it:
// the member (or the proxy) answering for one cell. Each method is one
// look, taken when a command runs; none may block for long (a command
// answers while its client waits) and all must be safe for concurrent use.
type Member interface {
	// Serving reports whether the cell serves requests now (it has a
	// leader); a command that needs a serving member answers NotServing
	// when it does not.
	Serving() bool
	// Figures is one reading of the numbers srvr, stat, mntr, the
	// AdminServer and the Prometheus endpoint show.
	Figures() Figures
	// Replica is the cell's replica's figures that Prometheus shows,
	// read only at a scrape; nil for an implementer with no replica (a
	// proxy), whose figures are then not shown.
	Replica() *Replica
	// Conf is what conf, configuration and the membership commands show.
	Conf() Conf
	// DirSizes are the sizes in bytes of the data and the log
	// directories (dirs, conf, stats), walked on demand.
	DirSizes() (data, log int64)
	// Connections are the cell's client connections here, in a stable
	// order (cons, stat, connections).
	Connections() []Connection
	// ResetConnections is crst: every connection's figures start again.
	ResetConnections()
	// ResetStats is srst: the latency summaries, the packet counts, the
	// response sizes and the failed authentications start again.
	ResetStats()
	// Sessions is what dump shows: sessions by expiry, ephemerals by
	// session, connections.
	Sessions() Sessions
	// WatchCount is wchs: the watches, the paths watched and the
	// connections watching.
	WatchCount() (watches, paths, conns int)
	// WatchesBySession is wchc: the paths of the data watches of each
	// session, sessions and paths sorted.
	WatchesBySession() []SessionWatches
	// WatchesByPath is wchp: the sessions with a data watch on each path,
	// paths and sessions sorted.
	WatchesByPath() []PathWatches
}

// Host is what the AdminServer needs of the implementer beyond a Member.
type Host interface {
	// Cell is the Member answering an AdminServer request for the cell
	// its ?cell= names ("" names none: the default cell), or a sentence
	// saying why there is none.
	Cell(name string) (Member, string)
	// Authorize decides a request for a command with Auth set: ok, or the
	// HTTP status and ZooKeeper's sentence to refuse it with.
	Authorize(r *http.Request, need Auth) (status int, refusal string, ok bool)
}

// Auth is what a command asks of an AdminServer request's Authorization
// header.
type Auth uint8

const (
	// AuthNone: anyone may run it.
	AuthNone Auth = iota
	// AuthAllOnRoot: ids holding ALL on "/" (ZooKeeper 3.9's
	// AuthRequest(Perms.ALL, "/")).
	AuthAllOnRoot
	// AuthSuper: the super user only.
	AuthSuper
)

// Figures is one reading of a cell's numbers. The latencies are in
// milliseconds; counts of packets, bytes and refusals are since the member
// started (or since srst, for those srst resets).
type Figures struct {
	Mode string // srvr's Mode: leader, follower, observer, standalone
	Zxid int64
	// NodeCount counts as ZooKeeper does: the root twice.
	NodeCount, Ephemerals, DataSize int64
	Watches                         int
	Connections                     int
	Outstanding                     int
	Sessions                        int
	Uptime                          int64 // ms since the member started
	Received, Sent                  int64 // packets
	MinLat, MaxLat                  int64
	AvgLat                          float64
	OpenFDs, MaxFDs                 int64
	Voters, Learners, Observers     int
	SyncedFollowers, SyncedNonVot   int

	// Reads and Writes are the request latency summaries by kind.
	Reads, Writes Latency
	// Responses and Proposals are the sizes of replies and proposed
	// commands.
	Responses, Proposals Sizes

	AuthFailed            int64
	ConnRejected          int64 // refused by a limit (maxClientCnxns and the like)
	LargeRequestsRejected int64
	TLSHandshakes         int64 // in progress
	TLSHandshakeFailed    int64
	Throttled             int64 // requests that waited for the global limit
	StalledClosed         int64 // connections closed for not reading their replies
	BytesReceived         int64
	// SessionBatches and SessionBatchOps count the proposals of proxied
	// channels' handshakes and the handshakes (creates and attaches) they
	// carried; SessionBatchLargest is the most one carried;
	// SessionBatchDropped the handshakes dropped unproposed (their
	// channel closed while they queued).
	SessionBatches, SessionBatchOps, SessionBatchLargest, SessionBatchDropped int64
}

// Latency is a min/avg/max summary in milliseconds (avg rounded to four
// decimals, as ZooKeeper prints it), with its count and sum.
type Latency struct {
	Min   int64
	Avg   float64
	Max   int64
	Count int64
	Sum   int64
}

// Sizes are the last, the smallest and the largest of some sizes in bytes
// (0, 0, 0 before the first).
type Sizes struct {
	Last, Min, Max int64
}

// Replica is a cell's replica's figures, shown by Prometheus only.
type Replica struct {
	LeaderID uint64 // 0: no leader known
	Term     uint64 // of the last leader change (the member's)
	// ApplyLag is the number of log entries stored here and not yet
	// applied, if ApplyLagKnown.
	ApplyLag         uint64
	ApplyLagKnown    bool
	SnapshotResets   int64 // states installed from another replica's snapshot
	SnapshotsCreated int64 // the member's
	// Store is the state machine's store's figures; nil when they cannot
	// be read.
	Store *Store
}

// Store is a state machine store's figures.
type Store struct {
	DiskBytes     uint64
	MemTableBytes uint64
	WALBytes      uint64
	LevelBytes    []int64 // sstable bytes by level
	Compactions   int64
}

// Conf is a cell's configuration as conf and configuration show it.
type Conf struct {
	ClientPort                           int
	SecureClientPort                     int // -1: none
	DataDir                              string
	DataLogDir                           string // DataDir when the log shares it
	TickTime                             int64  // ms
	MaxClientCnxns                       int
	MinSessionTimeout, MaxSessionTimeout int64  // ms
	ServerID                             uint64 // 0 when standalone
	// Ensemble is nil for a standalone member.
	Ensemble *Ensemble
}

// Ensemble is a replicated member's place in its ensemble.
type Ensemble struct {
	ElectionPort, QuorumPort int
	Observer                 bool
	// Members are the ensemble's server.N=... lines, as ZooKeeper's
	// dynamic configuration file has them, one per line.
	Members string
	// IsLeader, LeaderID and LeaderIP are the cell's leader as this
	// member knows it.
	IsLeader bool
	LeaderID uint64
	LeaderIP string
}

// Connection is one client connection as cons, stat and connections show
// it. The Last... figures, Session and Timeout are known only for a
// connection with a session (HasSession).
type Connection struct {
	Remote       string // host:port
	Interest     int
	Queued       int
	Received     int64 // packets
	Sent         int64
	Session      int64
	LastOp       string
	Established  int64 // unix ms
	Timeout      int64 // ms
	LastCxid     int64 // -1: none
	LastZxid     int64
	LastResponse int64 // ms since the member started
	LastLatency  int64
	MinLat       int64
	AvgLat       int64
	MaxLat       int64
	HasSession   bool
	Secure       bool
}

// Sessions is a cell's sessions as dump shows them.
type Sessions struct {
	// Started is when the member started; dump's JSON counts expiry times
	// from it.
	Started time.Time
	// Expiry are the sessions by expiry time; Count how many sessions
	// there are.
	Expiry map[time.Time][]int64
	Count  int
	// Owners are the sessions holding ephemerals, sorted, and Ephemerals
	// the paths of each.
	Owners     []int64
	Ephemerals [][]string
	// Conns are the connections and when each expires.
	Conns []ConnExpiry
}

// ConnExpiry is one connection of dump: its remote address, its session
// (0 before it has one) and when it expires.
type ConnExpiry struct {
	Remote  string
	Session int64
	Expire  time.Time
}

// SessionWatches are the paths one session watches.
type SessionWatches struct {
	ID    int64
	Paths []string
}

// PathWatches are the sessions watching one path.
type PathWatches struct {
	Path string
	IDs  []int64
}
