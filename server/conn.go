package server

import (
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/session"
	"github.com/zkraft/zkraft/znode"
)

const (
	// maxOutstanding bounds the requests a connection may have queued; the
	// reader stops reading when it is reached (limits.go has the rest of a
	// connection's bounds).
	maxOutstanding = 256
	// handshakeTimeout bounds the wait for a ConnectRequest.
	handshakeTimeout = 30 * time.Second
)

// conn is one client connection. It has three goroutines, all owned by
// serve: the reader (serve itself) admits requests (limits.go), decodes
// them and proposes writes in arrival order; the processor completes them
// in that order, running reads only after every earlier request has
// completed; the flusher writes the outbox to the socket.
//
// A client with one request in flight is served by the reader alone: a
// request read with nothing queued ahead of it is completed by the reader
// (conn.idle), and a reply queued with nothing ahead of it in the outbox is
// written by whoever completed it, without waiting for the socket
// (conn.reply); replies of requests answered one after another without a
// wait (a burst read in one call, ready results) go out in one writev
// (conn.process). The processor runs for pipelines, the flusher for
// replies the socket does not take at once and for notifications.
//
// INVARIANT: on one connection, the notification of a change is queued in
// the outbox before any reply that reflects the change (triggers are queued
// under the state machine's lock before results and reads can proceed).
type conn struct {
	srv  *Server
	cell *cell
	nc   net.Conn
	raw  syscall.RawConn // nc's socket when it is TCP (not TLS), for reply
	in   frameReader     // over nc; the reader goroutine's
	ip   string
	// rateTurn is this connection's part in its cell's request rate
	// (celllimits.go); the reader goroutine's.
	rateTurn rateTurn
	// wv is tryWrite's state, the outbox writer's (whoever holds
	// out.flushing).
	wv rawWriter

	// owner names this connection in the log (raftsm.Command.Owner).
	owner uint64
	// resetsAtAccept is cell.resets when the connection was accepted: a
	// reset of the cell's state from a snapshot closes the connections
	// accepted before it, not those accepted since.
	resetsAtAccept int64

	// st holds the figures of cons and stat (stats.go).
	st connStats
	// secure marks a connection on the TLS listener (tls.go); sasl is its
	// SASL exchange (sasl.go), used by the reader goroutine only.
	secure bool
	sasl   *saslServer
	// outDrained wakes a processor waiting for outbox room; readerWake
	// wakes the reader waiting for admission (queue or outbox room);
	// slotsIdle wakes it waiting for a global slot once slots is 0
	// (limits.go).
	outDrained chan struct{}
	readerWake chan struct{}
	slotsIdle  chan struct{}
	// slots is the global slots its requests hold, guarded by
	// srv.outstanding.mu. readerWaits: the reader waits for the
	// connection's own pipeline (admit, or an earlier read), not reading.
	slots       int
	readerWaits atomic.Bool

	// Set by the handshake, read-only afterwards.
	sessionID int64
	timeout   time.Duration

	// auth holds the connection's ids; the reader goroutine replaces it,
	// watch delivery reads it.
	auth atomic.Pointer[[]jute.ID]

	watchKeys keySet // its watches, guarded by cell.watches.mu (watch.go)
	// shared is set on the conn that stands for a proxy's upstream
	// connection in the watch registry (its shared watches, upstream.go),
	// which serves nothing; nil on every other.
	shared *sharedWatcher
	// held are the notifications held while a read that sets watches
	// runs (registry.hold), guarded by cell.watches.mu.
	held struct {
		on    bool
		notes []note
	}
	closingSession atomic.Bool    // a closeSession is in flight
	inflight       atomic.Int64   // requests read but not yet answered
	bg             sync.WaitGroup // resumable-watch replays; serve waits
	done           chan struct{}
	closeOnce      sync.Once

	// The processor and the flusher run only while they have work: an idle
	// connection is one goroutine (the reader), not three, which is most
	// of the memory of a session. q.running and out.flushing say whether
	// one runs; procWG and flushWG let the reader wait for them at the end.
	// An idle processor lingers for procLinger (q.lingering), woken by
	// procWake, so that a client with one request at a time does not start
	// one per request.
	procWG   sync.WaitGroup
	flushWG  sync.WaitGroup
	procWake chan struct{}
	// writer: the goroutine completing requests (the processor, or the
	// reader inline) holds the outbox's writer role (beginWrite); replies
	// it queued are unwritten until endWrite. Handed between the reader
	// and the processor under q's lock (idle, pop).
	writer bool

	// q holds the requests read and not yet answered, in order, at most
	// maxOutstanding of them and about queueBytes of request bytes; the
	// reader waits for room on readerWake. A slice that is dropped when
	// empty, not a channel of maxOutstanding slots per connection (2 KB of
	// an idle session).
	q struct {
		sync.Mutex
		items     []*pending
		head      int
		bytes     int  // request bytes of the queued items
		running   bool // a processor runs
		lingering bool // it has answered every request and waits for more
		stopping  bool // the reader has ended: the processor ends once idle
		parked    bool // the processor waits for the client to read (park)
	}

	// out is the outbox. Lock order: registry.mu, then out.
	out struct {
		sync.Mutex
		frames     [][]byte
		bytes      int  // of frames
		writing    int  // bytes the flusher took and has not written yet
		closed     bool // no more frames accepted
		closeAfter bool // close the socket once the frames are written
		flushing   bool // a flusher runs
	}
}

// pending is one request waiting for its reply.
type pending struct {
	xid      int32
	op       jute.OpCode
	prop     proposal                // a proposed write
	exec     func() (*result, error) // a read, run in order
	watching bool                    // exec may set watches (readOp)
	// sharedGen: a read a proxy sent as DataShared (opShared), whose
	// watches are the upstream connection's shared ones; 0 otherwise.
	sharedGen  int64
	res        *result       // what exec returned
	executed   chan struct{} // closed once exec has run (queued reads only)
	after      func()        // runs after the reply is queued
	frame      []byte        // a ready reply
	start      time.Time     // when the request was read, for latency
	size       int           // request bytes, for the queue's bound
	slot       bool          // holds a global slot (limits.go)
	closeAfter bool
	// auditBody is a write's request, kept for the audit log when it is
	// on (audit.go).
	auditBody []byte
}

