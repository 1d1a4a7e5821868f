package server

import (
	"sync"
	"testing"
	"time"
)

// fakeTimers stands in for the clock and the server's afterFunc of a
// tokenBucket: the test moves the clock and fires the timers itself.
type fakeTimers struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
	added  chan struct{} // one send per timer started
	refuse bool
}

type fakeTimer struct {
	d  time.Duration
	fn func()
}

func newFakeTimers(now time.Time) *fakeTimers {
	return &fakeTimers{now: now, added: make(chan struct{}, 100)}
}

func (f *fakeTimers) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeTimers) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *fakeTimers) after(d time.Duration, fn func()) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse {
		return false
	}
	f.timers = append(f.timers, fakeTimer{d, fn})
	f.added <- struct{}{}
	return true
}

func (f *fakeTimers) started() []fakeTimer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeTimer(nil), f.timers...)
}

// TestCellRateLetsGoOnAGrid: a cell's request rate admits its burst at
// once; the requests over it wait for their debt rounded up to the next
// point of the rateGrid grid, those due at one point on one timer, so
// that they are let go together; the rate refills with time; a closed
// connection stops waiting; a stopping server lets the waiters go.
func TestCellRateLetsGoOnAGrid(t *testing.T) {
	// 3 ms past a grid point: 17 requests past the burst owe 1..17 ms, all
	// due by the point 17 ms away (1000.020 s), one timer for them; the
	// 18th owes 18 ms, due at 1000.021 s: the next point, 1000.040 s.
	start := time.Unix(1000, 0).Add(3 * time.Millisecond)
	b, f, results := letGoAtTwoPoints(t, start, 1000, 17, 17*time.Millisecond, 37*time.Millisecond)
	never := make(chan struct{})

	// Two seconds later the debts are paid and the bucket is full again
	// (it holds at most a second's tokens): a burst passes at once.
	f.advance(2 * time.Second)
	for i := 0; i < 1000; i++ {
		if !b.wait(never, nil) {
			t.Fatalf("request %d of the refilled burst refused", i)
		}
	}
	if n := len(f.started()); n != 2 {
		t.Fatalf("the refilled burst started %d timers, want none more than the 2", n)
	}

	// A connection that closes while it waits stops waiting.
	done := make(chan struct{})
	go func() { results <- b.wait(done, nil) }()
	<-f.added
	close(done)
	if <-results {
		t.Fatal("a closed connection's wait reported a token")
	}

	// A stopping server starts no timer: the waiters go at once.
	f.mu.Lock()
	f.refuse = true
	f.mu.Unlock()
	f.advance(time.Hour) // a new grid point, with a debt still owed
	for i := 0; i < 1000; i++ {
		b.wait(never, nil)
	}
	if !b.wait(never, nil) {
		t.Fatal("a request over the rate of a stopping server refused")
	}

	// Without a rate nothing waits.
	b.setRate(0)
	if !b.wait(never, nil) {
		t.Fatal("a request without a rate refused")
	}
}

// TestCellRateGridFollowsTheRate: the release grid holds rateGridBatch
// requests' worth of the rate, between 20 and 100 ms; at a low rate the
// requests due within one coarse step share one timer (where a 20 ms grid
// would have started five), and the rate is kept: a request whose debt
// runs past the point waits for the next one.
func TestCellRateGridFollowsTheRate(t *testing.T) {
	for _, c := range []struct {
		rate int64
		want time.Duration
	}{
		{1, 100 * time.Millisecond},
		{60, 100 * time.Millisecond},
		{80, 100 * time.Millisecond},
		{100, 80 * time.Millisecond},
		{200, 40 * time.Millisecond},
		{400, 20 * time.Millisecond},
		{1000, 20 * time.Millisecond},
	} {
		if got := rateGrid(c.rate); got != c.want {
			t.Errorf("rateGrid(%d) = %v, want %v", c.rate, got, c.want)
		}
	}

	// 1 ms past a point of the 100 ms grid of a rate of 60 a second:
	// debts of 1/60 .. 5/60 s, due by 1000.085 s, all at the point 1000.100
	// s, on one timer; the sixth owes 100 ms, due at 1000.101 s, past the
	// point, so it waits for the next one (1000.200 s).
	start := time.Unix(1000, 0).Add(time.Millisecond)
	letGoAtTwoPoints(t, start, 60, 5, 99*time.Millisecond, 199*time.Millisecond)
}

