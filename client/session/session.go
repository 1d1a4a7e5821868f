package session

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// State is what the library knows about its session.
type State int32

const (
	// Safe: a server answered on this session recently; locks and
	// leaderships held on it are sound.
	Safe State = iota + 1
	// Jeopardy: the connection was lost, or has been silent for half a
	// session timeout. The session may still be alive: the library keeps
	// trying every server for the grace period. Work that needs a lock
	// held on the session should pause.
	Jeopardy
	// Lost: the session expired, the grace period ended, or the Session
	// was closed. Every context of the session is cancelled. Unless the
	// Session was closed, the library opens a new session and reports Safe
	// again with its id; what was held on the old one is gone.
	Lost
)

func (s State) String() string {
	switch s {
	case Safe:
		return "safe"
	case Jeopardy:
		return "jeopardy"
	case Lost:
		return "lost"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Event is one transition of a Session.
type Event struct {
	State State
	// SessionID is the ZooKeeper session the event is about: for Lost the
	// one that was lost, for Safe after a Lost the new one.
	SessionID int64
	// Err is why: for Lost one of ErrExpired, ErrGraceExpired, ErrClosed;
	// for Jeopardy a description of what was seen.
	Err error
	// At is when the library saw it.
	At time.Time
}

// Auth is one set of credentials sent on every session (zk.Conn.AddAuth).
type Auth struct {
	Scheme string
	Auth   []byte
}

// Config configures a Session. Zero values take the defaults written on
// each field.
type Config struct {
	// Servers are the members' client addresses (host:port). Required.
	Servers []string
	// SessionTimeout is the timeout requested from the server. Default
	// 10s. The server may grant another; Timeout reports it.
	SessionTimeout time.Duration
	// GracePeriod is how long after the server last certainly heard from
	// the session (see Session.ConfirmedAt) the library keeps trying
	// before it reports Lost. Default: nine tenths of the negotiated
	// timeout. It is capped at the negotiated timeout, after which the
	// server may expire the session whatever the client hopes.
	GracePeriod time.Duration
	// OnEvent, if set, is called with every transition, in order, from
	// the Session's own goroutine; it must return promptly.
	OnEvent func(Event)
	// Auth is sent on every session the Session opens.
	Auth []Auth
	// Dialer, if set, opens the TCP connections (tests put a proxy
	// there); the default is net.DialTimeout.
	Dialer zk.Dialer
	// Logger receives go-zookeeper's log lines; default none.
	Logger zk.Logger
}

func (c *Config) validate() error {
	if len(c.Servers) == 0 {
		return errors.New("session: no servers")
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.GracePeriod < 0 {
		return errors.New("session: negative grace period")
	}
	if c.Dialer == nil {
		c.Dialer = net.DialTimeout
	}
	if c.Logger == nil {
		c.Logger = quiet{}
	}
	return nil
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// Session is a ZooKeeper session with jeopardy: see the package doc. It is
// safe for concurrent use.
type Session struct {
	cfg  Config
	wake chan struct{} // one pending signal for run

	quit chan struct{} // closed by Close
	done chan struct{} // closed when run returns
	wg   sync.WaitGroup

	// state mirrors mu.state for the meter's onConfirm, which must not
	// take mu.
	state atomic.Int32

	// mu guards what follows. Lock order: mu before nothing (callbacks
	// run without it).
	mu struct {
		sync.Mutex
		gen     *generation
		state   State
		changed chan struct{} // closed and replaced on every transition
		inbox   []genEvent
		closed  bool
	}
}

// generation is one ZooKeeper session: one zk.Conn, one id, one context.
type generation struct {
	n      int
	conn   *zk.Conn
	meter  *meter
	ctx    context.Context
	cancel context.CancelCauseFunc

	// Owned by run.
	id       int64
	hasSess  bool // go-zookeeper reports StateHasSession now
	authDone bool
	lastErr  error
}

type genEvent struct {
	gen  *generation
	ev   zk.Event
	auth error // set for the auth-done event
	isAu bool
}

// Open starts a session and returns once a server granted it (Safe), or
// fails when ctx ends first.
func Open(ctx context.Context, cfg Config) (*Session, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	s.mu.changed = make(chan struct{})
	s.mu.state = Lost
	s.state.Store(int32(Lost))
	g, err := s.newGeneration(1)
	if err != nil {
		return nil, err
	}
	s.mu.gen = g
	go s.run()
	if err := s.WaitSafe(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("session: no session from %v: %w", cfg.Servers, err)
	}
	return s, nil
}

func (s *Session) newGeneration(n int) (*generation, error) {
	g := &generation{n: n}
	g.meter = newMeter(func() {
		if State(s.state.Load()) != Safe {
			s.signal()
		}
	})
	g.ctx, g.cancel = context.WithCancelCause(context.Background())
	limit := s.cfg.SessionTimeout * 2 / 3
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		nc, err := s.cfg.Dialer(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		return g.meter.wrap(nc, limit), nil
	}
	conn, _, err := zk.Connect(s.cfg.Servers, s.cfg.SessionTimeout,
		zk.WithLogger(s.cfg.Logger), zk.WithLogInfo(false), zk.WithDialer(dial),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession {
				s.post(genEvent{gen: g, ev: ev})
			}
		}))
	if err != nil {
		g.cancel(ErrClosed)
		return nil, err
	}
	g.conn = conn
	// Credentials go once the session is up; go-zookeeper resends them on
	// every reconnection of this generation.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var err error
		for _, a := range s.cfg.Auth {
			if err = g.waitConnected(s.quit); err != nil {
				break
			}
			if err = conn.AddAuth(a.Scheme, a.Auth); err != nil {
				break
			}
		}
		s.post(genEvent{gen: g, isAu: true, auth: err})
	}()
	return g, nil
}

// waitConnected waits until the generation's connection has a session,
// polling: go-zookeeper has no way to wait for it but its event stream,
// which the Session consumes.
func (g *generation) waitConnected(quit <-chan struct{}) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for g.conn.State() != zk.StateHasSession {
		select {
		case <-quit:
			return ErrClosed
		case <-g.ctx.Done():
			return context.Cause(g.ctx)
		case <-t.C:
		}
	}
	return nil
}