// ran tells a reader waiting to read a later write that the read has run.
func (p *pending) ran() {
	if p.executed != nil {
		close(p.executed)
	}
}

// result is the outcome of a read.
type result struct {
	zxid int64
	err  jute.ErrCode
	resp jute.Record
	// errBody is sent with a non-OK err (zkraft's extension only; a
	// ZooKeeper error reply is the header alone).
	errBody jute.Record
	// after runs once the reply is queued (starts a resumable replay).
	after func()
	// at is the zxid of the state a read saw; want are the watches to
	// register as of it, before the notifications to queue ahead of the
	// reply (registry.finishRead).
	at     int64
	want   []watchReq
	before []note
}

func (r *result) watch(t watchTable, path string, m watchMode) {
	r.want = append(r.want, watchReq{t, path, m})
}

func newConn(s *Server, cl *cell, nc net.Conn, ip string) *conn {
	c := &conn{
		owner: s.cfg.ReplicaID<<48 | s.connSeq.Add(1)&(1<<48-1),
		srv:   s,
		cell:  cl,
		// Read before the connection reads its first request.
		resetsAtAccept: cl.resets.Load(),
		nc:             nc,
		in:             frameReader{src: nc},
		ip:             ip,
		done:           make(chan struct{}),
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		c.raw, _ = tc.SyscallConn()
		c.in.raw = c.raw
	}
	c.setAuthIDs([]jute.ID{{Scheme: "ip", ID: ip}})
	c.st.init()
	c.outDrained = make(chan struct{}, 1)
	c.readerWake = make(chan struct{}, 1)
	c.procWake = make(chan struct{}, 1)
	c.slotsIdle = make(chan struct{}, 1)
	return c
}

func (c *conn) authIDs() []jute.ID { return *c.auth.Load() }

// sharedWatcher is the shared watches of the version 2 upstream
// connection whose channel c serves, nil for any other conn.
func (c *conn) sharedWatcher() *sharedWatcher {
	if v, ok := c.nc.(*vconn); ok {
		return v.up.shared
	}
	return nil
}
func (c *conn) setAuthIDs(ids []jute.ID) { c.auth.Store(&ids) }

// rawRecord is an already-encoded record.
type rawRecord []byte

func (r rawRecord) Encode(w *jute.Writer) { w.Raw(r) }
func (r rawRecord) Decode(*jute.Reader)   {}

