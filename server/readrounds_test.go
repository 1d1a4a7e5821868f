package server

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// asker is a readRounds index function the test steps by hand: each call
// takes the next number (1, 2, ...), says so on started, and returns that
// number once the test sends on its release channel.
type asker struct {
	mu       sync.Mutex
	n        int
	releases map[int]chan error
	started  chan int
}

func newAsker() *asker {
	return &asker{releases: map[int]chan error{}, started: make(chan int, 16)}
}

func (a *asker) release(n int) chan error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch, ok := a.releases[n]
	if !ok {
		ch = make(chan error, 1)
		a.releases[n] = ch
	}
	return ch
}

func (a *asker) index() (any, error) {
	a.mu.Lock()
	a.n++
	n := a.n
	a.mu.Unlock()
	a.started <- n
	if err := <-a.release(n); err != nil {
		return nil, err
	}
	return n, nil
}

func goNow(fn func()) bool { go fn(); return true }

// TestReadRoundsNeverServeFromAnEarlierReadIndex: a read that arrives
// while the rounds in flight are already asked is served by a ReadIndex
// asked after it arrived, never by one of those, even when one of them
// completes first.
func TestReadRoundsNeverServeFromAnEarlierReadIndex(t *testing.T) {
	a := newAsker()
	rr := &readRounds{index: a.index, goroutine: goNow}

	// Fill the rounds in flight: each read asks its own ReadIndex.
	var early []*readRound
	for i := 1; i <= maxReadRounds; i++ {
		early = append(early, rr.join())
		if n := <-a.started; n != i {
			t.Fatalf("ReadIndex %d started, want %d", n, i)
		}
	}
	// Two reads arrive now: they share the next round, not asked yet.
	late1, late2 := rr.join(), rr.join()
	if late1 != late2 {
		t.Fatal("two reads arriving while the rounds are in flight got different rounds")
	}
	for _, r := range early {
		if r == late1 {
			t.Fatal("a read arriving after a round was asked joined it")
		}
	}

	// ReadIndex 1 completes: its read is served by it; the late reads'
	// round is asked in its place (ReadIndex maxReadRounds+1) and they
	// wait for that one.
	a.release(1) <- nil
	<-early[0].done
	if early[0].err != nil || early[0].result != 1 {
		t.Fatalf("first read: result %v, err %v; want ReadIndex 1", early[0].result, early[0].err)
	}
	next := maxReadRounds + 1
	if n := <-a.started; n != next {
		t.Fatalf("ReadIndex %d started after the first ended, want %d", n, next)
	}
	select {
	case <-late1.done:
		t.Fatalf("a late read was served (by ReadIndex %v) before the ReadIndex asked after it completed", late1.result)
	default:
	}
	for i := 2; i <= maxReadRounds; i++ {
		a.release(i) <- nil
		<-early[i-1].done
		if early[i-1].result != i {
			t.Fatalf("read %d served by ReadIndex %v, want %d", i, early[i-1].result, i)
		}
	}
	select {
	case <-late1.done:
		t.Fatalf("a late read was served (by ReadIndex %v) before its own ReadIndex completed", late1.result)
	default:
	}
	a.release(next) <- nil
	<-late1.done
	if late1.err != nil || late1.result != next {
		t.Fatalf("late reads: result %v, err %v; want ReadIndex %d", late1.result, late1.err, next)
	}

	// Nothing in flight now: a new read asks at once.
	r := rr.join()
	if n := <-a.started; n != next+1 {
		t.Fatalf("ReadIndex %d started for a read on idle rounds, want %d", n, next+1)
	}
	// A failed ReadIndex fails its reads, and the rounds go on.
	fail := errors.New("no leader")
	a.release(next + 1) <- fail
	<-r.done
	if !errors.Is(r.err, fail) {
		t.Fatalf("read of a failed round: err %v, want %v", r.err, fail)
	}
	r = rr.join()
	<-a.started
	a.release(next + 2) <- nil
	<-r.done
	if r.err != nil || r.result != next+2 {
		t.Fatalf("read after a failed round: result %v, err %v", r.result, r.err)
	}
}

// TestReadRoundsConcurrent: many readers at once, ReadIndexes completing
// in any order. Every read is served by a ReadIndex that started after the
// read arrived, and no more than maxReadRounds are ever in flight.
func TestReadRoundsConcurrent(t *testing.T) {
	var started, inFlight, most atomic.Int64
	rr := &readRounds{goroutine: goNow, index: func() (any, error) {
		n := started.Add(1)
		cur := inFlight.Add(1)
		for {
			m := most.Load()
			if cur <= m || most.CompareAndSwap(m, cur) {
				break
			}
		}
		// Let others run and join while this one is in flight.
		for range 3 {
			runtime.Gosched()
		}
		inFlight.Add(-1)
		return n, nil
	}}
	const readers, reads = 16, 500
	var wg sync.WaitGroup
	errs := make(chan string, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range reads {
				before := started.Load()
				r := rr.join()
				<-r.done
				if n := r.result.(int64); n <= before {
					errs <- "a read was served by a ReadIndex that started before it arrived"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if m := most.Load(); m > maxReadRounds {
		t.Fatalf("%d ReadIndexes in flight at once, at most %d allowed", m, maxReadRounds)
	}
	t.Logf("%d reads took %d ReadIndexes", readers*reads, started.Load())
}
