package operator

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
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
	// connections, replica and store, and the packets, bytes and request
	// latencies of its ports' connections), which Prometheus shows for
	// every cell hosted here with the label cell="<name>". The others are
	// the member's own (its process, its limits, TLS and authentication
	// counters, its proposals) and are shown once, without the label.
	perCell bool
	// value is the figure as mntr prints it (int, int64, float64 or
	// string; a float64 prints as Java's double does). nil: not known now,
	// and not shown (Prometheus only).
	value func(r *reading) any
}

// reading is one look at a cell, for one mntr or one scrape.
type reading struct {
	m Member
	f Figures
	// rep is the replica's figures, read once per reading (Prometheus
	// only); nil if the implementer has none.
	rep     *Replica
	repRead bool
}

func newReading(m Member) *reading { return &reading{m: m, f: m.Figures()} }

// replica is the cell's replica's figures, read once per reading.
func (r *reading) replica() *Replica {
	if !r.repRead {
		r.rep, r.repRead = r.m.Replica(), true
	}
	return r.rep
}

// shows says whether the figure is shown now.
func (r *reading) shows(fg *figure, in shownIn) bool {
	return fg.in&in != 0 && (!fg.leader || r.f.Mode == "leader")
}

// figureTable lists the figures in mntr's order: ZooKeeper 3.8's keys that
// exporters read, in the order of its output (which is HashMap order;
// clients must not rely on it), then the leader's, then the latency
// summaries zkraft keeps; then the figures only Prometheus shows.
var figureTable = slices.Concat([]figure{
	{name: "version", in: inMntr, value: func(*reading) any { return Version }},
	{name: "server_state", in: inMntr, value: func(r *reading) any { return r.f.Mode }},
	{name: "ephemerals_count", perCell: true, in: inBoth, typ: gauge, help: "Number of ephemeral znodes", value: func(r *reading) any { return r.f.Ephemerals }},
	{name: "num_alive_connections", perCell: true, in: inBoth, typ: gauge, help: "Number of client connections", value: func(r *reading) any { return r.f.Connections }},
	{name: "avg_latency", perCell: true, in: inBoth, typ: gauge, help: "Average request latency (ms)", value: func(r *reading) any { return r.f.AvgLat }},
	{name: "outstanding_requests", in: inBoth, typ: gauge, help: "Requests read and not yet answered", value: func(r *reading) any { return r.f.Outstanding }},
	{name: "znode_count", perCell: true, in: inBoth, typ: gauge, help: "Number of znodes", value: func(r *reading) any { return r.f.NodeCount }},
	{name: "global_sessions", perCell: true, in: inBoth, typ: gauge, help: "Number of sessions", value: func(r *reading) any { return r.f.Sessions }},
	{name: "non_mtls_remote_conn_count", in: inMntr, value: func(*reading) any { return 0 }},
	{name: "last_client_response_size", in: inMntr, value: func(r *reading) any { return r.f.Responses.Last }},
	{name: "packets_sent", perCell: true, in: inBoth, typ: counter, help: "Packets sent to clients", value: func(r *reading) any { return r.f.Sent }},
	{name: "packets_received", perCell: true, in: inBoth, typ: counter, help: "Packets received from clients", value: func(r *reading) any { return r.f.Received }},
	{name: "max_client_response_size", in: inMntr, value: func(r *reading) any { return r.f.Responses.Max }},
	{name: "connection_drop_probability", in: inMntr, value: func(*reading) any { return 0.0 }},
	{name: "watch_count", perCell: true, in: inBoth, typ: gauge, help: "Number of watches", value: func(r *reading) any { return r.f.Watches }},
	{name: "auth_failed_count", in: inBoth, typ: counter, help: "Failed authentications", value: func(r *reading) any { return r.f.AuthFailed }},
	{name: "min_latency", perCell: true, in: inBoth, typ: gauge, help: "Minimum request latency (ms)", value: func(r *reading) any { return r.f.MinLat }},
	{name: "max_file_descriptor_count", in: inBoth, typ: gauge, help: "File descriptor limit", value: func(r *reading) any { return r.f.MaxFDs }},
	{name: "approximate_data_size", perCell: true, in: inBoth, typ: gauge, help: "Approximate data size in bytes (paths and data)", value: func(r *reading) any { return r.f.DataSize }},
	{name: "open_file_descriptor_count", in: inBoth, typ: gauge, help: "Open file descriptors", value: func(r *reading) any { return r.f.OpenFDs }},
	{name: "local_sessions", in: inMntr, value: func(*reading) any { return 0 }},
	{name: "uptime", in: inBoth, typ: gauge, help: "Milliseconds since the member started", value: func(r *reading) any { return r.f.Uptime }},
	{name: "max_latency", perCell: true, in: inBoth, typ: gauge, help: "Maximum request latency (ms)", value: func(r *reading) any { return r.f.MaxLat }},
	{name: "outstanding_tls_handshake", in: inBoth, typ: gauge, help: "TLS handshakes in progress", value: func(r *reading) any { return r.f.TLSHandshakes }},
	{name: "min_client_response_size", in: inMntr, value: func(r *reading) any { return r.f.Responses.Min }},
	{name: "non_mtls_local_conn_count", in: inMntr, value: func(*reading) any { return 0 }},
	{name: "throttled_ops", in: inBoth, typ: counter, help: "Requests that waited for the global outstanding limit", value: func(r *reading) any { return r.f.Throttled }},
	{name: "stalled_connections_closed", in: inProm, typ: counter, help: "Connections closed because their client read no reply for its session timeout", value: func(r *reading) any { return r.f.StalledClosed }},
	{name: "large_requests_rejected", in: inBoth, typ: counter, help: "Requests larger than jute.maxbuffer", value: func(r *reading) any { return r.f.LargeRequestsRejected }},
	{name: "connection_rejected", in: inBoth, typ: counter, help: "Connections refused by a limit", value: func(r *reading) any { return r.f.ConnRejected }},
	{name: "unsuccessful_handshake", in: inBoth, typ: counter, help: "Failed TLS handshakes", value: func(r *reading) any { return r.f.TLSHandshakeFailed }},
	{name: "bytes_received_count", perCell: true, in: inBoth, typ: counter, help: "Bytes received from clients", value: func(r *reading) any { return r.f.BytesReceived }},
	{name: "quorum_size", perCell: true, in: inBoth, typ: gauge, help: "Voting members", value: func(r *reading) any { return r.f.Voters }},

	{name: "learners", perCell: true, in: inBoth, leader: true, typ: gauge, help: "Followers and observers", value: func(r *reading) any { return r.f.Learners }},
	// ZooKeeper 3.4's name, still read by some exporters.
	{name: "followers", in: inMntr, leader: true, value: func(r *reading) any { return r.f.Learners }},
	{name: "synced_followers", perCell: true, in: inBoth, leader: true, typ: gauge, help: "Voting followers the leader is connected to", value: func(r *reading) any { return r.f.SyncedFollowers }},
	{name: "synced_non_voting_followers", in: inMntr, leader: true, value: func(r *reading) any { return r.f.SyncedNonVot }},
	// mntr's synced_observers counts the observers the leader reaches;
	// Prometheus's (below) has counted the configured ones.
	{name: "synced_observers", in: inMntr, leader: true, value: func(r *reading) any { return r.f.SyncedNonVot }},
	{name: "pending_syncs", in: inMntr, leader: true, value: func(*reading) any { return 0 }},
	{name: "last_proposal_size", in: inMntr, leader: true, value: func(r *reading) any { return r.f.Proposals.Last }},
	{name: "max_proposal_size", in: inMntr, leader: true, value: func(r *reading) any { return r.f.Proposals.Max }},
	{name: "min_proposal_size", in: inMntr, leader: true, value: func(r *reading) any { return r.f.Proposals.Min }},
},
	latencyFigures("readlatency", func(r *reading) Latency { return r.f.Reads }),
	latencyFigures("updatelatency", func(r *reading) Latency { return r.f.Writes }),
	[]figure{
		{name: "synced_observers", perCell: true, in: inProm, leader: true, typ: gauge, help: "Observers", value: func(r *reading) any { return r.f.Observers }},
		{name: "zkraft_is_leader", perCell: true, in: inProm, typ: gauge, help: "1 if this member leads the shard", value: func(r *reading) any {
			return r.f.Mode == "leader" || r.f.Mode == "standalone"
		}},
		{name: "zkraft_leader_id", perCell: true, in: inProm, typ: gauge, help: "Replica id of the shard's leader (0: none)", value: replicaFigure(func(p *Replica) any { return p.LeaderID })},
		{name: "zkraft_raft_term", in: inProm, typ: gauge, help: "Raft term of the last leader change", value: replicaFigure(func(p *Replica) any { return p.Term })},
		{name: "zkraft_last_zxid", perCell: true, in: inProm, typ: gauge, help: "Last zxid applied on this member", value: func(r *reading) any { return r.f.Zxid }},
		{name: "zkraft_raft_apply_lag_entries", perCell: true, in: inProm, typ: gauge, help: "Raft log entries stored on this member and not yet applied", value: replicaFigure(func(p *Replica) any {
			if p.ApplyLagKnown {
				return p.ApplyLag
			}
			return nil
		})},
		{name: "zkraft_snapshot_resets_total", perCell: true, in: inProm, typ: counter, help: "States installed from another member's snapshot", value: replicaFigure(func(p *Replica) any { return p.SnapshotResets })},
		{name: "zkraft_raft_snapshots_created_total", in: inProm, typ: counter, help: "Raft snapshots this member created", value: replicaFigure(func(p *Replica) any { return p.SnapshotsCreated })},
		{name: "zkraft_pebble_disk_bytes", perCell: true, in: inProm, typ: gauge, help: "Disk space used by the state machine's Pebble store", value: storeFigure(func(m *Store) any { return m.DiskBytes })},
		{name: "zkraft_pebble_memtable_bytes", perCell: true, in: inProm, typ: gauge, help: "Pebble memtable size", value: storeFigure(func(m *Store) any { return m.MemTableBytes })},
		{name: "zkraft_pebble_wal_bytes", perCell: true, in: inProm, typ: gauge, help: "Pebble write-ahead log size", value: storeFigure(func(m *Store) any { return m.WALBytes })},
		{name: "zkraft_pebble_level_bytes", perCell: true, in: inProm, typ: gauge, help: "Pebble sstable bytes by level", label: "level", value: storeFigure(func(m *Store) any {
			out := make([]float64, len(m.LevelBytes))
			for i, b := range m.LevelBytes {
				out[i] = float64(b)
			}
			return out
		})},
		{name: "zkraft_pebble_sstable_bytes", perCell: true, in: inProm, typ: gauge, help: "Pebble sstable bytes", value: storeFigure(func(m *Store) any {
			var sst int64
			for _, b := range m.LevelBytes {
				sst += b
			}
			return sst
		})},
		{name: "zkraft_session_batches_total", perCell: true, in: inBoth, typ: counter, help: "Proposals of proxied sessions' handshakes (createSession, attach), each a batch of one or more", value: func(r *reading) any { return r.f.SessionBatches }},
		{name: "zkraft_session_batch_ops_total", perCell: true, in: inBoth, typ: counter, help: "Proxied sessions' handshakes proposed in those batches", value: func(r *reading) any { return r.f.SessionBatchOps }},
		{name: "zkraft_session_batch_dropped_total", perCell: true, in: inBoth, typ: counter, help: "Proxied sessions' handshakes dropped before their batch was proposed: their channel closed while they queued", value: func(r *reading) any { return r.f.SessionBatchDropped }},
		{name: "zkraft_session_batch_largest", perCell: true, in: inBoth, typ: gauge, help: "The most handshakes one batch carried", value: func(r *reading) any { return r.f.SessionBatchLargest }},
		{name: "zkraft_pebble_compactions_total", perCell: true, in: inProm, typ: counter, help: "Pebble compactions", value: storeFigure(func(m *Store) any { return m.Compactions })},
	})

