package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/zkraft/zkraft/jute"
)

// Magic opens every Hello: "zkrp".
const Magic int32 = 0x7a6b7270

// Version is the newest protocol version this build speaks; MinVersion
// the oldest it still accepts. Version 2 adds shared watches (kinds 8 to
// 11); a connection speaks the version the member's HelloReply names.
const (
	Version    int32 = 2
	MinVersion int32 = 1
)

// Kind is a frame's kind.
type Kind int32

// The frame kinds (docs/proxy.md has the table): 1 to 7 are version 1's,
// 8 to 11 version 2's, never sent on a version 1 connection.
const (
	KindHello      Kind = 1  // proxy → member, channel 0: Hello
	KindHelloReply Kind = 2  // member → proxy, channel 0: HelloReply
	KindOpen       Kind = 3  // proxy → member, a new channel: Open
	KindData       Kind = 4  // both: one ZooKeeper frame's body
	KindClose      Kind = 5  // both: the channel is over, no payload
	KindKeepAlive  Kind = 6  // proxy → member, channel 0: KeepAlive
	KindProgress   Kind = 7  // member → proxy, channel 0: Progress
	KindDataShared Kind = 8  // proxy → member: a watch-setting request whose watches are the connection's: DataShared
	KindEvent      Kind = 9  // member → proxy, channel 0: a shared watch fired: Event
	KindWatching   Kind = 10 // member → proxy, the reading channel: the shared watches a read registered: Watching
	KindUnwatch    Kind = 11 // proxy → member, channel 0: drop a shared watch: Unwatch
)

func (k Kind) String() string {
	switch k {
	case KindHello:
		return "hello"
	case KindHelloReply:
		return "helloReply"
	case KindOpen:
		return "open"
	case KindData:
		return "data"
	case KindClose:
		return "close"
	case KindKeepAlive:
		return "keepAlive"
	case KindProgress:
		return "progress"
	case KindDataShared:
		return "dataShared"
	case KindEvent:
		return "event"
	case KindWatching:
		return "watching"
	case KindUnwatch:
		return "unwatch"
	}
	return fmt.Sprintf("kind(%d)", int32(k))
}

// HeaderLen is the length of a frame's kind and channel, which follow its
// 4-byte length.
const HeaderLen = 12

// Overhead is what a frame may carry beyond jute.maxbuffer of payload
// (its header and an Open's client address).
const Overhead = 1024

// Hello reply codes.
const (
	HelloOK              int32 = 0
	HelloVersionRefused  int32 = 1
	helloMessageMaxBytes       = 512
)

var (
	// ErrFrameLength: a frame's length is negative, shorter than its
	// header or beyond the reader's bound.
	ErrFrameLength = errors.New("wire: frame length out of range")
	// ErrBadMagic: the first frame is not a zkraft Hello.
	ErrBadMagic = errors.New("wire: not a zkraft upstream hello")
	// ErrRefused: the member refused the proxy's hello.
	ErrRefused = errors.New("wire: hello refused")
)