// replyFrame is the frame of a reply: its header, then body unless code
// is an error. One buffer of about the frame's size: grown from nil by
// appends, a getData reply of 1 KiB was reallocated eight times.
func replyFrame(xid int32, zxid int64, code jute.ErrCode, body jute.Record) []byte {
	if code != jute.ErrOK {
		body = nil
	}
	if raw, ok := body.(rawRecord); ok {
		return rawReplyFrame(xid, zxid, code, raw)
	}
	w := jute.AppendWriter(make([]byte, 4, replyFrameSize(body)))
	(&jute.ReplyHeader{Xid: xid, Zxid: zxid, Err: code}).Encode(w)
	b := w.Bytes()
	if body != nil {
		b = jute.AppendRecord(b, body)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// rawReplyFrame is replyFrame for an encoded body (nil: none), a write's
// reply from the state machine.
func rawReplyFrame(xid int32, zxid int64, code jute.ErrCode, body []byte) []byte {
	if code != jute.ErrOK {
		body = nil
	}
	w := jute.AppendWriter(make([]byte, 4, 4+replyHeaderBytes+len(body)))
	(&jute.ReplyHeader{Xid: xid, Zxid: zxid, Err: code}).Encode(w)
	w.Raw(body)
	b := w.Bytes()
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// replyHeaderBytes is the size of an encoded jute.ReplyHeader (xid, zxid,
// err); statBytes that of a jute.Stat.
const (
	replyHeaderBytes = 4 + 8 + 4
	statBytes        = 6*8 + 5*4
)

// replyFrameSize is the capacity replyFrame starts with for body: exact
// for the replies that carry data, enough for a Stat otherwise (a larger
// body grows it).
func replyFrameSize(body jute.Record) int {
	n := 4 + replyHeaderBytes
	switch r := body.(type) {
	case nil:
		return n
	case *jute.GetDataResponse:
		return n + 4 + len(r.Data) + statBytes
	}
	return n + 128
}

// serve runs the handshake, then the reader on a goroutine of its own:
// the handshake's calls (a proposal through Dragonboat) grow a stack that an
// idle session would otherwise keep. srv.routines counts the reader.
func (c *conn) serve() {
	ok, err := c.handshake()
	if !ok {
		if err != nil && !errors.Is(err, io.EOF) {
			c.log().Debug("handshake", "err", err)
		}
		c.finish()
		return
	}
	if !c.srv.routines.start(c.reader) {
		c.finish() // the server is stopping
	}
}

// reader runs the reader until the connection ends, then finishes it. A
// proxy's channel (a vconn) whose reader has nothing to read and nothing
// to wait for parks instead: the goroutine ends, and the vconn starts
// another when the proxy sends the next frame or closes the channel
// (vconn.park, vconn.deliver). An idle proxied session then costs the
// member no goroutine.
func (c *conn) reader() {
	for {
		err := c.readLoop()
		if errors.Is(err, errParked) {
			if c.nc.(*vconn).park(c) {
				return
			}
			continue // a frame came meanwhile
		}
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			c.log().Debug("connection ended", "session", hexID(c.sessionID), "err", err)
		}
		c.finish()
		return
	}
}

// errParked: readLoop found nothing to read on a vconn and nothing of its
// own to wait for (reader parks it).
var errParked = errors.New("server: reader parked")

// finish waits for the processor and the flusher, closes the socket and
// releases the connection's session and watches.
func (c *conn) finish() {
	c.in.release()
	c.stopProcessor()
	c.procWG.Wait()
	c.out.Lock()
	graceful := c.out.closeAfter
	c.out.closed = true // no flusher starts after this
	c.out.Unlock()
	if !graceful {
		c.close()
	}
	c.flushWG.Wait() // a graceful close ends once the outbox is written
	c.close()
	c.bg.Wait()
	c.cell.watches.removeConn(c)
	c.cell.resumables.removeConn(c)
	if c.sessionID != 0 {
		c.cell.detach(c.sessionID, c)
	}
	c.srv.unregister(c)
	c.logClosed()
}

// log is the connection's logger, made when first needed (a logger with
// attributes per connection is a kilobyte of an idle session).
func (c *conn) log() *slog.Logger {
	return c.cell.log.With("remote", c.nc.RemoteAddr().String())
}

func hexID(id int64) string { return "0x" + formatHex(uint64(id)) }

func formatHex(v uint64) string {
	const digits = "0123456789abcdef"
	if v == 0 {
		return "0"
	}
	var b [16]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = digits[v&0xf]
		v >>= 4
	}
	return string(b[i:])
}

// readFrame reads one length-prefixed frame, the first four bytes already
// read into lenBuf when prefix is set.
func (c *conn) readFrame(prefix []byte) ([]byte, error) {
	b, err := c.readFrameFrom(prefix, nil)
	if err != nil {
		return nil, err
	}
	return *b, nil
}

// readFrameFrom is readFrame into a buffer of pool (nil: one of its own).
func (c *conn) readFrameFrom(prefix []byte, pool *bufPool) (*[]byte, error) {
	var lenBuf [4]byte
	if prefix != nil {
		copy(lenBuf[:], prefix)
	} else if err := c.in.readFull(lenBuf[:]); err != nil {
		return nil, err
	}
	n, err := jute.FrameLength(lenBuf, c.srv.cfg.MaxBuffer)
	if err != nil {
		c.srv.counters.largeRequestsRejected.Add(1)
		return nil, err
	}
	var buf *[]byte
	if pool != nil {
		buf = pool.get(n)
	} else {
		b := make([]byte, n)
		buf = &b
	}
	if err := c.in.readFull(*buf); err != nil {
		return nil, err
	}
	c.cell.reqs.received.Add(1)
	c.st.recved.Add(1)
	c.cell.reqs.bytesReceived.Add(int64(n) + 4)
	return buf, nil
}

// handshake reads the ConnectRequest (or a four-letter word) and answers it.
func (c *conn) handshake() (bool, error) {
	c.nc.SetReadDeadline(time.Now().Add(handshakeTimeout))
	var first [4]byte
	if _, err := io.ReadFull(c.nc, first[:]); err != nil {
		return false, err
	}
	if word := string(first[:]); c.srv.ops.commands.IsWord(word) {
		c.fourLetterWord(word)
		return false, nil
	}
	body, err := c.readFrame(first[:])
	if err != nil {
		return false, err
	}
	if !c.cell.waitServing(c.srv.leaderGrace(), c.done) {
		// No leader within the grace period: like a ZooKeeper server that
		// is not serving, close; the client tries another member.
		return false, nil
	}
	req := new(jute.ConnectRequest)
	if err := jute.Unmarshal(body, req); err != nil {
		return false, err
	}
	if req.LastZxidSeen > c.cell.zxid.Load() {
		// Catch up before refusing: this member may lag the leader.
		if err := c.cell.rep.read(nil, readQuery{fn: func(raftsm.View) error { return nil }, linearizable: true}); err != nil {
			return false, err
		}
		if req.LastZxidSeen > c.cell.zxid.Load() {
			c.log().Info("refusing client ahead of this member", "lastZxidSeen", req.LastZxidSeen, "zxid", c.cell.zxid.Load())
			return false, nil
		}
	}
	cfg := &c.srv.cfg
	timeout := session.NegotiateTimeout(req.TimeOut, int32(cfg.MinSessionTimeout/time.Millisecond), int32(cfg.MaxSessionTimeout/time.Millisecond))
	resp := &jute.ConnectResponse{TimeOut: timeout, HasReadOnly: req.HasReadOnly}
	if req.SessionID == 0 && c.cell.sessionsFull() {
		// The cell's session limit (celllimits.go): refused, as ZooKeeper
		// refuses a session it will not serve, by closing.
		c.log().Warn("session refused: the cell has its maximum of sessions", "maxSessions", c.cell.cellLimits().MaxSessions)
		return false, nil
	}
	if req.SessionID == 0 {
		id, err := c.createSession(timeout)
		if err != nil {
			return false, err
		}
		resp.SessionID, resp.Passwd = id, session.Password(id)
		c.log().Info("session created", "session", hexID(id), "timeout", timeout)
	} else {
		// ZooKeeper closes the session's current connection before it
		// checks the password (CLIENT_RECONNECT).
		c.cell.detachAndClose(req.SessionID)
		ok, err := c.reattach(req.SessionID, req.Passwd)
		if err != nil {
			return false, err
		}
		if !ok {
			c.log().Info("session expired or bad password on reconnect", "session", hexID(req.SessionID))
			c.enqueue(jute.AppendFrame(nil, &jute.ConnectResponse{Passwd: make([]byte, 16), HasReadOnly: req.HasReadOnly}))
			c.closeAfterFlush()
			return false, nil
		}
		resp.SessionID, resp.Passwd = req.SessionID, session.Password(req.SessionID)
		c.log().Info("session reattached", "session", hexID(req.SessionID), "timeout", timeout)
	}
	c.sessionID = resp.SessionID
	c.timeout = time.Duration(timeout) * time.Millisecond
	c.cell.attach(c.sessionID, c)
	c.cell.alive.Record(c.sessionID)
	c.reply(jute.AppendFrame(nil, resp))
	return true, nil
}

func (c *conn) createSession(timeout int32) (int64, error) {
	for range 3 {
		id := c.cell.ids.Next()
		// Retried across leader changes: the id is this member's own, so
		// NODEEXISTS after a retry means an earlier attempt created it.
		var code jute.ErrCode
		var retried bool
		if c.batched() {
			res, r, err := c.cell.sessions.submit(raftsm.SessionOp{Session: id, Timeout: timeout, Owner: c.owner}, c.done, c.channelGone())
			if err != nil {
				return 0, err
			}
			code, retried = res.Err, r
		} else {
			rep, r, err := c.cell.rep.proposeRetry(&raftsm.Command{
				Kind: raftsm.KindCreateSession, Session: id, Timeout: timeout, Owner: c.owner, Time: time.Now().UnixMilli(),
			}, c.done)
			if err != nil {
				return 0, err
			}
			code, retried = rep.Err, r
		}
		if code == jute.ErrOK || (retried && code == jute.ErrNodeExists) {
			return id, nil
		}
		if code == jute.ErrNotReadOnly {
			return 0, errCellSealed
		}
	}
	return 0, errors.New("server: could not allocate a session id")
}

// errCellSealed: the cell is sealed before its delete (raftsm.KindSeal)
// and takes no new session; the connection closes, as a read-only
// ZooKeeper closes one from a client that did not allow read-only mode.
var errCellSealed = errors.New("server: the cell is sealed (it is being deleted): no new session")

// reattach checks a reconnecting client's password and records, through
// the log, that this connection now holds the session; any other
// connection that held it, on any member, is closed when that applies.
func (c *conn) reattach(id int64, passwd []byte) (bool, error) {
	if !session.CheckPassword(id, passwd) {
		return false, nil
	}
	if c.batched() {
		res, _, err := c.cell.sessions.submit(raftsm.SessionOp{Attach: true, Session: id, Owner: c.owner}, c.done, c.channelGone())
		if err != nil {
			return false, err
		}
		return res.Err == jute.ErrOK, nil
	}
	// attach is idempotent: retried across leader changes.
	rep, _, err := c.cell.rep.proposeRetry(&raftsm.Command{
		Kind: raftsm.KindAttach, Session: id, Owner: c.owner, Time: time.Now().UnixMilli(),
	}, c.done)
	if err != nil {
		return false, err
	}
	return rep.Err == jute.ErrOK, nil
}

// readLoop reads requests until the connection ends.
func (c *conn) readLoop() error {
	var lastRead *pending
	// holding: the reader is the outbox's writer, the replies of the
	// requests it answered itself queued unwritten while the next request
	// is already buffered (one write for a burst); it writes them before
	// anything that may wait, and before it hands a request on.
	holding := false
	release := func() {
		if holding {
			holding = false
			c.endWrite()
		}
	}
	defer release()
	// A connection that sends nothing for two session timeouts and a tick
	// is closed. The deadline is moved at most once a tick (each move is a
	// timer's), so it falls up to a tick later.
	idle, tick := 2*c.timeout+c.srv.cfg.TickTime, c.srv.cfg.TickTime
	var moved time.Time
	for {
		if now := time.Now(); now.Sub(moved) >= tick {
			c.nc.SetReadDeadline(now.Add(idle + tick))
			moved = now
		}
		if !c.in.hasFrame() {
			release() // before the read waits for the client
			if v, ok := c.nc.(*vconn); ok && c.in.empty() && v.empty() && (lastRead == nil || isClosed(lastRead.executed)) {
				// Nothing buffered and no earlier read that a write
				// must wait for: the reader may end until the next frame.
				return errParked
			}
		}
		frame, err := c.readFrameFrom(nil, &frameBufs)
		if err != nil {
			return err
		}
		body := *frame
		r := jute.NewReader(body)
		hdr := new(jute.RequestHeader)
		hdr.Decode(r)
		if r.Err() != nil {
			return r.Err()
		}
		c.cell.alive.Record(c.sessionID)
		if lastRead != nil && (hdr.Type == jute.OpMulti || hdr.Type == jute.OpCloseSession || znode.IsWrite(hdr.Type)) {
			// A read must not see a write sent after it on the same
			// connection: hold later writes until earlier reads have run.
			c.readerWaits.Store(true)
			select {
			case <-lastRead.executed:
			case <-c.done:
				return net.ErrClosed
			}
			c.readerWaits.Store(false)
			lastRead = nil
		}
		if hdr.Type != jute.OpPing && c.cell.rate.limited() {
			// The cell's request rate (celllimits.go): this connection
			// waits for a token; pings never do, so sessions live on. The
			// replies held for a burst go out before it waits.
			release()
			if !c.cell.rate.wait(c.done, &c.rateTurn) {
				return net.ErrClosed
			}
		}
		if !c.cell.serving() {
			release()
		}
		if !c.cell.serving() && !c.cell.waitServing(c.srv.leaderGrace(), c.done) {
			// An election is taking too long: the client moves on.
			return errNoLeader
		}
		start := time.Now()
		// Nothing global is taken before the connection's own bounds admit
		// the request: a client that does not read stalls here.
		if err := c.admit(len(body), release); err != nil {
			return err
		}
		if err := c.acquireSlot(); err != nil {
			return err // global outstanding limit: wait (backpressure) or closed
		}
		p, err := c.dispatch(hdr, r.Rest())
		if err != nil {
			c.srv.outstanding.release(c, 1)
			return err
		}
		p.start, p.size, p.slot = start, len(body), true
		if p.prop != nil {
			// A proposed request keeps nothing of its frame: the command
			// was encoded from it (and copied by the replica), an audit
			// line copies what it needs (dispatch).
			frameBufs.put(frame)
		}
		c.inflight.Add(1)
		if p.prop == nil && !c.waitsForRound(p) && c.idle() {
			// Nothing queued ahead: answer it here, sparing a processor
			// goroutine (and its stack's growth) per request. No later
			// request is read before it has run (p.executed stays nil).
			holding = c.process(p, true, c.in.hasFrame())
			if isClosed(c.done) {
				return net.ErrClosed
			}
			if p.closeAfter {
				return nil
			}
			continue
		}
		release() // the processor takes the writer's role from here
		if p.exec != nil {
			p.executed = make(chan struct{})
			lastRead = p
		}
		if !c.push(p) {
			c.releaseSlot(p)
			return net.ErrClosed
		}
		if p.closeAfter {
			return nil
		}
	}
}

// waitsForRound reports whether p is a read that waits for a ReadIndex
// round (an ensemble member's linearizable read). The reader leaves those
// to the processor: waiting itself, it would read the connection's next
// requests only after the round, and a pipelining client's reads would
// take a round each instead of sharing one.
func (c *conn) waitsForRound(p *pending) bool {
	return p.exec != nil && p.op != jute.OpPing &&
		c.srv.cfg.ReadMode == ReadLinearizable && !c.cell.localReads.Load()
}

// idle reports whether the connection has nothing queued and no processor
// running (or one lingering, done with every request): a request read now
// may be answered by the reader itself, in order. Only the reader adds to
// the queue, so it stays idle until the reader pushes.
func (c *conn) idle() bool {
	c.q.Lock()
	defer c.q.Unlock()
	return (!c.q.running || c.q.lingering) && len(c.q.items) == c.q.head
}

// dispatch turns one request into a pending reply, proposing writes now.
func (c *conn) dispatch(hdr *jute.RequestHeader, body []byte) (*pending, error) {
	p := &pending{xid: hdr.Xid, op: hdr.Type}
	if frame, refused := c.authEnforced(hdr); refused {
		p.frame, p.closeAfter = frame, true // enforce.auth: SESSIONCLOSEDREQUIRESASLAUTH
		return p, nil
	}
	switch {
	case hdr.Type == jute.OpSASL:
		c.saslOp(p, body)
	case hdr.Type == jute.OpPing:
		p.xid = jute.XidPing // whatever xid the ping carried
		p.exec = func() (*result, error) { return &result{zxid: c.cell.zxid.Load()}, nil }
	case hdr.Type == jute.OpAuth:
		var ids []jute.ID
		ids, p.frame, p.closeAfter = authenticate(hdr.Xid, c.authIDs(), body, c.srv.cfg.SuperDigest)
		c.setAuthIDs(ids)
		if p.frame == nil {
			return nil, errMalformedAuth
		}
	case hdr.Type == jute.OpCloseSession:
		c.closingSession.Store(true)
		return c.propose(p, &raftsm.Command{Kind: raftsm.KindCloseSession, Session: c.sessionID, Owner: c.owner, Time: time.Now().UnixMilli()}, true)
	case hdr.Type == jute.OpCheck:
		// A check outside a multi: ZooKeeper 3.9 answers UNIMPLEMENTED with
		// zxid -1 and closes (3.8 applied it and, when it passed, never
		// answered).
		p.exec = func() (*result, error) { return &result{zxid: -1, err: jute.ErrUnimplemented}, nil }
		p.closeAfter = true
	case hdr.Type == jute.OpReconfig && c.srv.cfg.ReconfigEnabled && !c.srv.standalone():
		p.exec = c.reconfigOp(body)
	case hdr.Type == jute.OpReconfig && c.srv.cfg.ReconfigEnabled:
		// A standalone ZooKeeper with reconfig enabled answers UNIMPLEMENTED
		// through an error txn.
		return c.propose(p, &raftsm.Command{Kind: raftsm.KindRequest, Session: c.sessionID, Owner: c.owner,
			Time: time.Now().UnixMilli(), Op: jute.OpError, Body: jute.Marshal(&jute.ErrorResponse{Err: jute.ErrUnimplemented})}, false)
	case hdr.Type == jute.OpMulti || znode.IsWrite(hdr.Type):
		cmd := &raftsm.Command{Kind: raftsm.KindRequest, Session: c.sessionID, Time: time.Now().UnixMilli(),
			Op: hdr.Type, Auth: c.authIDs(), Body: body, Owner: c.owner}
		if !validWrite(hdr.Type, body) {
			// ZooKeeper logs an error txn and answers MARSHALLINGERROR.
			cmd.Op, cmd.Body = jute.OpError, nil
		} else {
			if c.cell.overQuota(hdr.Type, body) {
				// The cell's znode or data limit (celllimits.go): an error
				// txn, as ZooKeeper's quota refusals are.
				cmd.Op, cmd.Body = jute.OpError, jute.Marshal(&jute.ErrorResponse{Err: jute.ErrQuotaExceeded})
			}
			if c.srv.audit != nil {
				p.auditBody = append([]byte(nil), body...)
			}
		}
		return c.propose(p, cmd, false)
	case hdr.Type == opShared && c.sharedWatcher() != nil:
		// A proxy's DataShared read: the generation, then the request's
		// own header and record.
		r := jute.NewReader(body)
		gen := r.Long()
		inner := new(jute.RequestHeader)
		inner.Decode(r)
		if r.Err() != nil || gen <= 0 || inner.Xid != hdr.Xid {
			return nil, errMalformedShared
		}
		p.op, p.sharedGen = inner.Type, gen
		p.exec, p.closeAfter, p.watching = c.readOp(inner, r.Rest())
		if p.watching && c.cell.watchesFull() {
			c.log().Warn("connection closed: the cell has its maximum of watches", "maxWatches", c.cell.cellLimits().MaxWatches)
			return nil, errWatchLimit
		}
	default:
		p.exec, p.closeAfter, p.watching = c.readOp(hdr, body)
		if p.watching && c.cell.watchesFull() {
			// The cell's watch limit (celllimits.go): the connection closes.
			c.log().Warn("connection closed: the cell has its maximum of watches", "maxWatches", c.cell.cellLimits().MaxWatches)
			return nil, errWatchLimit
		}
	}
	return p, nil
}

// validWrite reports whether a write's body decodes, with only write ops
// inside a multi.
func validWrite(op jute.OpCode, body []byte) bool {
	if op == jute.OpMulti {
		m := new(jute.MultiRequest)
		if jute.UnmarshalShared(body, m) != nil {
			return false
		}
		for _, o := range m.Ops {
			if !znode.IsWrite(o.Type) || o.Type == jute.OpMulti {
				return false
			}
		}
		return true
	}
	req, ok := jute.NewRequest(op)
	return ok && jute.UnmarshalShared(body, req) == nil // decoded to check, then dropped
}

func (c *conn) propose(p *pending, cmd *raftsm.Command, closeAfter bool) (*pending, error) {
	prop, err := c.cell.rep.propose(cmd)
	if err != nil {
		// The client sees a lost connection and retries elsewhere.
		c.log().Warn("propose failed", "op", cmd.Op.String(), "err", err)
		return nil, err
	}
	p.prop = prop
	p.closeAfter = closeAfter
	return p, nil
}

var (
	errMalformedAuth   = errors.New("server: malformed auth packet")
	errMalformedShared = errors.New("server: malformed shared-watch request from a proxy")
	errNoLeader        = errors.New("server: no leader")
)

// push queues a request for the processor, starting one unless it runs.
// admit has made room for it. False: the connection closed. Only the
// reader goroutine calls it.
func (c *conn) push(p *pending) bool {
	if isClosed(c.done) {
		return false
	}
	c.q.Lock()
	c.q.items = append(c.q.items, p)
	c.q.bytes += p.size
	wake := false
	switch {
	case !c.q.running:
		c.procWG.Add(1)
		if !c.srv.routines.start(c.processor) {
			// The server is stopping: the request is not answered.
			c.procWG.Done()
			c.q.Unlock()
			c.close()
			return false
		}
		c.q.running = true
	case c.q.lingering:
		c.q.lingering, wake = false, true
	}
	unslot := c.q.parked && p.slot // park's invariant
	if unslot {
		p.slot = false
	}
	c.q.Unlock()
	if wake {
		c.wakeProcessor()
	}
	if unslot {
		c.srv.outstanding.release(c, 1)
	}
	return true
}

func (c *conn) wakeProcessor() {
	select {
	case c.procWake <- struct{}{}:
	default:
	}
}

// stopProcessor tells the processor that no request follows: it ends once
// it has answered the queued ones. The reader calls it as it ends.
func (c *conn) stopProcessor() {
	c.q.Lock()
	c.q.stopping = true
	c.q.Unlock()
	c.wakeProcessor()
}

// pop takes the oldest queued request; nil when there is none: the
// processor then lingers, or ends (stop) once the reader has ended.
func (c *conn) pop() (p *pending, stop bool) {
	c.q.Lock()
	defer c.q.Unlock()
	n := len(c.q.items) - c.q.head
	if n == 0 {
		c.q.items, c.q.head = nil, 0
		if c.q.stopping {
			c.q.running = false
			return nil, true
		}
		c.q.lingering = true
		return nil, false
	}
	p = c.q.items[c.q.head]
	c.q.items[c.q.head] = nil
	c.q.head++
	c.q.bytes -= p.size
	select {
	case c.readerWake <- struct{}{}: // room for the reader, if it waits
	default:
	}
	return p, false
}

// queued is the number of requests waiting for the processor.
func (c *conn) queued() int {
	c.q.Lock()
	defer c.q.Unlock()
	return len(c.q.items) - c.q.head
}

// procLinger is how long an idle processor waits for the next request
// before it ends. Starting one per request costs more than the request
// (its stack grows for every read and write it completes), and a session
// that sends one request at a time leaves it idle between them.
const procLinger = time.Second

// processor answers queued requests in order; idle for procLinger, or once
// the reader has ended, it ends (push starts another for the next request).
func (c *conn) processor() {
	defer c.procWG.Done()
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		p, stop := c.pop()
		if stop {
			return
		}
		if p != nil {
			c.process(p, false, false)
			continue
		}
		if t == nil {
			t = time.NewTimer(procLinger)
		} else {
			t.Reset(procLinger)
		}
		select {
		case <-c.procWake:
			continue // a request, or the reader ended (pop says which)
		case <-t.C:
		case <-c.done:
		}
		c.q.Lock()
		if len(c.q.items) > c.q.head {
			c.q.lingering = false // pushed meanwhile
			c.q.Unlock()
			continue
		}
		c.q.running, c.q.lingering = false, false
		c.q.Unlock()
		return
	}
}

