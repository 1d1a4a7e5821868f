package proxy

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/operator"
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
	// requestHeaderLen is a request's header: xid and op code.
	requestHeaderLen = 8
)

// stallTimeout closes a client that does not read its replies: the
// flusher's write deadline (a variable for tests only).
var stallTimeout = 30 * time.Second

// client is one client connection: its reader (serve) forwards requests
// upstream on its channel and answers pings; the upstream connection's
// reader queues what the member sends in the outbox, which a flusher
// started on demand writes.
type client struct {
	p  *Proxy
	nc net.Conn
	ip string

	// up and ch are the upstream connection and channel the client's
	// session is attached to: set by the handshake, and again when the
	// session is reattached on a new upstream connection (reattach.go),
	// while the client is detached (fl.detached), so that its reader,
	// which takes them in admit, never sends on a channel half set.
	up atomic.Pointer[upConn]
	ch atomic.Int64

	sessionID atomic.Int64
	timeout   atomic.Int64 // negotiated, ms
	passwd    []byte       // the session's, from the ConnectResponse (upstream reader, then reattach)
	zxid      atomic.Int64 // the highest zxid the channel carried
	// told is the highest zxid the client was given (replies,
	// notifications, pings): its lastZxidSeen, the zxid its session's
	// watches are re-set from when the session is reattached.
	told      atomic.Int64
	connected atomic.Bool  // the ConnectResponse came
	heard     atomic.Int64 // Unix ns of the client's last packet (dump's expiry)
	// reattaching: the session's reattach was sent on a new channel and
	// its ConnectResponse has not come (it is consumed here, never given
	// to the client); it holds one of the proxy's reattach slots.
	reattaching atomic.Bool
	// handshaking: the client's handshake was forwarded and its
	// ConnectResponse has not come; it holds one of the proxy's
	// handshake slots (admission.go).
	handshaking atomic.Bool
	// detachTimer closes the client when its session is not reattached
	// within its timeout (reattach.go).
	detachTimer *time.Timer
	// evq holds notifications while requests are outstanding (held,
	// watches.go); upstream reader only. holding says it is not empty,
	// for the client's reader (a ping's answer).
	evq     []heldNote
	holding atomic.Bool

	// subs, swDropped and evSeq are the client's part of the upstream
	// connection's shared watches, guarded by its sharedWatches.mu: the
	// watches it holds, whether it went away, and the last event it was
	// given (one notification per change).
	subs      map[upKey]struct{}
	swDropped bool
	evSeq     int64

	stats connStats // cons's figures (stats.go)

	// fl is what was forwarded and not answered, in order.
	fl struct {
		sync.Mutex
		cond    sync.Cond
		flights []flight
		bytes   int
		closed  bool // the client went away: no more answers are counted
		// detached: the upstream connection ended and the session waits
		// to be reattached on the next; the reader waits in admit.
		detached bool
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
	done       chan struct{}
	closeOnce  sync.Once
	finishOnce sync.Once

	// The reader between frames (poller.go): rc and fd are the socket's
	// raw connection and descriptor; rbuf the bytes read and not yet
	// taken as frames (nil while the client is parked with no frame half
	// read). pmu guards parked (no reader goroutine: the poller answers
	// a lone ping or starts one), pclosed (the socket is closing: no more
	// epoll calls on fd), pollAdded (fd is in the poller's set) and
	// pollPending (a readiness edge came while a reader ran: it reads
	// again before it parks).
	rc                                      syscall.RawConn
	fd                                      int
	rbuf                                    []byte
	pmu                                     sync.Mutex
	parked, pclosed, pollAdded, pollPending bool
}

// flight is one request forwarded and not answered.
type flight struct {
	size int
	op   jute.OpCode
	at   time.Time // when it came, for its latency
	xid  int32
	// keys: a DataShared read's upstream watches (in flight until its
	// reply); path and wtype: a removeWatches' or checkWatches' request,
	// applied to the shared watches when its reply comes.
	keys  []upKey
	path  string
	wtype int32
	// exist: the exist watches a setWatches re-set (the member holds
	// them as data watches; a reattach must re-set them as exist
	// watches). internal: the proxy's own request (a reattached session's
	// setWatches), whose reply the client never sees.
	exist    []string
	internal bool
}

// heldNote is a notification held for a client (held).
type heldNote struct {
	zxid  int64
	frame []byte
}

// maxHeldNotes bounds a client's held notifications; past it the client
// is closed (it reconnects and catches up with setWatches), as a member
// bounds what it holds for a connection.
const maxHeldNotes = 1 << 16

func newClient(p *Proxy, nc net.Conn, ip string) *client {
	c := &client{p: p, nc: nc, ip: ip, done: make(chan struct{}), fd: -1}
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			if fd, err := rawFd(rc); err == nil {
				c.rc, c.fd = rc, fd
			}
		}
	}
	c.fl.cond.L = &c.fl.Mutex
	c.stats.init(time.Now())
	return c
}

