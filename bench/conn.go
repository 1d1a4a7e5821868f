package bench

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
)

// This file is a small pipelined ZooKeeper client on top of package jute.
// One Conn is one session on one TCP connection. Any number of requests may
// be in flight: Send encodes a request into the pending write buffer and
// returns at once; a writer goroutine writes whatever has accumulated in one
// system call, and a reader goroutine matches replies, which ZooKeeper sends
// in request order, to their callbacks. Callbacks run on the reader
// goroutine and must not block; they may call Send.

// epoch is the origin of nanotime.
var epoch = time.Now()

// nanotime returns monotonic nanoseconds since epoch.
func nanotime() int64 { return int64(time.Since(epoch)) }

// maxFrame bounds a reply frame (64 MiB), far above jute.maxbuffer.
const maxFrame = 64 << 20

// ErrClosed is returned by Send after the connection has closed.
var ErrClosed = errors.New("bench: connection closed")

// Reply is a reply passed to a callback. Body aliases the read buffer and is
// valid only during the callback.
type Reply struct {
	Xid  int32
	Zxid int64
	Err  jute.ErrCode
	Body []byte
	// At is the nanotime at which the reply was read; Latency is At minus
	// the nanotime at which the request was queued.
	At      int64
	Latency int64
}

// Callback receives the reply to one request. When the connection is lost
// before the reply, it is called with Err = jute.ErrConnectionLoss.
type Callback func(r *Reply)

type pending struct {
	xid  int32
	sent int64
	cb   Callback
}

// ConnOptions configure Dial.
type ConnOptions struct {
	// SessionTimeout requested from the server.
	SessionTimeout time.Duration
	// DialTimeout bounds the TCP connect and the session handshake.
	DialTimeout time.Duration
	// SessionID and Passwd re-attach to an existing session.
	SessionID int64
	Passwd    []byte
	// OnWatch is called on the reader goroutine for every notification.
	OnWatch func(ev *jute.WatcherEvent, at int64)
	// OnPing is called on the reader goroutine with each ping's round trip.
	OnPing func(rtt int64)
	// OnClose is called once, on the reader goroutine, when the connection
	// ends; err is nil after Close.
	OnClose func(err error)
}

// Conn is one ZooKeeper session over one TCP connection.
type Conn struct {
	nc   net.Conn
	opts ConnOptions

	// SessionID, Passwd and Timeout are the session as the server granted it.
	SessionID int64
	Passwd    []byte
	Timeout   time.Duration

	mu      sync.Mutex
	w       *jute.Writer // requests not yet handed to the writer
	spare   *jute.Writer
	xid     int32
	ring    []pending // FIFO of requests awaiting replies
	head, n int
	closed  bool
	closing bool
	// closeSent is set once closeSession is queued: the server then
	// closes the connection, which is not an error.
	closeSent bool
	err       error

	kick     chan struct{}
	quit     chan struct{}
	done     chan struct{} // closed when the reader has exited
	wdone    chan struct{} // closed when the writer has exited
	lastSend atomic.Int64
	lastRecv atomic.Int64
	pingSent atomic.Int64 // nanotime of the outstanding ping, 0 if none
}

// Dial opens a session on addr.
func Dial(addr string, opts ConnOptions) (*Conn, error) {
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 10 * time.Second
	}
	nc, err := net.DialTimeout("tcp", addr, opts.DialTimeout)
	if err != nil {
		return nil, err
	}
	passwd := opts.Passwd
	if passwd == nil {
		passwd = make([]byte, 16)
	}
	req := &jute.ConnectRequest{
		TimeOut:     int32(opts.SessionTimeout / time.Millisecond),
		SessionID:   opts.SessionID,
		Passwd:      passwd,
		HasReadOnly: true,
	}
	_ = nc.SetDeadline(time.Now().Add(opts.DialTimeout))
	if _, err := nc.Write(jute.AppendFrame(nil, req)); err != nil {
		nc.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	frame, err := jute.ReadFrame(br, nil, maxFrame)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("session handshake with %s: %w", addr, err)
	}
	var resp jute.ConnectResponse
	if err := jute.Unmarshal(frame, &resp); err != nil {
		nc.Close()
		return nil, fmt.Errorf("session handshake with %s: %w", addr, err)
	}
	if resp.TimeOut <= 0 {
		nc.Close()
		return nil, jute.ErrSessionExpired
	}
	_ = nc.SetDeadline(time.Time{})
	c := &Conn{
		nc:        nc,
		opts:      opts,
		SessionID: resp.SessionID,
		Passwd:    resp.Passwd,
		Timeout:   time.Duration(resp.TimeOut) * time.Millisecond,
		w:         jute.NewWriter(4096),
		spare:     jute.NewWriter(4096),
		ring:      make([]pending, 64),
		kick:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
		wdone:     make(chan struct{}),
	}
	now := nanotime()
	c.lastSend.Store(now)
	c.lastRecv.Store(now)
	go c.readLoop(br)
	go c.writeLoop()
	return c, nil
}

