package server

import (
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zkraft/zkraft/raftsm"
)

// The member's figures as mntr (and the AdminServer's monitor) and the
// Prometheus endpoint show them: one list, each figure once, with its mntr
// key and its Prometheus name, help and type. ZooKeeper names a figure the
// same on both (mntr's zk_ prefix aside), and so does zkraft. The
// request-latency summaries and histograms that Prometheus observes per
// request are instruments, not figures (metrics.go).

// shownIn says where a figure is shown.
type shownIn uint8

const (
	inMntr shownIn = 1 << iota // mntr as zk_<name>, monitor as <name>
	inProm                     // the Prometheus endpoint as <name>
	inBoth = inMntr | inProm
)

const (
	gauge   = prometheus.GaugeValue
	counter = prometheus.CounterValue
)

// figure is one number (or string) of the member.
type figure struct {
	name string
	in   shownIn
	// leader: shown only while this member leads.
	leader bool
	// typ and help are the Prometheus metric's (inProm).
	typ  prometheus.ValueType
	help string
	// label names the one label of a figure with several series; value then
	// returns a []float64, the series of label values 0, 1, ...
	label string
	// perCell: a figure of one cell (its tree, sessions, watches,
	// connections, replica and store), which Prometheus shows for every
	// cell hosted here with the label cell="<name>". The others are the
	// member's own (its process, its request counters and latencies, not
	// yet kept per cell) and are shown once, without the label.
	perCell bool
	// value is the figure as mntr prints it (int, int64, float64 or
	// string; a float64 prints as Java's double does). nil: not known now,
	// and not shown (Prometheus only).
	value func(r *reading) any
}

// reading is one look at the member, for one mntr or one scrape.
type reading struct {
	s             *cellView
	f             figures
	reads, writes latencySnap
	pm            *raftsm.StoreFigures // nil until read, or if it cannot be
	pmRead        bool
}

func (s *cellView) newReading() *reading {
	return &reading{s: s, f: s.figures(), reads: s.counters.reads.snap(), writes: s.counters.writes.snap()}
}

// storeFigures are the state machine's store figures, read once per
// reading.
func (r *reading) storeFigures() *raftsm.StoreFigures {
	if !r.pmRead {
		r.pm, r.pmRead = r.s.storeFigures(), true
	}
	return r.pm
}

// shows says whether the figure is shown now.
func (r *reading) shows(fg *figure, in shownIn) bool {
	return fg.in&in != 0 && (!fg.leader || r.f.mode == "leader")
}