// outboxLimit: beyond it a client that does not read is closed.
func (c *client) outboxLimit() int { return 2*queueBytes + c.p.cfg.MaxBuffer }

// serve runs the handshake, then reads the client's requests (pump)
// until it parks or the connection ends.
func (c *client) serve() {
	if !c.handshake() {
		c.finish()
		return
	}
	c.nc.SetReadDeadline(time.Time{}) // from now on the keep-alive loop judges liveness (sweepIdle)
	c.pump()
}

// handshake reads the ConnectRequest (or a four-letter word, answered
// here) and opens the client's channel upstream; false when the
// connection is over.
func (c *client) handshake() bool {
	if c.rc == nil {
		return false // not a socket: never from the listener
	}
	c.nc.SetReadDeadline(time.Now().Add(handshakeTimeout))
	var first [4]byte
	if _, err := io.ReadFull(c.nc, first[:]); err != nil {
		return false
	}
	c.stats.received.Add(1)
	c.p.stats.received.Add(1)
	c.heard.Store(time.Now().UnixNano())
	if w := string(first[:]); c.p.reg.IsWord(w) {
		// The proxy answers for itself, as a member does for itself.
		c.p.stats.wordsAnswered.Add(1)
		if out, ok := c.p.reg.Word(w, c.p.cfg.FourLetterWords, c.nc, opMember{c.p}); ok {
			operator.Answer(c.nc, out, operator.DefaultLinger, func() {})
		}
		return false
	}
	body, err := c.readBody(first[:])
	if err != nil {
		return false
	}
	req := new(jute.ConnectRequest)
	if err := jute.Unmarshal(body, req); err != nil {
		return false // as a member: a handshake that does not decode closes
	}
	up := c.p.upstream(c.p.cfg.HandshakeWait, c.done)
	if up == nil {
		c.p.stats.handshakeRefused.Add(1)
		return false // no member: the client tries its next address
	}
	if c.p.admit.acquire(c.p.ctx, c.done, c.rc, budgetOf(req.TimeOut)) != admitted {
		return false // busy, or the client left: it tries its next address
	}
	c.handshaking.Store(true)
	c.up.Store(up)
	if _, err := up.open(c, body); err != nil {
		return false
	}
	return true
}

// handshakeDone gives back c's handshake slot, if it holds one;
// answered: the member answered it.
func (c *client) handshakeDone(answered bool) {
	if c.handshaking.CompareAndSwap(true, false) {
		c.p.admit.release(answered)
	}
}

// finish ends the client's part upstream and in the proxy, once.
func (c *client) finish() { c.finishOnce.Do(c.finishNow) }

