// Package tcpproxy is a loopback TCP proxy for tests that cut a client's
// connections to a server mid-stream, or blackhole them for a while.
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards every connection it accepts to a target address.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	// open is closed while traffic flows; Block replaces it with an open
	// channel that Unblock closes.
	open chan struct{}
	// accepted counts the connections accepted so far.
	accepted int
}

// New starts a proxy to target; it is closed when the test ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, open: make(chan struct{})}
	close(p.open)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.accepted++
	p.mu.Unlock()
	<-p.gate() // while blocked, a new connection is accepted but goes nowhere
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, s)
	p.mu.Unlock()
	go func() { p.copy(s, c); s.Close() }()
	go func() { p.copy(c, s); c.Close() }()
}

// copy forwards src to dst, holding each chunk while the proxy is blocked.
func (p *Proxy) copy(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Accepted is the number of connections accepted so far: a test that
// cuts connections checks with it that its client came back.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every proxied connection; new ones are still accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Block stops every byte in both directions, as a network partition does:
// connections stay open and silent, new ones are accepted and go nowhere,
// until Unblock.
func (p *Proxy) Block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

// Unblock lets traffic flow again, what was held first.
func (p *Proxy) Unblock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// Close stops accepting and cuts every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Unblock()
	p.Cut()
}
