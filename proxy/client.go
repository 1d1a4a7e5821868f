package proxy

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/proxy/wire"
)

const (
	// maxOutstanding and queueBytes bound what one client may have
	// forwarded and not had answered, as a member bounds a connection's
	// queue; the proxy stops reading the client beyond them. The member
	// closes a channel that exceeds them.
	maxOutstanding = 256
	queueBytes     = 4 << 20
	// handshakeTimeout bounds the wait for a ConnectRequest.
	handshakeTimeout = 30 * time.Second
	// wordTail bounds what a four-letter word's client may send after it
	// that goes up; wordDrainLimit and wordLinger bound what is read and
	// dropped after the answer, and for how long.
	wordTail       = 64
	wordDrainLimit = 64 << 10
	wordLinger     = 5 * time.Second
	// stallTimeout closes a client that does not read its replies.
	stallTimeout = 30 * time.Second
)

// client is one client connection: its reader (serve) forwards requests
// upstream on its channel and answers pings; the upstream connection's
// reader queues what the member sends in the outbox, which a flusher
// started on demand writes.
type client struct {
	p  *Proxy
	nc net.Conn
	ip string

	up *upConn // set by the handshake, read-only afterwards
	ch int64

	sessionID atomic.Int64
	timeout   atomic.Int64 // negotiated, ms
	zxid      atomic.Int64 // the highest zxid the channel carried
	connected bool         // the ConnectResponse came (upstream reader only)
	word      bool         // a four-letter word's connection: text comes back

	stats   connStats   // cons's figures
	watches connWatches // what the proxy saw it set on the member

	// fl is what was forwarded and not answered, in order.
	fl struct {
		sync.Mutex
		cond  sync.Cond
		reqs  []flight
		bytes int
	}
	// out is the outbox: frames (each a length and a body) for the
	// flusher.
	out struct {
		sync.Mutex
		frames     [][]byte
		bytes      int
		flushing   bool
		closed     bool
		closeAfter bool
	}
	done      chan struct{}
	wordDone  chan struct{} // a word's answer is written and the socket half-closed
	closeOnce sync.Once
}

func newClient(p *Proxy, nc net.Conn, ip string) *client {
	c := &client{p: p, nc: nc, ip: ip, done: make(chan struct{}), wordDone: make(chan struct{})}
	c.fl.cond.L = &c.fl.Mutex
	c.stats.init(time.Now())
	return c
}

// outboxLimit: beyond it a client that does not read is closed.
func (c *client) outboxLimit() int { return 2*queueBytes + c.p.cfg.MaxBuffer }

func (c *client) serve() {
	defer c.finish()
	c.nc.SetReadDeadline(time.Now().Add(handshakeTimeout))
	var first [4]byte
	if _, err := io.ReadFull(c.nc, first[:]); err != nil {
		return
	}
	var body []byte
	word := string(first[:])
	c.stats.received.Add(1)
	c.p.stats.received.Add(1)
	if isFourLetterWord(word) {
		c.word = true
		if out, ok := c.p.answerWord(c, word); ok {
			c.answerOwn(out)
			return
		}
	} else {
		word = ""
		var err error
		if body, err = c.readBody(first[:]); err != nil {
			return
		}
		if err := jute.Unmarshal(body, new(jute.ConnectRequest)); err != nil {
			return // as a member: a handshake that does not decode closes
		}
	}
	up := c.p.upstream(c.p.cfg.HandshakeWait, c.done)
	if up == nil {
		c.p.stats.handshakeRefused.Add(1)
		return // no member: the client tries its next address
	}
	c.up = up
	ch, err := up.open(c, body, word)
	if err != nil {
		return
	}
	c.ch = ch
	if c.word {
		// The member answers the word and closes the channel, and the
		// client's socket closes with the answer. What the client sends
		// after the word (stmk's mask) goes up, a few bytes at most.
		// Once the answer is written the flusher half-closes the socket and
		// the rest is read and dropped until the client closes its side
		// (for at most wordLinger), as a member does (answerAndClose).
		c.nc.SetReadDeadline(time.Now().Add(handshakeTimeout))
		buf := make([]byte, 4<<10)
		for sent, drained := 0, 0; drained < wordDrainLimit; {
			n, err := c.nc.Read(buf)
			if n > 0 && sent < wordTail {
				m := min(n, wordTail-sent)
				up.send(true, wire.AppendFrame(nil, wire.KindData, ch, buf[:m]))
				sent += m
			}
			drained += n
			if err != nil {
				break
			}
		}
		select {
		case <-c.wordDone:
		case <-c.done:
		case <-time.After(handshakeTimeout):
		}
		return
	}
	if err := c.readLoop(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.p.log.Debug("client connection ended", "session", c.sessionID.Load(), "err", err)
	}
}

