package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	dbconfig "github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	"github.com/lni/dragonboat/v4/raftpb"
)

// zkraft's Raft transport between members (opt-in with
// --raft-transport=zkraft; Dragonboat's own is the default until the
// faulttest stall of docs/performance.md, "Raft transport", is explained;
// docs/operations.md).
//
// It speaks Dragonboat's TCP wire format byte for byte, so a member with
// it and a member with Dragonboat's transport talk to each other. Every
// message batch and every snapshot chunk is one frame:
//
//	magic    2 bytes  0xAE 0x7D (two zero bytes instead: "poison", below)
//	method   2 bytes  big endian, 100 a message batch, 200 a snapshot chunk
//	size     8 bytes  big endian, the payload's length (never 0)
//	hcrc     4 bytes  CRC-32 (IEEE) of the 18 header bytes with hcrc zeroed
//	pcrc     4 bytes  CRC-32 (IEEE) of the payload; 0 under mutual TLS
//	payload  size bytes, raftpb.MessageBatch or raftpb.Chunk, marshaled
//
// A snapshot connection ends with a poison (two zero bytes) that the
// receiver acknowledges with two zero bytes before both close.
//
// What differs from Dragonboat's transport is only the cost: a frame goes
// out in one write (Dragonboat writes magic, header and payload with three
// calls and sets a deadline before each), the receiver reads through a
// buffer (Dragonboat reads magic, header and payload with three calls, each
// after setting a deadline), deadlines are pushed forward at most once a
// second rather than per call, and Validate remembers the addresses it
// has accepted: Dragonboat validates the sender's address of every
// received message (registry.Add) with a regular expression.

const (
	raftNetName = "zkraft-tcp"

	raftNetHeaderSize = 18                    // method, size, hcrc, pcrc
	raftNetFrameHead  = 2 + raftNetHeaderSize // magic and header

	raftNetMethodBatch uint16 = 100
	raftNetMethodChunk uint16 = 200

	// raftNetReadBuf is the receiver's buffer; a payload that fits is
	// decoded in place, a larger one is read into a buffer of its own.
	raftNetReadBuf = 128 << 10
	// raftNetKeepBuf: a connection keeps a send or receive buffer up to
	// this size for the next frame and drops a larger one (a snapshot
	// chunk is 2 MiB).
	raftNetKeepBuf = 4 << 20
	// raftNetMaxPayload bounds a received frame's size field: a larger one
	// is a corrupt or hostile stream and ends the connection. Dragonboat
	// caps a batch at 64 MiB and a chunk at 2 MiB.
	raftNetMaxPayload = 256 << 20

	raftNetDialTimeout = 5 * time.Second  // Dragonboat's GetConnectedTimeoutSecond
	raftNetTLSTimeout  = 10 * time.Second // handshake
	raftNetKeepAlive   = 10 * time.Second
	// raftNetIOTimeout is how long a write, or the rest of a started
	// frame, may take (Dragonboat: 5 s per call). A deadline is set at
	// most once per raftNetDeadlineSlack, so the effective bound lies
	// between raftNetIOTimeout-raftNetDeadlineSlack and raftNetIOTimeout.
	raftNetIOTimeout     = 5 * time.Second
	raftNetDeadlineSlack = time.Second
	// raftNetPoisonWait is how long a closing snapshot connection waits
	// for the receiver's acknowledgement (Dragonboat's keep-alive period).
	raftNetPoisonWait = 10 * time.Second
	// raftNetValidCache bounds the addresses Validate remembers.
	raftNetValidCache = 4096
)

var (
	raftNetMagic  = [2]byte{0xAE, 0x7D}
	raftNetPoison = [2]byte{0, 0}

	errRaftNetBadFrame = errors.New("server: Raft transport: bad frame")
	errRaftNetClosed   = errors.New("server: Raft transport closed")
)

// RaftTransportKind names the Raft transport between members.
type RaftTransportKind string

const (
	// RaftTransportAuto (the zero value) is RaftTransportDragonboat.
	RaftTransportAuto RaftTransportKind = ""
	// RaftTransportZkraft is zkraft's own transport (raftnet.go).
	RaftTransportZkraft RaftTransportKind = "zkraft"
	// RaftTransportDragonboat is Dragonboat's TCP transport.
	RaftTransportDragonboat RaftTransportKind = "dragonboat"
)

// ParseRaftTransportKind parses --raft-transport.
func ParseRaftTransportKind(s string) (RaftTransportKind, error) {
	switch k := RaftTransportKind(s); k {
	case RaftTransportAuto, RaftTransportZkraft, RaftTransportDragonboat:
		return k, nil
	}
	return "", fmt.Errorf("unknown Raft transport %q (zkraft or dragonboat)", s)
}

