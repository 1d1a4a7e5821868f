package server

import (
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// A connection's share of the member's resources, and what a client that
// does not read its replies can hold of them.
//
// Every request passes the connection's admission (conn.admit) before it
// takes anything global: the reader waits, reading nothing more so that
// TCP pushes back on that client alone, while
//   - the connection has maxOutstanding requests queued, or queued requests
//     of more than queueBytes (one request is always admitted);
//   - its outbox (replies queued and being written) is over its high-water
//     mark: a client that does not read gets no new work done.
//
// Then it takes a slot of the global outstanding limit (outstandingLimit).
// The processor completes requests in order; before it queues a reply on an
// outbox over the high-water mark it parks (conn.park): the slots of the
// requests queued behind it are given back, since they wait for their
// client, not for the member.
//
// A connection whose socket accepts no byte for its session timeout is
// closed (conn.write), as ZooKeeper's NIO server closes a connection with
// no I/O for its session timeout; a reply written, even slowly, counts as
// hearing from the session, because the member chose not to read its pings.
//
// So a stalled connection holds no global slot once parked, at most
// outboxHighWater plus one reply of replies, at most queueBytes plus one
// request of requests, maxOutstanding pending requests (and their ReadIndex
// or proposal), at most outboxLimit of watch notifications (then it is
// closed), three goroutines, and the state machine's read lock never while
// it waits.

// queueBytes bounds the request bytes a connection may have queued: a
// client pipelining requests of jute.maxbuffer bytes holds a few of them,
// not maxOutstanding.
const queueBytes = 4 << 20

// flushBatch bounds the bytes one write takes from the outbox, so that the
// outbox's waiters learn of progress while a slow client drains it.
const flushBatch = 1 << 20

// outstandingLimit is ZooKeeper's globalOutstandingLimit. A request holds
// one slot from its admission until its reply is computed (a write applied,
// a read run), as a ZooKeeper request counts in zk_outstanding_requests
// from its submission until FinalRequestProcessor: never while its reply
// waits for the socket, nor while it waits behind replies its client has
// not read (conn.park).
//
// At the limit, a connection that has a request in process waits, first
// come first served, until a slot frees or its own requests complete. A
// connection with none is always admitted, so the limit may be passed by
// one request per connection: ZooKeeper's rule ("the connection layer
// always allows a connection to send at least one request", its
// RequestThrottler's doc), which keeps a client that sends one request at
// a time from waiting behind others' pipelines.
type outstandingLimit struct {
	limit int
	// mu guards the count, the waiters and every conn.slots; it is taken
	// with no other lock held.
	mu struct {
		sync.Mutex
		n       int
		waiters []*slotWaiter // FIFO
	}
}

type slotWaiter struct {
	c       *conn
	granted chan struct{} // closed, under mu, once a slot is counted for it
}

// acquire takes a slot for one of c's requests, waiting at the limit;
// net.ErrClosed if c closes meanwhile. waited reports a wait (throttled).
func (l *outstandingLimit) acquire(c *conn) (waited bool, err error) {
	l.mu.Lock()
	if l.mu.n < l.limit || c.slots == 0 {
		l.takeLocked(c)
		l.mu.Unlock()
		return false, nil
	}
	w := &slotWaiter{c: c, granted: make(chan struct{})}
	l.mu.waiters = append(l.mu.waiters, w)
	l.mu.Unlock()
	for {
		select {
		case <-w.granted:
		case <-c.slotsIdle:
		case <-c.done:
		}
		l.mu.Lock()
		granted, closed := isClosed(w.granted), isClosed(c.done)
		// c.slots == 0: c's requests all completed while it waited.
		done := granted || closed || c.slots == 0
		if done && !granted {
			l.removeWaiterLocked(w)
			if !closed {
				l.takeLocked(c)
			}
		}
		l.mu.Unlock()
		if !done {
			continue
		}
		if closed {
			if granted {
				l.release(c, 1)
			}
			return true, net.ErrClosed
		}
		return true, nil
	}
}

func (l *outstandingLimit) takeLocked(c *conn) {
	l.mu.n++
	c.slots++
}

func (l *outstandingLimit) removeWaiterLocked(w *slotWaiter) {
	for i, x := range l.mu.waiters {
		if x == w {
			l.mu.waiters = append(l.mu.waiters[:i], l.mu.waiters[i+1:]...)
			return
		}
	}
}

// release gives back k of c's slots, handing freed ones to waiters in order.
func (l *outstandingLimit) release(c *conn, k int) {
	l.mu.Lock()
	l.mu.n -= k
	c.slots -= k
	idle := c.slots == 0
	for l.mu.n < l.limit && len(l.mu.waiters) > 0 {
		w := l.mu.waiters[0]
		l.mu.waiters[0] = nil
		l.mu.waiters = l.mu.waiters[1:]
		l.takeLocked(w.c)
		close(w.granted)
	}
	if len(l.mu.waiters) == 0 {
		l.mu.waiters = nil // drop the array a burst of waiters grew
	}
	l.mu.Unlock()
	if idle {
		select {
		case c.slotsIdle <- struct{}{}:
		default:
		}
	}
}

func (l *outstandingLimit) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.n
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// acquireSlot takes a global slot for the request being admitted,
// counting a wait in zk_throttled_ops.
func (c *conn) acquireSlot() error {
	waited, err := c.srv.outstanding.acquire(c)
	if waited {
		c.srv.counters.throttled.Add(1)
	}
	return err
}

// releaseSlot gives back p's global slot, if it holds one.
func (c *conn) releaseSlot(p *pending) {
	if p.slot {
		p.slot = false
		c.srv.outstanding.release(c, 1)
	}
}

// outstandingRequests is the number of requests the member is working on
// (zk_outstanding_requests).
func (s *Server) outstandingRequests() int { return s.outstanding.held() }

// outboxHighWater is the outbox size above which a connection reads no new
// request and its processor queues no further reply, so a client that does
// not read its replies stalls its own pipeline instead of growing the
// server's memory or holding global slots. Watch notifications are queued
// regardless (they are queued under the state machine's lock and must not
// block); outboxLimit closes a connection whose outbox grows past it.
func (c *conn) outboxHighWater() int { return max(4<<20, 2*c.srv.cfg.MaxBuffer) }

// outboxLimit is the outbox size past which a further notification closes
// the connection: replies alone stay under the high-water mark plus one
// reply, so only notifications that pile up reach it.
func (c *conn) outboxLimit() int { return 4 * c.outboxHighWater() }

// outboxLocked is what the outbox holds: frames queued and frames the
// flusher is writing. c.out is held.
func (c *conn) outboxLocked() int { return c.out.bytes + c.out.writing }

// admit waits until the connection may take a request of size bytes (see
// the top of this file); net.ErrClosed if it closes meanwhile. Only the
// reader calls it, and only the reader adds to the queue, so the room it
// sees is still there when it pushes.
func (c *conn) admit(size int, beforeWait func()) error {
	hw := c.outboxHighWater()
	for {
		c.q.Lock()
		n := len(c.q.items) - c.q.head
		room := n < maxOutstanding && (n == 0 || c.q.bytes+size <= queueBytes)
		c.q.Unlock()
		if room {
			c.out.Lock()
			room = c.outboxLocked() <= hw || c.out.closed
			c.out.Unlock()
			if room {
				return nil
			}
		}
		beforeWait()
		c.readerWaits.Store(true)
		select {
		case <-c.readerWake:
		case <-c.done:
			return net.ErrClosed
		}
		c.readerWaits.Store(false)
	}
}

// waitOutboxRoom waits until the outbox is at most at its high-water mark
// or the connection closes, parking the queued requests while it waits.
// The processor calls it before it queues a reply, and so does the reader
// (byReader) for a request it answers itself: it then reads no ping while
// it waits, so the replies written meanwhile keep the session alive
// (readerWaits).
func (c *conn) waitOutboxRoom(byReader bool) {
	limit := c.outboxHighWater()
	parked := false
	for {
		c.out.Lock()
		n, closed := c.outboxLocked(), c.out.closed
		c.out.Unlock()
		if n <= limit || closed {
			break
		}
		if c.writer {
			c.endWrite() // the replies held for one write go first
			continue
		}
		if !parked {
			c.park()
			parked = true
			if byReader {
				c.readerWaits.Store(true)
				defer c.readerWaits.Store(false)
			}
		}
		select {
		case <-c.outDrained:
		case <-c.done:
			closed = true
		}
		if closed {
			break
		}
	}
	if parked {
		c.unpark()
	}
}

// park gives back the global slots of the queued requests: they wait for
// the client to read, not for the member. They run later without one (at
// most one at a time: the processor runs them in order).
//
// INVARIANT: while q.parked, no queued request holds a slot (push gives
// back the slot of one queued meanwhile).
func (c *conn) park() {
	c.q.Lock()
	c.q.parked = true
	k := 0
	for _, p := range c.q.items[c.q.head:] {
		if p.slot {
			p.slot = false
			k++
		}
	}
	c.q.Unlock()
	if k > 0 {
		c.srv.outstanding.release(c, k)
	}
}

func (c *conn) unpark() {
	c.q.Lock()
	c.q.parked = false
	c.q.Unlock()
}

// outboxProgress is called by the flusher once n bytes are written.
func (c *conn) outboxProgress(n int) {
	c.out.Lock()
	c.out.writing -= n
	c.out.Unlock()
	c.outboxWritten()
}

// outboxWritten wakes the outbox's waiters once bytes of it are written.
func (c *conn) outboxWritten() {
	for _, ch := range []chan struct{}{c.outDrained, c.readerWake} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	if c.sessionID != 0 && c.readerWaits.Load() {
		// The client reads, so it is alive, though the reader does not
		// read its pings while it waits for the pipeline to drain.
		c.cell.alive.Record(c.sessionID)
	}
}

// stallTimeout is how long the socket may accept no byte before the
// connection is closed: the session timeout (the longest allowed before
// the handshake set it).
func (c *conn) stallTimeout() time.Duration {
	if c.timeout > 0 {
		return c.timeout
	}
	return c.srv.cfg.MaxSessionTimeout
}

// writeChunk bounds one write call, so that progress (outboxProgress) is
// seen while a slow client drains a large reply, and so that a TLS write,
// which cannot be resumed once it timed out, gets the whole stall timeout
// for a small piece.
const writeChunk = 64 << 10

// write writes frames, failing when no byte goes out for about the stall
// timeout; a slow client that keeps reading is not closed.
//
// A write that times out reports the bytes it wrote, but not when: most
// may have gone at once, into the socket buffer, before it blocked. So on
// TCP each call waits a quarter of the stall timeout at most, and the
// progress of a call counts from its start: the connection is closed
// between three quarters of and one stall timeout after the socket last
// took a byte.
func (c *conn) write(frames [][]byte) error {
	_, resumable := c.nc.(*net.TCPConn)
	stall := c.stallTimeout()
	wait := stall
	if resumable {
		wait = stall / 4
	}
	last := time.Now() // the start of the last call that wrote
	for len(frames) > 0 {
		var chunk net.Buffers
		size := 0
		for len(frames) > 0 && size < writeChunk {
			f := frames[0]
			take := min(len(f), writeChunk-size)
			chunk = append(chunk, f[:take])
			size += take
			if take == len(f) {
				frames = frames[1:]
			} else {
				frames[0] = f[take:]
			}
		}
		for len(chunk) > 0 {
			start := time.Now()
			c.nc.SetWriteDeadline(start.Add(wait))
			n, err := chunk.WriteTo(c.nc) // consumes what it wrote
			if n > 0 {
				last = start
				c.outboxProgress(int(n))
			}
			if err == nil {
				break
			}
			if resumable && errors.Is(err, os.ErrDeadlineExceeded) && time.Since(last) < stall {
				continue
			}
			return c.writeFailed(err)
		}
	}
	return nil
}

func (c *conn) writeFailed(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.srv.counters.stalledClosed.Add(1)
		c.log().Warn("client not reading its replies: connection closed", "session", hexID(c.sessionID),
			"stalled", c.stallTimeout().String())
	}
	return err
}

// warnTooManyConnections logs a refusal under maxClientCnxns, at most once
// a second, so a connection flood cannot flood the log too.
func (s *Server) warnTooManyConnections(ip string) {
	now := time.Now().UnixNano()
	last := s.counters.lastFloodLog.Load()
	if now-last < int64(time.Second) || !s.counters.lastFloodLog.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("too many connections from one address: refused", "ip", ip, "limit", s.cfg.MaxClientCnxns,
		"refusedSoFar", s.counters.connRejected.Load()+1)
}

// logClosed writes the line of a session's connection closing (the
// session lives on until it expires or is closed).
func (c *conn) logClosed() {
	if c.sessionID == 0 || c.closingSession.Load() {
		return
	}
	c.log().Info("session connection closed", "session", hexID(c.sessionID))
}
