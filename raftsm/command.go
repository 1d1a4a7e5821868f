package raftsm

import (
	"encoding/binary"
	"fmt"

	"github.com/zkraft/zkraft/jute"
)

// Kind is the kind of a replicated command.
type Kind int32

const (
	// KindRequest is a client write: Op and Body (the request record as
	// the client sent it), with the client's session and auth ids.
	KindRequest Kind = 1
	// KindCreateSession creates Session with Timeout.
	KindCreateSession Kind = 2
	// KindCloseSession closes Session at its client's request.
	KindCloseSession Kind = 3
	// KindExpireSessions closes each of Sessions, decided by the leader.
	KindExpireSessions Kind = 4
	// KindKeepAlive reports Sessions heard from by a member since its last
	// batch. It changes no state and consumes no zxid.
	KindKeepAlive Kind = 5
	// KindAttach records that Session is now held by the connection Owner
	// (a client re-attached, possibly on another member). Writes from any
	// other connection of the session then fail with SESSIONMOVED.
	KindAttach Kind = 6
	// KindSetConfig sets the data of /zookeeper/config to Body.
	KindSetConfig Kind = 7
	// KindCheckImport carries an imported member's import record (Body):
	// every replica compares it with its own and stops if they differ, so
	// an ensemble whose members started from different imports (or one
	// from none) cannot run on silently.
	KindCheckImport Kind = 8
	// KindCheckDigest carries the proposer's digest (digest.go) of its
	// state after the entry at an index: Body is the index and the digest,
	// 8 bytes each, big-endian. Every replica that still remembers its own
	// digest after that index compares them and stops if they differ, as
	// ZooKeeper 3.6+ compares the digests its transactions carry. It
	// changes no state and consumes no zxid.
	KindCheckDigest Kind = 9
	// KindSeal seals the namespace before it is deleted (docs/cells.md,
	// Deleting a cell): from the next entry on, every client write (a
	// KindRequest) is refused with NOTREADONLY, as a read-only ZooKeeper
	// refuses it, without a zxid, and so is every new session. Reads,
	// keep-alives, re-attaching and closing sessions (which deletes their
	// ephemerals) go on, so the namespace can still empty. It consumes no
	// zxid; sealing a sealed namespace changes nothing.
	KindSeal Kind = 10
	// KindUnseal undoes KindSeal (a delete that was refused).
	KindUnseal Kind = 11
	// KindSessions is a batch of session handshakes (Body: SessionOps,
	// sessions.go), each applied in order exactly as the KindCreateSession
	// or KindAttach of its own would be, with a result of its own (the
	// reply's Body: SessionResults). A member gathers its proxied
	// channels' concurrent handshakes into one (server's sessionBatcher),
	// so that thousands of sessions opening or moving at once are a few
	// entries of the log, not thousands.
	KindSessions Kind = 12
)

// lastKind is the highest Kind; DecodeCommand refuses anything above.
const lastKind = KindSessions

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindCreateSession:
		return "createSession"
	case KindCloseSession:
		return "closeSession"
	case KindExpireSessions:
		return "expireSessions"
	case KindKeepAlive:
		return "keepAlive"
	case KindAttach:
		return "attach"
	case KindSetConfig:
		return "setConfig"
	case KindCheckImport:
		return "checkImport"
	case KindCheckDigest:
		return "checkDigest"
	case KindSeal:
		return "seal"
	case KindUnseal:
		return "unseal"
	case KindSessions:
		return "sessions"
	}
	return fmt.Sprintf("Kind(%d)", int32(k))
}

const commandVersion = 1

// Command is one entry of the replicated log. Everything Update needs is in
// it: the proposer chooses the wall time (Time, ms) and the session id.
type Command struct {
	Kind     Kind
	Session  int64
	Time     int64
	Op       jute.OpCode
	Auth     []jute.ID
	Timeout  int32
	Sessions []int64
	Body     []byte
	// Seen, for KindExpireSessions, holds for each of Sessions the Raft
	// index of its last keep-alive the leader had applied when it decided:
	// a session kept alive after that is not expired.
	Seen []int64
	// Owner identifies the client connection that sent a request or holds
	// a session: the member's replica id in the top 16 bits and a
	// member-local connection number below. 0 means the server itself.
	Owner uint64
}

// Encode writes c.
func (c *Command) Encode(w *jute.Writer) {
	w.Int(commandVersion)
	w.Int(int32(c.Kind))
	w.Long(c.Session)
	w.Long(c.Time)
	w.Int(int32(c.Op))
	w.Int(int32(len(c.Auth)))
	for _, id := range c.Auth {
		w.String(id.Scheme)
		w.String(id.ID)
	}
	w.Int(c.Timeout)
	w.Int(int32(len(c.Sessions)))
	for _, s := range c.Sessions {
		w.Long(s)
	}
	w.Buffer(c.Body)
	w.Long(int64(c.Owner))
	w.Int(int32(len(c.Seen)))
	for _, x := range c.Seen {
		w.Long(x)
	}
}