// raftNetFactory makes raftNet transports. Its Validate is Dragonboat's
// address check, remembered per address.
type raftNetFactory struct {
	valid  sync.Map // string -> struct{}: addresses Validate accepted
	nvalid atomic.Int64
	// Frames received by the transports it made, for tests and figures.
	batchesIn, chunksIn atomic.Uint64
}

var _ dbconfig.TransportFactory = (*raftNetFactory)(nil)

func newRaftNetFactory() *raftNetFactory { return &raftNetFactory{} }

func (f *raftNetFactory) Create(nhc dbconfig.NodeHostConfig, h raftio.MessageHandler, ch raftio.ChunkHandler) raftio.ITransport {
	return &raftNet{f: f, nhc: nhc, handler: h, chunks: ch, encrypted: nhc.MutualTLS}
}

// Validate is called for the NodeHost's address, every target, and the
// sender's address of every received message.
func (f *raftNetFactory) Validate(addr string) bool {
	if _, ok := f.valid.Load(addr); ok {
		return true
	}
	if !dbconfig.IsValidAddress(addr) {
		return false
	}
	if f.nvalid.Load() < raftNetValidCache {
		if _, loaded := f.valid.LoadOrStore(addr, struct{}{}); !loaded {
			f.nvalid.Add(1)
		}
	}
	return true
}

// raftNet is one NodeHost's transport: a listener whose connections are
// served by one goroutine each, and the connections Dragonboat asks for.
type raftNet struct {
	f         *raftNetFactory
	nhc       dbconfig.NodeHostConfig
	handler   raftio.MessageHandler
	chunks    raftio.ChunkHandler
	encrypted bool // mutual TLS: payload CRCs are 0 and not checked, as Dragonboat does

	ln       net.Listener
	routines goroutines // the accept loop and the connections' goroutines (goroutines.go)

	mu struct {
		sync.Mutex
		closed bool
		conns  map[net.Conn]struct{} // accepted, still served
	}
}

var _ raftio.ITransport = (*raftNet)(nil)

func (t *raftNet) Name() string { return raftNetName }

func (t *raftNet) Start() error {
	tlsCfg, err := t.nhc.GetServerTLSConfig()
	if err != nil {
		return err
	}
	lc := net.ListenConfig{KeepAlive: raftNetKeepAlive}
	ln, err := lc.Listen(context.Background(), "tcp", t.nhc.GetListenAddress())
	if err != nil {
		return err
	}
	t.ln = ln
	t.mu.conns = make(map[net.Conn]struct{})
	if !t.routines.start(func() { t.acceptLoop(tlsCfg) }) {
		_ = ln.Close()
		return errRaftNetClosed
	}
	return nil
}

// Close stops the listener, closes the accepted connections and waits for
// their goroutines. The connections Dragonboat got from GetConnection are
// Dragonboat's to close.
func (t *raftNet) Close() error {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return nil
	}
	t.mu.closed = true
	for c := range t.mu.conns {
		_ = c.Close()
	}
	t.mu.Unlock()
	var err error
	if t.ln != nil {
		err = t.ln.Close()
	}
	t.routines.stop()
	t.routines.wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (t *raftNet) acceptLoop(tlsCfg *tls.Config) {
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if t.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (EMFILE and the like): wait, go on.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if tlsCfg != nil {
			c = tls.Server(c, tlsCfg)
		}
		if !t.track(c) {
			_ = c.Close()
			return
		}
		if !t.routines.start(func() {
			t.serve(c)
			t.untrack(c)
			_ = c.Close()
		}) {
			t.untrack(c)
			_ = c.Close()
			return
		}
	}
}

func (t *raftNet) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.closed
}

func (t *raftNet) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return false
	}
	t.mu.conns[c] = struct{}{}
	return true
}

func (t *raftNet) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.mu.conns, c)
	t.mu.Unlock()
}

// serve reads frames from one accepted connection until it fails, the
// peer ends it with a poison, or a handler refuses a chunk.
func (t *raftNet) serve(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		_ = c.SetDeadline(time.Now().Add(raftNetTLSTimeout))
		if err := tc.Handshake(); err != nil {
			return
		}
	}
	r := frameReaderOf(c)
	for {
		method, payload, err := r.next(t.encrypted)
		if err != nil {
			if errors.Is(err, errRaftNetPoison) {
				_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
				_, _ = c.Write(raftNetPoison[:])
			}
			return
		}
		switch method {
		case raftNetMethodBatch:
			var b raftpb.MessageBatch
			err = b.Unmarshal(payload) // copies what it keeps
			r.done()
			if err != nil {
				return
			}
			t.f.batchesIn.Add(1)
			t.handler(b)
		case raftNetMethodChunk:
			var ch raftpb.Chunk
			err = ch.Unmarshal(payload) // copies Data
			r.done()
			if err != nil {
				return
			}
			t.f.chunksIn.Add(1)
			if !t.chunks(ch) {
				return
			}
		}
	}
}

