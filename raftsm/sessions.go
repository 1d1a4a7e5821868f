package raftsm

import (
	"fmt"

	"github.com/zkraft/zkraft/jute"
)

// SessionOp is one handshake of a KindSessions batch: a new session
// (Attach false: KindCreateSession's Session, Timeout and Owner) or a
// reconnecting one (Attach true: KindAttach's Session and Owner; Timeout
// is not used).
type SessionOp struct {
	Attach  bool
	Session int64
	Timeout int32
	Owner   uint64
}

// sessionOpBytes is one SessionOp's encoding: attach, session, timeout,
// owner.
const sessionOpBytes = 1 + 8 + 4 + 8

// MaxSessionOps bounds a KindSessions batch (about 21 KiB of command).
const MaxSessionOps = 1024

// SessionOps is a KindSessions command's Body.
type SessionOps []SessionOp

func (s SessionOps) Encode(w *jute.Writer) {
	w.Int(int32(len(s)))
	for _, op := range s {
		w.Bool(op.Attach)
		w.Long(op.Session)
		w.Int(op.Timeout)
		w.Long(int64(op.Owner))
	}
}

// Decode reads the ops; a count out of range or a short buffer is an
// error left in r.
func (s *SessionOps) Decode(r *jute.Reader) {
	n := r.Int()
	if r.Err() != nil {
		return
	}
	if n < 1 || n > MaxSessionOps || int(n) > r.Remaining()/sessionOpBytes {
		r.Fail(fmt.Errorf("raftsm: a sessions batch of %d ops in %d bytes", n, r.Remaining()))
		return
	}
	ops := make(SessionOps, n)
	for i := range ops {
		ops[i] = SessionOp{Attach: r.Bool(), Session: r.Long(), Timeout: r.Int(), Owner: uint64(r.Long())}
	}
	*s = ops
}

var _ jute.Record = (*SessionOps)(nil)

// SessionResult is one op's outcome, as the reply of its single command
// would carry it: the error code and the zxid.
type SessionResult struct {
	Err  jute.ErrCode
	Zxid int64
}

// SessionResults is a KindSessions reply's Body: one result per op, in
// the ops' order.
type SessionResults []SessionResult

func (s SessionResults) Encode(w *jute.Writer) {
	w.Int(int32(len(s)))
	for _, r := range s {
		w.Int(int32(r.Err))
		w.Long(r.Zxid)
	}
}

func (s *SessionResults) Decode(r *jute.Reader) {
	n := r.Int()
	if r.Err() != nil {
		return
	}
	if n < 0 || int(n) > r.Remaining()/12 {
		r.Fail(fmt.Errorf("raftsm: %d session results in %d bytes", n, r.Remaining()))
		return
	}
	out := make(SessionResults, n)
	for i := range out {
		out[i] = SessionResult{Err: jute.ErrCode(r.Int()), Zxid: r.Long()}
	}
	*s = out
}

var _ jute.Record = (*SessionResults)(nil)

// sessions applies a KindSessions batch: each op as its own command
// would be applied (createSession, attach: the same functions), in
// order, each with its own result. A create consumes a zxid of its own,
// as KindCreateSession does; the reply's zxid is the last one.
func (a *applier) sessions(c *Command) (*Reply, error) {
	var ops SessionOps
	if err := jute.UnmarshalShared(c.Body, &ops); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	results := make(SessionResults, len(ops))
	for i, op := range ops {
		one := &Command{Kind: KindCreateSession, Session: op.Session, Timeout: op.Timeout, Owner: op.Owner, Time: c.Time}
		apply := a.createSession
		if op.Attach {
			one.Kind, one.Timeout, apply = KindAttach, 0, a.attach
		}
		r, err := apply(one)
		if err != nil {
			return nil, err
		}
		results[i] = SessionResult{Err: r.Err, Zxid: r.Zxid}
	}
	return &Reply{Zxid: a.zxid, resp: &results}, nil
}