// Decode reads c; errors are left in r.
func (c *Command) Decode(r *jute.Reader) {
	if v := r.Int(); v != commandVersion && r.Err() == nil {
		r.Rest()
		c.Kind = 0
		return
	}
	c.Kind = Kind(r.Int())
	c.Session = r.Long()
	c.Time = r.Long()
	c.Op = jute.OpCode(r.Int())
	n := r.Int()
	if n < 0 || int(n) > r.Remaining()/8 {
		r.Rest()
		c.Kind = 0
		return
	}
	c.Auth = make([]jute.ID, 0, n)
	for i := int32(0); i < n && r.Err() == nil; i++ {
		c.Auth = append(c.Auth, jute.ID{Scheme: r.String(), ID: r.String()})
	}
	c.Timeout = r.Int()
	n = r.Int()
	if n < 0 || int(n) > r.Remaining()/8 {
		r.Rest()
		c.Kind = 0
		return
	}
	c.Sessions = make([]int64, 0, n)
	for i := int32(0); i < n; i++ {
		c.Sessions = append(c.Sessions, r.Long())
	}
	c.Body = r.Buffer()
	c.Owner = uint64(r.Long())
	n = r.Int()
	if n < 0 || int(n) > r.Remaining()/8 {
		r.Rest()
		c.Kind = 0
		return
	}
	for i := int32(0); i < n; i++ {
		c.Seen = append(c.Seen, r.Long())
	}
}

var _ jute.Record = (*Command)(nil)

// EncodeCommand returns the bytes to propose for c, in one buffer of
// their size (a write's request body, usually most of it, is copied once
// rather than into a buffer grown from 64 bytes).
func EncodeCommand(c *Command) []byte {
	return AppendCommand(make([]byte, 0, c.EncodedSize()), c)
}

// AppendCommand appends the bytes to propose for c to dst, growing it at
// most once: for a proposer that reuses its buffer (Dragonboat's Propose
// copies the command into its log entry before it returns).
func AppendCommand(dst []byte, c *Command) []byte {
	if need := len(dst) + c.EncodedSize(); cap(dst) < need {
		dst = append(make([]byte, 0, need), dst...)
	}
	w := jute.AppendWriter(dst)
	c.Encode(w)
	return w.Bytes()
}

// EncodedSize is the size of c's encoding.
func (c *Command) EncodedSize() int {
	size := commandFixedBytes + len(c.Body) + 8*(len(c.Sessions)+len(c.Seen))
	for _, id := range c.Auth {
		size += 8 + len(id.Scheme) + len(id.ID)
	}
	return size
}

// commandFixedBytes is the size of a Command's encoding without its
// variable parts: version, kind, session, time, op, the Auth count,
// timeout, the Sessions count, the Body length, owner and the Seen count.
const commandFixedBytes = 4 + 4 + 8 + 8 + 4 + 4 + 4 + 4 + 4 + 8 + 4

// DecodeCommand decodes a proposed command.
func DecodeCommand(b []byte) (*Command, error) {
	c := new(Command)
	if err := jute.UnmarshalShared(b, c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	if c.Kind < KindRequest || c.Kind > lastKind {
		return nil, fmt.Errorf("%w: kind %d", ErrBadCommand, c.Kind)
	}
	return c, nil
}

// Reply is the outcome of a command as Update returns it in Result.Data:
// the wire error code, the zxid the command carried (the last zxid for
// commands that consume none) and the response record bytes.
type Reply struct {
	Err  jute.ErrCode
	Zxid int64
	Body []byte
	// resp, when set, is the response record that Encode writes as Body
	// (Body is then nil): Update encodes a reply once, not the record and
	// then a copy of it.
	resp jute.Record
}

func (p *Reply) Encode(w *jute.Writer) {
	w.Int(int32(p.Err))
	w.Long(p.Zxid)
	if p.resp == nil {
		w.Buffer(p.Body)
		return
	}
	// The record in place of the buffer's bytes, its length written
	// after it: what w.Buffer(jute.Marshal(p.resp)) writes.
	at := w.Len()
	w.Int(0)
	p.resp.Encode(w)
	binary.BigEndian.PutUint32(w.Bytes()[at:], uint32(w.Len()-at-4))
}

// encodeReply is a reply's bytes as Update returns them in Result.Data.
func encodeReply(r *Reply) []byte {
	return jute.AppendRecord(make([]byte, 0, replyBytesHint), r)
}

// replyBytesHint is the buffer encodeReply starts with: the header and a
// Stat (setData, multi of one op) fit.
const replyBytesHint = 128

func (p *Reply) Decode(r *jute.Reader) {
	p.Err = jute.ErrCode(r.Int())
	p.Zxid = r.Long()
	p.Body = r.Buffer()
}

var _ jute.Record = (*Reply)(nil)

func marshal(rec jute.Record) []byte { return jute.Marshal(rec) }