func (c *client) finish() {
	if c.up != nil {
		c.up.closeChannel(c.ch)
	}
	c.closeNow()
	c.p.unregister(c)
}

func (c *client) readBody(prefix []byte) ([]byte, error) {
	n := int32(binary.BigEndian.Uint32(prefix))
	if n < 0 || int(n) > c.p.cfg.MaxBuffer {
		return nil, errFrameLength
	}
	body := make([]byte, n)
	_, err := io.ReadFull(c.nc, body)
	return body, err
}

var errFrameLength = errors.New("proxy: frame length out of range")

// readLoop forwards the client's requests until the connection ends.
func (c *client) readLoop() error {
	var lenBuf [4]byte
	for {
		idle := handshakeTimeout
		if t := c.timeout.Load(); t > 0 {
			// As a member: two session timeouts and a keep-alive interval.
			idle = 2*time.Duration(t)*time.Millisecond + c.p.cfg.KeepAliveInterval
		}
		c.nc.SetReadDeadline(time.Now().Add(idle))
		if _, err := io.ReadFull(c.nc, lenBuf[:]); err != nil {
			return err
		}
		body, err := c.readBody(lenBuf[:])
		if err != nil {
			return err
		}
		now := time.Now()
		c.stats.received.Add(1)
		c.p.stats.received.Add(1)
		c.p.stats.bytesReceived.Add(int64(4 + len(body)))
		var hdr jute.RequestHeader
		if err := jute.Unmarshal(body, &hdr); err != nil {
			return err
		}
		if id := c.sessionID.Load(); id != 0 {
			c.p.alive.Record(id)
		}
		if hdr.Type == jute.OpPing {
			zxid := max(c.zxid.Load(), c.up.zxid.Load())
			h := jute.ReplyHeader{Xid: jute.XidPing, Zxid: zxid}
			c.answeredAt(flight{at: now, op: jute.OpPing, xid: jute.XidPing}, h, now)
			c.queue(jute.AppendFrame(nil, &h))
			continue
		}
		f := flight{size: len(body), at: now, op: hdr.Type, xid: hdr.Xid}
		if len(body) > requestHeaderLen {
			f.watch = watchChangeOf(hdr.Type, body[requestHeaderLen:])
		}
		if !c.admit(f) {
			return net.ErrClosed
		}
		if err := c.up.send(true, wire.AppendFrame(nil, wire.KindData, c.ch, body)); err != nil {
			return err
		}
	}
}

// requestHeaderLen is a RequestHeader's size: xid and type.
const requestHeaderLen = 8

// admit waits until the client's forwarded-and-unanswered requests leave
// room for one more of f.size bytes (one is always admitted), and counts
// it.
func (c *client) admit(f flight) bool {
	c.fl.Lock()
	defer c.fl.Unlock()
	for len(c.fl.reqs) > 0 && (len(c.fl.reqs) >= maxOutstanding || c.fl.bytes+f.size > queueBytes) {
		if isClosed(c.done) {
			return false
		}
		c.fl.cond.Wait()
	}
	c.fl.reqs = append(c.fl.reqs, f)
	c.fl.bytes += f.size
	return !isClosed(c.done)
}

// answered counts the oldest forwarded request as answered and returns it
// (ok false if none was outstanding).
func (c *client) answered() (f flight, ok bool) {
	c.fl.Lock()
	if len(c.fl.reqs) > 0 {
		f, ok = c.fl.reqs[0], true
		c.fl.bytes -= f.size
		c.fl.reqs = c.fl.reqs[1:]
		if len(c.fl.reqs) == 0 {
			c.fl.reqs = nil
		}
	}
	c.fl.cond.Signal()
	c.fl.Unlock()
	return f, ok
}

// queued is the number of requests forwarded and not answered.
func (c *client) queued() int {
	c.fl.Lock()
	defer c.fl.Unlock()
	return len(c.fl.reqs)
}

