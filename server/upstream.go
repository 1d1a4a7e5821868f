package server

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/proxy/wire"
	"github.com/zkraft/zkraft/znode"
)

// The upstream listener (Config.ProxyAddr) serves zkraft proxies over the
// upstream protocol (package wire, docs/proxy.md). Every client connection
// a proxy forwards is a channel, and every channel is served by an
// ordinary conn, the same pipeline as a client socket's, over a vconn: an
// in-memory net.Conn whose bytes travel in the upstream connection's
// frames. Nothing of the pipeline is written twice.

const (
	// upstreamHelloTimeout bounds the wait for a proxy's Hello.
	upstreamHelloTimeout = 10 * time.Second
	// upstreamIdle closes an upstream connection that sent nothing (a
	// proxy sends a keep-alive frame every tick, even an empty one, and the
	// member answers each with a Progress frame).
	upstreamIdle = 30 * time.Second
	// upstreamQueueBytes bounds the frames queued for a proxy before a
	// conn's write waits for the writer.
	upstreamQueueBytes = 8 << 20
	// upstreamWriteTimeout closes an upstream connection whose proxy does
	// not read: all its channels end, their clients reconnect.
	upstreamWriteTimeout = 30 * time.Second
	// proxyQueueBytes is what a proxy may have sent on a channel and not
	// had answered (package proxy keeps to it); a vconn holds at most that
	// plus one request unread before it closes the channel.
	proxyQueueBytes = queueBytes
)

// upstreams is the server's upstream listener and its connections.
type upstreams struct {
	ln net.Listener
	// keepAlives counts the proxies' keep-alive frames received.
	keepAlives atomic.Int64
	// mu guards conns. Lock order: upstream.mu after it, never before.
	mu struct {
		sync.Mutex
		conns  map[*upstream]struct{}
		closed bool
	}
}

// ProxyAddr is the upstream listener's address, nil when it is off.
func (s *Server) ProxyAddr() net.Addr {
	if s.up.ln == nil {
		return nil
	}
	return s.up.ln.Addr()
}

// startUpstream listens for proxies if Config.ProxyAddr is set.
func (s *Server) startUpstream() error {
	if s.cfg.ProxyAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.ProxyAddr)
	if err != nil {
		return fmt.Errorf("server: listen %s (proxy port): %w", s.cfg.ProxyAddr, err)
	}
	s.up.ln = ln
	s.up.mu.conns = map[*upstream]struct{}{}
	if !s.routines.start(s.upstreamAcceptLoop) {
		ln.Close()
		return nil
	}
	s.log.Info("serving proxies", "proxy", ln.Addr().String(), "protocol", wire.Version)
	return nil
}

// stopUpstream closes the listener and every upstream connection (their
// channels' conns are closed with the others by Close).
func (s *Server) stopUpstream() {
	if s.up.ln == nil {
		return
	}
	s.up.ln.Close()
	s.up.mu.Lock()
	s.up.mu.closed = true
	conns := make([]*upstream, 0, len(s.up.mu.conns))
	for u := range s.up.mu.conns {
		conns = append(conns, u)
	}
	s.up.mu.Unlock()
	for _, u := range conns {
		u.nc.Close()
	}
}