// figureTable lists the figures in mntr's order: ZooKeeper 3.8's keys that
// exporters read, in the order of its output (which is HashMap order;
// clients must not rely on it), then the leader's, then the latency
// summaries zkraft keeps; then the figures only Prometheus shows.
var figureTable = slices.Concat([]figure{
	{name: "version", in: inMntr, value: func(*reading) any { return Version }},
	{name: "server_state", in: inMntr, value: func(r *reading) any { return r.f.mode }},
	{name: "ephemerals_count", perCell: true, in: inBoth, typ: gauge, help: "Number of ephemeral znodes", value: func(r *reading) any { return r.f.ephemerals }},
	{name: "num_alive_connections", perCell: true, in: inBoth, typ: gauge, help: "Number of client connections", value: func(r *reading) any { return r.f.connections }},
	{name: "avg_latency", in: inBoth, typ: gauge, help: "Average request latency (ms)", value: func(r *reading) any { return r.f.avgLat }},
	{name: "outstanding_requests", in: inBoth, typ: gauge, help: "Requests read and not yet answered", value: func(r *reading) any { return r.f.outstanding }},
	{name: "znode_count", perCell: true, in: inBoth, typ: gauge, help: "Number of znodes", value: func(r *reading) any { return r.f.nodeCount }},
	{name: "global_sessions", perCell: true, in: inBoth, typ: gauge, help: "Number of sessions", value: func(r *reading) any { return r.f.sessions }},
	{name: "non_mtls_remote_conn_count", in: inMntr, value: func(*reading) any { return 0 }},
	{name: "last_client_response_size", in: inMntr, value: func(r *reading) any { return r.s.counters.resp.last.Load() }},
	{name: "packets_sent", in: inBoth, typ: counter, help: "Packets sent to clients", value: func(r *reading) any { return r.f.sent }},
	{name: "packets_received", in: inBoth, typ: counter, help: "Packets received from clients", value: func(r *reading) any { return r.f.received }},
	{name: "max_client_response_size", in: inMntr, value: func(r *reading) any { return r.s.counters.resp.max.Load() }},
	{name: "connection_drop_probability", in: inMntr, value: func(*reading) any { return 0.0 }},
	{name: "watch_count", perCell: true, in: inBoth, typ: gauge, help: "Number of watches", value: func(r *reading) any { return r.f.watches }},
	{name: "auth_failed_count", in: inBoth, typ: counter, help: "Failed authentications", value: func(r *reading) any { return r.s.counters.authFailed.Load() }},
	{name: "min_latency", in: inBoth, typ: gauge, help: "Minimum request latency (ms)", value: func(r *reading) any { return r.f.minLat }},
	{name: "max_file_descriptor_count", in: inBoth, typ: gauge, help: "File descriptor limit", value: func(r *reading) any { return r.f.maxFDs }},
	{name: "approximate_data_size", perCell: true, in: inBoth, typ: gauge, help: "Approximate data size in bytes (paths and data)", value: func(r *reading) any { return r.f.dataSize }},
	{name: "open_file_descriptor_count", in: inBoth, typ: gauge, help: "Open file descriptors", value: func(r *reading) any { return r.f.openFDs }},
	{name: "local_sessions", in: inMntr, value: func(*reading) any { return 0 }},
	{name: "uptime", in: inBoth, typ: gauge, help: "Milliseconds since the member started", value: func(r *reading) any { return r.f.uptime }},
	{name: "max_latency", in: inBoth, typ: gauge, help: "Maximum request latency (ms)", value: func(r *reading) any { return r.f.maxLat }},
	{name: "outstanding_tls_handshake", in: inBoth, typ: gauge, help: "TLS handshakes in progress", value: func(r *reading) any { return r.s.counters.tlsHandshakes.Load() }},
	{name: "min_client_response_size", in: inMntr, value: func(r *reading) any { return r.s.counters.resp.min.Load() }},
	{name: "non_mtls_local_conn_count", in: inMntr, value: func(*reading) any { return 0 }},
	{name: "throttled_ops", in: inBoth, typ: counter, help: "Requests that waited for the global outstanding limit", value: func(r *reading) any { return r.s.counters.throttled.Load() }},
	{name: "stalled_connections_closed", in: inProm, typ: counter, help: "Connections closed because their client read no reply for its session timeout", value: func(r *reading) any { return r.s.counters.stalledClosed.Load() }},
	{name: "large_requests_rejected", in: inBoth, typ: counter, help: "Requests larger than jute.maxbuffer", value: func(r *reading) any { return r.s.counters.largeRequestsRejected.Load() }},
	{name: "connection_rejected", in: inBoth, typ: counter, help: "Connections refused by a limit", value: func(r *reading) any { return r.s.counters.connRejected.Load() }},
	{name: "unsuccessful_handshake", in: inBoth, typ: counter, help: "Failed TLS handshakes", value: func(r *reading) any { return r.s.counters.tlsHandshakeFailed.Load() }},
	{name: "bytes_received_count", in: inBoth, typ: counter, help: "Bytes received from clients", value: func(r *reading) any { return r.s.counters.bytesReceived.Load() }},
	{name: "quorum_size", perCell: true, in: inBoth, typ: gauge, help: "Voting members", value: func(r *reading) any { return r.f.voters }},

	{name: "learners", perCell: true, in: inBoth, leader: true, typ: gauge, help: "Followers and observers", value: func(r *reading) any { return r.f.learners }},
	// ZooKeeper 3.4's name, still read by some exporters.
	{name: "followers", in: inMntr, leader: true, value: func(r *reading) any { return r.f.learners }},
	{name: "synced_followers", perCell: true, in: inBoth, leader: true, typ: gauge, help: "Voting followers the leader is connected to", value: func(r *reading) any { return r.f.syncedFollowers }},
	{name: "synced_non_voting_followers", in: inMntr, leader: true, value: func(r *reading) any { return r.f.syncedNonVot }},
	// mntr's synced_observers counts the observers the leader reaches;
	// Prometheus's (below) has counted the configured ones.
	{name: "synced_observers", in: inMntr, leader: true, value: func(r *reading) any { return r.f.syncedNonVot }},
	{name: "pending_syncs", in: inMntr, leader: true, value: func(*reading) any { return 0 }},
	{name: "last_proposal_size", in: inMntr, leader: true, value: func(r *reading) any { return r.s.counters.proposals.last.Load() }},
	{name: "max_proposal_size", in: inMntr, leader: true, value: func(r *reading) any { return r.s.counters.proposals.max.Load() }},
	{name: "min_proposal_size", in: inMntr, leader: true, value: func(r *reading) any { return r.s.counters.proposals.min.Load() }},
},
	latencyFigures("readlatency", func(r *reading) latencySnap { return r.reads }),
	latencyFigures("updatelatency", func(r *reading) latencySnap { return r.writes }),
	[]figure{
		{name: "synced_observers", perCell: true, in: inProm, leader: true, typ: gauge, help: "Observers", value: func(r *reading) any { return r.f.observers }},
		{name: "zkraft_is_leader", perCell: true, in: inProm, typ: gauge, help: "1 if this member leads the shard", value: func(r *reading) any {
			return r.f.mode == "leader" || r.f.mode == "standalone"
		}},
		{name: "zkraft_leader_id", perCell: true, in: inProm, typ: gauge, help: "Replica id of the shard's leader (0: none)", value: func(r *reading) any { return r.s.cell.leaderID.Load() }},
		{name: "zkraft_raft_term", in: inProm, typ: gauge, help: "Raft term of the last leader change", value: func(r *reading) any { return r.s.metrics.term.Load() }},
		{name: "zkraft_last_zxid", perCell: true, in: inProm, typ: gauge, help: "Last zxid applied on this member", value: func(r *reading) any { return r.f.zxid }},
		{name: "zkraft_raft_apply_lag_entries", perCell: true, in: inProm, typ: gauge, help: "Raft log entries stored on this member and not yet applied", value: func(r *reading) any {
			if lag, ok := r.s.applyLag(); ok {
				return lag
			}
			return nil
		}},
		{name: "zkraft_snapshot_resets_total", perCell: true, in: inProm, typ: counter, help: "States installed from another member's snapshot", value: func(r *reading) any { return r.s.cell.resets.Load() }},
		{name: "zkraft_raft_snapshots_created_total", in: inProm, typ: counter, help: "Raft snapshots this member created", value: func(r *reading) any { return r.s.ops.peers.snapshots.Load() }},
		{name: "zkraft_pebble_disk_bytes", perCell: true, in: inProm, typ: gauge, help: "Disk space used by the state machine's Pebble store", value: storeFigure(func(m *raftsm.StoreFigures) any { return m.DiskBytes })},
		{name: "zkraft_pebble_memtable_bytes", perCell: true, in: inProm, typ: gauge, help: "Pebble memtable size", value: storeFigure(func(m *raftsm.StoreFigures) any { return m.MemTableBytes })},
		{name: "zkraft_pebble_wal_bytes", perCell: true, in: inProm, typ: gauge, help: "Pebble write-ahead log size", value: storeFigure(func(m *raftsm.StoreFigures) any { return m.WALBytes })},
		{name: "zkraft_pebble_level_bytes", perCell: true, in: inProm, typ: gauge, help: "Pebble sstable bytes by level", label: "level", value: storeFigure(func(m *raftsm.StoreFigures) any {
			out := make([]float64, len(m.LevelBytes))
			for i, b := range m.LevelBytes {
				out[i] = float64(b)
			}
			return out
		})},
		{name: "zkraft_pebble_sstable_bytes", perCell: true, in: inProm, typ: gauge, help: "Pebble sstable bytes", value: storeFigure(func(m *raftsm.StoreFigures) any {
			var sst int64
			for _, b := range m.LevelBytes {
				sst += b
			}
			return sst
		})},
		{name: "zkraft_pebble_compactions_total", perCell: true, in: inProm, typ: counter, help: "Pebble compactions", value: storeFigure(func(m *raftsm.StoreFigures) any { return m.Compactions })},
	})

