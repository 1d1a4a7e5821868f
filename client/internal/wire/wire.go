// Package wire is a small ZooKeeper client over one connection at a time,
// for what go-zookeeper hides or lacks and the caches need: the zxid of
// every reply, persistent and persistent recursive watches (addWatch,
// restored by setWatches2 on a reconnection), and notifications queued in
// the order they arrived between the replies.
//
// It keeps its session across reconnections to any of its servers and
// opens a new one when the server says the old one expired, reporting
// each in the event queue; it does not retry requests (a request cut off
// by a lost connection fails with ErrConnLost) and does not replay what
// the watches missed while disconnected: its caller re-reads.
//
// It imports jute only; it must never import the server or anything
// under it.
package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
)

var (
	// ErrConnLost: the connection failed before the reply; a write may or
	// may not have been applied.
	ErrConnLost = errors.New("wire: connection lost")
	// ErrClosed: the Conn was closed.
	ErrClosed = errors.New("wire: closed")
)

// Auth is a set of credentials sent on every connection.
type Auth struct {
	Scheme string
	Auth   []byte
}

// Config configures a Conn.
type Config struct {
	Servers []string
	Timeout time.Duration // session timeout requested; default 10s
	Auth    []Auth
}

// EventKind says what an Event reports.
type EventKind int

const (
	// Notify is a watch notification.
	Notify EventKind = iota
	// Reconnected: the connection was lost and a server resumed the
	// session; notifications in between are lost.
	Reconnected
	// NewSession: the session expired and a new one was opened; the
	// persistent watches were added again. (As after Reconnected, a
	// request sent after the event is answered after they are in place.)
	NewSession
)

// Event is one entry of the queue.
type Event struct {
	Kind EventKind
	// Zxid of a notification's header: the change's zxid when the server
	// says (zkraft, ZooKeeper 3.9+), else -1 or 0.
	Zxid int64
	Type jute.EventType
	Path string
}

// Conn is a session over one connection at a time. It is safe for
// concurrent use.
type Conn struct {
	cfg  Config
	quit chan struct{}
	done chan struct{}
	xid  atomic.Int32
	wake chan struct{} // one pending signal: events queued

	// mu guards what follows; lock order: Conn.mu before link.mu.
	mu struct {
		sync.Mutex
		cur        *link
		ready      chan struct{} // closed while cur serves
		sid        int64
		passwd     []byte
		lastZxid   int64
		timeout    time.Duration
		persistent map[string]int32 // path -> addWatch mode
		events     []Event
		closed     bool
		connected  bool // a session was granted at least once
	}
}

type link struct {
	nc   net.Conn
	wmu  sync.Mutex
	dead chan struct{}

	mu      sync.Mutex
	pending map[int32]*call
	failed  bool
}

type call struct {
	done chan struct{}
	hdr  jute.ReplyHeader
	body []byte
}

// Dial starts a Conn and returns once it has a session.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	if len(cfg.Servers) == 0 {
		return nil, errors.New("wire: no servers")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	c := &Conn{cfg: cfg, quit: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	c.mu.ready = make(chan struct{})
	c.mu.persistent = map[string]int32{}
	c.mu.timeout = cfg.Timeout
	go c.run()
	c.mu.Lock()
	ready := c.mu.ready
	c.mu.Unlock()
	select {
	case <-ready:
		return c, nil
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("wire: no session from %v: %w", cfg.Servers, context.Cause(ctx))
	}
}

func (c *Conn) run() {
	defer close(c.done)
	backoff := 20 * time.Millisecond
	for i := 0; ; i++ {
		select {
		case <-c.quit:
			return
		default:
		}
		addr := c.cfg.Servers[i%len(c.cfg.Servers)]
		l, err := c.connect(addr)
		if err == nil {
			backoff = 20 * time.Millisecond
			c.serve(l)
			continue
		}
		if (i+1)%len(c.cfg.Servers) == 0 {
			t := time.NewTimer(backoff)
			select {
			case <-c.quit:
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, time.Second)
		}
	}
}