func (s *Server) upstreamAcceptLoop() {
	for {
		nc, err := s.up.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("accept (proxy port)", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		u := &upstream{srv: s, nc: nc}
		u.mu.chans = map[int64]*vconn{}
		u.out = wire.NewOutbox(upstreamQueueBytes)
		s.up.mu.Lock()
		if s.up.mu.closed {
			s.up.mu.Unlock()
			nc.Close()
			return
		}
		s.up.mu.conns[u] = struct{}{}
		s.up.mu.Unlock()
		if !s.routines.start(u.serve) {
			nc.Close()
			s.up.mu.Lock()
			delete(s.up.mu.conns, u)
			s.up.mu.Unlock()
		}
	}
}

// upstream is one connection from a proxy.
type upstream struct {
	srv  *Server
	nc   net.Conn
	name string // the proxy's, from its Hello
	// version is the protocol version the connection speaks (the
	// proxy's, when the member speaks it); shared is its shared watches,
	// from version 2 on (nil before). Both set by hello.
	version int32
	shared  *sharedWatcher

	// out is the queue of frames for the writer goroutine, in order.
	out *wire.Outbox // frames for the writer

	// mu guards the channel table.
	mu struct {
		sync.Mutex
		chans  map[int64]*vconn
		closed bool
	}
}

func (u *upstream) serve() {
	br := bufio.NewReaderSize(u.nc, 32<<10)
	err := u.hello(br)
	if err == nil {
		if u.srv.routines.start(u.writer) {
			err = u.run(br)
		} else {
			err = net.ErrClosed
		}
	}
	u.closeOut()
	u.nc.Close()
	u.mu.Lock()
	u.mu.closed = true
	chans := u.mu.chans
	u.mu.chans = nil
	u.mu.Unlock()
	for _, v := range chans {
		v.remoteClose()
	}
	if u.shared != nil {
		u.srv.cell.watches.removeConn(u.shared.conn)
	}
	u.srv.up.mu.Lock()
	delete(u.srv.up.mu.conns, u)
	u.srv.up.mu.Unlock()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		u.srv.log.Info("proxy connection ended", "proxy", u.name, "remote", u.nc.RemoteAddr().String(), "channels", len(chans), "err", err)
	}
}

// hello reads the proxy's Hello and answers it, before the writer starts.
func (u *upstream) hello(br *bufio.Reader) error {
	max := u.srv.cfg.MaxBuffer + wire.Overhead
	u.nc.SetReadDeadline(time.Now().Add(upstreamHelloTimeout))
	kind, _, payload, err := wire.ReadFrame(br, max)
	if err != nil {
		return err
	}
	if kind != wire.KindHello {
		return fmt.Errorf("%w: first frame %v", wire.ErrBadMagic, kind)
	}
	rep, refused := wire.Accept(payload, wire.MinVersion, wire.Version)
	if rep == nil {
		return refused
	}
	u.version = rep.Version
	if refused == nil && u.version >= 2 {
		u.shared = newSharedWatcher(u)
	}
	rep.Zxid = u.srv.lastZxid()
	h := new(wire.Hello)
	jute.Unmarshal(payload, h)
	u.name = h.Name
	u.nc.SetWriteDeadline(time.Now().Add(upstreamHelloTimeout))
	if _, err := u.nc.Write(wire.AppendRecord(nil, wire.KindHelloReply, 0, rep)); err != nil {
		return err
	}
	if refused != nil {
		u.srv.log.Warn("proxy refused", "remote", u.nc.RemoteAddr().String(), "err", refused)
		return refused
	}
	u.srv.log.Info("proxy connected", "proxy", u.name, "remote", u.nc.RemoteAddr().String(), "protocol", u.version)
	return nil
}