// process completes one request and queues its reply, after the replies of
// every earlier request: the processor calls it in order, the reader for a
// request with nothing queued ahead of it (inline, byReader). A request
// that fails closes the connection; the later ones then fail at once,
// releasing their request states.
//
// The reply is written at once unless the caller has more to answer at
// once: the reader another request already buffered (more), the processor
// a next request that is ready (nextReady). The caller then stays the
// outbox's writer (the result) and the replies go out in one write.
func (c *conn) process(p *pending, byReader, more bool) (writer bool) {
	if p.watching {
		// Room first: notifications are held while the read runs.
		c.waitOutboxRoom(byReader)
		c.cell.watches.hold(c)
	}
	frame, err := c.complete(p)
	c.requestDone(p, frame, err)
	c.inflight.Add(-1)
	if err != nil {
		c.endWrite()
		if p.watching {
			c.cell.watches.finishRead(c, 0, nil, nil, nil)
		}
		if !errors.Is(err, net.ErrClosed) {
			c.log().Warn("request failed", "op", p.op.String(), "err", err)
		}
		c.close()
		return false
	}
	if p.watching {
		// The reply and the notifications finishRead queues are written
		// here, as reply writes a reply alone.
		c.beginWrite()
		if sw := c.sharedWatcher(); p.sharedGen != 0 && sw != nil {
			c.cell.watches.finishSharedRead(c, sw, p.xid, p.sharedGen, p.res.at, p.res.before, frame, p.res.want)
		} else {
			c.cell.watches.finishRead(c, p.res.at, p.res.before, frame, p.res.want)
		}
	} else {
		c.waitOutboxRoom(byReader) // a slow reader holds the pipeline, not memory
		c.beginWrite()
		c.enqueue(frame)
	}
	if p.after != nil {
		p.after()
	}
	if p.closeAfter {
		c.closeAfterFlush()
	}
	if !byReader {
		more = c.nextReady()
	}
	if p.closeAfter || !more {
		c.endWrite()
	}
	return c.writer
}

