package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/zkraft/zkraft/operator"
	"github.com/zkraft/zkraft/proxy/wire"
	"github.com/zkraft/zkraft/session"
)

const (
	// backoffMin and backoffMax bound the wait between upstream attempts;
	// each wait is jittered by ±50 % so that proxies that lost one member
	// together do not reconnect together.
	backoffMin = 50 * time.Millisecond
	backoffMax = 5 * time.Second
	// dialTimeout bounds an upstream connect and its hello.
	dialTimeout = 3 * time.Second
)

// Proxy is one running proxy.
type Proxy struct {
	cfg Config
	log *slog.Logger
	ln  net.Listener

	// alive is the set of sessions heard from since the last keep-alive.
	alive session.KeepAlives

	stats   proxyStats    // packets, latencies, refusals (stats.go)
	upstats upstreamStats // the upstream connection's history
	// liveness and sched: the upstream reader's judgements of a silent
	// member, and the scheduler latency it logs with them (liveness.go).
	liveness livenessStats
	sched    schedLatency
	ops      []*opsServer // AdminServer and Prometheus listeners, set by New
	// poll starts the readers of parked clients (poller.go).
	poll *poller
	// reattachSlots holds one token per reattach in flight
	// (reattachWindow).
	reattachSlots chan struct{}
	// admit paces the clients' handshakes (admission.go).
	admit *admission
	reg   *operator.Registry

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards the fields below.
	mu struct {
		sync.Mutex
		up      *upConn // the upstream connection, nil while there is none
		clients map[*client]struct{}
		// detached are the clients kept when the upstream connection
		// ended, whose sessions wait to be reattached (reattach.go).
		detached map[*client]struct{}
		perIP    map[string]int
		closed   bool
	}
}

// New listens for clients and starts connecting upstream. Clients that
// connect before an upstream connection is up wait for it (HandshakeWait).
func New(cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.ClientAddr)
	if err != nil {
		return nil, fmt.Errorf("proxy: listen %s: %w", cfg.ClientAddr, err)
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger.With("proxy", cfg.Name), ln: ln}
	p.stats.started = time.Now()
	p.reg = newRegistry(p)
	p.mu.clients = map[*client]struct{}{}
	p.mu.detached = map[*client]struct{}{}
	p.reattachSlots = make(chan struct{}, reattachWindow)
	p.admit = newAdmission(cfg.HandshakesInFlight)
	p.mu.perIP = map[string]int{}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if p.poll, err = newPoller(p); err != nil {
		ln.Close()
		return nil, fmt.Errorf("proxy: epoll: %w", err)
	}
	if err := p.startOps(); err != nil {
		p.poll.release()
		p.closeOps()
		p.cancel()
		p.wg.Wait()
		ln.Close()
		return nil, err
	}
	p.wg.Add(4)
	go func() {
		defer p.wg.Done()
		p.poll.run()
	}()
	go p.acceptLoop()
	go p.upstreamLoop()
	go p.keepAliveLoop()
	p.log.Info("proxy serving", "client", ln.Addr().String(), "members", cfg.Members, "protocol", wire.Version)
	return p, nil
}

// Addr is the client listener's address.
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

// Close closes the listener, every client and the upstream connection, and
// waits for every goroutine the proxy started. Sessions are not closed:
// they are the cell's, and their clients reconnect elsewhere.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil
	}
	p.mu.closed = true
	up := p.mu.up
	clients := make([]*client, 0, len(p.mu.clients))
	for c := range p.mu.clients {
		clients = append(clients, c)
	}
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	p.closeOps()
	if up != nil {
		up.close()
	}
	for _, c := range clients {
		c.close()
	}
	p.poll.close()
	p.wg.Wait()
	p.poll.release()
	return err
}

// go runs f on a goroutine that Close waits for.
func (p *Proxy) goTracked(f func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			p.log.Warn("accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c, ok := p.register(nc)
		if !ok {
			nc.Close()
			continue
		}
		p.goTracked(c.serve)
	}
}

func remoteIP(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, _ := net.SplitHostPort(nc.RemoteAddr().String())
	return host
}

func (p *Proxy) register(nc net.Conn) (*client, bool) {
	ip := remoteIP(nc)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed ||
		(p.cfg.MaxClientCnxns > 0 && p.mu.perIP[ip] >= p.cfg.MaxClientCnxns) ||
		(p.cfg.MaxCnxns > 0 && len(p.mu.clients) >= p.cfg.MaxCnxns) {
		if !p.mu.closed {
			p.stats.connRejected.Add(1)
		}
		return nil, false
	}
	c := newClient(p, nc, ip)
	p.mu.clients[c] = struct{}{}
	p.mu.perIP[ip]++
	return c, true
}

func (p *Proxy) unregister(c *client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.mu.clients[c]; !ok {
		return
	}
	delete(p.mu.clients, c)
	delete(p.mu.detached, c)
	if p.mu.perIP[c.ip]--; p.mu.perIP[c.ip] <= 0 {
		delete(p.mu.perIP, c.ip)
	}
}