// run serves the channels' frames until the connection ends.
func (u *upstream) run(br *bufio.Reader) error {
	max := u.srv.cfg.MaxBuffer + wire.Overhead
	var moved time.Time
	for {
		if now := time.Now(); now.Sub(moved) >= time.Second {
			u.nc.SetReadDeadline(now.Add(upstreamIdle))
			moved = now
		}
		kind, ch, payload, err := wire.ReadFrame(br, max)
		if err != nil {
			return err
		}
		switch kind {
		case wire.KindOpen:
			if err := u.open(ch, payload); err != nil {
				return err
			}
		case wire.KindData:
			if v := u.channel(ch); v != nil {
				v.deliver(payload)
			}
		case wire.KindDataShared:
			if u.shared == nil {
				return fmt.Errorf("server: proxy sent a %v frame on a version %d connection", kind, u.version)
			}
			d := new(wire.DataShared)
			if err := jute.Unmarshal(payload, d); err != nil {
				return err
			}
			if v := u.channel(ch); v != nil {
				v.deliver(sharedRequest(d))
			}
		case wire.KindUnwatch:
			if u.shared == nil {
				return fmt.Errorf("server: proxy sent a %v frame on a version %d connection", kind, u.version)
			}
			uw := new(wire.Unwatch)
			if err := jute.Unmarshal(payload, uw); err != nil {
				return err
			}
			u.srv.cell.watches.unwatch(u.shared, sharedKey{watchTable(uw.Watch.Table), uw.Watch.Path, sharedMode(watchMode(uw.Watch.Mode))}, uw.Gen)
		case wire.KindClose:
			if v := u.channel(ch); v != nil {
				u.drop(ch)
				v.remoteClose()
			}
		case wire.KindKeepAlive:
			ka := new(wire.KeepAlive)
			if err := jute.Unmarshal(payload, ka); err != nil {
				return err
			}
			u.keepAlive(ka.Sessions)
			if err := u.send(false, wire.AppendRecord(nil, wire.KindProgress, 0, &wire.Progress{Zxid: u.srv.lastZxid()})); err != nil {
				return err
			}
		default:
			return fmt.Errorf("server: proxy sent a %v frame", kind)
		}
	}
}

// open starts a channel: a conn over a vconn, whose first bytes are the
// client's ConnectRequest frame or its four-letter word.
func (u *upstream) open(ch int64, payload []byte) error {
	o := new(wire.Open)
	if err := jute.Unmarshal(payload, o); err != nil {
		return err
	}
	if ch <= 0 {
		return fmt.Errorf("server: proxy opened channel %d", ch)
	}
	v := newVconn(u, ch, o.ClientAddr)
	u.mu.Lock()
	_, dup := u.mu.chans[ch]
	if !dup {
		u.mu.chans[ch] = v
	}
	u.mu.Unlock()
	if dup {
		return fmt.Errorf("server: proxy opened channel %d twice", ch)
	}
	if o.Word != "" {
		v.raw = true
		v.in = []byte(o.Word)
	} else {
		v.deliver(o.Connect)
	}
	// Proxies front the default cell (docs/proxy.md).
	c, ok := u.srv.register(v, u.srv.cell)
	if !ok {
		v.Close()
		return nil
	}
	u.mu.Lock()
	v.c = c
	u.mu.Unlock()
	if !u.srv.routines.start(c.serve) {
		v.Close()
		u.srv.unregister(c)
	}
	return nil
}

func (u *upstream) channel(ch int64) *vconn {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.mu.chans[ch]
}

// drop removes a channel; false if it was gone already.
func (u *upstream) drop(ch int64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.mu.chans[ch]; !ok {
		return false
	}
	delete(u.mu.chans, ch)
	return true
}

// keepAlive records, under one lock, the sessions of a proxy's batch that
// are attached to one of this connection's channels: the cell's session
// loop then carries them in its next keep-alive proposal with the direct
// clients' (one proposal per tick, however many sessions).
func (u *upstream) keepAlive(ids []int64) {
	cl := u.srv.cell
	live := ids[:0:0]
	cl.mu.Lock()
	for _, id := range ids {
		if cn, ok := cl.mu.owners[id]; ok {
			if v, ok := cn.nc.(*vconn); ok && v.up == u {
				live = append(live, id)
			}
		}
	}
	cl.mu.Unlock()
	cl.alive.RecordAll(live)
	u.srv.up.keepAlives.Add(1)
}

// send queues whole frames for the writer. With block it waits while the
// queue holds more than upstreamQueueBytes (a conn's flusher: the pipeline's
// own bounds then hold); without, it never waits (a Close frame, sent
// from wherever a conn is closed, perhaps under a lock).
func (u *upstream) send(block bool, frames ...[]byte) error {
	if u.out.Send(block, frames...) != nil {
		return net.ErrClosed
	}
	return nil
}