func (c *Conn) connect(addr string) (*link, error) {
	c.mu.Lock()
	timeout := c.mu.timeout
	c.mu.Unlock()
	dialTimeout := max(timeout/time.Duration(2*len(c.cfg.Servers)), 500*time.Millisecond)
	nc, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		return nil, err
	}
	// Close interrupts a handshake in progress.
	var current atomic.Pointer[net.Conn]
	current.Store(&nc)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-c.quit:
			(*current.Load()).Close()
		case <-stop:
		}
	}()
	for attempt := 0; attempt < 2; attempt++ {
		c.mu.Lock()
		req := &jute.ConnectRequest{LastZxidSeen: c.mu.lastZxid, TimeOut: int32(c.cfg.Timeout / time.Millisecond),
			SessionID: c.mu.sid, Passwd: c.mu.passwd}
		c.mu.Unlock()
		if req.Passwd == nil {
			req.Passwd = make([]byte, 16)
		}
		nc.SetDeadline(time.Now().Add(max(timeout*2/3, time.Second)))
		if _, err := nc.Write(jute.AppendFrame(nil, req)); err != nil {
			nc.Close()
			return nil, err
		}
		body, err := jute.ReadFrame(nc, nil, maxFrame)
		if err != nil {
			nc.Close()
			return nil, err
		}
		var resp jute.ConnectResponse
		if err := jute.Unmarshal(body, &resp); err != nil {
			nc.Close()
			return nil, err
		}
		if resp.SessionID == 0 {
			// Expired: forget it and ask this server for a new one. A
			// ZooKeeper server closes the connection after saying so.
			c.mu.Lock()
			had := c.mu.sid != 0
			c.mu.sid, c.mu.passwd = 0, nil
			c.mu.Unlock()
			if !had {
				nc.Close()
				return nil, errors.New("wire: the server refused a new session")
			}
			nc.Close()
			if nc, err = net.DialTimeout("tcp", addr, dialTimeout); err != nil {
				return nil, err
			}
			current.Store(&nc)
			continue
		}
		nc.SetDeadline(time.Time{})
		return c.established(nc, resp, req.SessionID)
	}
	nc.Close()
	return nil, errors.New("wire: no session")
}

// established finishes a handshake: credentials, watches, the event, and
// the link starts serving.
func (c *Conn) established(nc net.Conn, resp jute.ConnectResponse, asked int64) (*link, error) {
	l := &link{nc: nc, dead: make(chan struct{}), pending: map[int32]*call{}}
	var frames []byte
	for _, a := range c.cfg.Auth {
		frames = jute.AppendFrame(frames, &jute.RequestHeader{Xid: jute.XidAuth, Type: jute.OpAuth},
			&jute.AuthPacket{Scheme: a.Scheme, Auth: a.Auth})
	}
	c.mu.Lock()
	first := !c.mu.connected
	same := asked != 0 && asked == resp.SessionID
	c.mu.sid, c.mu.passwd = resp.SessionID, resp.Passwd
	c.mu.timeout = time.Duration(resp.TimeOut) * time.Millisecond
	c.mu.connected = true
	if len(c.mu.persistent) > 0 {
		if same {
			// Empty lists, not nil: a Java server reads a nil (-1) vector
			// as null and fails on it.
			sw := &jute.SetWatches2{RelativeZxid: c.mu.lastZxid, DataWatches: []string{}, ExistWatches: []string{},
				ChildWatches: []string{}, PersistentWatches: []string{}, PersistentRecursiveWatches: []string{}}
			for p, m := range c.mu.persistent {
				if m == jute.AddWatchModePersistentRecursive {
					sw.PersistentRecursiveWatches = append(sw.PersistentRecursiveWatches, p)
				} else {
					sw.PersistentWatches = append(sw.PersistentWatches, p)
				}
			}
			frames = jute.AppendFrame(frames, &jute.RequestHeader{Xid: jute.XidSetWatches, Type: jute.OpSetWatches2}, sw)
		} else {
			for p, m := range c.mu.persistent {
				frames = jute.AppendFrame(frames, &jute.RequestHeader{Xid: c.nextXid(), Type: jute.OpAddWatch},
					&jute.AddWatchRequest{Path: p, Mode: m})
			}
		}
	}
	c.mu.Unlock()
	// The credentials and watches go before the link is published, so
	// every request sent after the event below is answered after them.
	if len(frames) > 0 {
		nc.SetWriteDeadline(time.Now().Add(max(time.Duration(resp.TimeOut)*time.Millisecond*2/3, time.Second)))
		_, err := nc.Write(frames)
		nc.SetWriteDeadline(time.Time{})
		if err != nil {
			nc.Close()
			return nil, err
		}
	}
	c.mu.Lock()
	switch {
	case first:
	case same:
		c.queueLocked(Event{Kind: Reconnected})
	default:
		c.queueLocked(Event{Kind: NewSession})
	}
	c.mu.cur = l
	close(c.mu.ready)
	c.mu.Unlock()
	return l, nil
}

func (c *Conn) nextXid() int32 { return c.xid.Add(1) & 0x7fffffff }

