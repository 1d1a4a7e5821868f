package session

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
)

// A meter watches the frames go-zookeeper sends and receives on one
// generation's connections, to learn the one thing that client hides: when
// the server last heard from this session for certain.
//
// A reply to a request proves the server had the session alive when it
// received the request, so no later than the request's send time; the
// server expires the session no earlier than a session timeout after it
// last heard from it. The meter therefore records, for every request it
// sees leave, its send time, and for every reply it sees come back, the
// send time of the request it answers: confirmed is the latest such time.
// The grace period runs from confirmed, never from the receipt of the
// reply, so that Lost is reported before the server can have expired the
// session.
//
// INVARIANT: confirmed only grows, and only for replies that are not a
// session error (SESSIONEXPIRED, SESSIONMOVED) and for a ConnectResponse
// that grants a session.
type meter struct {
	base time.Time
	// confirmed is nanoseconds since base of the send time of the latest
	// request the server answered; 0 before any.
	confirmed atomic.Int64
	// timeout is the negotiated session timeout in milliseconds, from the
	// latest ConnectResponse that granted a session.
	timeout atomic.Int32
	// onConfirm is called (must not block) after confirmed advances.
	onConfirm func()
}

func newMeter(onConfirm func()) *meter {
	return &meter{base: time.Now(), onConfirm: onConfirm}
}

func (m *meter) now() int64 { return int64(time.Since(m.base)) }

// confirmedAt is the time the server last certainly heard from the
// session, zero before any.
func (m *meter) confirmedAt() time.Time {
	c := m.confirmed.Load()
	if c == 0 {
		return time.Time{}
	}
	return m.base.Add(time.Duration(c))
}

func (m *meter) confirm(sent int64) {
	for {
		cur := m.confirmed.Load()
		if sent <= cur {
			return
		}
		if m.confirmed.CompareAndSwap(cur, sent) {
			if m.onConfirm != nil {
				m.onConfirm()
			}
			return
		}
	}
}

// wrap returns nc, metered; limit caps every deadline go-zookeeper sets
// (see meteredConn).
func (m *meter) wrap(nc net.Conn, limit time.Duration) net.Conn {
	return &meteredConn{Conn: nc, m: m, limit: limit, pending: map[int32][]int64{}}
}

// meteredConn is one TCP connection of a generation. go-zookeeper writes
// from one goroutine and reads from another; the pending requests are
// shared between them under mu.
//
// It also caps every read and write deadline at limit from now: without
// it go-zookeeper waits ten receive timeouts for a ConnectResponse, so a
// connection to a member that accepts but does not answer (paused, or
// partitioned behind a proxy) would outlast the whole grace period, where
// ZooKeeper's Java client gives up after its connect timeout.
type meteredConn struct {
	net.Conn
	m     *meter
	limit time.Duration

	out frameScanner // written by the writer only
	in  frameScanner // read by the reader only

	mu      sync.Mutex
	pending map[int32][]int64 // xid -> send times, oldest first (pings share xid -2)
	// connectSent is the send time of the ConnectRequest, 0 once answered.
	connectSent int64
}

func (c *meteredConn) Write(p []byte) (int, error) {
	now := c.m.now()
	c.out.scan(p, func(first bool, body []byte) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if first {
			c.connectSent = now
			return
		}
		if len(body) < 4 {
			return
		}
		xid := int32(binary.BigEndian.Uint32(body))
		c.pending[xid] = append(c.pending[xid], now)
	})
	return c.Conn.Write(p)
}

func (c *meteredConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.in.scan(p[:n], c.received)
	}
	return n, err
}

// received handles the head of one frame from the server.
func (c *meteredConn) received(first bool, body []byte) {
	if first {
		// ConnectResponse: protocolVersion, timeOut, sessionId, passwd.
		if len(body) < 16 {
			return
		}
		timeout := int32(binary.BigEndian.Uint32(body[4:]))
		sid := int64(binary.BigEndian.Uint64(body[8:]))
		c.mu.Lock()
		sent := c.connectSent
		c.connectSent = 0
		c.mu.Unlock()
		if sid != 0 && timeout > 0 && sent != 0 {
			c.m.timeout.Store(timeout)
			c.m.confirm(sent)
		}
		return
	}
	if len(body) < 16 {
		return
	}
	xid := int32(binary.BigEndian.Uint32(body))
	code := jute.ErrCode(int32(binary.BigEndian.Uint32(body[12:])))
	if xid == jute.XidNotification {
		return // the server speaks unasked: no proof it heard us
	}
	c.mu.Lock()
	q := c.pending[xid]
	var sent int64
	if len(q) > 0 {
		sent = q[0]
		if len(q) == 1 {
			delete(c.pending, xid)
		} else {
			c.pending[xid] = q[1:]
		}
	}
	c.mu.Unlock()
	if sent == 0 || code == jute.ErrSessionExpired || code == jute.ErrSessionMoved {
		return
	}
	c.m.confirm(sent)
}

func (c *meteredConn) capped(t time.Time) time.Time {
	lim := time.Now().Add(c.limit)
	if t.IsZero() || t.After(lim) {
		return lim
	}
	return t
}

func (c *meteredConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.capped(t)) }
func (c *meteredConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.capped(t))
}
func (c *meteredConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.capped(t))
}

// frameScanner follows a stream of length-prefixed frames across the
// chunks it is given and hands each frame's first bytes (up to headLen of
// its body) to a function, with whether it is the stream's first frame.
type frameScanner struct {
	lenBuf  [4]byte
	lenHave int
	remain  int // body bytes of the current frame still to come
	head    [headLen]byte
	headHas int
	frames  int
}

const headLen = 16 // xid, zxid and err of a reply; xid and type of a request

func (s *frameScanner) scan(p []byte, frame func(first bool, head []byte)) {
	for len(p) > 0 {
		if s.remain == 0 && s.lenHave < 4 {
			k := copy(s.lenBuf[s.lenHave:], p)
			s.lenHave += k
			p = p[k:]
			if s.lenHave < 4 {
				return
			}
			n := int(int32(binary.BigEndian.Uint32(s.lenBuf[:])))
			s.headHas = 0
			if n <= 0 {
				s.lenHave = 0
				s.emit(frame)
				continue
			}
			s.remain = n
		}
		k := min(len(p), s.remain)
		if s.headHas < headLen {
			s.headHas += copy(s.head[s.headHas:], p[:k])
		}
		s.remain -= k
		p = p[k:]
		if s.remain == 0 {
			s.lenHave = 0
			s.emit(frame)
		}
	}
}

func (s *frameScanner) emit(frame func(bool, []byte)) {
	first := s.frames == 0
	s.frames++
	frame(first, s.head[:s.headHas])
}