// batchBytes bounds the replies the processor queues before it writes
// them (endWrite) while the next request is ready.
const batchBytes = 64 << 10

// beginWrite makes the caller the outbox's writer (claimWriter), unless it
// is already: the processor keeps the role while the requests it answers
// one after another are ready (nextReady), so that their replies go out in
// one write, and ends it (endWrite) before it waits for anything.
func (c *conn) beginWrite() {
	if !c.writer {
		c.writer = c.claimWriter()
	}
}

// endWrite writes what was queued while the caller was the writer.
func (c *conn) endWrite() {
	if c.writer {
		c.writer = false
		c.writeQueued()
	}
}

// nextReady reports whether the processor may answer the next queued
// request without waiting: a ready reply, a local read that sets no watch
// and needs no ReadIndex round, or a write whose result has arrived; and
// the replies queued unwritten are under batchBytes.
func (c *conn) nextReady() bool {
	c.out.Lock()
	full := c.out.bytes >= batchBytes
	c.out.Unlock()
	if full {
		return false
	}
	c.q.Lock()
	defer c.q.Unlock()
	if len(c.q.items) == c.q.head {
		return false
	}
	p := c.q.items[c.q.head]
	switch {
	case p.prop != nil:
		return p.prop.ready()
	case p.exec != nil:
		return !p.watching && !c.waitsForRound(p) && quickRead(p.op)
	}
	return true
}

