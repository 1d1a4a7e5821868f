package raftsm

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/zkraft/zkraft/jute"
)

// TestSessionsBatchIsEachOnItsOwn: a KindSessions batch gives every op
// the reply, the zxid and the events its own KindCreateSession or
// KindAttach gives, and leaves the same sessions, owners and ephemerals:
// new sessions, reconnecting ones, one that does not exist (expired:
// SESSIONEXPIRED), an id taken and id 0 (NODEEXISTS), and, once the
// namespace is sealed, a new session refused (NOTREADONLY) beside an
// attach that goes on.
func TestSessionsBatchIsEachOnItsOwn(t *testing.T) {
	setup := []*Command{createSession(0x10, 30000), create(0x10, "/e", jute.FlagEphemeral)}
	ops := []SessionOp{
		{Session: 0x1, Timeout: 10000, Owner: 7},
		{Session: 0x2, Timeout: 20000, Owner: 8},
		{Attach: true, Session: 0x10, Owner: 9},
		{Attach: true, Session: 0x99, Owner: 9},  // expired (never existed here)
		{Session: 0x1, Timeout: 5000, Owner: 10}, // taken, by the first op
		{Session: 0x0, Timeout: 5000, Owner: 10},
		{Attach: true, Session: 0x1, Owner: 11},
	}
	sealedOps := []SessionOp{{Session: 0x3, Timeout: 4000, Owner: 12}, {Attach: true, Session: 0x2, Owner: 13}}
	single := func(op SessionOp) *Command {
		if op.Attach {
			return &Command{Kind: KindAttach, Session: op.Session, Owner: op.Owner, Time: 2000}
		}
		return &Command{Kind: KindCreateSession, Session: op.Session, Timeout: op.Timeout, Owner: op.Owner, Time: 2000}
	}
	batch := func(ops []SessionOp) *Command {
		return &Command{Kind: KindSessions, Time: 2000, Body: jute.Marshal(ptr(SessionOps(ops)))}
	}

	one, many := newHarness(t, t.TempDir()), newHarness(t, t.TempDir())
	one.apply(setup...)
	many.apply(setup...)
	one.sink.reset()
	many.sink.reset()

	var want []SessionResult
	for _, op := range ops {
		r := one.apply1(single(op))
		want = append(want, SessionResult{r.Err, r.Zxid})
	}
	one.apply1(&Command{Kind: KindSeal})
	for _, op := range sealedOps {
		r := one.apply1(single(op))
		want = append(want, SessionResult{r.Err, r.Zxid})
	}

	var got SessionResults
	for _, cmd := range []*Command{batch(ops), {Kind: KindSeal}, batch(sealedOps)} {
		rep := many.apply1(cmd)
		if cmd.Kind != KindSessions {
			continue
		}
		var rs SessionResults
		if err := jute.Unmarshal(rep.Body, &rs); err != nil {
			t.Fatal(err)
		}
		if len(rs) > 0 && rep.Zxid != rs[len(rs)-1].Zxid && rep.Zxid != many.zxid() {
			t.Errorf("batch reply zxid %d, its last op's %d", rep.Zxid, rs[len(rs)-1].Zxid)
		}
		got = append(got, rs...)
	}
	if !reflect.DeepEqual(got, SessionResults(want)) {
		t.Errorf("batch results %+v\nsingle commands' %+v", got, want)
	}
	for i, code := range []jute.ErrCode{jute.ErrOK, jute.ErrOK, jute.ErrOK, jute.ErrSessionExpired, jute.ErrNodeExists, jute.ErrNodeExists, jute.ErrOK, jute.ErrNotReadOnly, jute.ErrOK} {
		if i < len(got) && got[i].Err != code {
			t.Errorf("op %d: %v, want %v", i, got[i].Err, code)
		}
	}
	if one.zxid() != many.zxid() {
		t.Errorf("zxid %d after the batches, %d after the single commands", many.zxid(), one.zxid())
	}
	// The same events but for the entry's index (a batch is one entry).
	strip := func(es []Event) []Event {
		out := append([]Event(nil), es...)
		for i := range out {
			out[i].Index = 0
		}
		return out
	}
	if a, b := strip(many.sink.all()), strip(one.sink.all()); !reflect.DeepEqual(a, b) {
		t.Errorf("batch events %+v\nsingle commands' %+v", a, b)
	}
	sessions := func(h *harness) any {
		return h.view(func(v View) (any, error) { return v.Sessions() })
	}
	if a, b := sessions(many), sessions(one); !reflect.DeepEqual(a, b) {
		t.Errorf("sessions %+v after the batches, %+v after the single commands", a, b)
	}
	for _, id := range []int64{0x1, 0x2, 0x10} {
		if a, b := many.sm.mu.sessions[id], one.sm.mu.sessions[id]; a == nil || b == nil || a.owner != b.owner || a.timeout != b.timeout {
			t.Errorf("session %#x: %+v after the batches, %+v after the single commands", id, a, b)
		}
	}
	if n := many.node("/e"); n == nil || n.EphemeralOwner != 0x10 {
		t.Errorf("/e after the batches: %+v", n)
	}
}

// TestSessionOpsDecode: every truncation of a batch, an empty one and
// one past MaxSessionOps are errors, never a panic; a round trip keeps
// every field.
func TestSessionOpsDecode(t *testing.T) {
	ops := SessionOps{{Session: -1, Timeout: 1 << 30, Owner: 1 << 63}, {Attach: true, Session: 5, Owner: 3}}
	b := jute.Marshal(&ops)
	var back SessionOps
	if err := jute.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, ops) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for i := range b {
		if err := jute.Unmarshal(b[:i], new(SessionOps)); err == nil {
			t.Errorf("%d of %d bytes decoded", i, len(b))
		}
	}
	w := jute.NewWriter(8)
	w.Int(0)
	if err := jute.Unmarshal(w.Bytes(), new(SessionOps)); err == nil {
		t.Error("an empty batch decoded")
	}
	big := make(SessionOps, MaxSessionOps+1)
	if err := jute.Unmarshal(jute.Marshal(&big), new(SessionOps)); err == nil {
		t.Error("a batch past MaxSessionOps decoded")
	}
	res := SessionResults{{Err: jute.ErrSessionExpired, Zxid: 4}, {Zxid: 1 << 40}}
	var rb SessionResults
	if err := jute.Unmarshal(jute.Marshal(&res), &rb); err != nil || !reflect.DeepEqual(rb, res) || !bytes.Equal(jute.Marshal(&rb), jute.Marshal(&res)) {
		t.Errorf("results round trip: %+v, %v", rb, err)
	}
}

func ptr[T any](v T) *T { return &v }
