package proxy

import (
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/zkraft/zkraft/operator"
)

// The proxy's operator surfaces are the operator package's commands over
// the proxy: its four-letter words (with ZooKeeper's whitelist, srvr only
// by default), its AdminServer and the standard figures of its Prometheus
// endpoint describe the proxy, not the member behind it. opMember is the
// proxy as an operator.Member sees it; what a proxy does not have (a data
// tree, a data directory, a replica, session expiry) is zero or empty.

// Mode is the proxy's srvr Mode and mntr zk_server_state.
const Mode = "proxy"

// opMember is the proxy as operator.Member and operator.Host.
type opMember struct{ p *Proxy }

var (
	_ operator.Member = opMember{}
	_ operator.Host   = opMember{}
)

// newRegistry is ZooKeeper's commands and the proxy's own: upstream, the
// upstream connection's state.
func newRegistry(p *Proxy) *operator.Registry {
	return operator.NewRegistry(operator.Command{
		Name: "upstream", Aliases: []string{"upst"},
		JSON: func(operator.Member, url.Values) (operator.Object, string) { return p.upstreamJSON(), "" },
	})
}

// Serving: the proxy serves while it has an upstream connection.
func (o opMember) Serving() bool {
	o.p.mu.Lock()
	defer o.p.mu.Unlock()
	return o.p.mu.up != nil
}

func (o opMember) zxid() int64 {
	o.p.mu.Lock()
	up := o.p.mu.up
	o.p.mu.Unlock()
	if up == nil {
		return 0
	}
	return up.zxid.Load()
}

func (o opMember) Figures() operator.Figures {
	p := o.p
	v := p.look()
	p.stats.mu.Lock()
	lat := p.stats.mu.lat
	p.stats.mu.Unlock()
	f := operator.Figures{
		Mode:          Mode,
		Zxid:          o.zxid(),
		Watches:       v.dataWatches + v.childWatch,
		Connections:   len(v.clients),
		Outstanding:   v.outstanding,
		Sessions:      v.sessions,
		Uptime:        time.Since(p.stats.started).Milliseconds(),
		Received:      p.stats.received.Load(),
		Sent:          p.stats.sent.Load(),
		MinLat:        lat.min,
		MaxLat:        lat.max,
		AvgLat:        lat.avg(),
		ConnRejected:  p.stats.connRejected.Load(),
		StalledClosed: p.stats.stalledClosed.Load(),
		BytesReceived: p.stats.bytesReceived.Load(),
	}
	f.OpenFDs, f.MaxFDs = fdCounts()
	return f
}

func fdCounts() (open, limit int64) {
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		open = int64(len(ents))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		limit = int64(lim.Cur)
	}
	return open, limit
}

// Replica: a proxy has none.
func (opMember) Replica() *operator.Replica { return nil }

// Conf: the proxy's client port and connection limit; it has no data
// directory, tick or session timeout bounds of its own (the member's
// apply), so those are empty or zero.
func (o opMember) Conf() operator.Conf {
	port := 0
	if a, ok := o.p.ln.Addr().(*net.TCPAddr); ok {
		port = a.Port
	}
	return operator.Conf{ClientPort: port, SecureClientPort: -1, MaxClientCnxns: o.p.cfg.MaxClientCnxns}
}

func (opMember) DirSizes() (data, log int64) { return 0, 0 }

// clientsSorted are the proxy's clients by when they connected.
func (p *Proxy) clientsSorted() []*client {
	v := p.look()
	sort.Slice(v.clients, func(i, j int) bool {
		a, b := v.clients[i], v.clients[j]
		if !a.stats.established.Equal(b.stats.established) {
			return a.stats.established.Before(b.stats.established)
		}
		return a.nc.RemoteAddr().String() < b.nc.RemoteAddr().String()
	})
	return v.clients
}

