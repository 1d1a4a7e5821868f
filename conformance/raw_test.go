package conformance

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/jute"
)

// Raw-socket helpers. They speak the Jute wire format with encoding/binary
// directly (zookeeper-facts.md §0 and §2) so that tests can send what a
// well-behaved client library refuses to send, and can see the exact frames
// the server writes (order, lengths, header zxids). Every read has a deadline.

// rawIOTimeout bounds each read of a reply that is expected to arrive.
const rawIOTimeout = 5 * time.Second

// ---------------------------------------------------------------------------
// Encoding.

// jw appends Jute-encoded values to a byte slice.
type jw struct{ b []byte }

func (w *jw) i32(v int32) *jw { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)); return w }
func (w *jw) i64(v int64) *jw { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)); return w }

func (w *jw) boolean(v bool) *jw {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
	return w
}

// buf writes a Jute buffer; nil is written as length -1.
func (w *jw) buf(p []byte) *jw {
	if p == nil {
		return w.i32(-1)
	}
	w.i32(int32(len(p)))
	w.b = append(w.b, p...)
	return w
}

func (w *jw) str(s string) *jw {
	w.i32(int32(len(s)))
	w.b = append(w.b, s...)
	return w
}

func (w *jw) acl(list []zk.ACL) *jw {
	w.i32(int32(len(list)))
	for _, a := range list {
		w.i32(a.Perms).str(a.Scheme).str(a.ID)
	}
	return w
}

func (w *jw) bytes() []byte { return w.b }

// openACL is OPEN_ACL_UNSAFE: world:anyone with every permission.
var openACL = []zk.ACL{{Perms: permAll, Scheme: "world", ID: "anyone"}}

// Request records (the part after the RequestHeader).

func createReq(path string, data []byte, flags int32) []byte {
	return new(jw).str(path).buf(data).acl(openACL).i32(flags).bytes()
}

func pathWatchReq(path string, watch bool) []byte { return new(jw).str(path).boolean(watch).bytes() }
func pathReq(path string) []byte                  { return new(jw).str(path).bytes() }

func deleteReq(path string, version int32) []byte {
	return new(jw).str(path).i32(version).bytes()
}

func setDataReq(path string, data []byte, version int32) []byte {
	return new(jw).str(path).buf(data).i32(version).bytes()
}

func setACLReq(path string, acl []zk.ACL, version int32) []byte {
	return new(jw).str(path).acl(acl).i32(version).bytes()
}

func checkReq(path string, version int32) []byte { return deleteReq(path, version) }

// multiOp is one operation inside a multi request: its op code and record.
type multiOp struct {
	op   int32
	body []byte
}

// multiReq encodes MultiOperationRecord: MultiHeader{type, done=false, err=-1}
// + record per op, then the terminator MultiHeader{-1, true, -1}.
func multiReq(ops ...multiOp) []byte {
	w := new(jw)
	for _, o := range ops {
		w.i32(o.op).boolean(false).i32(-1)
		w.b = append(w.b, o.body...)
	}
	w.i32(-1).boolean(true).i32(-1)
	return w.bytes()
}

// ---------------------------------------------------------------------------
// Decoding.

// jr reads Jute values from a byte slice; the first short read sets err and
// every later read returns zero values.
type jr struct {
	b   []byte
	err error
}

func (r *jr) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = fmt.Errorf("short buffer: need %d bytes, have %d", n, len(r.b))
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *jr) i32() int32 {
	p := r.take(4)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

func (r *jr) i64() int64 {
	p := r.take(8)
	if p == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(p))
}

func (r *jr) boolean() bool {
	p := r.take(1)
	return p != nil && p[0] != 0
}

// buf reads a Jute buffer; length -1 gives nil.
func (r *jr) buf() []byte {
	n := r.i32()
	if r.err != nil || n == -1 {
		return nil
	}
	return bytes.Clone(r.take(int(n)))
}

func (r *jr) str() string { return string(r.buf()) }

func (r *jr) strs() []string {
	n := r.i32()
	if r.err != nil || n == -1 {
		return nil
	}
	if n < 0 || int(n) > len(r.b) {
		r.err = fmt.Errorf("bad vector length %d", n)
		return nil
	}
	out := make([]string, 0, n)
	for i := int32(0); i < n && r.err == nil; i++ {
		out = append(out, r.str())
	}
	return out
}