func (c *Conn) queueLocked(e Event) {
	c.mu.events = append(c.mu.events, e)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// serve reads l until it fails, pinging meanwhile.
func (c *Conn) serve(l *link) {
	c.mu.Lock()
	timeout := c.mu.timeout
	c.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(timeout / 3)
		defer t.Stop()
		ping := jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing})
		for {
			select {
			case <-l.dead:
				return
			case <-c.quit:
				return
			case <-t.C:
				if err := l.write(ping, timeout); err != nil {
					c.fail(l)
					return
				}
			}
		}
	}()
	defer wg.Wait()
	defer c.fail(l)
	br := bufio.NewReaderSize(l.nc, 64<<10)
	for {
		l.nc.SetReadDeadline(time.Now().Add(timeout * 2 / 3))
		body, err := jute.ReadFrame(br, nil, maxFrame)
		if err != nil {
			return
		}
		var h jute.ReplyHeader
		r := jute.NewReader(body)
		h.Decode(r)
		if r.Err() != nil {
			return
		}
		switch h.Xid {
		case jute.XidNotification:
			var ev jute.WatcherEvent
			ev.Decode(r)
			if r.Err() != nil {
				return
			}
			c.mu.Lock()
			c.queueLocked(Event{Kind: Notify, Zxid: h.Zxid, Type: ev.Type, Path: ev.Path})
			c.mu.Unlock()
			continue
		case jute.XidPing, jute.XidAuth, jute.XidSetWatches:
			continue
		}
		if h.Zxid > 0 {
			c.mu.Lock()
			if h.Zxid > c.mu.lastZxid {
				c.mu.lastZxid = h.Zxid
			}
			c.mu.Unlock()
		}
		l.mu.Lock()
		cl := l.pending[h.Xid]
		delete(l.pending, h.Xid)
		l.mu.Unlock()
		if cl != nil {
			cl.hdr, cl.body = h, r.Rest()
			close(cl.done)
		}
	}
}

func (l *link) write(frame []byte, timeout time.Duration) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.nc.SetWriteDeadline(time.Now().Add(timeout * 2 / 3))
	_, err := l.nc.Write(frame)
	return err
}

// fail takes l down: its pending calls end with ErrConnLost.
func (c *Conn) fail(l *link) {
	c.mu.Lock()
	if c.mu.cur == l {
		c.mu.cur = nil
		c.mu.ready = make(chan struct{})
	}
	c.mu.Unlock()
	l.mu.Lock()
	if !l.failed {
		l.failed = true
		close(l.dead)
		l.nc.Close()
	}
	l.mu.Unlock()
}

// Do sends one request and waits for its reply: it returns the reply's
// zxid and, for an error reply, its jute.ErrCode. resp may be nil.
func (c *Conn) Do(ctx context.Context, op jute.OpCode, req, resp jute.Record) (int64, error) {
	l, err := c.link(ctx)
	if err != nil {
		return 0, err
	}
	cl := &call{done: make(chan struct{})}
	xid := c.nextXid()
	l.mu.Lock()
	if l.failed {
		l.mu.Unlock()
		return 0, ErrConnLost
	}
	l.pending[xid] = cl
	l.mu.Unlock()
	c.mu.Lock()
	timeout := c.mu.timeout
	c.mu.Unlock()
	if err := l.write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: xid, Type: op}, req), timeout); err != nil {
		c.fail(l)
		return 0, ErrConnLost
	}
	select {
	case <-cl.done:
	case <-l.dead:
		select {
		case <-cl.done:
		default:
			return 0, ErrConnLost
		}
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
	if cl.hdr.Err != jute.ErrOK {
		return cl.hdr.Zxid, cl.hdr.Err
	}
	if resp != nil {
		if err := jute.Unmarshal(cl.body, resp); err != nil {
			return cl.hdr.Zxid, err
		}
	}
	return cl.hdr.Zxid, nil
}

// link waits for a serving link.
func (c *Conn) link(ctx context.Context) (*link, error) {
	for {
		c.mu.Lock()
		l, ready, closed := c.mu.cur, c.mu.ready, c.mu.closed
		c.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		if l != nil {
			return l, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-c.quit:
			return nil, ErrClosed
		}
	}
}

// AddWatch adds a persistent (recursive) watch on path, kept across
// reconnections and sessions until Close.
func (c *Conn) AddWatch(ctx context.Context, path string, mode int32) error {
	c.mu.Lock()
	c.mu.persistent[path] = mode
	c.mu.Unlock()
	_, err := c.Do(ctx, jute.OpAddWatch, &jute.AddWatchRequest{Path: path, Mode: mode}, nil)
	if err != nil {
		c.mu.Lock()
		delete(c.mu.persistent, path)
		c.mu.Unlock()
	}
	return err
}

// Wake is signalled when events are queued.
func (c *Conn) Wake() <-chan struct{} { return c.wake }

// Drain returns the queued events, oldest first, and empties the queue.
func (c *Conn) Drain() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.mu.events
	c.mu.events = nil
	return e
}

// SessionID is the current session's id.
func (c *Conn) SessionID() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.sid
}

// Close closes the session and waits for the Conn's goroutines.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		<-c.done
		return nil
	}
	c.mu.closed = true
	l := c.mu.cur
	c.mu.Unlock()
	if l != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cl := &call{done: make(chan struct{})}
		l.mu.Lock()
		l.pending[1<<30] = cl
		l.mu.Unlock()
		if l.write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: 1 << 30, Type: jute.OpCloseSession}), time.Second) == nil {
			select {
			case <-cl.done:
			case <-l.dead:
			case <-ctx.Done():
			}
		}
		cancel()
	}
	close(c.quit)
	if l != nil {
		c.fail(l)
	}
	<-c.done
	return nil
}

// maxFrame bounds a frame read from the server.
const maxFrame = 64 << 20