// TestCellRateSharesAPointBetweenConnections: two connections let go at
// one point come back with their next requests at once; the tokens the
// bucket refilled while they waited are shared between them (each takes
// at most its share at once, then waits for the next point without a
// token), not all taken by the first to come back.
func TestCellRateSharesAPointBetweenConnections(t *testing.T) {
	start := time.Unix(1000, 0).Add(time.Millisecond)
	f := newFakeTimers(start)
	b := &tokenBucket{now: f.clock, after: f.after}
	b.setRate(60) // a 100 ms grid
	never := make(chan struct{})
	for i := 0; i < 60; i++ {
		b.wait(never, nil)
	}
	var ta, tb rateTurn
	results := make(chan bool, 4)
	go func() { results <- b.wait(never, &ta) }()
	<-f.added
	go func() { results <- b.wait(never, &tb) }()
	waitFor(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.mu.tokens <= -2
	})
	f.advance(99 * time.Millisecond) // the point, 1000.100 s
	f.started()[0].fn()
	for i := 0; i < 2; i++ {
		if !<-results {
			t.Fatal("a connection's request refused at the point")
		}
	}
	// 1000.100 s: -2 + 5.94 tokens refilled, 2 connections let go: a
	// share of 2 each.
	if ta.epoch != tb.epoch || ta.epoch != time.Unix(1000, 0).Add(100*time.Millisecond).UnixNano() {
		t.Fatalf("turns after the point: %+v %+v", ta, tb)
	}
	for i := 0; i < 2; i++ {
		if !b.wait(never, &ta) {
			t.Fatalf("connection a's request %d within its share refused", i)
		}
	}
	if n := len(f.started()); n != 1 {
		t.Fatalf("connection a's share started %d timers, want none more than the 1", n)
	}
	// a's third is past its share: it waits for the next point, with
	// tokens still in the bucket.
	go func() { results <- b.wait(never, &ta) }()
	select {
	case <-f.added:
	case ok := <-results:
		t.Fatalf("connection a's request past its share returned (%v) at once", ok)
	}
	if timers := f.started(); len(timers) != 2 || timers[1].d != 100*time.Millisecond {
		t.Fatalf("connection a past its share: timers %v, want a second of 100ms", timers)
	}
	// b's first goes at once: the tokens a left.
	done := make(chan bool, 1)
	go func() { done <- b.wait(never, &tb) }()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("connection b's request refused")
		}
	case ok := <-results:
		t.Fatalf("connection a's request past its share returned (%v) before the next point", ok)
	case <-time.After(10 * time.Second):
		t.Fatal("connection b's first request waited: connection a took the point's tokens")
	}
	// b's second owes part of a token: the next point too, on a's timer.
	go func() { results <- b.wait(never, &tb) }()
	waitFor(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		p := b.mu.release[time.Unix(1000, 0).Add(200*time.Millisecond).UnixNano()]
		return p != nil && p.n == 2
	})
	if n := len(f.started()); n != 2 {
		t.Fatalf("%d timers, want b's second on a's", n)
	}
	f.advance(100 * time.Millisecond)
	f.started()[1].fn()
	for i := 0; i < 2; i++ {
		if !<-results {
			t.Fatal("a request refused at the next point")
		}
	}
}

// letGoAtTwoPoints spends the burst of a bucket of rate tokens a second
// at start (a second's worth: no timer), then checks the grid: waiters
// requests at that instant wait on one timer of first, the request after
// them on a second timer of second, and each timer lets go its own
// requests and no other. It returns the bucket, its timers and the
// channel the requests' results came on.
func letGoAtTwoPoints(t *testing.T, start time.Time, rate int64, waiters int, first, second time.Duration) (*tokenBucket, *fakeTimers, chan bool) {
	t.Helper()
	f := newFakeTimers(start)
	b := &tokenBucket{now: f.clock, after: f.after}
	b.setRate(rate)
	never := make(chan struct{})
	for i := int64(0); i < rate; i++ {
		if !b.wait(never, nil) {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	if n := len(f.started()); n != 0 {
		t.Fatalf("the burst started %d timers", n)
	}
	results := make(chan bool, waiters+1)
	for i := 0; i < waiters; i++ {
		go func() { results <- b.wait(never, nil) }()
	}
	<-f.added
	// Every waiter has taken its token (its debt) before it waits.
	waitFor(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.mu.tokens <= -float64(waiters)
	})
	timers := f.started()
	if len(timers) != 1 || timers[0].d != first {
		t.Fatalf("timers for %d requests due by one grid point: %v, want one of %v", waiters, timers, first)
	}
	select {
	case ok := <-results:
		t.Fatalf("a request over the rate returned (%v) before its grid point", ok)
	default:
	}
	go func() { results <- b.wait(never, nil) }()
	<-f.added
	if timers = f.started(); len(timers) != 2 || timers[1].d != second {
		t.Fatalf("the request due after the first point: timers %v, want a second of %v", timers, second)
	}
	timers[0].fn()
	for i := 0; i < waiters; i++ {
		if !<-results {
			t.Fatalf("waiter %d refused", i)
		}
	}
	select {
	case ok := <-results:
		t.Fatalf("the request due at the second point returned (%v) at the first", ok)
	default:
	}
	timers[1].fn()
	if !<-results {
		t.Fatal("the request due at the second point refused")
	}
	return b, f, results
}