// latencyFigures are mntr's avg_, min_, max_, cnt_ and sum_ of a latency
// summary.
func latencyFigures(name string, of func(*reading) latencySnap) []figure {
	return []figure{
		{name: "avg_" + name, in: inMntr, value: func(r *reading) any { return of(r).avg }},
		{name: "min_" + name, in: inMntr, value: func(r *reading) any { return of(r).min }},
		{name: "max_" + name, in: inMntr, value: func(r *reading) any { return of(r).max }},
		{name: "cnt_" + name, in: inMntr, value: func(r *reading) any { return of(r).count }},
		{name: "sum_" + name, in: inMntr, value: func(r *reading) any { return of(r).sum }},
	}
}

// storeFigure is a figure of the state machine's store, not shown when
// it cannot be read.
func storeFigure(fn func(*raftsm.StoreFigures) any) func(*reading) any {
	return func(r *reading) any {
		if m := r.storeFigures(); m != nil {
			return fn(m)
		}
		return nil
	}
}

// monitor is mntr (and monitor): the figures shown in mntr, in order.
func (s *cellView) monitor() []kv {
	r := s.newReading()
	var out []kv
	for i := range figureTable {
		if fg := &figureTable[i]; r.shows(fg, inMntr) {
			out = append(out, kv{fg.name, fg.value(r)})
		}
	}
	return out
}

