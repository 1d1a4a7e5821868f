package server

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/operator"
	"github.com/zkraft/zkraft/raftsm"
)

// latency is a min/avg/max summary in milliseconds, as ZooKeeper's
// ServerStats and AvgMinMaxCounter keep them. Safe for concurrent use; one
// short critical section per request.
type latency struct {
	mu    sync.Mutex
	count int64
	sum   int64
	min   int64
	max   int64
}

func (l *latency) add(ms int64) {
	l.mu.Lock()
	if l.count == 0 || ms < l.min {
		l.min = ms
	}
	if ms > l.max {
		l.max = ms
	}
	l.count++
	l.sum += ms
	l.mu.Unlock()
}

func (l *latency) reset() {
	l.mu.Lock()
	l.count, l.sum, l.min, l.max = 0, 0, 0, 0
	l.mu.Unlock()
}

func (l *latency) snap() operator.Latency {
	var x operator.Latency
	x.Min, x.Avg, x.Max, x.Count, x.Sum = l.get()
	return x
}

// get returns min, avg (rounded to 4 decimals, as ZooKeeper prints it), max,
// count and sum.
func (l *latency) get() (min int64, avg float64, max, count, sum int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.count > 0 {
		avg = math.Round(float64(l.sum)/float64(l.count)*10000) / 10000
	}
	return l.min, avg, l.max, l.count, l.sum
}

// serverCounters are the member-wide figures of srvr, stat and mntr that
// are not kept elsewhere. All fields are updated lock-free except the
// latency summaries.
type serverCounters struct {
	proposals             sizes // of proposed commands
	authFailed            atomic.Int64
	connRejected          atomic.Int64 // maxClientCnxns, limits
	largeRequestsRejected atomic.Int64
	tlsHandshakes         atomic.Int64 // in progress
	tlsHandshakeFailed    atomic.Int64
	tlsReloads            atomic.Int64 // key and trust stores reloaded (tls.go)
	tlsReloadFailed       atomic.Int64 // changed stores that did not load
	throttled             atomic.Int64 // requests that waited for the global limit
	stalledClosed         atomic.Int64 // connections closed for not reading their replies
	lastFloodLog          atomic.Int64 // unix ns of the last too-many-connections warning
}

// cellCounters are the request figures kept per cell (docs/cells.md,
// Figures per cell): the latencies, packets, bytes and reply sizes of the
// connections of one cell's ports. All fields are updated lock-free except
// the latency summaries.
type cellCounters struct {
	all, reads, writes latency // request latency, ms
	resp               sizes   // of replies to requests
	received, sent     atomic.Int64
	bytesReceived      atomic.Int64
}

// sizes is a last, min and max of sizes in bytes, lock-free; all three are
// 0 until the first.
type sizes struct {
	last, min, max atomic.Int64
}

func (z *sizes) add(n int) {
	v := int64(n)
	z.last.Store(v)
	for {
		cur := z.min.Load()
		if (cur != 0 && cur <= v) || z.min.CompareAndSwap(cur, v) {
			break
		}
	}
	for {
		cur := z.max.Load()
		if cur >= v || z.max.CompareAndSwap(cur, v) {
			break
		}
	}
}

func (z *sizes) snap() operator.Sizes {
	return operator.Sizes{Last: z.last.Load(), Min: z.min.Load(), Max: z.max.Load()}
}

func (z *sizes) reset() {
	z.last.Store(0)
	z.min.Store(0)
	z.max.Store(0)
}

// proposal records the size of a proposed command.
func (s *serverCounters) proposal(n int) { s.proposals.add(n) }

// ResetStats is srst: ZooKeeper resets latency, packet counts and the
// response sizes (the cell's, for the cell of the port it is asked on).
func (s *cellView) ResetStats() {
	c := &s.cell.reqs
	c.all.reset()
	c.reads.reset()
	c.writes.reset()
	c.received.Store(0)
	c.sent.Store(0)
	c.resp.reset()
	s.counters.authFailed.Store(0)
}

// connStats are one connection's figures for cons and stat.
type connStats struct {
	established time.Time
	recved      atomic.Int64 // packets
	sent        atomic.Int64

	mu struct {
		sync.Mutex
		lop   string
		lcxid int64 // -1 after a reset
		lzxid int64 // -1 after a reset
		lresp int64 // ms since the server started
		lat   latency
		llat  int64
	}
}

func (st *connStats) init() {
	st.established = time.Now()
	st.mu.lcxid, st.mu.lzxid = -1, -1
	st.mu.lop = "NA"
}

func (st *connStats) reset() {
	st.recved.Store(0)
	st.sent.Store(0)
	st.mu.Lock()
	st.mu.lop, st.mu.lcxid, st.mu.lzxid, st.mu.lresp, st.mu.llat = "NA", -1, -1, 0, 0
	st.mu.lat.reset()
	st.mu.Unlock()
}

// requestDone records a completed request: the member's and the
// connection's latency, last op and zxid, and the response size. It runs on
// the connection's processor goroutine.
func (c *conn) requestDone(p *pending, frame []byte, err error) {
	s := c.srv
	c.releaseSlot(p)
	if err != nil || p.start.IsZero() {
		return
	}
	now := time.Now()
	ms := now.Sub(p.start).Milliseconds()
	cc := &c.cell.reqs
	cc.all.add(ms)
	write := p.prop != nil
	if write {
		cc.writes.add(ms)
	} else if !opTable[p.op].untimed {
		cc.reads.add(ms)
	}
	s.metrics.request(p.op, write, now.Sub(p.start))
	if p.op == jute.OpCloseSession {
		c.log().Info("session closed", "session", hexID(c.sessionID))
	}
	cc.resp.add(len(frame))
	var zxid int64 = -1
	if len(frame) >= 16 {
		zxid = int64(uint64(frame[8])<<56 | uint64(frame[9])<<48 | uint64(frame[10])<<40 | uint64(frame[11])<<32 |
			uint64(frame[12])<<24 | uint64(frame[13])<<16 | uint64(frame[14])<<8 | uint64(frame[15]))
	}
	st := &c.st
	st.mu.Lock()
	st.mu.lop = lastOpOf(p.op)
	if p.xid >= 0 {
		st.mu.lcxid = int64(p.xid)
	}
	if zxid >= 0 {
		st.mu.lzxid = zxid
	}
	st.mu.lresp = now.Sub(s.started).Milliseconds()
	st.mu.llat = ms
	st.mu.lat.add(ms)
	st.mu.Unlock()
}

// treeCounts are the data tree's node, ephemeral and approximate-size
// figures of the member's applied state, which the state machine keeps with
// every write (raftsm.TreeStats): O(1) on any tree.
func (c *cell) treeCounts() (nodes, ephemerals, dataSize int64) {
	st, err := readValue(c.rep, nil, localRead, func(v raftsm.View) (raftsm.TreeStats, error) {
		return v.TreeStats()
	})
	if err != nil {
		return 0, 0, 0
	}
	return st.Nodes, st.Ephemerals, st.DataSize
}
