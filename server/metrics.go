package server

import (
	"bytes"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/zkraft/zkraft/jute"
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
		m.requests, m.leaderChanges, &serverCollector{s: s}} {
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
	m.requests.WithLabelValues(opLabel(op)).Inc()
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

// serverCollector computes the ZooKeeper gauges at scrape time from the
// same figures as mntr (none of them walks the tree).
type serverCollector struct{ s *Server }

// Describe sends nothing: an unchecked collector, since its set of series
// depends on the member's role.
func (c *serverCollector) Describe(chan<- *prometheus.Desc) {}

func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	gauge := func(name, help string, v float64) {
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, nil, nil), prometheus.GaugeValue, v)
	}
	counter := func(name, help string, v float64) {
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, nil, nil), prometheus.CounterValue, v)
	}
	f := s.figures()
	gauge("znode_count", "Number of znodes", float64(f.nodeCount))
	gauge("ephemerals_count", "Number of ephemeral znodes", float64(f.ephemerals))
	gauge("approximate_data_size", "Approximate data size in bytes (paths and data)", float64(f.dataSize))
	gauge("watch_count", "Number of watches", float64(f.watches))
	gauge("num_alive_connections", "Number of client connections", float64(f.connections))
	gauge("outstanding_requests", "Requests read and not yet answered", float64(f.outstanding))
	gauge("global_sessions", "Number of sessions", float64(f.sessions))
	gauge("uptime", "Milliseconds since the member started", float64(f.uptime))
	counter("packets_received", "Packets received from clients", float64(f.received))
	counter("packets_sent", "Packets sent to clients", float64(f.sent))
	counter("bytes_received_count", "Bytes received from clients", float64(s.counters.bytesReceived.Load()))
	counter("auth_failed_count", "Failed authentications", float64(s.counters.authFailed.Load()))
	counter("connection_rejected", "Connections refused by a limit", float64(s.counters.connRejected.Load()))
	counter("large_requests_rejected", "Requests larger than jute.maxbuffer", float64(s.counters.largeRequestsRejected.Load()))
	counter("throttled_ops", "Requests that waited for the global outstanding limit", float64(s.counters.throttled.Load()))
	gauge("outstanding_tls_handshake", "TLS handshakes in progress", float64(s.counters.tlsHandshakes.Load()))
	counter("unsuccessful_handshake", "Failed TLS handshakes", float64(s.counters.tlsHandshakeFailed.Load()))
	gauge("open_file_descriptor_count", "Open file descriptors", float64(f.openFDs))
	gauge("max_file_descriptor_count", "File descriptor limit", float64(f.maxFDs))
	gauge("min_latency", "Minimum request latency (ms)", float64(f.minLat))
	gauge("avg_latency", "Average request latency (ms)", f.avgLat)
	gauge("max_latency", "Maximum request latency (ms)", float64(f.maxLat))
	gauge("quorum_size", "Voting members", float64(f.voters))
	if f.mode == "leader" {
		gauge("learners", "Followers and observers", float64(f.learners))
		gauge("synced_followers", "Voting followers the leader is connected to", float64(f.syncedFollowers))
		gauge("synced_observers", "Observers", float64(f.observers))
	}
	leader := 0.0
	if f.mode == "leader" || f.mode == "standalone" {
		leader = 1
	}
	gauge("zkraft_is_leader", "1 if this member leads the shard", leader)
	gauge("zkraft_leader_id", "Replica id of the shard's leader (0: none)", float64(s.cell.leaderID.Load()))
	gauge("zkraft_raft_term", "Raft term of the last leader change", float64(s.metrics.term.Load()))
	gauge("zkraft_last_zxid", "Last zxid applied on this member", float64(f.zxid))
	if lag, ok := s.applyLag(); ok {
		gauge("zkraft_raft_apply_lag_entries", "Raft log entries stored on this member and not yet applied", float64(lag))
	}
	counter("zkraft_snapshot_resets_total", "States installed from another member's snapshot", float64(s.cell.resets.Load()))
	counter("zkraft_raft_snapshots_created_total", "Raft snapshots this member created", float64(s.ops.peers.snapshots.Load()))
	if pm := s.storeMetrics(); pm != nil {
		gauge("zkraft_pebble_disk_bytes", "Disk space used by the state machine's Pebble store", float64(pm.DiskSpaceUsage()))
		gauge("zkraft_pebble_memtable_bytes", "Pebble memtable size", float64(pm.MemTable.Size))
		gauge("zkraft_pebble_wal_bytes", "Pebble write-ahead log size", float64(pm.WAL.Size))
		var sst int64
		for i := range pm.Levels {
			sst += pm.Levels[i].Size
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("zkraft_pebble_level_bytes",
				"Pebble sstable bytes by level", []string{"level"}, nil), prometheus.GaugeValue,
				float64(pm.Levels[i].Size), strconv.Itoa(i))
		}
		gauge("zkraft_pebble_sstable_bytes", "Pebble sstable bytes", float64(sst))
		counter("zkraft_pebble_compactions_total", "Pebble compactions", float64(pm.Compact.Count))
	}
}

// applyLag is the number of Raft entries this member stores beyond its
// applied index.
func (s *Server) applyLag() (uint64, bool) {
	lr, err := s.nh.GetLogReader(s.cfg.ShardID)
	if err != nil {
		return 0, false
	}
	_, last := lr.GetRange()
	v, err := s.nh.StaleRead(s.cfg.ShardID, raftsm.ReadFunc(func(v raftsm.View) (any, error) {
		return v.AppliedIndex()
	}))
	if err != nil {
		return 0, false
	}
	applied := v.(uint64)
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