// quickRead reports whether op's read runs on the member's own state with
// nothing to wait for (not sync, reconfig or the like).
func quickRead(op jute.OpCode) bool {
	switch op {
	case jute.OpPing, jute.OpExists, jute.OpGetData, jute.OpGetChildren, jute.OpGetChildren2,
		jute.OpGetACL, jute.OpGetAllChildrenNumber, jute.OpGetEphemerals:
		return true
	}
	return false
}

func (c *conn) complete(p *pending) ([]byte, error) {
	switch {
	case p.prop != nil:
		// net.ErrClosed once the connection is gone (closed by the client,
		// a leader change or shutdown): nobody waits for this reply any
		// more.
		rep, err := p.prop.wait(c.done)
		if err != nil {
			return nil, err
		}
		if p.auditBody != nil {
			c.auditWrite(p.op, p.auditBody, rep)
		}
		return rawReplyFrame(p.xid, rep.Zxid, rep.Err, rep.Body), nil
	case p.exec != nil:
		select {
		case <-c.done:
			p.ran()
			return nil, net.ErrClosed
		default:
		}
		res, err := p.exec()
		p.ran()
		if err != nil {
			return nil, err
		}
		p.after, p.res = res.after, res
		if res.err != jute.ErrOK && res.errBody != nil {
			return jute.AppendFrame(nil, &jute.ReplyHeader{Xid: p.xid, Zxid: res.zxid, Err: res.err}, res.errBody), nil
		}
		return replyFrame(p.xid, res.zxid, res.err, res.resp), nil
	}
	return p.frame, nil
}

