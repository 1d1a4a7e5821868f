package session_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/session"
	"github.com/zkraft/zkraft/internal/clienttest"
	"github.com/zkraft/zkraft/internal/tcpproxy"
)

// recorder keeps every event a Session reports.
type recorder struct {
	clienttest.Recorder[session.Event]
}

func newRecorder() *recorder { return &recorder{} }

func (r *recorder) on(e session.Event)   { r.On(e) }
func (r *recorder) all() []session.Event { return r.All() }

// wait waits until the n-th event (1-based) has been reported, then
// returns it; it fails the test after limit.
func (r *recorder) wait(t *testing.T, n int, limit time.Duration) session.Event {
	t.Helper()
	ev, ok := r.WaitUntil(limit, func(ev []session.Event) bool { return len(ev) >= n })
	if !ok {
		t.Fatalf("after %v: events %v, waiting for the %d-th", limit, ev, n)
	}
	return ev[n-1]
}

func states(evs []session.Event) string {
	s := ""
	for i, e := range evs {
		if i > 0 {
			s += ","
		}
		s += e.State.String()
	}
	return s
}

const timeout = 4 * time.Second // the least both servers grant with a 2 s tick

func open(t *testing.T, addr string, rec *recorder, creds *clienttest.Creds) *session.Session {
	t.Helper()
	cfg := session.Config{Servers: []string{addr}, SessionTimeout: timeout, OnEvent: rec.on}
	if creds != nil {
		cfg.Dialer = creds.Dial
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := session.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSession(t *testing.T) {
	clienttest.Each(t, func(t *testing.T, tg *clienttest.Target) {
		t.Run("CutIsJeopardyThenSafe", func(t *testing.T) { testCut(t, tg) })
		t.Run("PartitionShorterThanGrace", func(t *testing.T) { testShortPartition(t, tg) })
		t.Run("PartitionLongerThanGraceIsLost", func(t *testing.T) { testLongPartition(t, tg) })
		t.Run("ExpiredByTheServer", func(t *testing.T) { testExpired(t, tg) })
		t.Run("Close", func(t *testing.T) { testClose(t, tg) })
	})
}

// A connection reset: jeopardy, then safe on the same session as soon as
// the client reconnects; the session's context is never cancelled.
func testCut(t *testing.T, tg *clienttest.Target) {
	p := tcpproxy.New(t, tg.Addr())
	rec := newRecorder()
	s := open(t, p.Addr(), rec, nil)
	if e := rec.wait(t, 1, time.Second); e.State != session.Safe || e.SessionID == 0 {
		t.Fatalf("first event %+v, want safe with a session id", e)
	}
	id, ctx := s.SessionID(), s.Context()
	for round := 0; round < 3; round++ {
		p.Cut()
		j := rec.wait(t, 2+2*round, 5*time.Second)
		safe := rec.wait(t, 3+2*round, 10*time.Second)
		if j.State != session.Jeopardy || safe.State != session.Safe || safe.SessionID != id {
			t.Fatalf("round %d: events %v (%+v), want jeopardy then safe on 0x%x", round, states(rec.all()), rec.all(), id)
		}
	}
	if ctx.Err() != nil || s.SessionID() != id {
		t.Fatalf("context %v, session 0x%x (was 0x%x)", context.Cause(ctx), s.SessionID(), id)
	}
	if _, err := s.Conn().Create("/cut", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
}

// A silent partition: jeopardy when the server has been quiet for half a
// session timeout; when traffic flows again before the grace period ends,
// safe, same session, no lost.
func testShortPartition(t *testing.T, tg *clienttest.Target) {
	p := tcpproxy.New(t, tg.Addr())
	rec := newRecorder()
	s := open(t, p.Addr(), rec, nil)
	rec.wait(t, 1, time.Second)
	id, ctx := s.SessionID(), s.Context()
	if _, err := s.Conn().Create("/short", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	blocked := time.Now()
	p.Block()
	j := rec.wait(t, 2, timeout)
	if j.State != session.Jeopardy {
		t.Fatalf("events %v, want jeopardy", states(rec.all()))
	}
	if quiet := time.Since(s.ConfirmedAt()); quiet < timeout/2 {
		t.Fatalf("jeopardy after %v of silence, before half the timeout", quiet)
	}
	if s.WaitSafe(ctxFor(t, 50*time.Millisecond)) == nil {
		t.Fatal("WaitSafe returned nil in jeopardy")
	}
	p.Unblock()
	safe := rec.wait(t, 3, timeout)
	if safe.State != session.Safe || safe.SessionID != id || ctx.Err() != nil {
		t.Fatalf("events %v after %v blocked, want safe on the same session", states(rec.all()), time.Since(blocked))
	}
	if err := s.WaitSafe(ctxFor(t, time.Second)); err != nil {
		t.Fatal(err)
	}
	if ok, st, err := s.Conn().Exists("/short"); err != nil || !ok || st.EphemeralOwner != id {
		t.Fatalf("the session's ephemeral: %v %+v %v", ok, st, err)
	}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// A partition that outlasts the grace period: lost, with the context
// cancelled before the server expires the session (its ephemeral is still
// there when the client reports lost), then a new session once the
// network heals.
func testLongPartition(t *testing.T, tg *clienttest.Target) {
	p := tcpproxy.New(t, tg.Addr())
	rec := newRecorder()
	s := open(t, p.Addr(), rec, nil)
	rec.wait(t, 1, time.Second)
	id, ctx := s.SessionID(), s.Context()
	if _, err := s.Conn().Create("/long", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	observer := dial(t, tg.Addr())
	p.Block()
	if j := rec.wait(t, 2, timeout); j.State != session.Jeopardy {
		t.Fatalf("events %v", states(rec.all()))
	}
	confirmed := s.ConfirmedAt() // nothing can confirm through the block
	<-ctx.Done()
	lostAt := time.Now()
	// The server has not expired the session yet: its ephemeral is there.
	ok, st, err := observer.Exists("/long")
	if err != nil || !ok || st.EphemeralOwner != id {
		t.Fatalf("when the client reported lost the ephemeral was %v %+v %v: the server expired the session first", ok, st, err)
	}
	if !errors.Is(context.Cause(ctx), session.ErrGraceExpired) || !errors.Is(context.Cause(ctx), session.ErrLost) {
		t.Fatalf("cause %v, want ErrGraceExpired", context.Cause(ctx))
	}
	evs := rec.all()
	if states(evs[:3]) != "safe,jeopardy,lost" || evs[2].SessionID != id {
		t.Fatalf("events %v", states(evs))
	}
	if since := lostAt.Sub(confirmed); since > timeout || since < timeout/2 {
		t.Fatalf("lost %v after the last confirmation, beyond the session timeout", since)
	}
	// The server expires it a little later.
	deadline := time.Now().Add(3 * timeout)
	for {
		ok, _, err := observer.Exists("/long")
		if err == nil && !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never expired the partitioned session")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("lost reported %v before the server expired the session", time.Since(lostAt).Round(time.Millisecond))
	p.Unblock()
	safe := rec.wait(t, 4, 3*timeout)
	if safe.State != session.Safe || safe.SessionID == id || safe.SessionID == 0 {
		t.Fatalf("after healing: %+v, want safe on a new session", safe)
	}
	if s.Context().Err() != nil {
		t.Fatal("the new session's context is done")
	}
}

// The server ends the session (as on expiry): lost with ErrExpired, then
// a new session.
func testExpired(t *testing.T, tg *clienttest.Target) {
	rec := newRecorder()
	creds := new(clienttest.Creds)
	s := open(t, tg.Addr(), rec, creds)
	rec.wait(t, 1, time.Second)
	id, ctx := s.SessionID(), s.Context()
	cid, passwd := creds.Session()
	if cid != id {
		t.Fatalf("recorded session 0x%x, the session is 0x%x", cid, id)
	}
	if err := clienttest.KillSession(tg.Addr(), id, passwd); err != nil {
		t.Fatal(err)
	}
	// The server closes the connection as it ends the session: jeopardy
	// (maybe), then lost when the client hears that it expired.
	var lost session.Event
	for n := 2; lost.State != session.Lost && n <= 3; n++ {
		lost = rec.wait(t, n, 3*timeout)
	}
	if lost.State != session.Lost || !errors.Is(lost.Err, session.ErrExpired) || lost.SessionID != id {
		t.Fatalf("events %v (%+v), want lost by expiry", states(rec.all()), lost)
	}
	if !errors.Is(context.Cause(ctx), session.ErrExpired) {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
	safe := rec.wait(t, len(rec.all())+1, 3*timeout)
	if safe.State != session.Safe || safe.SessionID == id {
		t.Fatalf("after expiry: %+v", safe)
	}
	if _, err := s.Conn().Create("/after-expiry", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
}

// Close ends the session (its ephemerals go), reports lost with ErrClosed
// and waits for what the Session started.
func testClose(t *testing.T, tg *clienttest.Target) {
	rec := newRecorder()
	s := open(t, tg.Addr(), rec, nil)
	id, ctx := s.SessionID(), s.Context()
	path := fmt.Sprintf("/close-%x", id)
	if _, err := s.Conn().Create(path, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(ctx), session.ErrClosed) {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
	evs := rec.all()
	if last := evs[len(evs)-1]; last.State != session.Lost || !errors.Is(last.Err, session.ErrClosed) {
		t.Fatalf("events %v", evs)
	}
	if err := s.WaitSafe(context.Background()); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("WaitSafe after Close: %v", err)
	}
	if ok, _, err := dial(t, tg.Addr()).Exists(path); err != nil || ok {
		t.Fatalf("ephemeral after Close: %v %v", ok, err)
	}
	n := len(rec.all())
	time.Sleep(100 * time.Millisecond)
	if len(rec.all()) != n {
		t.Fatalf("events after Close returned: %v", rec.all()[n:])
	}
}

func dial(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