// writer writes the queued frames in order, as many at once as are queued.
// A write that fails or stalls for upstreamWriteTimeout closes the
// connection, and with it every channel.
func (u *upstream) writer() {
	for {
		frames, ok := u.out.Take()
		if !ok {
			return
		}
		u.nc.SetWriteDeadline(time.Now().Add(upstreamWriteTimeout))
		bufs := net.Buffers(frames)
		if _, err := bufs.WriteTo(u.nc); err != nil {
			u.closeOut()
			u.nc.Close() // the reader ends and closes every channel
			return
		}
	}
}

func (u *upstream) closeOut() { u.out.Close() }

// vconn is one channel as a net.Conn for a conn. Its reads take the Data
// frames the proxy sent, each given the four-byte length a socket's frame
// has; its writes go out as Data frames, one per ZooKeeper frame.
//
// A vconn has no read deadline: a channel's liveness is the proxy's to
// judge (it closes the channel when its client goes quiet), and an
// upstream connection that dies closes every channel.
type vconn struct {
	up     *upstream
	ch     int64
	remote net.Addr
	// c is the conn serving the channel, set once registered (guarded
	// by up.mu): a shared watch's Event names the channels whose
	// session may not read the znode.
	c *conn
	// raw: a four-letter word's channel, whose answer is text, not frames.
	raw bool

	// mu guards the fields below; cond wakes the reader.
	mu     sync.Mutex
	cond   sync.Cond
	in     []byte // received, not yet read
	closed bool
	eof    bool // closed by the proxy (or its connection): reads say EOF
	// parked: the conn's reader ended with nothing to read (park); the
	// next frame, or the channel's close, starts it again (wakeLocked).
	parked *conn

	// gone is closed when the channel ends, from either side (remoteClose,
	// Close): a handshake queued in the session batcher for a channel
	// that is gone is never proposed (sessionbatch.go). The conn's own
	// done closes only once its handshake returns.
	gone     chan struct{}
	goneOnce sync.Once

	// wmu guards part: the tail of a frame written in pieces.
	wmu  sync.Mutex
	part []byte
}

var _ net.Conn = (*vconn)(nil)

func newVconn(u *upstream, ch int64, clientAddr string) *vconn {
	v := &vconn{up: u, ch: ch, remote: u.nc.RemoteAddr(), gone: make(chan struct{})}
	// An address, never a name to look up: a lookup would hold the
	// connection's reader.
	if ap, err := netip.ParseAddrPort(clientAddr); err == nil {
		v.remote = net.TCPAddrFromAddrPort(ap)
	}
	v.cond.L = &v.mu
	return v
}

// deliver queues one ZooKeeper frame body for the conn to read (on a
// four-letter word's channel, the bytes that followed the word: stmk's
// mask). A proxy
// that sends past the bound it must keep (proxyQueueBytes) loses the
// channel.
func (v *vconn) deliver(body []byte) {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return
	}
	if len(v.in)+len(body) > proxyQueueBytes+v.up.srv.cfg.MaxBuffer+4 {
		v.mu.Unlock()
		v.up.srv.log.Warn("proxy sent past its bound: channel closed", "proxy", v.up.name, "channel", v.ch)
		v.Close()
		return
	}
	if !v.raw {
		v.in = binary.BigEndian.AppendUint32(v.in, uint32(len(body)))
	}
	v.in = append(v.in, body...)
	v.cond.Signal()
	c := v.wakeLocked()
	v.mu.Unlock()
	v.resume(c)
}

// empty reports whether nothing is waiting to be read.
func (v *vconn) empty() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.in) == 0 && !v.closed
}

// park ends c's reader unless a frame came, or the channel closed, since
// it found nothing to read: then the caller goes on reading.
func (v *vconn) park(c *conn) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.in) > 0 || v.closed {
		return false
	}
	v.parked = c
	return true
}

