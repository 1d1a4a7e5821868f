package proxy

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
)

// The proxy's own figures, for its four-letter words, AdminServer and
// Prometheus endpoint (operator.go): packets and latencies as a member
// counts them (a request's latency is from its arrival at the proxy to its
// reply leaving for the client, the member's hop included), per
// connection and in all; the watches its clients hold; its upstream
// connection's history. They only observe: nothing here changes what is
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
	keepAliveBatches atomic.Int64
	keepAliveIDs     atomic.Int64 // session ids sent in them, in all
	lastBatch        atomic.Int64 // sessions in the last batch

	mu struct {
		sync.Mutex
		lat latency
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

// flight is one request forwarded and not answered.
type flight struct {
	size int
	at   time.Time
	op   jute.OpCode
	xid  int32
	// watch is what the request sets or removes if it succeeds (nil for
	// most requests).
	watch *watchChange
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
	if f.watch != nil {
		c.watches.apply(f.watch, h.Err)
	}
}

// Watch modes a connection's watch on one path may have, as bits.
const (
	watchOnce       uint8 = 1 << iota // getData/exists/getChildren's one-shot
	watchPersistent                   // addWatch PERSISTENT
	watchRecursive                    // addWatch PERSISTENT_RECURSIVE
)

// watchChange is what a request does to its connection's watches once
// answered.
type watchChange struct {
	data, child []string // paths a one-shot watch is set on (or persistent, with mode)
	mode        uint8
	noNodeOK    bool  // exists: a watch is set on a missing znode too
	remove      int32 // removeWatches: the watcher type (0 for none)
}

// watchChangeOf decodes the watch a request sets or removes; nil if none.
func watchChangeOf(op jute.OpCode, record []byte) *watchChange {
	switch op {
	case jute.OpGetData, jute.OpExists, jute.OpGetChildren, jute.OpGetChildren2:
		var r jute.GetDataRequest // path and watch flag: the four have one shape
		if jute.Unmarshal(record, &r) != nil || !r.Watch {
			return nil
		}
		if op == jute.OpGetChildren || op == jute.OpGetChildren2 {
			return &watchChange{child: []string{r.Path}, mode: watchOnce}
		}
		return &watchChange{data: []string{r.Path}, mode: watchOnce, noNodeOK: op == jute.OpExists}
	case jute.OpAddWatch:
		var r jute.AddWatchRequest
		if jute.Unmarshal(record, &r) != nil {
			return nil
		}
		if r.Mode == 1 { // PERSISTENT_RECURSIVE
			return &watchChange{data: []string{r.Path}, mode: watchRecursive}
		}
		return &watchChange{data: []string{r.Path}, child: []string{r.Path}, mode: watchPersistent}
	case jute.OpRemoveWatches:
		var r jute.RemoveWatchesRequest
		if jute.Unmarshal(record, &r) != nil {
			return nil
		}
		return &watchChange{data: []string{r.Path}, child: []string{r.Path}, remove: r.Type}
	case jute.OpSetWatches:
		var r jute.SetWatches
		if jute.Unmarshal(record, &r) != nil {
			return nil
		}
		return &watchChange{data: append(r.DataWatches, r.ExistWatches...), child: r.ChildWatches, mode: watchOnce}
	case jute.OpSetWatches2:
		var r jute.SetWatches2
		if jute.Unmarshal(record, &r) != nil {
			return nil
		}
		// Persistent watches re-registered by setWatches2 are counted as
		// one-shot ones here: the table only observes.
		data := append(append(append(r.DataWatches, r.ExistWatches...), r.PersistentWatches...), r.PersistentRecursiveWatches...)
		return &watchChange{data: data, child: append(r.ChildWatches, r.PersistentWatches...), mode: watchOnce}
	}
	return nil
}

// connWatches are the watches one client connection holds on the member
// through its channel, as the proxy sees its requests, replies and
// notifications: wchs, wchc, wchp and the watch figures show them.
type connWatches struct {
	mu          sync.Mutex
	data, child map[string]uint8
}

func (w *connWatches) apply(ch *watchChange, errCode jute.ErrCode) {
	ok := errCode == jute.ErrOK || (ch.noNodeOK && errCode == jute.ErrNoNode)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch.remove != 0 {
		if ch.remove&jute.WatcherTypeData != 0 {
			for _, p := range ch.data {
				delete(w.data, p)
			}
		}
		if ch.remove&jute.WatcherTypeChildren != 0 {
			for _, p := range ch.child {
				delete(w.child, p)
			}
		}
		return
	}
	add := func(m *map[string]uint8, paths []string) {
		if len(paths) == 0 {
			return
		}
		if *m == nil {
			*m = map[string]uint8{}
		}
		for _, p := range paths {
			(*m)[p] |= ch.mode
		}
	}
	add(&w.data, ch.data)
	add(&w.child, ch.child)
}

// fired drops the one-shot watches a notification fired.
func (w *connWatches) fired(ev *jute.WatcherEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	drop := func(m map[string]uint8) {
		if mode, ok := m[ev.Path]; ok {
			if mode &^= watchOnce; mode == 0 {
				delete(m, ev.Path)
			} else {
				m[ev.Path] = mode
			}
		}
	}
	switch ev.Type {
	case jute.EventNodeCreated, jute.EventNodeDataChanged:
		drop(w.data)
	case jute.EventNodeDeleted:
		drop(w.data)
		drop(w.child)
	case jute.EventNodeChildrenChanged:
		drop(w.child)
	}
}

// counts are the connection's data and child watches.
func (w *connWatches) counts() (data, child int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.data), len(w.child)
}

// dataPaths are the paths of the connection's data watches, sorted.
func (w *connWatches) dataPaths() []string {
	w.mu.Lock()
	out := make([]string, 0, len(w.data))
	for p := range w.data {
		out = append(out, p)
	}
	w.mu.Unlock()
	sort.Strings(out)
	return out
}

// allPaths are the paths of the connection's watches, of both tables.
func (w *connWatches) allPaths() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]bool, len(w.data)+len(w.child))
	for p := range w.data {
		out[p] = true
	}
	for p := range w.child {
		out[p] = true
	}
	return out
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