// notify queues a watch notification. It is called with the registry lock
// held and must not block.
func (c *conn) notify(zxid int64, typ jute.EventType, path string) {
	c.enqueue(jute.AppendFrame(nil,
		&jute.ReplyHeader{Xid: jute.XidNotification, Zxid: zxid},
		&jute.WatcherEvent{Type: typ, State: jute.StateSyncConnected, Path: path}))
}

// sessionClosed is called (under the state machine's lock) when the
// connection's session is closed or expired.
func (c *conn) sessionClosed() {
	if c.closingSession.Load() {
		return // the processor closes after the closeSession reply
	}
	c.log().Info("session expired", "session", hexID(c.sessionID))
	c.closeAfterFlush()
}

func (c *conn) enqueue(frame []byte) {
	c.out.Lock()
	if c.out.closed {
		c.out.Unlock()
		return
	}
	if c.outboxLocked() > c.outboxLimit() {
		// Only notifications get here: a reply is queued once the outbox
		// is under its high-water mark, however large the reply.
		c.out.closed = true
		c.out.frames, c.out.bytes = nil, 0
		c.out.Unlock()
		c.log().Warn("client too slow: outbox full", "session", hexID(c.sessionID), "limit", c.outboxLimit())
		c.close()
		return
	}
	c.out.frames = append(c.out.frames, frame)
	c.out.bytes += len(frame)
	c.kickFlusherLocked()
	c.out.Unlock()
}

// reply queues a reply frame and, unless a flusher runs, writes the
// outbox at once (writeQueued): one request at a time then takes no
// flusher goroutine (a new goroutine per reply grows its stack for the
// write, every time). Nothing waits for the socket here: what it does not
// take at once goes to the flusher, which waits under the stall timeout.
func (c *conn) reply(frame []byte) {
	c.beginWrite()
	c.enqueue(frame)
	c.endWrite()
}

// claimWriter makes the calling goroutine the outbox's writer, unless a
// flusher is one (or the socket is TLS, or the outbox closed): no flusher
// starts while it holds the role, and it must call writeQueued, which
// writes what was queued meanwhile in order (notifications too).
func (c *conn) claimWriter() bool {
	c.out.Lock()
	defer c.out.Unlock()
	if c.out.closed || c.raw == nil || c.out.flushing {
		return false
	}
	c.out.flushing = true
	return true
}