// upstream is the current upstream connection, waiting for one for at most
// wait; nil if there is none.
func (p *Proxy) upstream(wait time.Duration, done <-chan struct{}) *upConn {
	deadline := time.Now().Add(wait)
	for {
		p.mu.Lock()
		up := p.mu.up
		p.mu.Unlock()
		if up != nil || !time.Now().Before(deadline) {
			return up
		}
		select {
		case <-done:
			return nil
		case <-p.ctx.Done():
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// upstreamLoop keeps one upstream connection: it connects to the members
// in turn from a random start, with jittered exponential backoff between
// failed attempts, and when a connection ends closes its clients and
// connects again.
func (p *Proxy) upstreamLoop() {
	defer p.wg.Done()
	n := len(p.cfg.Members)
	next := rand.IntN(n)
	backoff := backoffMin
	for p.ctx.Err() == nil {
		addr := p.cfg.Members[next%n]
		next++
		u, err := dialUpstream(p, addr)
		if err != nil {
			p.upstats.failed(addr, err)
			p.log.Warn("upstream connect failed", "member", addr, "err", err, "retryIn", backoff.String())
			wait := backoff/2 + rand.N(backoff)
			backoff = min(2*backoff, backoffMax)
			select {
			case <-p.ctx.Done():
			case <-time.After(wait):
			}
			continue
		}
		backoff = backoffMin
		p.mu.Lock()
		if p.mu.closed {
			p.mu.Unlock()
			u.close()
			return
		}
		p.mu.up = u
		var orphans []*client
		if u.sw == nil {
			// A version 1 connection: the proxy does not know the
			// sessions' watches, so it cannot re-set them.
			for c := range p.mu.detached {
				orphans = append(orphans, c)
			}
			clear(p.mu.detached)
		}
		p.mu.Unlock()
		for _, c := range orphans {
			c.close()
		}
		p.upstats.connected(addr, time.Now())
		p.log.Info("upstream connected", "member", addr)
		if u.sw != nil {
			p.goTracked(func() { p.reattachAll(u) })
		}
		err = u.run()
		p.mu.Lock()
		p.mu.up = nil
		p.mu.Unlock()
		p.upstats.lost(err)
		kept := u.lose(p.ctx.Err() == nil)
		p.mu.Lock()
		for _, c := range kept {
			if _, ok := p.mu.clients[c]; ok {
				p.mu.detached[c] = struct{}{}
			}
		}
		p.mu.Unlock()
		if p.ctx.Err() == nil {
			p.log.Warn("upstream lost: sessions without requests in flight are kept and reattached on the next connection, the other clients closed", "member", addr, "err", err, "kept", len(kept))
		}
	}
}

// keepAliveLoop sends, every KeepAliveInterval, one batch of the sessions
// heard from since the last one (an empty batch too: it is the member's
// sign that the proxy lives, and its answer the proxy's that the member
// does).
func (p *Proxy) keepAliveLoop() {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.KeepAliveInterval)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		p.sweepIdle(time.Now())
		ids := p.alive.Drain()
		p.mu.Lock()
		up := p.mu.up
		p.mu.Unlock()
		if up != nil {
			up.kaAt.CompareAndSwap(0, time.Now().UnixNano())
			up.send(false, wire.AppendRecord(nil, wire.KindKeepAlive, 0, &wire.KeepAlive{Sessions: ids}))
			p.stats.keepAliveBatches.Add(1)
			p.stats.keepAliveIDs.Add(int64(len(ids)))
			p.stats.lastBatch.Store(int64(len(ids)))
		}
	}
}

// Clients is the number of client connections the proxy holds.
func (p *Proxy) Clients() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.clients)
}

// Upstream is the member address of the upstream connection, "" while
// there is none.
func (p *Proxy) Upstream() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.up == nil {
		return ""
	}
	return p.mu.up.addr
}

// sweepIdle closes the clients silent for two session timeouts and a
// keep-alive interval, as a member closes a connection whose reader's
// deadline passed (a parked client has no reader, poller.go). A client
// in its handshake has its reader's deadline.
func (p *Proxy) sweepIdle(now time.Time) {
	p.mu.Lock()
	clients := make([]*client, 0, len(p.mu.clients))
	for c := range p.mu.clients {
		clients = append(clients, c)
	}
	p.mu.Unlock()
	for _, c := range clients {
		t := c.timeout.Load()
		if t <= 0 {
			continue
		}
		bound := 2*time.Duration(t)*time.Millisecond + p.cfg.KeepAliveInterval
		if now.Sub(time.Unix(0, c.heard.Load())) > bound {
			p.log.Debug("client silent for two session timeouts: closed", "session", hexID(c.sessionID.Load()))
			c.close()
		}
	}
}
