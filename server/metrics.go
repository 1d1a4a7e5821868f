package server

import (
	"bytes"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/operator"
	"github.com/zkraft/zkraft/raftsm"
)

// metrics are the member's Prometheus metrics. Names follow ZooKeeper's
// PrometheusMetricsProvider where ZooKeeper has the figure (znode_count,
// readlatency, ...); zkraft's own Raft and storage figures are zkraft_*.
// Everything is registered on the Registerer of Config.Metrics.
type metrics struct {
	gatherer prometheus.Gatherer

	readLatency   prometheus.Summary // ms, as ZooKeeper's readlatency
	updateLatency prometheus.Summary // ms, as ZooKeeper's updatelatency
	electionTime  prometheus.Summary // ms without a leader, as election_time
	commit        prometheus.Histogram
	requests      *prometheus.CounterVec
	leaderChanges prometheus.Counter
	// byOp caches requests' counter of each op code in
	// [-opSlotsBelow, opSlots-opSlotsBelow), resolved at its first request:
	// WithLabelValues hashes the label and locks the vector on every call
	// (about 1 µs per request in the member's CPU profile at 64x1).
	byOp [opSlots]atomic.Pointer[prometheus.Counter]

	noLeaderSince atomic.Int64 // unix ns when the shard lost its leader, 0 if it has one
	term          atomic.Uint64
}

func newMetrics(s *Server) (*metrics, error) {
	reg := s.cfg.Metrics.Registerer
	g := s.cfg.Metrics.Gatherer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg = r
		if g == nil {
			g = r
		}
	}
	if g == nil {
		g, _ = reg.(prometheus.Gatherer)
	}
	obj := map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001}
	m := &metrics{
		gatherer: g,
		readLatency: prometheus.NewSummary(prometheus.SummaryOpts{Name: "readlatency",
			Help: "Read request latency in milliseconds (ZooKeeper's readlatency)", Objectives: obj}),
		updateLatency: prometheus.NewSummary(prometheus.SummaryOpts{Name: "updatelatency",
			Help: "Update request latency in milliseconds (ZooKeeper's updatelatency)", Objectives: obj}),
		electionTime: prometheus.NewSummary(prometheus.SummaryOpts{Name: "election_time",
			Help: "Time without a leader before one was known, in milliseconds (ZooKeeper's election_time)", Objectives: obj}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "zkraft_proposal_commit_seconds",
			Help:    "Time from reading a write to its result: Raft proposal, commit and apply",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zkraft_requests_total",
			Help: "Client requests answered, by op"}, []string{"op"}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "zkraft_leader_changes_total",
			Help: "Leader changes this member saw (including losing the leader)"}),
	}
	for _, c := range []prometheus.Collector{m.readLatency, m.updateLatency, m.electionTime, m.commit,
		m.requests, m.leaderChanges, operator.Collector(s.promCells)} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// request records one answered request.
func (m *metrics) request(op jute.OpCode, write bool, d time.Duration) {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case write:
		m.updateLatency.Observe(ms)
		m.commit.Observe(d.Seconds())
	case !opTable[op].untimed:
		m.readLatency.Observe(ms)
	}
	m.opCounter(op).Inc()
}

const (
	opSlots      = 144
	opSlotsBelow = 16
)

// opCounter is requests' counter for op.
func (m *metrics) opCounter(op jute.OpCode) prometheus.Counter {
	i := int(op) + opSlotsBelow
	if i < 0 || i >= opSlots {
		return m.requests.WithLabelValues(opLabel(op))
	}
	if c := m.byOp[i].Load(); c != nil {
		return *c
	}
	c := m.requests.WithLabelValues(opLabel(op))
	m.byOp[i].Store(&c)
	return c
}

// leaderChanged is called by the cell when the shard's leader changes.
func (m *metrics) leaderChanged(prev, now, term uint64) {
	m.leaderChanges.Inc()
	m.term.Store(term)
	if now == 0 {
		m.noLeaderSince.CompareAndSwap(0, time.Now().UnixNano())
		return
	}
	if since := m.noLeaderSince.Swap(0); since != 0 {
		m.electionTime.Observe(float64(time.Now().UnixNano()-since) / 1e6)
	}
}

// The ZooKeeper gauges are computed at scrape time from the same figures
// as mntr (operator.Collector over promCells; none of them walks the
// tree).

// applyLag is the number of Raft entries this member stores beyond its
// applied index.
func (s *cellView) applyLag() (uint64, bool) {
	lr, err := s.nh.GetLogReader(s.cell.shardID)
	if err != nil {
		return 0, false
	}
	_, last := lr.GetRange()
	applied, err := readValue(s.cell.rep, nil, localRead, func(v raftsm.View) (uint64, error) {
		return v.AppliedIndex()
	})
	if err != nil {
		return 0, false
	}
	if last < applied {
		return 0, true
	}
	return last - applied, true
}

// metricsHandler serves the registry in the text format, followed by
// Dragonboat's own health metrics when enabled.
func (s *Server) metricsHandler() http.Handler {
	h := promhttp.HandlerFor(s.metrics.gatherer, promhttp.HandlerOpts{DisableCompression: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.Clone(r.Context())
		r.Header.Del("Accept") // the text format, so Dragonboat's lines can follow
		rec := &bufferedResponse{header: http.Header{}}
		h.ServeHTTP(rec, r)
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		if rec.code != 0 {
			w.WriteHeader(rec.code)
		}
		w.Write(rec.body.Bytes())
		if s.cfg.Metrics.Enabled {
			dragonboat.WriteHealthMetrics(w)
		}
	})
}

type bufferedResponse struct {
	header http.Header
	body   bytes.Buffer
	code   int
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedResponse) WriteHeader(code int)        { b.code = code }