func (r *jr) acl() []zk.ACL {
	n := r.i32()
	if r.err != nil || n == -1 {
		return nil
	}
	if n < 0 || int(n) > len(r.b) {
		r.err = fmt.Errorf("bad vector length %d", n)
		return nil
	}
	out := make([]zk.ACL, 0, n)
	for i := int32(0); i < n && r.err == nil; i++ {
		out = append(out, zk.ACL{Perms: r.i32(), Scheme: r.str(), ID: r.str()})
	}
	return out
}

// stat reads the 68-byte wire Stat.
func (r *jr) stat() zk.Stat {
	var s zk.Stat
	s.Czxid = r.i64()
	s.Mzxid = r.i64()
	s.Ctime = r.i64()
	s.Mtime = r.i64()
	s.Version = r.i32()
	s.Cversion = r.i32()
	s.Aversion = r.i32()
	s.EphemeralOwner = r.i64()
	s.DataLength = r.i32()
	s.NumChildren = r.i32()
	s.Pzxid = r.i64()
	return s
}

// end fails if a read was short or bytes are left over.
func (r *jr) end() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%d unexpected trailing bytes: % x", len(r.b), r.b)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Handshake records.

type connectRequest struct {
	ProtocolVersion int32
	LastZxidSeen    int64
	TimeOut         int32
	SessionID       int64
	Passwd          []byte
	// WithReadOnly appends the optional trailing readOnly byte (false), as
	// every current client does. Without it the request is 44 bytes long.
	WithReadOnly bool
}

func (c connectRequest) encode() []byte {
	w := new(jw).i32(c.ProtocolVersion).i64(c.LastZxidSeen).i32(c.TimeOut).i64(c.SessionID).buf(c.Passwd)
	if c.WithReadOnly {
		w.boolean(false)
	}
	return w.bytes()
}

// newSessionRequest is the ConnectRequest of a client asking for a new session.
func newSessionRequest(timeoutMs int32) connectRequest {
	return connectRequest{TimeOut: timeoutMs, Passwd: make([]byte, 16), WithReadOnly: true}
}

type connectResponse struct {
	ProtocolVersion int32
	TimeOut         int32
	SessionID       int64
	Passwd          []byte
	HasReadOnly     bool // the trailing readOnly byte was present
	ReadOnly        bool
	Len             int // body length in bytes
}

func decodeConnectResponse(b []byte) (connectResponse, error) {
	r := &jr{b: b}
	resp := connectResponse{Len: len(b)}
	resp.ProtocolVersion = r.i32()
	resp.TimeOut = r.i32()
	resp.SessionID = r.i64()
	resp.Passwd = r.buf()
	if r.err == nil && len(r.b) > 0 {
		resp.HasReadOnly = true
		resp.ReadOnly = r.boolean()
	}
	return resp, r.end()
}

// ---------------------------------------------------------------------------
// Replies.

// reply is one server frame after the handshake: a ReplyHeader and the rest.
type reply struct {
	Xid  int32
	Zxid int64
	Err  int32
	Body []byte
	Len  int // whole frame body length, header included
}

func (r reply) String() string {
	return fmt.Sprintf("{xid %d zxid %#x err %s body %d bytes}", r.Xid, r.Zxid, errName(r.Err), len(r.Body))
}

func decodeReply(b []byte) (reply, error) {
	if len(b) < 16 {
		return reply{}, fmt.Errorf("frame of %d bytes is shorter than a ReplyHeader: % x", len(b), b)
	}
	r := &jr{b: b}
	rep := reply{Xid: r.i32(), Zxid: r.i64(), Err: r.i32(), Len: len(b)}
	rep.Body = r.b
	return rep, nil
}

// watcherEvent is the body of a notification frame.
type watcherEvent struct {
	Type  int32
	State int32
	Path  string
}

func (rep reply) event() (watcherEvent, error) {
	if rep.Xid != xidNotification {
		return watcherEvent{}, fmt.Errorf("frame %v is not a notification", rep)
	}
	r := &jr{b: rep.Body}
	ev := watcherEvent{Type: r.i32(), State: r.i32(), Path: r.str()}
	return ev, r.end()
}

// ---------------------------------------------------------------------------
// Connections.

// rawConn is one TCP connection speaking the client protocol by hand.
type rawConn struct {
	t  testing.TB
	nc net.Conn

	xid       int32
	SessionID int64
	Passwd    []byte
	TimeOut   int32

	// Events holds notifications read by call while it waited for a reply,
	// in arrival order.
	Events []watcherEvent
	// EventZxids holds the ReplyHeader zxid of each frame in Events.
	EventZxids []int64
}