func (s *Session) post(e genEvent) {
	s.mu.Lock()
	s.mu.inbox = append(s.mu.inbox, e)
	s.mu.Unlock()
	s.signal()
}

func (s *Session) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run owns the state: it takes go-zookeeper's session events, the
// meter's confirmations and the clock, and makes every transition.
func (s *Session) run() {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		inbox := s.mu.inbox
		s.mu.inbox = nil
		g := s.mu.gen
		s.mu.Unlock()
		for _, e := range inbox {
			if e.gen != g {
				continue // from a generation already lost
			}
			if e.isAu {
				g.authDone = true
				if e.auth != nil {
					g.lastErr = fmt.Errorf("session: auth: %w", e.auth)
				}
				continue
			}
			switch e.ev.State {
			case zk.StateHasSession:
				g.hasSess = true
				if g.id == 0 {
					g.id = g.conn.SessionID()
				}
			case zk.StateExpired:
				g.hasSess = false
				g = s.lose(g, ErrExpired)
			case zk.StateDisconnected:
				if g.hasSess {
					g.lastErr = fmt.Errorf("session: disconnected from %s", e.ev.Server)
				}
				g.hasSess = false
			}
		}
		next := s.evaluate(g)
		timer.Reset(next)
		select {
		case <-s.quit:
			s.shutdown()
			return
		case <-s.wake:
		case <-timer.C:
		}
	}
}

// evaluate makes the transitions the clock and the meter call for, and
// returns how long until it should look again.
func (s *Session) evaluate(g *generation) time.Duration {
	now := time.Now()
	timeout := s.negotiated(g)
	confirmed := g.meter.confirmedAt()
	quiet := timeout / 2
	grace := s.grace(timeout)
	cur := s.State()
	fresh := !confirmed.IsZero() && now.Sub(confirmed) < quiet
	switch {
	case g.hasSess && g.authDone && fresh:
		if cur != Safe {
			s.transition(Event{State: Safe, SessionID: g.id, At: now})
		}
		return confirmed.Add(quiet).Sub(now) + time.Millisecond
	case g.id == 0:
		// A new generation not granted yet: nothing to lose.
		return timeout / 10
	case cur == Safe:
		err := g.lastErr
		if err == nil || g.hasSess {
			err = fmt.Errorf("session: no reply from the server for %v", now.Sub(confirmed).Round(time.Millisecond))
		}
		s.transition(Event{State: Jeopardy, SessionID: g.id, Err: err, At: now})
		fallthrough
	default:
		deadline := confirmed.Add(grace)
		if !now.Before(deadline) {
			s.lose(g, ErrGraceExpired)
			return time.Millisecond
		}
		return min(deadline.Sub(now)+time.Millisecond, timeout/10)
	}
}

func (s *Session) negotiated(g *generation) time.Duration {
	if ms := g.meter.timeout.Load(); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return s.cfg.SessionTimeout
}