func (c *client) finishNow() {
	c.releaseSlot()
	c.handshakeDone(false)
	if up := c.up.Load(); up != nil {
		up.closeChannel(c.ch.Load())
		if sw := up.sw; sw != nil {
			sw.dropClient(c)
			c.fl.Lock()
			flights := c.fl.flights
			c.fl.flights, c.fl.closed = nil, true
			c.fl.Unlock()
			for _, f := range flights {
				if f.keys != nil {
					sw.readDone(f.keys)
				}
			}
		}
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

// readBufBytes is a reader's buffer: most frames (pings, small requests)
// fit, several at once; a bigger frame gets a buffer of its own.
const readBufBytes = 4 << 10

var readBufs = sync.Pool{New: func() any { b := make([]byte, readBufBytes); return &b }}

// pump reads and forwards the client's requests while bytes come, then
// parks the client (poller.go) and returns; the connection's end
// finishes the client.
func (c *client) pump() {
	err := c.readFrames()
	if err == errParked {
		return
	}
	if err != nil && !errors.Is(err, errEOF) && !errors.Is(err, net.ErrClosed) {
		c.p.log.Debug("client connection ended", "session", c.sessionID.Load(), "err", err)
	}
	c.closeNow()
	c.finish()
}

// readFrames takes every whole frame read, reads more without waiting,
// and parks the client once nothing more is there (errParked), its buffer
// given back when no frame is half read.
func (c *client) readFrames() error {
	for {
		buf, off := c.rbuf, 0
		for len(buf)-off >= 4 {
			n := int32(binary.BigEndian.Uint32(buf[off:]))
			if n < 0 || int(n) > c.p.cfg.MaxBuffer {
				return errFrameLength
			}
			if len(buf)-off < 4+int(n) {
				break
			}
			if err := c.request(buf[off+4 : off+4+int(n)]); err != nil {
				return err
			}
			off += 4 + int(n)
		}
		rest := copy(buf, buf[off:])
		buf = buf[:rest]
		if need := 4; rest >= 4 {
			need = 4 + int(binary.BigEndian.Uint32(buf))
			if need > cap(buf) {
				big := make([]byte, rest, need)
				copy(big, buf)
				c.putBuf(buf)
				buf = big
			}
		}
		if buf == nil {
			buf = (*readBufs.Get().(*[]byte))[:0]
		}
		c.rbuf = buf
		n, err := c.tryRead(buf[len(buf):cap(buf)])
		switch {
		case err == errWouldBlock:
			if len(buf) == 0 {
				c.putBuf(buf)
				c.rbuf = nil
			}
			parked, again := c.park()
			switch {
			case parked:
				return errParked
			case again:
				continue // an edge came while this reader ran
			}
			return net.ErrClosed
		case err != nil:
			return err
		}
		c.rbuf = buf[:len(buf)+n]
	}
}

// putBuf gives a reader's buffer back to the pool.
func (c *client) putBuf(b []byte) {
	if cap(b) == readBufBytes {
		b = b[:readBufBytes]
		readBufs.Put(&b)
	}
}

// request takes one frame body from the client: a ping is answered here,
// anything else forwarded on the client's channel. body is the reader's
// buffer: nothing here keeps it.
func (c *client) request(body []byte) error {
	{
		now := time.Now()
		c.heard.Store(now.UnixNano())
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
			// The connection's zxid, as a member answers its last applied
			// one; but only the client's own while notifications are held
			// for it: a client whose lastZxidSeen passed a change whose
			// notification it has not had would not have it fired by
			// setWatches after a reconnect.
			z := c.zxid.Load()
			if !c.holding.Load() {
				z = max(z, c.up.Load().zxid.Load())
			}
			c.tell(z)
			h := jute.ReplyHeader{Xid: jute.XidPing, Zxid: z}
			c.answeredAt(flight{op: jute.OpPing, at: now, xid: jute.XidPing}, h, now)
			// Written by this reader when nothing is queued before it
			// (fanout.go): no flusher goroutine per ping.
			if c.queueDirect(jute.AppendFrame(nil, &h)) {
				c.p.stats.sent.Add(1)
			}
			return nil
		}
		f := flight{size: len(body), op: hdr.Type, at: now, xid: hdr.Xid}
		up, ch, ok := c.admit(&f, body)
		if !ok {
			return net.ErrClosed
		}
		frame := wire.AppendFrame(nil, wire.KindData, ch, body)
		if f.keys != nil {
			frame = wire.AppendRecord(nil, wire.KindDataShared, ch, &wire.DataShared{Gen: up.sw.sendShared(f.keys), Request: body})
		}
		if err := up.send(true, frame); err != nil {
			return err
		}
		return nil
	}
}

// sharedParts fills in what f's request means for up's shared watches.
func sharedParts(up *upConn, f *flight, body []byte) {
	if up.sw == nil {
		return
	}
	switch f.op {
	case jute.OpRemoveWatches, jute.OpCheckWatches:
		req := new(jute.RemoveWatchesRequest) // checkWatches' record is the same
		if jute.Unmarshal(body[requestHeaderLen:], req) == nil {
			f.path, f.wtype = req.Path, req.Type
		}
	default:
		f.keys = sharedKeys(f.op, body[requestHeaderLen:])
		if f.keys != nil {
			f.exist = existPaths(f.op, body[requestHeaderLen:])
		}
	}
}

// admit waits until the client's forwarded-and-unanswered requests leave
// room for one more (one is always admitted) and its session is attached
// upstream, and counts it; it returns the upstream connection and channel
// to send it on (body is the request, for its shared watches). The
// request is then sent before any other of the client's, so that flights
// stay in the order the member answers.
func (c *client) admit(f *flight, body []byte) (*upConn, int64, bool) {
	c.fl.Lock()
	defer c.fl.Unlock()
	for c.fl.detached || len(c.fl.flights) > 0 && (len(c.fl.flights) >= maxOutstanding || c.fl.bytes+f.size > queueBytes) {
		if isClosed(c.done) {
			return nil, 0, false
		}
		c.fl.cond.Wait()
	}
	if c.fl.closed || isClosed(c.done) {
		return nil, 0, false
	}
	up := c.up.Load()
	sharedParts(up, f, body)
	c.fl.flights = append(c.fl.flights, *f)
	c.fl.bytes += f.size
	return up, c.ch.Load(), true
}

// answered counts the oldest forwarded request as answered and returns
// it, and how many are still outstanding; ok is false when none was (the
// client went away).
func (c *client) answered() (f flight, left int, ok bool) {
	c.fl.Lock()
	defer c.fl.Unlock()
	if len(c.fl.flights) > 0 {
		f, ok = c.fl.flights[0], true
		c.fl.bytes -= f.size
		c.fl.flights[0] = flight{}
		c.fl.flights = c.fl.flights[1:]
		if len(c.fl.flights) == 0 {
			c.fl.flights = nil
		}
	}
	c.fl.cond.Signal()
	return f, len(c.fl.flights), ok
}

// outstanding is the number of requests forwarded and not answered.
func (c *client) outstanding() int {
	c.fl.Lock()
	defer c.fl.Unlock()
	return len(c.fl.flights)
}

// held queues a notification for the client, or holds it while requests
// are outstanding (or notifications are held already): it goes out
// before the first reply of a zxid at or above its own (release), or once
// nothing is outstanding. Upstream reader only.
func (c *client) held(zxid int64, frame []byte) {
	if len(c.evq) == 0 && c.outstanding() == 0 {
		c.deliver(zxid, frame)
		return
	}
	if len(c.evq) >= maxHeldNotes {
		c.p.log.Warn("client closed: too many notifications held for its outstanding requests", "session", c.sessionID.Load())
		c.close()
		return
	}
	c.evq = append(c.evq, heldNote{zxid, frame})
	c.holding.Store(true)
}

// release queues the held notifications of a zxid at or below upTo (all
// with all set), keeping the others in order.
func (c *client) release(upTo int64, all bool) {
	kept := c.evq[:0]
	for _, n := range c.evq {
		if all || n.zxid <= upTo {
			c.deliver(n.zxid, n.frame)
		} else {
			kept = append(kept, n)
		}
	}
	clear(c.evq[len(kept):])
	c.evq = kept
	if len(c.evq) == 0 {
		c.evq = nil
		c.holding.Store(false)
	}
}

func (c *client) deliver(zxid int64, frame []byte) {
	if zxid > c.zxid.Load() {
		c.zxid.Store(zxid)
	}
	c.tell(zxid)
	c.queue(frame)
}

// tell records that the client was given zxid z.
func (c *client) tell(z int64) {
	for {
		cur := c.told.Load()
		if z <= cur || c.told.CompareAndSwap(cur, z) {
			return
		}
	}
}

// fromUpstream takes one frame the member sent on the client's channel of
// u: first the ConnectResponse, then replies (one per forwarded request,
// in order) and notifications. It runs on u's reader and never waits for
// the client.
func (c *client) fromUpstream(u *upConn, body []byte) {
	if !c.connected.Load() {
		resp := new(jute.ConnectResponse)
		if err := jute.Unmarshal(body, resp); err != nil {
			c.close()
			return
		}
		if c.reattaching.Load() {
			// The proxy's own reattach: the client has its session.
			c.releaseSlot()
			if resp.SessionID != c.sessionID.Load() || resp.TimeOut <= 0 {
				c.p.stats.reattachFailed.Add(1)
				c.p.log.Info("session not reattached (expired): its client is closed", "session", hexID(c.sessionID.Load()))
				c.close()
				return
			}
			c.p.stats.reattached.Add(1)
			c.connected.Store(true)
			c.p.alive.Record(resp.SessionID)
			return
		}
		c.handshakeDone(true)
		c.connected.Store(true)
		c.timeout.Store(int64(resp.TimeOut))
		c.sessionID.Store(resp.SessionID)
		c.passwd = resp.Passwd
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
	if h.Zxid > 0 {
		u.seen(h.Zxid)
	}
	switch {
	case h.Xid == jute.XidNotification && u.sw != nil:
		// The channel's own notifications (setWatches' catch-up) keep
		// their place among the held shared ones.
		c.held(h.Zxid, frameOf(body))
		return
	case h.Xid == jute.XidNotification || h.Xid == jute.XidResumableEvents:
		// Version 1's watches, and resumable watches' events, are the
		// channel's own, in the member's order.
		if h.Zxid > c.zxid.Load() {
			c.zxid.Store(h.Zxid)
		}
		c.tell(h.Zxid)
		c.queue(frameOf(body))
		return
	}
	f, left, ok := c.answered()
	frame := frameOf(body)
	if ok && u.sw != nil {
		if f.keys != nil {
			u.sw.readDone(f.keys)
			u.sw.markExist(c, &f, h.Err)
		}
		if (f.op == jute.OpRemoveWatches || f.op == jute.OpCheckWatches) && f.path != "" {
			// The session's shared watches are the proxy's: a watch removed
			// (or found) here makes the member's NOWATCHER an OK.
			if u.sw.watcherOp(c, f.path, f.wtype, f.op == jute.OpRemoveWatches) && h.Err == jute.ErrNoWatcher {
				h.Err = jute.ErrOK
				frame = jute.AppendFrame(nil, &h)
			}
		}
	}
	if ok && !f.internal {
		c.answeredAt(f, h, time.Now())
	}
	if len(c.evq) > 0 {
		c.release(h.Zxid, false)
	}
	if h.Zxid > c.zxid.Load() {
		c.zxid.Store(h.Zxid)
	}
	if !f.internal {
		c.tell(h.Zxid)
		c.queue(frame)
	}
	if left == 0 && len(c.evq) > 0 {
		c.release(0, true)
	}
}

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
	c.queueLocked(frame)
}

// queueLocked appends frame to c's outbox for its flusher, starts the
// flusher if it is not running, unlocks the outbox and counts the frame
// as sent. c.out must be locked.
func (c *client) queueLocked(frame []byte) {
	c.out.frames = append(c.out.frames, frame)
	c.out.bytes += len(frame)
	c.kickLocked()
	c.out.Unlock()
	c.stats.sent.Add(1)
	c.p.stats.sent.Add(1)
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
			if closeAfter {
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
		// The deadline bounds this write only (a write straight from the
		// fan-out or a ping, queueDirect, is a send(2) on the descriptor
		// that no deadline of Go's sees; the flusher's next write sets its
		// own).
		c.nc.SetWriteDeadline(time.Time{})
	}
}

// close closes the socket at once; the reader then ends and closes the
// channel.
func (c *client) close() { c.closeNow() }

func (c *client) closeNow() {
	c.closeOnce.Do(func() {
		// Out of the poller's set before the descriptor closes (it may
		// be reused at once); a parked client has no reader to finish
		// it.
		c.pmu.Lock()
		c.pclosed = true
		parked := c.parked
		c.parked = false
		if c.fd >= 0 {
			c.p.poll.forgetLocked(c, c.fd)
		}
		c.pmu.Unlock()
		// INVARIANT: no write straight to the descriptor (writeNow, under
		// c.out with c.out.closed false) runs or starts once the socket
		// closes: the descriptor's number may be reused at once.
		c.out.Lock()
		c.out.closed = true
		c.out.Unlock()
		close(c.done)
		c.nc.Close()
		c.fl.Lock()
		c.fl.cond.Broadcast()
		c.fl.Unlock()
		if parked {
			c.p.goTracked(c.finish)
		}
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