var errRaftNetPoison = errors.New("server: Raft transport: poison received")

// raftNetReader reads frames through a buffer. A payload that fits the
// buffer is returned in place, valid until done.
type raftNetReader struct {
	c          net.Conn
	br         *bufio.Reader
	big        []byte // a payload larger than br's buffer
	pending    int    // bytes of br to discard at done
	deadlineAt time.Time
}

func frameReaderOf(c net.Conn) *raftNetReader {
	return &raftNetReader{c: c, br: bufio.NewReaderSize(c, raftNetReadBuf)}
}

// refresh pushes the read deadline to raftNetIOTimeout from now unless it
// was pushed less than raftNetDeadlineSlack ago.
func (r *raftNetReader) refresh() error {
	now := time.Now()
	if r.deadlineAt.Sub(now) > raftNetIOTimeout-raftNetDeadlineSlack {
		return nil
	}
	r.deadlineAt = now.Add(raftNetIOTimeout)
	return r.c.SetReadDeadline(r.deadlineAt)
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// next returns the next frame's method and payload. An idle connection
// (no byte of a next frame arrived) waits on, as Dragonboat's does; a
// frame started and not finished within the deadline ends it.
func (r *raftNetReader) next(encrypted bool) (uint16, []byte, error) {
	// The magic number first: a poison is only two bytes long.
	for {
		if err := r.refresh(); err != nil {
			return 0, nil, err
		}
		m, err := r.br.Peek(2)
		if err == nil {
			switch [2]byte(m) {
			case raftNetMagic:
			case raftNetPoison:
				return 0, nil, errRaftNetPoison
			default:
				return 0, nil, errRaftNetBadFrame
			}
			break
		}
		if isNetTimeout(err) && r.br.Buffered() == 0 {
			continue // idle
		}
		return 0, nil, err
	}
	head, err := r.br.Peek(raftNetFrameHead)
	if err != nil {
		return 0, nil, err
	}
	method, size, pcrc, ok := decodeRaftNetHeader(head[2:raftNetFrameHead])
	if !ok || size == 0 || size > raftNetMaxPayload {
		return 0, nil, errRaftNetBadFrame
	}
	if _, err := r.br.Discard(raftNetFrameHead); err != nil {
		return 0, nil, err
	}
	n := int(size)
	var payload []byte
	if n <= r.br.Size() {
		p, err := r.br.Peek(n)
		if err != nil {
			return 0, nil, err
		}
		payload = p
		r.pending = n
	} else {
		if cap(r.big) < n {
			r.big = make([]byte, n)
		}
		payload = r.big[:n]
		for got := 0; got < n; {
			if err := r.refresh(); err != nil {
				return 0, nil, err
			}
			m, err := r.br.Read(payload[got:])
			got += m
			if err != nil && got < n {
				return 0, nil, err
			}
		}
	}
	if !encrypted && crc32.ChecksumIEEE(payload) != pcrc {
		return 0, nil, errRaftNetBadFrame
	}
	return method, payload, nil
}

// done releases the payload next returned.
func (r *raftNetReader) done() {
	if r.pending > 0 {
		_, _ = r.br.Discard(r.pending)
		r.pending = 0
	}
	if cap(r.big) > raftNetKeepBuf {
		r.big = nil
	}
}

// encodeRaftNetHead writes magic and header for a payload into
// b[:raftNetFrameHead].
func encodeRaftNetHead(b []byte, method uint16, payload []byte, encrypted bool) {
	_ = b[raftNetFrameHead-1]
	b[0], b[1] = raftNetMagic[0], raftNetMagic[1]
	h := b[2:raftNetFrameHead]
	binary.BigEndian.PutUint16(h[0:], method)
	binary.BigEndian.PutUint64(h[2:], uint64(len(payload)))
	binary.BigEndian.PutUint32(h[10:], 0)
	var pcrc uint32
	if !encrypted {
		pcrc = crc32.ChecksumIEEE(payload)
	}
	binary.BigEndian.PutUint32(h[14:], pcrc)
	binary.BigEndian.PutUint32(h[10:], crc32.ChecksumIEEE(h))
}

// decodeRaftNetHeader checks and decodes the 18 header bytes h (which it
// does not modify).
func decodeRaftNetHeader(h []byte) (method uint16, size uint64, pcrc uint32, ok bool) {
	var c [raftNetHeaderSize]byte
	copy(c[:], h)
	want := binary.BigEndian.Uint32(c[10:])
	binary.BigEndian.PutUint32(c[10:], 0)
	if crc32.ChecksumIEEE(c[:]) != want {
		return 0, 0, 0, false
	}
	method = binary.BigEndian.Uint16(c[0:])
	if method != raftNetMethodBatch && method != raftNetMethodChunk {
		return 0, 0, 0, false
	}
	return method, binary.BigEndian.Uint64(c[2:]), binary.BigEndian.Uint32(c[14:]), true
}

func (t *raftNet) dial(ctx context.Context, target string) (net.Conn, error) {
	if t.isClosed() {
		return nil, errRaftNetClosed
	}
	d := net.Dialer{Timeout: raftNetDialTimeout, KeepAlive: raftNetKeepAlive}
	c, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		// As Dragonboat: a closed connection is reset, not lingered on.
		_ = tc.SetLinger(0)
	}
	tlsCfg, err := t.nhc.GetClientTLSConfig(target)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	if tlsCfg != nil {
		tc := tls.Client(c, tlsCfg)
		hctx, cancel := context.WithTimeout(ctx, raftNetTLSTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		c = tc
	}
	return c, nil
}

func (t *raftNet) GetConnection(ctx context.Context, target string) (raftio.IConnection, error) {
	c, err := t.dial(ctx, target)
	if err != nil {
		return nil, err
	}
	return &raftNetConn{raftNetWriter: raftNetWriter{c: c, encrypted: t.encrypted}}, nil
}

func (t *raftNet) GetSnapshotConnection(ctx context.Context, target string) (raftio.ISnapshotConnection, error) {
	c, err := t.dial(ctx, target)
	if err != nil {
		return nil, err
	}
	return &raftNetSnapshotConn{raftNetWriter: raftNetWriter{c: c, encrypted: t.encrypted}}, nil
}

// raftNetWriter writes frames, each with one write call.
type raftNetWriter struct {
	c          net.Conn
	encrypted  bool
	buf        []byte
	deadlineAt time.Time
}

// frame returns a buffer of raftNetFrameHead+n bytes for a frame whose
// payload is at most n bytes.
func (w *raftNetWriter) frame(n int) []byte {
	need := raftNetFrameHead + n
	if cap(w.buf) >= need {
		return w.buf[:need]
	}
	b := make([]byte, need)
	if need <= raftNetKeepBuf {
		w.buf = b
	}
	return b
}

func (w *raftNetWriter) write(method uint16, b []byte, payloadLen int) error {
	b = b[:raftNetFrameHead+payloadLen]
	encodeRaftNetHead(b, method, b[raftNetFrameHead:], w.encrypted)
	now := time.Now()
	// A large frame gets a second per MiB on top.
	timeout := raftNetIOTimeout + time.Duration(len(b)>>20)*time.Second
	if len(b) >= 1<<20 || w.deadlineAt.Sub(now) <= timeout-raftNetDeadlineSlack {
		w.deadlineAt = now.Add(timeout)
		if err := w.c.SetWriteDeadline(w.deadlineAt); err != nil {
			return err
		}
	}
	_, err := w.c.Write(b)
	return err
}

// raftNetConn carries message batches to one peer.
type raftNetConn struct{ raftNetWriter }

var _ raftio.IConnection = (*raftNetConn)(nil)

func (c *raftNetConn) Close() { _ = c.c.Close() }

func (c *raftNetConn) SendMessageBatch(batch raftpb.MessageBatch) error {
	b := c.frame(batch.SizeUpperLimit())
	p := raftpb.MustMarshalTo(&batch, b[raftNetFrameHead:])
	return c.write(raftNetMethodBatch, b, len(p))
}

// raftNetSnapshotConn carries one snapshot's chunks to one peer.
type raftNetSnapshotConn struct{ raftNetWriter }

var _ raftio.ISnapshotConnection = (*raftNetSnapshotConn)(nil)

// Close ends the stream with a poison and waits for the receiver's
// acknowledgement, as Dragonboat's receiver expects.
func (c *raftNetSnapshotConn) Close() {
	defer func() { _ = c.c.Close() }()
	if err := c.c.SetWriteDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return
	}
	if _, err := c.c.Write(raftNetPoison[:]); err != nil {
		return
	}
	if err := c.c.SetReadDeadline(time.Now().Add(raftNetPoisonWait)); err != nil {
		return
	}
	var ack [2]byte
	_, _ = io.ReadFull(c.c, ack[:])
}

func (c *raftNetSnapshotConn) SendChunk(chunk raftpb.Chunk) error {
	b := c.frame(chunk.Size())
	p := raftpb.MustMarshalTo(&chunk, b[raftNetFrameHead:])
	return c.write(raftNetMethodChunk, b, len(p))
}