// collectFigures sends the figures shown in Prometheus.
// The member's own figures come once, from the default cell's reading;
// each cell's figures once per cell hosted here, labelled with its name.
func (s *Server) collectFigures(ch chan<- prometheus.Metric) {
	views := []*cellView{s.view()}
	s.fleet.mu.Lock()
	for _, h := range s.fleet.mu.hosted {
		views = append(views, &cellView{Server: s, cell: h.c})
	}
	s.fleet.mu.Unlock()
	slices.SortFunc(views[1:], func(a, b *cellView) int { return strings.Compare(a.cell.name, b.cell.name) })
	for vi, v := range views {
		r := v.newReading()
		for i := range figureTable {
			fg := &figureTable[i]
			if !r.shows(fg, inProm) || !fg.perCell && vi > 0 {
				continue
			}
			var labels, values []string
			if fg.perCell {
				labels, values = []string{"cell"}, []string{v.cell.name}
			}
			switch x := fg.value(r).(type) {
			case nil:
			case []float64:
				desc := prometheus.NewDesc(fg.name, fg.help, append([]string{fg.label}, labels...), nil)
				for i, y := range x {
					ch <- prometheus.MustNewConstMetric(desc, fg.typ, y, append([]string{strconv.Itoa(i)}, values...)...)
				}
			default:
				ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(fg.name, fg.help, labels, nil), fg.typ, promValue(x), values...)
			}
		}
	}
}

// promValue is a figure's value as a Prometheus sample.
func promValue(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	case float64:
		return x
	case bool:
		if x {
			return 1
		}
	}
	return 0
}

// latencySnap is a latency summary at one moment.
type latencySnap struct {
	min   int64
	avg   float64
	max   int64
	count int64
	sum   int64
}

func (l *latency) snap() latencySnap {
	var x latencySnap
	x.min, x.avg, x.max, x.count, x.sum = l.get()
	return x
}