// wakeLocked takes the parked reader's conn, for resume; v.mu is held.
func (v *vconn) wakeLocked() *conn {
	c := v.parked
	v.parked = nil
	return c
}

// resume starts the reader of a parked conn (none when c is nil) on a new
// goroutine. Once the server is stopping it is refused, and the conn is
// left as it is: Close closes every conn and the NodeHost with them. (It
// is never finished here: resume runs under locks that finish takes.)
func (v *vconn) resume(c *conn) {
	if c != nil {
		c.srv.routines.start(c.reader)
	}
}

// remoteClose ends the channel from the proxy's side: reads say EOF once
// drained, and no Close frame goes back.
func (v *vconn) remoteClose() {
	v.goneOnce.Do(func() { close(v.gone) })
	v.mu.Lock()
	v.eof = true
	v.closed = true
	v.in = nil
	v.cond.Broadcast()
	c := v.wakeLocked()
	v.mu.Unlock()
	v.resume(c) // the reader reads EOF and finishes the conn
}

func (v *vconn) Read(p []byte) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for len(v.in) == 0 && !v.closed {
		v.cond.Wait()
	}
	if len(v.in) == 0 {
		if v.eof {
			return 0, io.EOF
		}
		return 0, net.ErrClosed
	}
	n := copy(p, v.in)
	v.in = v.in[n:]
	if len(v.in) == 0 {
		v.in = nil
	}
	return n, nil
}