// writeQueued writes the queued frames without waiting for the socket, as
// the writer claimWriter made the caller, and hands what is left (and a
// close once the outbox is written) to a flusher.
func (c *conn) writeQueued() {
	c.out.Lock()
	for len(c.out.frames) > 0 {
		frames := c.takeFramesLocked()
		c.out.Unlock()
		wrote := c.tryWrite(frames)
		sent, left := 0, wrote
		var rest [][]byte
		for i, f := range frames {
			if left < len(f) {
				rest = append([][]byte{f[left:]}, frames[i+1:]...)
				break
			}
			left -= len(f)
			sent++
		}
		if sent > 0 {
			c.cell.reqs.sent.Add(int64(sent))
			c.st.sent.Add(int64(sent))
		}
		if wrote > 0 {
			c.outboxProgress(wrote)
		}
		c.out.Lock()
		if rest != nil {
			size := 0
			for _, f := range rest {
				size += len(f)
			}
			c.out.writing -= size
			if !c.out.closed || c.out.closeAfter {
				// The rest goes first, before what was queued meanwhile.
				c.out.frames = append(rest, c.out.frames...)
				c.out.bytes += size
			}
			break
		}
	}
	if len(c.out.frames) > 0 || c.out.closeAfter {
		c.startFlusherLocked() // flushing stays set: it is the flusher's now
	} else {
		c.out.flushing = false
	}
	c.out.Unlock()
}

// tryWrite writes what the socket takes of frames, in one writev call
// for up to maxIovecs of them, without waiting for the socket; the number
// of bytes written. A write deadline left by the flusher that has passed
// makes it write nothing.
func (c *conn) tryWrite(frames [][]byte) int {
	w := &c.wv
	if w.fn == nil {
		w.fn = w.writeFD
	}
	w.frames, w.n = frames, 0
	c.raw.Write(w.fn)
	n := w.n
	w.frames, w.n = nil, 0
	return n
}

// rawWriter is tryWrite's callback for raw.Write, made once per
// connection, with its arguments and result: a closure made per write
// escaped with what it captured, heap objects on every reply.
type rawWriter struct {
	fn     func(fd uintptr) bool
	frames [][]byte
	n      int // bytes written
}

func (w *rawWriter) writeFD(fd uintptr) bool {
	for len(w.frames) > 0 {
		iov := w.frames[:min(len(w.frames), maxIovecs)]
		want := 0
		for _, f := range iov {
			want += len(f)
		}
		m, err := unix.Writev(int(fd), iov)
		if m > 0 {
			w.n += m
		}
		if err == unix.EINTR && m <= 0 {
			continue
		}
		if m < want {
			break // the socket is full (EAGAIN) or failed: the flusher meets it
		}
		w.frames = w.frames[len(iov):]
	}
	return true
}

// maxIovecs is the frames one writev takes (Linux's IOV_MAX is 1024).
const maxIovecs = 256

// kickFlusherLocked starts the flusher unless it runs; c.out is held.
func (c *conn) kickFlusherLocked() {
	if !c.out.flushing {
		c.startFlusherLocked()
	}
}

// startFlusherLocked starts a flusher, which owns out.flushing; c.out is
// held. Refused (the server is stopping), the outbox closes and so does
// the connection.
func (c *conn) startFlusherLocked() {
	c.out.flushing = true
	c.flushWG.Add(1)
	if !c.srv.routines.start(c.flusher) {
		c.flushWG.Done()
		c.out.closed, c.out.flushing = true, false
		c.close()
	}
}

// closeAfterFlush accepts no more frames and closes the socket once the
// queued ones are written.
func (c *conn) closeAfterFlush() {
	c.out.Lock()
	defer c.out.Unlock()
	if c.out.closeAfter {
		return
	}
	wasClosed := c.out.closed
	c.out.closed = true
	c.out.closeAfter = true
	if !wasClosed {
		c.kickFlusherLocked() // it closes the socket once the outbox is empty
	}
}

// flusher writes the outbox until it is empty, then ends (enqueue starts
// another for the next frame). With closeAfter set it closes the socket
// once everything queued is written.
func (c *conn) flusher() {
	defer c.flushWG.Done()
	for {
		c.out.Lock()
		frames := c.takeFramesLocked()
		closeAfter := c.out.closeAfter
		if len(frames) == 0 {
			c.out.flushing = false
			c.out.Unlock()
			if closeAfter {
				c.close()
			} else if c.raw != nil {
				// reply writes without a deadline, and fails on a past one.
				c.nc.SetWriteDeadline(time.Time{})
			}
			return
		}
		c.out.Unlock()
		if err := c.write(frames); err != nil {
			c.out.Lock()
			c.out.closed, c.out.frames, c.out.bytes, c.out.writing, c.out.flushing = true, nil, 0, 0, false
			c.out.Unlock()
			c.close()
			return
		}
		c.cell.reqs.sent.Add(int64(len(frames)))
		c.st.sent.Add(int64(len(frames)))
	}
}

// takeFramesLocked takes the oldest queued frames, about flushBatch bytes
// of them (at least one), counting them as being written. c.out is held.
func (c *conn) takeFramesLocked() [][]byte {
	all := c.out.frames
	n, size := 0, 0
	for n < len(all) && (n == 0 || size+len(all[n]) <= flushBatch) {
		size += len(all[n])
		n++
	}
	var taken [][]byte
	if n == len(all) {
		taken, c.out.frames = all, nil
	} else {
		taken = append([][]byte(nil), all[:n]...)
		clear(all[:n]) // the array kept for the rest holds no written frame
		c.out.frames = all[n:]
	}
	c.out.bytes -= size
	c.out.writing += size
	return taken
}

func (c *conn) close() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.nc.Close()
	})
}