// latencyFigures are mntr's avg_, min_, max_, cnt_ and sum_ of a latency
// summary.
func latencyFigures(name string, of func(*reading) Latency) []figure {
	return []figure{
		{name: "avg_" + name, in: inMntr, value: func(r *reading) any { return of(r).Avg }},
		{name: "min_" + name, in: inMntr, value: func(r *reading) any { return of(r).Min }},
		{name: "max_" + name, in: inMntr, value: func(r *reading) any { return of(r).Max }},
		{name: "cnt_" + name, in: inMntr, value: func(r *reading) any { return of(r).Count }},
		{name: "sum_" + name, in: inMntr, value: func(r *reading) any { return of(r).Sum }},
	}
}

// replicaFigure is a figure of the cell's replica, not shown for an
// implementer without one.
func replicaFigure(fn func(*Replica) any) func(*reading) any {
	return func(r *reading) any {
		if p := r.replica(); p != nil {
			return fn(p)
		}
		return nil
	}
}

// storeFigure is a figure of the state machine's store, not shown when
// it cannot be read.
func storeFigure(fn func(*Store) any) func(*reading) any {
	return replicaFigure(func(p *Replica) any {
		if p.Store != nil {
			return fn(p.Store)
		}
		return nil
	})
}

// Monitor is mntr (and the AdminServer's monitor): the figures shown in
// mntr, in order.
func Monitor(m Member) Object {
	r := newReading(m)
	var out Object
	for i := range figureTable {
		if fg := &figureTable[i]; r.shows(fg, inMntr) {
			out = append(out, KV{fg.name, fg.value(r)})
		}
	}
	return out
}

// Cell is one cell for the Prometheus collector: its name, the value of
// the label cell of its figures, and the Member answering for it.
type Cell struct {
	Name   string
	Member Member
}

// Collector is the Prometheus collector of the figures: cells are the
// cells hosted here, the member's default first. The member's own figures
// come once, from the first cell's reading; each cell's figures once per
// cell, labelled cell="<name>". Register it on the owner's Registerer.
func Collector(cells func() []Cell) prometheus.Collector { return collector(cells) }

type collector func() []Cell

// Describe sends nothing: an unchecked collector, since its set of series
// depends on the member's role.
func (c collector) Describe(chan<- *prometheus.Desc) {}

// Collect sends the figures the Prometheus endpoint shows.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	for vi, v := range c() {
		r := newReading(v.Member)
		for i := range figureTable {
			fg := &figureTable[i]
			if !r.shows(fg, inProm) || !fg.perCell && vi > 0 {
				continue
			}
			var labels, values []string
			if fg.perCell {
				labels, values = []string{"cell"}, []string{v.Name}
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