func (o opMember) Connections() []operator.Connection {
	cs := o.p.clientsSorted()
	out := make([]operator.Connection, 0, len(cs))
	for _, c := range cs {
		st := &c.stats
		st.mu.Lock()
		ci := operator.Connection{
			Remote:      c.nc.RemoteAddr().String(),
			Interest:    1, // reading
			Queued:      c.outstanding(),
			Received:    st.received.Load(),
			Sent:        st.sent.Load(),
			Session:     c.sessionID.Load(),
			LastOp:      st.mu.lastOp,
			Established: st.established.UnixMilli(),
			Timeout:     c.timeout.Load(),
			LastCxid:    st.mu.lastCxid,
			LastZxid:    st.mu.lastZxid,
			LastLatency: st.mu.lastLat,
			MinLat:      st.mu.lat.min,
			AvgLat:      int64(st.mu.lat.avg()),
			MaxLat:      st.mu.lat.max,
			HasSession:  c.sessionID.Load() != 0,
		}
		if !st.mu.lastResp.IsZero() {
			ci.LastResponse = st.mu.lastResp.Sub(o.p.stats.started).Milliseconds()
		}
		st.mu.Unlock()
		out = append(out, ci)
	}
	return out
}

func (o opMember) ResetConnections() {
	for _, c := range o.p.look().clients {
		c.stats.reset()
	}
}

func (o opMember) ResetStats() { o.p.stats.reset() }

// Sessions is dump: the proxy's sessions, each due to expire a timeout
// after the proxy last heard from its client (the member decides; the
// proxy's keep-alives carry what it heard), and its connections. It holds
// no ephemerals.
func (o opMember) Sessions() operator.Sessions {
	s := operator.Sessions{Started: o.p.stats.started, Expiry: map[time.Time][]int64{}}
	for _, c := range o.p.clientsSorted() {
		id := c.sessionID.Load()
		var exp time.Time
		if id != 0 {
			exp = time.Unix(0, c.heard.Load()).Add(time.Duration(c.timeout.Load()) * time.Millisecond)
			s.Expiry[exp] = append(s.Expiry[exp], id)
			s.Count++
		}
		s.Conns = append(s.Conns, operator.ConnExpiry{Remote: c.nc.RemoteAddr().String(), Session: id, Expire: exp})
	}
	return s
}

// WatchCount is wchs: the sessions' watches (one per table and path), the
// paths watched and the sessions watching.
func (o opMember) WatchCount() (watches, paths, conns int) {
	all := map[string]bool{}
	for _, c := range o.p.look().clients {
		d, ch := c.clientWatches()
		if len(d)+len(ch) == 0 {
			continue
		}
		watches += len(d) + len(ch)
		conns++
		for _, p := range append(d, ch...) {
			all[p] = true
		}
	}
	return watches, len(all), conns
}

