package faulttest

import (
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/linreg"
)

// sessionEvent is one session state change a client saw.
type sessionEvent struct {
	at     int64
	state  zk.State
	server string
}

// client is one ZooKeeper client of the workload: a go-zookeeper Conn to
// all members, with its session events recorded.
type client struct {
	name string
	conn *zk.Conn
	clk  linreg.Clock

	mu     sync.Mutex
	events []sessionEvent
	// expiries counts StateExpired events; the lock recipe uses it to
	// notice that its ephemeral znode may be gone.
	expiries int
}

// cappedConn bounds every read and write deadline go-zookeeper sets to the
// client's receive timeout (two thirds of the session timeout). Without
// it, go-zookeeper waits ten receive timeouts for a ConnectResponse, so a
// client that reconnects to a paused member (the kernel still accepts the
// connection) would sit there far beyond its session timeout. ZooKeeper's
// own Java client gives up on such a member after its connect timeout
// (session timeout / number of hosts), so this only makes the Go client
// behave like the reference client; it does not change what is checked.
type cappedConn struct {
	net.Conn
	limit time.Duration
}

func (c cappedConn) cap(t time.Time) time.Time {
	lim := time.Now().Add(c.limit)
	if t.IsZero() || t.After(lim) {
		return lim
	}
	return t
}

func (c cappedConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.cap(t)) }
func (c cappedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.cap(t)) }
func (c cappedConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.cap(t)) }

// newClient connects to addrs (go-zookeeper shuffles them) and waits for a
// session.
func newClient(name string, addrs []string, timeout time.Duration, clk linreg.Clock, logw io.Writer) (*client, error) {
	c := &client{name: name, clk: clk}
	limit := timeout * 2 / 3
	dialer := func(network, address string, connectTimeout time.Duration) (net.Conn, error) {
		nc, err := net.DialTimeout(network, address, connectTimeout)
		if err != nil {
			return nil, err
		}
		return cappedConn{Conn: nc, limit: limit}, nil
	}
	conn, _, err := zk.Connect(addrs, timeout,
		zk.WithLogger(log.New(logw, name+" ", log.Lmicroseconds)),
		zk.WithDialer(dialer),
		zk.WithEventCallback(c.onEvent))
	if err != nil {
		return nil, err
	}
	c.conn = conn
	deadline := time.Now().Add(20 * time.Second)
	for conn.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			conn.Close()
			return nil, fmt.Errorf("%s: no session within 20s (state %v)", name, conn.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c, nil
}

func (c *client) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	c.mu.Lock()
	c.events = append(c.events, sessionEvent{at: c.clk.Now(), state: ev.State, server: ev.Server})
	if ev.State == zk.StateExpired {
		c.expiries++
	}
	c.mu.Unlock()
}

func (c *client) expiryCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.expiries
}

func (c *client) sessionEvents() []sessionEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sessionEvent(nil), c.events...)
}

func (c *client) close() { c.conn.Close() }

// expiry is one session expiry a client saw, with the member it had been
// connected to before it lost that connection.
type expiry struct {
	client       string
	at           int64
	lastServer   string // "" if it never had a session
	disconnected int64  // when it lost its last connection
}

// expiries lists the client's session expiries.
func (c *client) expiriesSeen() []expiry {
	var out []expiry
	var last string
	var disc int64
	for _, ev := range c.sessionEvents() {
		switch ev.state {
		case zk.StateHasSession:
			last, disc = ev.server, 0
		case zk.StateDisconnected:
			if disc == 0 {
				disc = ev.at
			}
		case zk.StateExpired:
			out = append(out, expiry{client: c.name, at: ev.at, lastServer: last, disconnected: disc})
		}
	}
	return out
}