func (s *Session) grace(timeout time.Duration) time.Duration {
	g := s.cfg.GracePeriod
	if g == 0 {
		g = timeout * 9 / 10
	}
	return min(g, timeout)
}

// lose ends generation g for cause and starts the next one; it returns
// the new generation (g itself when the Session is closing).
func (s *Session) lose(g *generation, cause error) *generation {
	s.transition(Event{State: Lost, SessionID: g.id, Err: cause, At: time.Now()})
	g.cancel(cause)
	s.closeConn(g)
	ng, err := s.newGeneration(g.n + 1)
	if err != nil {
		// zk.Connect fails only for an empty server list, checked at Open.
		panic(fmt.Sprintf("session: reconnect: %v", err))
	}
	s.mu.Lock()
	s.mu.gen = ng
	s.mu.Unlock()
	return ng
}

// closeConn closes g's connection without holding up run: go-zookeeper's
// Close waits up to a second for its closeSession to be sent.
func (s *Session) closeConn(g *generation) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		g.conn.Close()
	}()
}

func (s *Session) transition(e Event) { s.transitionForce(e, false) }

// transitionForce reports e; a repeated state is reported only if force.
func (s *Session) transitionForce(e Event, force bool) {
	s.mu.Lock()
	if s.mu.state == e.State && !force {
		s.mu.Unlock()
		return
	}
	s.mu.state = e.State
	s.state.Store(int32(e.State))
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
	s.mu.Unlock()
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(e)
	}
}

func (s *Session) shutdown() {
	s.mu.Lock()
	g := s.mu.gen
	s.mu.Unlock()
	s.transitionForce(Event{State: Lost, SessionID: g.id, Err: ErrClosed, At: time.Now()}, true)
	g.cancel(ErrClosed)
	s.closeConn(g)
}

// Close ends the session (its ephemeral nodes go with it), cancels its
// contexts with ErrClosed, and waits for everything the Session started.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.mu.closed = true
	s.mu.Unlock()
	close(s.quit)
	<-s.done
	s.wg.Wait()
	return nil
}

// State is the current state.
func (s *Session) State() State { return State(s.state.Load()) }

// Conn is the current session's connection. After a Lost it is the new
// session's; a caller that must not act on a later session than the one
// it started on uses Current.
func (s *Session) Conn() *zk.Conn {
	c, _ := s.Current()
	return c
}

// Context is cancelled when the current session is lost; its cause
// (context.Cause) is ErrExpired, ErrGraceExpired or ErrClosed.
func (s *Session) Context() context.Context {
	_, ctx := s.Current()
	return ctx
}

// Current returns the current session's connection and context together:
// whatever is done on conn while ctx is not done is done on one session.
func (s *Session) Current() (*zk.Conn, context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.gen.conn, s.mu.gen.ctx
}

// SessionID is the current session's id (0 between a Lost and the next
// session).
func (s *Session) SessionID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.state != Safe && s.mu.state != Jeopardy {
		return 0
	}
	return s.mu.gen.conn.SessionID()
}

// Servers are the configured server addresses.
func (s *Session) Servers() []string { return append([]string(nil), s.cfg.Servers...) }

// Auth is the configured credentials.
func (s *Session) Auth() []Auth { return append([]Auth(nil), s.cfg.Auth...) }

// Timeout is the session timeout the server granted (the requested one
// until a server answered).
func (s *Session) Timeout() time.Duration {
	s.mu.Lock()
	g := s.mu.gen
	s.mu.Unlock()
	return s.negotiated(g)
}

// ConfirmedAt is when the server last certainly heard from the current
// session: the send time of the latest request it answered.
func (s *Session) ConfirmedAt() time.Time {
	s.mu.Lock()
	g := s.mu.gen
	s.mu.Unlock()
	return g.meter.confirmedAt()
}

// WaitSafe returns nil at once when the session is Safe; otherwise it
// waits until it is, or until ctx ends (then context.Cause(ctx)). Work
// that needs a lock calls it with the lock's context before each step:
// it pauses in jeopardy and stops once the lock is lost.
func (s *Session) WaitSafe(ctx context.Context) error {
	for {
		s.mu.Lock()
		st, ch, closed := s.mu.state, s.mu.changed, s.mu.closed
		s.mu.Unlock()
		if st == Safe {
			return nil
		}
		if closed {
			return ErrClosed
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ch:
		}
	}
}

// Changed returns a channel closed at the next transition, for callers
// that wait on several things at once.
func (s *Session) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.changed
}
