package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The proxy's own Prometheus figures, read at each scrape: its clients,
// their watches and outboxes, its upstream connection and its keep-alive
// batches. (The figures a member shows too, packets and latencies, come
// from the operator registry's collector.)

// view is one look at the proxy, for a scrape or a command.
type view struct {
	clients     []*client
	sessions    int // clients with a session
	outstanding int // requests forwarded and not answered
	outboxBytes int // replies queued for clients
	dataWatches int // the clients' watches, by table
	childWatch  int
	upMember    string // "" while there is no upstream connection
	upVersion   int32
	upChannels  int
	upQueued    int
	upWatches   int // shared watches the member holds for the connection
}

// look takes a view of the proxy.
func (p *Proxy) look() view {
	p.mu.Lock()
	v := view{clients: make([]*client, 0, len(p.mu.clients))}
	for c := range p.mu.clients {
		v.clients = append(v.clients, c)
	}
	up := p.mu.up
	p.mu.Unlock()
	for _, c := range v.clients {
		if c.sessionID.Load() != 0 {
			v.sessions++
		}
		v.outstanding += c.outstanding()
		c.out.Lock()
		v.outboxBytes += c.out.bytes
		c.out.Unlock()
		d, ch := c.clientWatches()
		v.dataWatches += len(d)
		v.childWatch += len(ch)
	}
	if up != nil {
		v.upMember, v.upVersion = up.addr, up.version
		v.upWatches = up.upstreamWatches()
		up.mu.Lock()
		v.upChannels = len(up.mu.chans)
		up.mu.Unlock()
		v.upQueued = up.out.Queued()
	}
	return v
}

type proxyCollector struct{ p *Proxy }

var (
	descUpConnected  = prometheus.NewDesc("zkraft_proxy_upstream_connected", "1 while the proxy has an upstream connection to the member named by the label", []string{"member"}, nil)
	descUpConnects   = prometheus.NewDesc("zkraft_proxy_upstream_connects_total", "upstream connections made (the first, then every reconnect)", nil, nil)
	descUpFailures   = prometheus.NewDesc("zkraft_proxy_upstream_connect_failures_total", "upstream connection attempts that failed", nil, nil)
	descUpChannels   = prometheus.NewDesc("zkraft_proxy_upstream_channels", "channels open on the upstream connection (client connections and four-letter words forwarded)", nil, nil)
	descUpQueued     = prometheus.NewDesc("zkraft_proxy_upstream_outbox_bytes", "bytes queued for the upstream connection's writer", nil, nil)
	descClients      = prometheus.NewDesc("zkraft_proxy_client_connections", "client connections the proxy holds", nil, nil)
	descSessions     = prometheus.NewDesc("zkraft_proxy_sessions", "client connections with a session", nil, nil)
	descOutstanding  = prometheus.NewDesc("zkraft_proxy_outstanding_requests", "client requests forwarded and not yet answered", nil, nil)
	descOutbox       = prometheus.NewDesc("zkraft_proxy_client_outbox_bytes", "bytes queued for clients, not yet written", nil, nil)
	descWatches      = prometheus.NewDesc("zkraft_proxy_watches", "watches the proxy's sessions hold in its fan-out lists, by table (data: getData, exists, persistent, recursive; child: getChildren, persistent); none with upstream protocol version 1", []string{"table"}, nil)
	descUpWatches    = prometheus.NewDesc("zkraft_proxy_upstream_watches", "shared watches the member holds for the upstream connection, one per path, table and mode however many sessions want it", nil, nil)
	descUpVersion    = prometheus.NewDesc("zkraft_proxy_upstream_protocol_version", "the upstream protocol version the connection speaks (0: no connection)", nil, nil)
	descKABatches    = prometheus.NewDesc("zkraft_proxy_keepalive_batches_total", "keep-alive batches sent upstream", nil, nil)
	descKAIDs        = prometheus.NewDesc("zkraft_proxy_keepalive_sessions_total", "session ids sent in keep-alive batches", nil, nil)
	descKALast       = prometheus.NewDesc("zkraft_proxy_keepalive_last_batch_sessions", "sessions in the last keep-alive batch", nil, nil)
	descRejected     = prometheus.NewDesc("zkraft_proxy_connections_rejected_total", "client connections refused by maxClientCnxns or maxCnxns", nil, nil)
	descNoUpstream   = prometheus.NewDesc("zkraft_proxy_handshakes_without_upstream_total", "client handshakes closed because no upstream connection came within the handshake wait", nil, nil)
	descStalled      = prometheus.NewDesc("zkraft_proxy_stalled_clients_closed_total", "clients closed because their outbox passed its bound (they stopped reading)", nil, nil)
	descWordsOwn     = prometheus.NewDesc("zkraft_proxy_words_answered_total", "four-letter words the proxy answered itself", nil, nil)
	proxyDescriptors = []*prometheus.Desc{descUpConnected, descUpConnects, descUpFailures, descUpChannels, descUpQueued, descUpWatches, descUpVersion, descClients, descSessions,
		descOutstanding, descOutbox, descWatches, descKABatches, descKAIDs, descKALast, descRejected, descNoUpstream, descStalled, descWordsOwn}
)

func (pc proxyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range proxyDescriptors {
		ch <- d
	}
}

func (pc proxyCollector) Collect(ch chan<- prometheus.Metric) {
	p := pc.p
	v := p.look()
	gauge := func(d *prometheus.Desc, x int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(x), labels...)
	}
	count := func(d *prometheus.Desc, x int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(x))
	}
	p.upstats.mu.Lock()
	connects, failures, member := p.upstats.mu.connects, p.upstats.mu.failures, p.upstats.mu.member
	p.upstats.mu.Unlock()
	connected := int64(0)
	if v.upMember != "" {
		connected, member = 1, v.upMember
	}
	gauge(descUpConnected, connected, member)
	count(descUpConnects, connects)
	count(descUpFailures, failures)
	gauge(descUpChannels, int64(v.upChannels))
	gauge(descUpQueued, int64(v.upQueued))
	gauge(descUpWatches, int64(v.upWatches))
	gauge(descUpVersion, int64(v.upVersion))
	gauge(descClients, int64(len(v.clients)))
	gauge(descSessions, int64(v.sessions))
	gauge(descOutstanding, int64(v.outstanding))
	gauge(descOutbox, int64(v.outboxBytes))
	gauge(descWatches, int64(v.dataWatches), "data")
	gauge(descWatches, int64(v.childWatch), "child")
	count(descKABatches, p.stats.keepAliveBatches.Load())
	count(descKAIDs, p.stats.keepAliveIDs.Load())
	gauge(descKALast, p.stats.lastBatch.Load())
	count(descRejected, p.stats.connRejected.Load())
	count(descNoUpstream, p.stats.handshakeRefused.Load())
	count(descStalled, p.stats.stalledClosed.Load())
	count(descWordsOwn, p.stats.wordsAnswered.Load())
}