// dialRaw opens a TCP connection to the server under test. The connection is
// closed when the test ends.
func dialRaw(t testing.TB) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", serverAddr, rawIOTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", serverAddr, err)
	}
	c := &rawConn{t: t, nc: nc}
	t.Cleanup(func() { nc.Close() })
	return c
}

// writeRaw writes b as is (no framing).
func (c *rawConn) writeRaw(b []byte) error {
	c.nc.SetWriteDeadline(time.Now().Add(rawIOTimeout))
	_, err := c.nc.Write(b)
	return err
}

// frame prefixes body with its 4-byte big-endian length.
func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func (c *rawConn) writeFrame(body []byte) error { return c.writeRaw(frame(body)) }

// readFrame reads one length-prefixed frame, waiting at most d.
func (c *rawConn) readFrame(d time.Duration) ([]byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(d))
	defer c.nc.SetReadDeadline(time.Time{})
	body, err := jute.ReadFrame(c.nc, nil, 16<<20)
	if errors.Is(err, jute.ErrFrameLength) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("the server's frame: %w", err)
	}
	return body, err
}

// handshake sends a ConnectRequest and reads the ConnectResponse.
func (c *rawConn) handshake(req connectRequest) (connectResponse, error) {
	if err := c.writeFrame(req.encode()); err != nil {
		return connectResponse{}, fmt.Errorf("write ConnectRequest: %w", err)
	}
	b, err := c.readFrame(rawIOTimeout)
	if err != nil {
		return connectResponse{}, fmt.Errorf("read ConnectResponse: %w", err)
	}
	resp, err := decodeConnectResponse(b)
	if err != nil {
		return resp, fmt.Errorf("decode ConnectResponse % x: %w", b, err)
	}
	if resp.SessionID != 0 {
		c.SessionID, c.Passwd, c.TimeOut = resp.SessionID, resp.Passwd, resp.TimeOut
	}
	return resp, nil
}

// rawSession dials and establishes a new session with the given requested
// timeout. When the test ends the session is closed (closeSession), so that
// it never expires later in the middle of another test.
func rawSession(t testing.TB, timeoutMs int32) *rawConn {
	t.Helper()
	c := dialRaw(t)
	resp, err := c.handshake(newSessionRequest(timeoutMs))
	if err != nil {
		t.Fatalf("raw handshake: %v", err)
	}
	if resp.SessionID == 0 {
		t.Fatalf("raw handshake: server refused a new session: %+v", resp)
	}
	id, pw := resp.SessionID, resp.Passwd
	t.Cleanup(func() { closeSessionByID(t, id, pw) })
	return c
}

// closeSessionByID makes sure a session is gone: it re-attaches to the session
// on a new connection and sends closeSession. A session that no longer exists
// (the server answers "expired") is fine.
func closeSessionByID(t testing.TB, id int64, passwd []byte) {
	nc, err := net.DialTimeout("tcp", serverAddr, rawIOTimeout)
	if err != nil {
		t.Logf("closeSessionByID %#x: dial: %v", id, err)
		return
	}
	c := &rawConn{t: t, nc: nc}
	defer nc.Close()
	resp, err := c.handshake(connectRequest{TimeOut: 10000, SessionID: id, Passwd: passwd, WithReadOnly: true})
	if err != nil {
		t.Logf("closeSessionByID %#x: %v", id, err)
		return
	}
	if resp.SessionID == 0 {
		return // already expired or closed
	}
	c.closeSession()
}

// send writes a request with the next xid and returns that xid.
func (c *rawConn) send(op int32, body []byte) (int32, error) {
	c.xid++
	return c.xid, c.sendXid(c.xid, op, body)
}

func (c *rawConn) sendXid(xid, op int32, body []byte) error {
	return c.writeFrame(append(new(jw).i32(xid).i32(op).bytes(), body...))
}

// readReply reads the next frame after the handshake.
func (c *rawConn) readReply(d time.Duration) (reply, error) {
	b, err := c.readFrame(d)
	if err != nil {
		return reply{}, err
	}
	return decodeReply(b)
}

// call sends a request and returns its reply. Notifications that arrive first
// are appended to c.Events; ping replies are skipped. Any I/O error or a reply
// with an unexpected xid fails the test.
func (c *rawConn) call(op int32, body []byte) reply {
	c.t.Helper()
	xid, err := c.send(op, body)
	if err != nil {
		c.t.Fatalf("send op %d: %v", op, err)
	}
	return c.await(xid)
}