// WatchesBySession is wchc: each session's data-table paths.
func (o opMember) WatchesBySession() []operator.SessionWatches {
	var out []operator.SessionWatches
	for _, c := range o.p.look().clients {
		if ps, _ := c.clientWatches(); len(ps) > 0 {
			out = append(out, operator.SessionWatches{ID: c.sessionID.Load(), Paths: ps})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// WatchesByPath is wchp: the sessions with a data-table watch on each path.
func (o opMember) WatchesByPath() []operator.PathWatches {
	by := map[string][]int64{}
	for _, c := range o.p.look().clients {
		ps, _ := c.clientWatches()
		for _, p := range ps {
			by[p] = append(by[p], c.sessionID.Load())
		}
	}
	out := make([]operator.PathWatches, 0, len(by))
	for p, ids := range by {
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		out = append(out, operator.PathWatches{Path: p, IDs: ids})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Cell: a proxy fronts one cell; ?cell= naming another is refused.
func (o opMember) Cell(name string) (operator.Member, string) {
	if name == "" || name == "default" {
		return o, ""
	}
	return nil, "a proxy answers for the cell it fronts only: no cell " + name + " here"
}

// Authorize: the proxy has no command that asks for authorization, and no
// way to check ids against the cell's ACLs itself.
func (opMember) Authorize(*http.Request, operator.Auth) (int, string, bool) {
	return http.StatusForbidden, "a proxy does not authorize AdminServer requests: ask a member", false
}

// upstreamJSON is the upstream command: the upstream connection's state.
func (p *Proxy) upstreamJSON() operator.Object {
	v := p.look()
	p.upstats.mu.Lock()
	member, connects, failures, lastError, at := p.upstats.mu.member, p.upstats.mu.connects, p.upstats.mu.failures, p.upstats.mu.lastError, p.upstats.mu.since
	p.upstats.mu.Unlock()
	p.liveness.mu.Lock()
	starved, unsent, graced, silent, lateMax, note := p.liveness.mu.starved, p.liveness.mu.unsent, p.liveness.mu.graced, p.liveness.mu.silent, p.liveness.mu.lateMax, p.liveness.mu.lastNote
	p.liveness.mu.Unlock()
	p.stats.fan.Lock()
	fan := p.stats.fan.last
	p.stats.fan.Unlock()
	since := ""
	if !at.IsZero() {
		since = at.UTC().Format(time.RFC3339)
	}
	return operator.Object{
		{"connected", v.upMember != ""},
		{"member", member},
		{"members", stringList(p.cfg.Members)},
		{"connected_since", since},
		{"connects", connects},
		{"connect_failures", failures},
		{"last_error", lastError},
		{"protocol_version", int64(v.upVersion)},
		{"channels", v.upChannels},
		{"outbox_bytes", v.upQueued},
		{"shared_watches", v.upWatches},
		{"session_watches", v.dataWatches + v.childWatch},
		{"zxid", opMember{p}.zxid()},
		{"keepalive_interval_ms", p.cfg.KeepAliveInterval.Milliseconds()},
		{"keepalive_batches", p.stats.keepAliveBatches.Load()},
		{"keepalive_last_batch_sessions", p.stats.lastBatch.Load()},
		{"client_connections", len(v.clients)},
		{"sessions", v.sessions},
		{"outstanding_requests", v.outstanding},
		{"client_outbox_bytes", v.outboxBytes},
		{"connections_rejected", p.stats.connRejected.Load()},
		{"handshakes_without_upstream", p.stats.handshakeRefused.Load()},
		{"handshakes_in_flight", int64(len(p.admit.slots))},
		{"handshakes_waiting", p.admit.waiting.Load()},
		{"handshakes_queued", p.admit.queued.Load()},
		{"handshakes_refused_busy", p.admit.refusedAtOnce.Load()},
		{"handshakes_refused_after_wait", p.admit.refusedWaited.Load()},
		{"handshakes_client_gone", p.admit.gone.Load()},
		{"stalled_clients_closed", p.stats.stalledClosed.Load()},
		{"pings_in_place", p.stats.pingsInPlace.Load()},
		{"sessions_detached", p.stats.detached.Load()},
		{"sessions_reattached", p.stats.reattached.Load()},
		{"sessions_not_reattached", p.stats.reattachFailed.Load()},
		{"sessions_detached_expired", p.stats.detachedExpired.Load()},
		{"reader_starved", starved},
		{"keepalive_unwritten", unsent},
		{"member_slow", graced},
		{"member_silent", silent},
		{"reader_late_max_ms", lateMax.Milliseconds()},
		{"last_liveness_note", note},
		// The last shared watch's fan-out (fanout.go): Unix ns when its
		// Event was read, when the fan-out began and ended; its sessions,
		// those written whole by the fan-out itself, its goroutines.
		{"fanout_last_read_unix_ns", unixNs(fan.read)},
		{"fanout_last_start_unix_ns", unixNs(fan.start)},
		{"fanout_last_end_unix_ns", unixNs(fan.end)},
		{"fanout_last_sessions", fan.sessions},
		{"fanout_last_direct", fan.direct},
		{"fanout_last_workers", fan.workers},
	}
}

// unixNs is t in Unix ns, 0 for the zero time.
func unixNs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func stringList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