// fromUpstream takes one frame the member sent on the channel: first the
// ConnectResponse, then replies (one per forwarded request, in order) and
// notifications. It runs on the upstream connection's reader and never
// waits for the client.
func (c *client) fromUpstream(body []byte) {
	if c.word {
		c.queue(body)
		return
	}
	if !c.connected {
		c.connected = true
		resp := new(jute.ConnectResponse)
		if err := jute.Unmarshal(body, resp); err != nil {
			c.close()
			return
		}
		c.timeout.Store(int64(resp.TimeOut))
		c.sessionID.Store(resp.SessionID)
		if resp.SessionID != 0 {
			c.p.alive.Record(resp.SessionID)
		}
		c.queue(frameOf(body))
		return
	}
	h, err := replyHeader(body)
	if err != nil {
		c.close()
		return
	}
	switch h.Xid {
	case jute.XidNotification:
		ev := new(jute.WatcherEvent)
		if jute.Unmarshal(body[replyHeaderLen:], ev) == nil {
			c.watches.fired(ev)
		}
	case jute.XidResumableEvents:
	default:
		if f, ok := c.answered(); ok {
			c.answeredAt(f, h, time.Now())
		}
	}
	if h.Zxid > c.zxid.Load() {
		c.zxid.Store(h.Zxid)
		c.up.seen(h.Zxid)
	}
	c.queue(frameOf(body))
}

// replyHeaderLen is a ReplyHeader's size: xid, zxid and err.
const replyHeaderLen = 16

func frameOf(body []byte) []byte {
	f := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(f, uint32(len(body)))
	return append(f, body...)
}

// queue adds a frame to the outbox and starts the flusher unless it runs.
// A client whose outbox passes its bound is closed.
func (c *client) queue(frame []byte) {
	c.out.Lock()
	if c.out.closed {
		c.out.Unlock()
		return
	}
	if c.out.bytes+len(frame) > c.outboxLimit() {
		c.out.closed = true
		c.out.frames, c.out.bytes = nil, 0
		c.out.Unlock()
		c.p.stats.stalledClosed.Add(1)
		c.p.log.Warn("client too slow: outbox full", "session", c.sessionID.Load(), "remote", c.nc.RemoteAddr().String())
		c.close()
		return
	}
	c.out.frames = append(c.out.frames, frame)
	c.out.bytes += len(frame)
	c.kickLocked()
	c.out.Unlock()
	if !c.word {
		c.stats.sent.Add(1)
		c.p.stats.sent.Add(1)
	}
}

func (c *client) kickLocked() {
	if !c.out.flushing {
		c.out.flushing = true
		c.p.goTracked(c.flusher)
	}
}

// closeAfterFlush closes the client once its outbox is written (the member
// closed the channel: a closed or expired session, a bad password).
func (c *client) closeAfterFlush() {
	c.out.Lock()
	defer c.out.Unlock()
	if c.out.closeAfter {
		return
	}
	c.out.closeAfter = true
	if !c.out.closed {
		c.out.closed = true
		c.kickLocked()
	}
}

func (c *client) flusher() {
	for {
		c.out.Lock()
		frames, closeAfter := c.out.frames, c.out.closeAfter
		c.out.frames, c.out.bytes = nil, 0
		if len(frames) == 0 {
			c.out.flushing = false
			c.out.Unlock()
			switch {
			case closeAfter && c.word:
				if tc, ok := c.nc.(*net.TCPConn); ok && tc.CloseWrite() == nil {
					c.nc.SetReadDeadline(time.Now().Add(wordLinger))
					close(c.wordDone)
					return
				}
				c.close()
			case closeAfter:
				c.close()
			}
			return
		}
		c.out.Unlock()
		c.nc.SetWriteDeadline(time.Now().Add(stallTimeout))
		bufs := net.Buffers(frames)
		if _, err := bufs.WriteTo(c.nc); err != nil {
			c.out.Lock()
			c.out.closed, c.out.frames, c.out.bytes, c.out.flushing = true, nil, 0, false
			c.out.Unlock()
			c.close()
			return
		}
	}
}

// close closes the socket at once; the reader then ends and closes the
// channel.
func (c *client) close() { c.closeNow() }

func (c *client) closeNow() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.nc.Close()
		c.fl.Lock()
		c.fl.cond.Broadcast()
		c.fl.Unlock()
	})
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// isFourLetterWord reports whether the first four bytes of a connection
// are a four-letter word rather than a frame's length (four lower-case
// letters as a length would exceed jute.maxbuffer). The member answers it
// (or not, if it has not enabled it), as if the client were connected to
// it.
func isFourLetterWord(w string) bool {
	for i := range len(w) {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}