// await reads frames until the reply with the given xid.
func (c *rawConn) await(xid int32) reply {
	c.t.Helper()
	for {
		rep, err := c.readReply(rawIOTimeout)
		if err != nil {
			c.t.Fatalf("waiting for reply xid %d: %v", xid, err)
		}
		switch {
		case rep.Xid == xidNotification:
			ev, err := rep.event()
			if err != nil {
				c.t.Fatalf("bad notification: %v", err)
			}
			c.Events = append(c.Events, ev)
			c.EventZxids = append(c.EventZxids, rep.Zxid)
		case rep.Xid == xidPing:
		case rep.Xid == xid:
			return rep
		default:
			c.t.Fatalf("waiting for reply xid %d, got %v", xid, rep)
		}
	}
}

// callOK is call that also requires err == 0.
func (c *rawConn) callOK(op int32, body []byte) reply {
	c.t.Helper()
	rep := c.call(op, body)
	if rep.Err != errOK {
		c.t.Fatalf("op %d: got %s, want OK", op, errName(rep.Err))
	}
	return rep
}

// closeSession sends closeSession and waits (bounded) for its reply.
func (c *rawConn) closeSession() {
	xid, err := c.send(opCloseSession, nil)
	if err != nil {
		return
	}
	deadline := time.Now().Add(rawIOTimeout)
	for time.Now().Before(deadline) {
		rep, err := c.readReply(time.Until(deadline))
		if err != nil || rep.Xid == xid {
			return
		}
	}
}

// create2 sends a create2 request (op 15) and decodes Create2Response.
func (c *rawConn) create2(path string, data []byte, flags int32) (reply, string, zk.Stat) {
	c.t.Helper()
	rep := c.call(opCreate2, createReq(path, data, flags))
	if rep.Err != errOK {
		return rep, "", zk.Stat{}
	}
	r := &jr{b: rep.Body}
	p, st := r.str(), r.stat()
	if err := r.end(); err != nil {
		c.t.Fatalf("decode Create2Response: %v", err)
	}
	return rep, p, st
}

// getData sends getData and decodes GetDataResponse.
func (c *rawConn) getData(path string, watch bool) (reply, []byte, zk.Stat) {
	c.t.Helper()
	rep := c.call(opGetData, pathWatchReq(path, watch))
	if rep.Err != errOK {
		return rep, nil, zk.Stat{}
	}
	r := &jr{b: rep.Body}
	data, st := r.buf(), r.stat()
	if err := r.end(); err != nil {
		c.t.Fatalf("decode GetDataResponse: %v", err)
	}
	return rep, data, st
}

// setData sends setData and decodes SetDataResponse.
func (c *rawConn) setData(path string, data []byte, version int32) (reply, zk.Stat) {
	c.t.Helper()
	rep := c.call(opSetData, setDataReq(path, data, version))
	if rep.Err != errOK {
		return rep, zk.Stat{}
	}
	r := &jr{b: rep.Body}
	st := r.stat()
	if err := r.end(); err != nil {
		c.t.Fatalf("decode SetDataResponse: %v", err)
	}
	return rep, st
}

// isClosedErr reports whether a read error means the peer closed the
// connection (EOF or reset), as opposed to a timeout.
func isClosedErr(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// readUntilClosed reads frames until the server closes the connection and
// returns the frames it sent first. It returns an error if the connection is
// still open after d, or on a malformed frame.
func (c *rawConn) readUntilClosed(d time.Duration) ([][]byte, error) {
	deadline := time.Now().Add(d)
	var frames [][]byte
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return frames, fmt.Errorf("connection still open after %v (%d frames read)", d, len(frames))
		}
		b, err := c.readFrame(left)
		if err == nil {
			frames = append(frames, b)
			continue
		}
		if isClosedErr(err) {
			return frames, nil
		}
		return frames, fmt.Errorf("connection still open after %v (%d frames read): %w", d, len(frames), err)
	}
}

// expectClosedSilently requires that the server closes the connection within
// d without sending anything.
func (c *rawConn) expectClosedSilently(d time.Duration) {
	c.t.Helper()
	frames, err := c.readUntilClosed(d)
	if err != nil {
		c.t.Fatalf("want the server to close the connection: %v", err)
	}
	if len(frames) != 0 {
		c.t.Fatalf("want the connection closed without a reply, got %d frame(s), first % x", len(frames), frames[0])
	}
}