// Write sends the whole frames in b (and a frame completed by b), keeping
// a frame's unfinished tail for the next Write.
func (v *vconn) Write(b []byte) (int, error) {
	v.mu.Lock()
	closed := v.closed
	v.mu.Unlock()
	if closed {
		return 0, net.ErrClosed
	}
	if v.raw {
		if err := v.up.send(true, wire.AppendFrame(nil, wire.KindData, v.ch, b)); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	v.wmu.Lock()
	defer v.wmu.Unlock()
	n := len(b)
	var frames [][]byte
	if len(v.part) > 0 {
		v.part = append(v.part, b...)
		b = v.part
		v.part = nil
	}
	for len(b) >= 4 {
		size := int(binary.BigEndian.Uint32(b))
		if len(b) < 4+size {
			break
		}
		frames = append(frames, wire.AppendFrame(nil, wire.KindData, v.ch, b[4:4+size]))
		b = b[4+size:]
	}
	if len(b) > 0 {
		v.part = append([]byte(nil), b...)
	}
	if len(frames) > 0 {
		if err := v.up.send(true, frames...); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Close ends the channel from the member's side and tells the proxy.
func (v *vconn) Close() error {
	v.goneOnce.Do(func() { close(v.gone) })
	v.mu.Lock()
	was := v.closed
	v.closed = true
	v.in = nil
	v.cond.Broadcast()
	c := v.wakeLocked()
	v.mu.Unlock()
	v.resume(c)
	if v.up.drop(v.ch) {
		v.up.send(false, wire.AppendFrame(nil, wire.KindClose, v.ch))
	}
	if was {
		return net.ErrClosed
	}
	return nil
}

// CloseWrite ends the channel as a whole: a four-letter word's answer is
// written (answerAndClose), and the proxy's half-close of its client
// follows the Close frame.
func (v *vconn) CloseWrite() error {
	v.Close()
	return nil
}

func (v *vconn) LocalAddr() net.Addr                { return v.up.nc.LocalAddr() }
func (v *vconn) RemoteAddr() net.Addr               { return v.remote }
func (v *vconn) SetDeadline(t time.Time) error      { return nil }
func (v *vconn) SetReadDeadline(t time.Time) error  { return nil }
func (v *vconn) SetWriteDeadline(t time.Time) error { return nil }

// opShared is the op code of a request a proxy sent as DataShared, as the
// channel's conn reads it: its header's xid, opShared, then the
// DataShared generation and the request's own header and record. Only a
// vconn of a version 2 upstream connection produces it (sharedRequest);
// from a client socket it is an unknown op.
const opShared jute.OpCode = -0x7a6b

// sharedRequest is the frame body a DataShared frame gives its channel's
// conn.
func sharedRequest(d *wire.DataShared) []byte {
	var hdr jute.RequestHeader
	jute.Unmarshal(d.Request, &hdr) // a header that does not decode: the conn answers MARSHALLINGERROR
	b := binary.BigEndian.AppendUint32(nil, uint32(hdr.Xid))
	op := int32(opShared)
	b = binary.BigEndian.AppendUint32(b, uint32(op))
	b = binary.BigEndian.AppendUint64(b, uint64(d.Gen))
	return append(b, d.Request...)
}

// sharedWatcher is a version 2 upstream connection's shared watches: in
// the cell's watch registry they are the watches of conn, a conn that
// serves nothing and stands for the connection, and each change that
// fires any of them is one Event frame on the connection (docs/proxy.md).
type sharedWatcher struct {
	up   *upstream
	conn *conn
	// gens is, per shared watch, the newest DataShared generation that
	// registered it (Unwatch's order against DataShared), guarded by the
	// registry's mu.
	gens map[sharedKey]int64
}

// sharedKey names one shared watch on the member: a table, a path and
// the one mode it is held in (persistent or recursive: sharedMode).
type sharedKey struct {
	table watchTable
	path  string
	mode  watchMode
}

func newSharedWatcher(u *upstream) *sharedWatcher {
	sw := &sharedWatcher{up: u, gens: map[sharedKey]int64{}}
	sw.conn = &conn{srv: u.srv, cell: u.srv.cell, shared: sw, done: make(chan struct{})}
	sw.conn.setAuthIDs(nil)
	return sw
}

// channelOf is the channel c serves on the connection, 0 for none.
func (sw *sharedWatcher) channelOf(c *conn) int64 {
	if v, ok := c.nc.(*vconn); ok && v.up == sw.up {
		return v.ch
	}
	return 0
}

// event queues the Event of a change that fired a shared watch. It runs
// under the registry's mu (and the state machine's lock), in zxid order.
func (sw *sharedWatcher) event(zxid int64, typ jute.EventType, path string, acl []jute.ACL) {
	sw.send(sw.eventFrame(zxid, typ, path, acl))
}

// eventFrame is the Event frame of a change, naming the channels whose
// session may not read the znode when it is not world-readable (one ACL
// check per channel of the connection then, none otherwise).
func (sw *sharedWatcher) eventFrame(zxid int64, typ jute.EventType, path string, acl []jute.ACL) []byte {
	e := &wire.Event{Zxid: zxid, Type: int32(typ), Path: path}
	if znode.CheckACL(acl, jute.PermRead, nil) != nil {
		sw.up.mu.Lock()
		for ch, v := range sw.up.mu.chans {
			if v.c != nil && znode.CheckACL(acl, jute.PermRead, v.c.authIDs()) != nil {
				e.Denied = append(e.Denied, ch)
			}
		}
		sw.up.mu.Unlock()
		slices.Sort(e.Denied)
	}
	return wire.AppendRecord(nil, wire.KindEvent, 0, e)
}

// send queues frames without waiting (it runs under the registry's mu);
// a proxy that does not read has its connection closed by the writer's
// timeout, or here once sharedQueueLimit bytes wait.
func (sw *sharedWatcher) send(frames ...[]byte) {
	if sw.up.out.Queued() > sharedQueueLimit {
		sw.up.srv.log.Warn("proxy too slow: upstream outbox full, closing its connection", "proxy", sw.up.name)
		sw.up.closeOut()
		sw.up.nc.Close()
		return
	}
	sw.up.send(false, frames...)
}

// sharedQueueLimit bounds what shared watches queue for a proxy that
// does not read: past it its connection closes (all its clients
// reconnect, their watches with setWatches).
const sharedQueueLimit = 8 * upstreamQueueBytes