// push appends p to the FIFO; c.mu is held.
func (c *Conn) push(p pending) {
	if c.n == len(c.ring) {
		r := make([]pending, 2*len(c.ring))
		for i := 0; i < c.n; i++ {
			r[i] = c.ring[(c.head+i)%len(c.ring)]
		}
		c.ring, c.head = r, 0
	}
	c.ring[(c.head+c.n)%len(c.ring)] = p
	c.n++
}

// pop removes the oldest pending request; c.mu is held.
func (c *Conn) pop() (pending, bool) {
	if c.n == 0 {
		return pending{}, false
	}
	p := c.ring[c.head]
	c.ring[c.head] = pending{}
	c.head = (c.head + 1) % len(c.ring)
	c.n--
	return p, true
}

// Send queues a request; cb (which may be nil) receives the reply. req may be
// reused as soon as Send returns.
func (c *Conn) Send(op jute.OpCode, req jute.Record, cb Callback) error {
	c.mu.Lock()
	if c.closed || c.closing {
		err := c.err
		c.mu.Unlock()
		if err == nil {
			err = ErrClosed
		}
		return err
	}
	c.xid++
	if c.xid <= 0 { // never collide with the special xids
		c.xid = 1
	}
	xid := c.xid
	if op == jute.OpCloseSession {
		c.closeSent = true
	}
	wasEmpty := c.appendFrame(xid, op, req)
	c.push(pending{xid: xid, sent: nanotime(), cb: cb})
	c.mu.Unlock()
	if wasEmpty {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// appendFrame encodes a request frame into c.w; c.mu is held. It reports
// whether c.w was empty before.
func (c *Conn) appendFrame(xid int32, op jute.OpCode, req jute.Record) bool {
	w := c.w
	start := w.Len()
	w.Int(0)
	w.Int(xid)
	w.Int(int32(op))
	if req != nil {
		req.Encode(w)
	}
	b := w.Bytes()
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return start == 0
}

// Do sends a request and waits for its reply (at most timeout), decoding the
// body into resp if it is not nil. A reply error is returned as a
// jute.ErrCode.
func (c *Conn) Do(op jute.OpCode, req, resp jute.Record, timeout time.Duration) error {
	ch := make(chan error, 1)
	err := c.Send(op, req, func(r *Reply) {
		if r.Err != jute.ErrOK {
			ch <- r.Err
			return
		}
		if resp != nil {
			ch <- jute.Unmarshal(r.Body, resp)
			return
		}
		ch <- nil
	})
	if err != nil {
		return err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-ch:
		return err
	case <-t.C:
		return fmt.Errorf("%v: no reply within %v", op, timeout)
	}
}

// InFlight returns the number of requests awaiting replies.
func (c *Conn) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Err returns the error that ended the connection, nil while it is open or
// after Close.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

func (c *Conn) readLoop(br *bufio.Reader) {
	var buf []byte
	var ev jute.WatcherEvent
	var rep Reply
	var err error
	for {
		buf, err = jute.ReadFrame(br, buf, maxFrame)
		if err != nil {
			break
		}
		now := nanotime()
		c.lastRecv.Store(now)
		if len(buf) < 16 {
			err = fmt.Errorf("reply frame of %d bytes", len(buf))
			break
		}
		xid := int32(binary.BigEndian.Uint32(buf))
		switch xid {
		case jute.XidNotification:
			if err = jute.Unmarshal(buf[16:], &ev); err != nil {
				break
			}
			if c.opts.OnWatch != nil {
				c.opts.OnWatch(&ev, now)
			}
			continue
		case jute.XidPing:
			if sent := c.pingSent.Swap(0); sent != 0 && c.opts.OnPing != nil {
				c.opts.OnPing(now - sent)
			}
			continue
		case jute.XidAuth, jute.XidSetWatches:
			continue
		}
		if err != nil {
			break
		}
		c.mu.Lock()
		p, ok := c.pop()
		c.mu.Unlock()
		if !ok || p.xid != xid {
			err = fmt.Errorf("reply xid %d out of order (expected %d)", xid, p.xid)
			break
		}
		if p.cb != nil {
			rep = Reply{
				Xid:     xid,
				Zxid:    int64(binary.BigEndian.Uint64(buf[4:])),
				Err:     jute.ErrCode(int32(binary.BigEndian.Uint32(buf[12:]))),
				Body:    buf[16:],
				At:      now,
				Latency: now - p.sent,
			}
			p.cb(&rep)
		}
	}
	c.mu.Lock()
	if c.closing || c.closeSent {
		c.err = nil // we ended it
	} else if c.err == nil {
		if err == io.EOF {
			err = errors.New("connection closed by the server")
		}
		c.err = err
	}
	err = c.err
	c.closed = true
	c.mu.Unlock()
	close(c.quit)
	c.nc.Close()
	<-c.wdone
	// Fail whatever is still pending.
	now := nanotime()
	for {
		c.mu.Lock()
		p, ok := c.pop()
		c.mu.Unlock()
		if !ok {
			break
		}
		if p.cb != nil {
			rep = Reply{Xid: p.xid, Err: jute.ErrConnectionLoss, At: now, Latency: now - p.sent}
			p.cb(&rep)
		}
	}
	if c.opts.OnClose != nil {
		c.opts.OnClose(err)
	}
	close(c.done)
}

// writeLoop writes queued requests and pings the server when the session has
// been idle for a third of its timeout (as the Java client does). It ends the
// connection when nothing has been read for two thirds of the timeout while
// a ping is outstanding (the Java client's read timeout).
func (c *Conn) writeLoop() {
	defer close(c.wdone)
	pingEvery := c.Timeout / 3
	readTimeout := int64(c.Timeout * 2 / 3)
	tick := pingEvery / 2
	if tick < 10*time.Millisecond {
		tick = 10 * time.Millisecond
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-c.kick:
		case <-t.C:
			now := nanotime()
			if now-c.lastRecv.Load() > readTimeout && c.pingSent.Load() != 0 {
				c.abort(fmt.Errorf("nothing read for %v (session timeout %v)", time.Duration(now-c.lastRecv.Load()), c.Timeout))
				return
			}
			if now-c.lastSend.Load() >= int64(pingEvery) && c.pingSent.Load() == 0 {
				c.mu.Lock()
				if !c.closed && !c.closing {
					c.pingSent.Store(now)
					c.appendFrame(jute.XidPing, jute.OpPing, nil)
				}
				c.mu.Unlock()
			}
		}
		c.mu.Lock()
		out := c.w
		if out.Len() == 0 {
			c.mu.Unlock()
			continue
		}
		c.w, c.spare = c.spare, nil
		c.mu.Unlock()
		c.lastSend.Store(nanotime())
		_, err := c.nc.Write(out.Bytes())
		out.Reset()
		c.mu.Lock()
		c.spare = out
		c.mu.Unlock()
		if err != nil {
			c.abort(err)
			return
		}
	}
}

// abort ends the connection with err (unless it is already ending).
func (c *Conn) abort(err error) {
	c.mu.Lock()
	if c.err == nil && !c.closing && !c.closed {
		c.err = err
	}
	c.mu.Unlock()
	c.nc.Close()
}

// Close ends the session: it sends closeSession, waits for the reply (at
// most timeout) and closes the connection. Requests still pending fail with
// ErrConnectionLoss.
func (c *Conn) Close(timeout time.Duration) error {
	err := c.Do(jute.OpCloseSession, nil, nil, timeout)
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.nc.Close()
	<-c.done
	if errors.Is(err, ErrClosed) {
		err = nil
	}
	return err
}

// Abort closes the connection without closing the session.
func (c *Conn) Abort() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.nc.Close()
	<-c.done
}
