package proxy

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
)

// The proxy's own figures, for its four-letter words, AdminServer and
// Prometheus endpoint (operator.go): packets and latencies as a member
// counts them (a request's latency is from its arrival at the proxy to its
// reply leaving for the client, the member's hop included), per
// connection and in all; its upstream connection's history. (The watches
// its clients hold are the shared watches' fan-out lists, watches.go.) They only observe: nothing here changes what is
// forwarded.

// lastOps are ZooKeeper's short names of operations (Request.op2String),
// cons's lop.
var lastOps = map[jute.OpCode]string{
	jute.OpCreate: "CREA", jute.OpCreate2: "CREA", jute.OpCreateContainer: "CREA", jute.OpCreateTTL: "CREA",
	jute.OpDelete: "DELE", jute.OpDeleteContainer: "DELE", jute.OpSetData: "SETD", jute.OpSetACL: "SETA",
	jute.OpCheck: "CHEC", jute.OpMulti: "MULT", jute.OpReconfig: "RECO", jute.OpExists: "EXIS",
	jute.OpGetData: "GETD", jute.OpGetChildren: "GETC", jute.OpGetChildren2: "GETC", jute.OpGetACL: "GETA",
	jute.OpSync: "SYNC", jute.OpGetAllChildrenNumber: "GETACN", jute.OpGetEphemerals: "GETE",
	jute.OpWhoAmI: "HOMI", jute.OpMultiRead: "MLTR", jute.OpSetWatches: "SETW", jute.OpSetWatches2: "SETW",
	jute.OpAddWatch: "ADDW", jute.OpCheckWatches: "CHKW", jute.OpRemoveWatches: "REMW", jute.OpPing: "PING",
	jute.OpAuth: "AUTH", jute.OpSASL: "SASL", jute.OpCloseSession: "CLOS", jute.OpCreateSession: "SESS",
}

func lastOpName(op jute.OpCode) string {
	if s, ok := lastOps[op]; ok {
		return s
	}
	return "UNKNOWN"
}

// latency is a min/max/sum/count summary in milliseconds.
type latency struct {
	min, max, sum, count int64
}

func (l *latency) add(ms int64) {
	if l.count == 0 || ms < l.min {
		l.min = ms
	}
	l.max = max(l.max, ms)
	l.sum += ms
	l.count++
}

func (l *latency) avg() float64 {
	if l.count == 0 {
		return 0
	}
	return float64(l.sum) / float64(l.count)
}

// proxyStats are the proxy's figures in all.
type proxyStats struct {
	started          time.Time
	received, sent   atomic.Int64 // client packets (pings included), as a member counts them
	bytesReceived    atomic.Int64
	connRejected     atomic.Int64 // refused by maxClientCnxns or maxCnxns
	handshakeRefused atomic.Int64 // closed: no upstream within HandshakeWait
	stalledClosed    atomic.Int64 // clients closed for not reading (outbox full)
	wordsAnswered    atomic.Int64
	pingsInPlace     atomic.Int64 // pings the poller answered itself (poller.go)
	keepAliveBatches atomic.Int64
	keepAliveIDs     atomic.Int64 // session ids sent in them, in all
	lastBatch        atomic.Int64 // sessions in the last batch
	// sessions kept across upstream losses (reattach.go): detached,
	// reattached, refused by the member, closed at their timeout
	detached, reattached, reattachFailed, detachedExpired atomic.Int64

	mu struct {
		sync.Mutex
		lat latency
	}
	// fan is the last shared watch's fan-out (fanout.go).
	fan struct {
		sync.Mutex
		last fanRecord
	}
}

// resetLocked is srst's part: packets and latencies.
func (s *proxyStats) reset() {
	s.received.Store(0)
	s.sent.Store(0)
	s.mu.Lock()
	s.mu.lat = latency{}
	s.mu.Unlock()
}

// connStats are one client connection's figures (cons).
type connStats struct {
	established    time.Time
	received, sent atomic.Int64
	mu             struct {
		sync.Mutex
		lastOp   string
		lastCxid int64
		lastZxid int64
		lastResp time.Time
		lastLat  int64
		lat      latency
	}
}

func (s *connStats) init(now time.Time) {
	s.established = now
	s.mu.lastOp, s.mu.lastCxid, s.mu.lastZxid = "NA", -1, -1
}

func (s *connStats) reset() {
	s.received.Store(0)
	s.sent.Store(0)
	s.mu.Lock()
	s.mu.lastOp, s.mu.lastCxid, s.mu.lastZxid, s.mu.lastResp, s.mu.lastLat = "NA", -1, -1, time.Time{}, 0
	s.mu.lat = latency{}
	s.mu.Unlock()
}

// answeredAt records a reply to f (header h) leaving for the client at
// now, on the connection's and the proxy's figures.
func (c *client) answeredAt(f flight, h jute.ReplyHeader, now time.Time) {
	ms := now.Sub(f.at).Milliseconds()
	st := &c.stats
	st.mu.Lock()
	st.mu.lastOp, st.mu.lastCxid, st.mu.lastZxid, st.mu.lastResp, st.mu.lastLat = lastOpName(f.op), int64(f.xid), h.Zxid, now, ms
	st.mu.lat.add(ms)
	st.mu.Unlock()
	ps := &c.p.stats
	ps.mu.Lock()
	ps.mu.lat.add(ms)
	ps.mu.Unlock()
}

// upstreamStats are the upstream connection's history.
type upstreamStats struct {
	mu struct {
		sync.Mutex
		connects  int64 // upstream connections made
		failures  int64 // attempts that failed
		since     time.Time
		lastError string
		member    string // the current or last member
	}
}

func (u *upstreamStats) connected(member string, now time.Time) {
	u.mu.Lock()
	u.mu.connects++
	u.mu.member, u.mu.since = member, now
	u.mu.Unlock()
}

func (u *upstreamStats) failed(member string, err error) {
	u.mu.Lock()
	u.mu.failures++
	u.mu.member, u.mu.lastError = member, err.Error()
	u.mu.Unlock()
}

func (u *upstreamStats) lost(err error) {
	u.mu.Lock()
	if err != nil {
		u.mu.lastError = err.Error()
	}
	u.mu.since = time.Time{}
	u.mu.Unlock()
}
