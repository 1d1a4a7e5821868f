package session

import (
	"slices"
	"sync"
	"time"
)

// Clock is injected so tests control time.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

var _ Clock = SystemClock{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Tracker decides expiry. Only the Raft leader's member consults Expired;
// every member keeps it fed from applied commands (createSession, the
// keep-alive batches, closeSession) so that any member can take over, and a
// member that becomes leader calls ExtendAll before asking for expiries.
//
// Deadlines are rounded up to the next multiple of tick, as ZooKeeper's
// ExpiryQueue does: (t/tick + 1) * tick, so a time already on a tick boundary
// moves to the following one. Rounding puts sessions into buckets so a caller
// that polls Expired once per tick sees each bucket expire at once.
//
// The tracker is not replicated state; it reads the injected clock and must
// never be consulted from Raft apply for a decision.
//
// Safe for concurrent use.
type Tracker struct {
	clock Clock
	tick  int64 // nanoseconds; <= 0 disables rounding

	// mu guards the session table. It is a leaf lock: no other lock is taken
	// while holding it, and the clock is read before it is acquired.
	mu struct {
		sync.Mutex
		sessions map[int64]*tracked
	}
}

type tracked struct {
	timeout  time.Duration
	deadline int64 // Unix nanoseconds, rounded up to a tick multiple
	// closing is set once the session's expiry has been proposed; Expired
	// skips it until Touch, Add or ExtendAll clears it or Remove drops it.
	closing bool
}

// NewTracker returns an empty tracker reading clock and rounding deadlines up
// to multiples of tick.
func NewTracker(clock Clock, tick time.Duration) *Tracker {
	t := &Tracker{clock: clock, tick: int64(tick)}
	t.mu.sessions = make(map[int64]*tracked)
	return t
}

// roundUp returns the next multiple of tick strictly after ns, as
// ExpiryQueue.roundToNextInterval does.
func (t *Tracker) roundUp(ns int64) int64 {
	if t.tick <= 0 {
		return ns
	}
	q := ns / t.tick
	if ns%t.tick < 0 { // floor division for times before the epoch
		q--
	}
	return (q + 1) * t.tick
}

func (t *Tracker) now() int64 { return t.clock.Now().UnixNano() }

// Add tracks a new or restored session with deadline now + timeout. Adding a
// known session replaces its timeout and deadline and clears its closing mark.
func (t *Tracker) Add(sessionID int64, timeout time.Duration) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := &tracked{timeout: timeout}
	t.mu.sessions[sessionID] = e
	t.extendLocked(e, now)
}

// Touch gives each known session a deadline of now + its timeout and clears
// its closing mark. Unknown ids are ignored.
func (t *Tracker) Touch(sessionIDs ...int64) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range sessionIDs {
		if e, ok := t.mu.sessions[id]; ok {
			t.extendLocked(e, now)
		}
	}
}

// Remove stops tracking sessionID (closed or expired).
func (t *Tracker) Remove(sessionID int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.mu.sessions, sessionID)
}

// ExtendAll gives every session a deadline of now + its timeout. The caller
// invokes it on becoming leader so healthy sessions survive failover. It also
// clears every closing mark: an expiry proposed under an earlier leadership
// may have been dropped, so the new leader decides afresh.
func (t *Tracker) ExtendAll() {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.mu.sessions {
		t.extendLocked(e, now)
	}
}

// extendLocked sets e's deadline to now + its timeout, rounded up, and clears
// its closing mark.
func (t *Tracker) extendLocked(e *tracked, now int64) {
	e.deadline = t.roundUp(now + int64(e.timeout))
	e.closing = false
}

// Expired returns the sessions whose deadline is <= now and that are not
// marked closing, sorted ascending. It does not remove them: the caller
// proposes their expiry, calls MarkClosing, and calls Remove once the
// closeSession command is applied.
func (t *Tracker) Expired() []int64 {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []int64
	for id, e := range t.mu.sessions {
		if !e.closing && e.deadline <= now {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// MarkClosing marks a session whose expiry has been proposed so Expired does
// not report it again until Remove or Touch. It returns false if the session
// is unknown.
func (t *Tracker) MarkClosing(sessionID int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.mu.sessions[sessionID]
	if ok {
		e.closing = true
	}
	return ok
}

// Timeout returns the session's negotiated timeout and whether it is known.
func (t *Tracker) Timeout(sessionID int64) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.mu.sessions[sessionID]
	if !ok {
		return 0, false
	}
	return e.timeout, true
}

// Len returns the number of tracked sessions.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.mu.sessions)
}