// AppendFrame appends one frame to dst: its length, kind, channel and the
// concatenation of payload.
func AppendFrame(dst []byte, kind Kind, channel int64, payload ...[]byte) []byte {
	n := HeaderLen
	for _, p := range payload {
		n += len(p)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = binary.BigEndian.AppendUint32(dst, uint32(kind))
	dst = binary.BigEndian.AppendUint64(dst, uint64(channel))
	for _, p := range payload {
		dst = append(dst, p...)
	}
	return dst
}

// AppendRecord appends one frame whose payload is rec's encoding.
func AppendRecord(dst []byte, kind Kind, channel int64, rec jute.Record) []byte {
	w := jute.NewWriter(64)
	rec.Encode(w)
	return AppendFrame(dst, kind, channel, w.Bytes())
}

// ReadFrame reads one frame from r whose payload is at most max bytes.
// The payload is a new slice, the caller's to keep.
func ReadFrame(r io.Reader, max int) (Kind, int64, []byte, error) {
	var hdr [4 + HeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		return 0, 0, nil, err
	}
	n := int64(int32(binary.BigEndian.Uint32(hdr[:4])))
	if n < HeaderLen || n-HeaderLen > int64(max) {
		return 0, 0, nil, fmt.Errorf("%w: %d", ErrFrameLength, n)
	}
	if _, err := io.ReadFull(r, hdr[4:]); err != nil {
		return 0, 0, nil, unexpected(err)
	}
	kind := Kind(binary.BigEndian.Uint32(hdr[4:8]))
	ch := int64(binary.BigEndian.Uint64(hdr[8:]))
	payload := make([]byte, n-HeaderLen)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, 0, nil, unexpected(err)
	}
	return kind, ch, payload, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Hello is the proxy's first frame.
type Hello struct {
	Magic   int32
	Version int32
	Name    string // the proxy's, for the member's log
}

func (h *Hello) Encode(w *jute.Writer) { w.Int(h.Magic); w.Int(h.Version); w.String(h.Name) }
func (h *Hello) Decode(r *jute.Reader) { h.Magic = r.Int(); h.Version = r.Int(); h.Name = r.String() }

// HelloReply is the member's answer to Hello.
type HelloReply struct {
	Version int32 // the member's
	Err     int32 // HelloOK or HelloVersionRefused
	Message string
	Zxid    int64 // the last zxid the member applied
}

func (h *HelloReply) Encode(w *jute.Writer) {
	w.Int(h.Version)
	w.Int(h.Err)
	w.String(h.Message)
	w.Long(h.Zxid)
}

func (h *HelloReply) Decode(r *jute.Reader) {
	h.Version = r.Int()
	h.Err = r.Int()
	h.Message = r.String()
	h.Zxid = r.Long()
}

// Accept is the member's decision on a Hello's payload, for a member that
// speaks versions min to max: the reply to send (its Version is the one
// the connection speaks from now on), and nil, or an error when the
// connection must close after the reply (a reply of nil: close at once,
// it is no zkraft proxy).
func Accept(payload []byte, min, max int32) (*HelloReply, error) {
	h := new(Hello)
	if err := jute.Unmarshal(payload, h); err != nil || h.Magic != Magic {
		return nil, ErrBadMagic
	}
	if h.Version < min || h.Version > max {
		speaks := fmt.Sprint(max)
		if min != max {
			speaks = fmt.Sprintf("%d to %d", min, max)
		}
		msg := fmt.Sprintf("zkraft upstream protocol: proxy %q speaks version %d, this member speaks %s", trim(h.Name), h.Version, speaks)
		return &HelloReply{Version: max, Err: HelloVersionRefused, Message: msg}, fmt.Errorf("%w: %s", ErrRefused, msg)
	}
	return &HelloReply{Version: h.Version, Err: HelloOK}, nil
}

// RefusedError is CheckReply's error for a member that refused the
// hello's version: Version is the newest the member speaks, so that a
// proxy that also speaks it can say hello again in it.
type RefusedError struct {
	Version int32
	Message string
}

func (e *RefusedError) Error() string { return ErrRefused.Error() + ": " + e.Message }
func (e *RefusedError) Unwrap() error { return ErrRefused }

// CheckReply is the proxy's reading of a HelloReply frame: the version
// the connection speaks and the member's last zxid, or why it refused (a
// *RefusedError for a version refused).
func CheckReply(kind Kind, payload []byte) (version int32, zxid int64, err error) {
	if kind != KindHelloReply {
		return 0, 0, fmt.Errorf("%w: the member answered a %v frame", ErrBadMagic, kind)
	}
	r := new(HelloReply)
	if err := jute.Unmarshal(payload, r); err != nil {
		return 0, 0, err
	}
	if r.Err != HelloOK {
		return 0, 0, &RefusedError{Version: r.Version, Message: trim(r.Message)}
	}
	return r.Version, r.Zxid, nil
}

func trim(s string) string {
	if len(s) > helloMessageMaxBytes {
		return s[:helloMessageMaxBytes]
	}
	return s
}

// Open opens a channel: a client connection the proxy forwards, either a
// session (Connect) or a four-letter word (Word, whose answer comes back
// as Data frames of raw text, then Close).
type Open struct {
	ClientAddr string // host:port of the client, as the proxy saw it
	Connect    []byte // the client's ConnectRequest frame body, or nil
	Word       string // a four-letter word, or ""
}

func (o *Open) Encode(w *jute.Writer) { w.String(o.ClientAddr); w.Buffer(o.Connect); w.String(o.Word) }
func (o *Open) Decode(r *jute.Reader) {
	o.ClientAddr = r.String()
	o.Connect = r.Buffer()
	o.Word = r.String()
	if r.Err() == nil && (o.Connect == nil) == (o.Word == "") {
		r.Fail(errors.New("wire: an open carries a ConnectRequest or a four-letter word"))
	}
	if r.Err() == nil && o.Word != "" && len(o.Word) != 4 {
		r.Fail(fmt.Errorf("wire: four-letter word of %d bytes", len(o.Word)))
	}
}

// Progress is the member's answer to each KeepAlive: its last applied
// zxid (a proxy answers pings with it) and a sign that it lives.
type Progress struct {
	Zxid int64
}

func (p *Progress) Encode(w *jute.Writer) { w.Long(p.Zxid) }
func (p *Progress) Decode(r *jute.Reader) { p.Zxid = r.Long() }

// KeepAlive lists the sessions a proxy heard from since its last one.
type KeepAlive struct {
	Sessions []int64
}

func (k *KeepAlive) Encode(w *jute.Writer) {
	w.Int(int32(len(k.Sessions)))
	for _, id := range k.Sessions {
		w.Long(id)
	}
}

func (k *KeepAlive) Decode(r *jute.Reader) {
	n := r.Int()
	if r.Err() != nil {
		return
	}
	if n < 0 || int(n) > r.Remaining()/8 {
		r.Fail(fmt.Errorf("wire: keep-alive of %d sessions in %d bytes", n, r.Remaining()))
		return
	}
	k.Sessions = make([]int64, n)
	for i := range k.Sessions {
		k.Sessions[i] = r.Long()
	}
}

// Shared watches (version 2). A watch is named as the member's watch
// registry names it: a table (WatchTableData for exists, getData and the
// data side of addWatch; WatchTableChild for getChildren and the child
// side of PERSISTENT) and a mode (standard: one-shot; persistent;
// recursive, data table only).
const (
	WatchTableData  int32 = 0
	WatchTableChild int32 = 1

	WatchStandard   int32 = 1
	WatchPersistent int32 = 2
	WatchRecursive  int32 = 4
)

// Watch is one watch a read registered (Watching) or one to drop
// (Unwatch).
type Watch struct {
	Table int32
	Mode  int32
	Path  string
}

func (w *Watch) Encode(jw *jute.Writer) { jw.Int(w.Table); jw.Int(w.Mode); jw.String(w.Path) }
func (w *Watch) Decode(r *jute.Reader) {
	w.Table, w.Mode, w.Path = r.Int(), r.Int(), r.String()
	if r.Err() != nil {
		return
	}
	if w.Table != WatchTableData && w.Table != WatchTableChild {
		r.Fail(fmt.Errorf("wire: watch table %d", w.Table))
	}
	switch w.Mode {
	case WatchStandard, WatchPersistent:
	case WatchRecursive:
		if w.Table != WatchTableData {
			r.Fail(errors.New("wire: a recursive watch in the child table"))
		}
	default:
		r.Fail(fmt.Errorf("wire: watch mode %d", w.Mode))
	}
}

// DataShared is a watch-setting request (exists, getData, getChildren,
// getChildren2 with the watch flag, addWatch, setWatches, setWatches2)
// whose watches the member registers for the upstream connection instead
// of the channel. Gen orders it against the proxy's Unwatch frames (it
// increases with every DataShared a proxy sends).
type DataShared struct {
	Gen     int64
	Request []byte // the ZooKeeper frame's body, unchanged
}

func (d *DataShared) Encode(w *jute.Writer) { w.Long(d.Gen); w.Raw(d.Request) }
func (d *DataShared) Decode(r *jute.Reader) { d.Gen = r.Long(); d.Request = r.Rest() }

// Watching is the member's account, on the reading channel, of the shared
// watches a DataShared read registered (those a setWatches fired at once
// are not among them): sent before the read's reply and before any Event
// the new watches fire, as of the state the read saw (Zxid).
type Watching struct {
	Xid     int32 // the read's
	Zxid    int64 // the state the read saw
	Watches []Watch
}

func (wg *Watching) Encode(w *jute.Writer) {
	w.Int(wg.Xid)
	w.Long(wg.Zxid)
	w.Int(int32(len(wg.Watches)))
	for i := range wg.Watches {
		wg.Watches[i].Encode(w)
	}
}

func (wg *Watching) Decode(r *jute.Reader) {
	wg.Xid, wg.Zxid = r.Int(), r.Long()
	n := r.Int()
	if r.Err() != nil {
		return
	}
	if n < 0 || int(n) > r.Remaining()/12 {
		r.Fail(fmt.Errorf("wire: watching %d watches in %d bytes", n, r.Remaining()))
		return
	}
	wg.Watches = make([]Watch, n)
	for i := range wg.Watches {
		wg.Watches[i].Decode(r)
	}
}

// Event is a change that fired one of the connection's shared watches,
// once per change however many of them it fired. Denied lists the
// channels whose session may not read the znode (its ACL denies READ):
// the proxy tells them nothing, as a member tells a client without READ
// nothing (their one-shot watches are used up all the same). Empty when
// the znode is world-readable.
type Event struct {
	Zxid   int64
	Type   int32 // jute.EventType
	Path   string
	Denied []int64
}

func (e *Event) Encode(w *jute.Writer) {
	w.Long(e.Zxid)
	w.Int(e.Type)
	w.String(e.Path)
	w.Int(int32(len(e.Denied)))
	for _, ch := range e.Denied {
		w.Long(ch)
	}
}

func (e *Event) Decode(r *jute.Reader) {
	e.Zxid, e.Type, e.Path = r.Long(), r.Int(), r.String()
	n := r.Int()
	if r.Err() != nil {
		return
	}
	if n < 0 || int(n) > r.Remaining()/8 {
		r.Fail(fmt.Errorf("wire: event denying %d channels in %d bytes", n, r.Remaining()))
		return
	}
	if n > 0 {
		e.Denied = make([]int64, n)
		for i := range e.Denied {
			e.Denied[i] = r.Long()
		}
	}
}

// Unwatch drops the connection's shared watch of Mode (persistent or
// recursive: a shared watch is never standard on the member, see
// docs/proxy.md) in Table on Path, unless a DataShared of a later Gen
// registered it again.
type Unwatch struct {
	Gen   int64
	Watch Watch
}

func (u *Unwatch) Encode(w *jute.Writer) { w.Long(u.Gen); u.Watch.Encode(w) }
func (u *Unwatch) Decode(r *jute.Reader) { u.Gen = r.Long(); u.Watch.Decode(r) }
