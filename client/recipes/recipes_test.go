package recipes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/fence"
	"github.com/zkraft/zkraft/client/recipes"
	"github.com/zkraft/zkraft/client/session"
	"github.com/zkraft/zkraft/internal/clienttest"
	"github.com/zkraft/zkraft/internal/tcpproxy"
)

const timeout = 4 * time.Second // the least both servers grant with a 2 s tick

func open(t *testing.T, addr string) *session.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := session.Open(ctx, session.Config{Servers: []string{addr}, SessionTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// dir is a fresh path for the running test.
func dir(t *testing.T) string { return "/" + t.Name() }

func TestRecipes(t *testing.T) {
	clienttest.Each(t, func(t *testing.T, tg *clienttest.Target) {
		for _, c := range []struct {
			name string
			f    func(*testing.T, *clienttest.Target)
		}{
			{"LockTokensStrictlyIncrease", testLockTokens},
			{"LockWaitersWatchOnlyTheirPredecessor", testLockNoHerd},
			{"LockCancelledAcquireLeavesNothing", testLockCancel},
			{"LockLostBeforeTheNextGrant", testLockLostBeforeNext},
			{"LockNodeDeletedEndsTheLease", testLockNodeDeleted},
			{"LockDelay", testLockDelay},
			{"RWLock", testRWLock},
			{"Semaphore", testSemaphore},
			{"ElectionObserve", testElection},
			{"Latch", testLatch},
			{"Barrier", testBarrier},
			{"DoubleBarrier", testDoubleBarrier},
			{"Queue", testQueue},
			{"Counter", testCounter},
			{"Registry", testRegistry},
		} {
			t.Run(c.name, func(t *testing.T) { c.f(t, tg) })
		}
	})
}

// Holders never overlap, and every grant's token is above the previous
// holder's, so a Guard accepts each in turn.
func testLockTokens(t *testing.T, tg *clienttest.Target) {
	guard := fence.NewGuard(nil)
	var holders atomic.Int32
	var mu sync.Mutex
	var tokens []int64
	var wg sync.WaitGroup
	const workers, rounds = 4, 8
	for w := 0; w < workers; w++ {
		s := open(t, tg.Addr())
		lock := recipes.NewLock(s, dir(t))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				lease, err := lock.Acquire(within(t, 30*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				if n := holders.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				if err := guard.Do("res", lease.Token, nil); err != nil {
					t.Errorf("guard refused the holder: %v", err)
				}
				mu.Lock()
				if len(tokens) > 0 && lease.Token <= tokens[len(tokens)-1] {
					t.Errorf("token %x not above the previous holder's %x", lease.Token, tokens[len(tokens)-1])
				}
				tokens = append(tokens, lease.Token)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				holders.Add(-1)
				if err := lease.Release(); err != nil {
					t.Error(err)
				}
				if !errors.Is(context.Cause(lease.Context()), recipes.ErrReleased) {
					t.Errorf("cause after release: %v", context.Cause(lease.Context()))
				}
			}
		}()
	}
	wg.Wait()
	if len(tokens) != workers*rounds {
		t.Fatalf("%d grants, want %d", len(tokens), workers*rounds)
	}
}

// Three waiters queue behind a holder: each watches exactly the node
// before its own, and nothing watches the directory. (The holder's lease
// watches its own node.)
func testLockNoHerd(t *testing.T, tg *clienttest.Target) {
	d := dir(t)
	holder, err := recipes.NewLock(open(t, tg.Addr()), d).Acquire(within(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *recipes.Lease, 3)
	for i := 0; i < 3; i++ {
		s := open(t, tg.Addr())
		go func() {
			l, err := recipes.NewLock(s, d).Acquire(within(t, 30*time.Second))
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
	}
	obs := dial(t, tg.Addr())
	deadline := time.Now().Add(10 * time.Second)
	for {
		kids, _, err := obs.Children(d)
		if err != nil {
			t.Fatal(err)
		}
		sort.Slice(kids, func(i, j int) bool { return kids[i][len(kids[i])-10:] < kids[j][len(kids[j])-10:] })
		w := clienttest.Watchers(t, tg)
		ok := len(kids) == 4
		var report []string
		for p, n := range w {
			if strings.HasPrefix(p, d) {
				report = append(report, fmt.Sprintf("%s:%d", p, n))
			}
		}
		if ok {
			for i, k := range kids {
				want := 1 // its successor
				switch i {
				case 0:
					want = 2 // and the holder's lease, which watches its own node
				case 3:
					want = 0 // the last has no successor
				}
				if w[d+"/"+k] != want {
					ok = false
				}
			}
			if _, watched := w[d]; watched {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("children %v, watches %v: want one watch on each node but the last, none on %s", kids, report, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := holder.Release(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		select {
		case l := <-got:
			l.Release()
		case <-time.After(20 * time.Second):
			t.Fatal("a waiter never got the lock")
		}
	}
}

// An Acquire whose context ends leaves no node behind; the lock still
// works.
func testLockCancel(t *testing.T, tg *clienttest.Target) {
	d := dir(t)
	s := open(t, tg.Addr())
	holder, err := recipes.NewLock(s, d).Acquire(within(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_, err = recipes.NewLock(open(t, tg.Addr()), d).Acquire(within(t, 300*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire under a held lock: %v", err)
	}
	kids, _, err := dial(t, tg.Addr()).Children(d)
	if err != nil || len(kids) != 1 {
		t.Fatalf("after the cancelled acquire: %v %v", kids, err)
	}
	holder.Release()
	holder.Release() // twice is fine
	if l, err := recipes.NewLock(s, d).Acquire(within(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	} else {
		l.Release()
	}
}

// The holder is partitioned from the servers and stops reading its
// context (as a paused process would): its lease's context is cancelled
// before the lock is granted to the next contender; the next holder's
// token is higher; the guard takes the new holder's write and refuses the
// old holder's late one.
func testLockLostBeforeNext(t *testing.T, tg *clienttest.Target) {
	d := dir(t)
	p := tcpproxy.New(t, tg.Addr())
	a := open(t, p.Addr())
	b := open(t, tg.Addr())
	guard := fence.NewGuard(nil)
	leaseA, err := recipes.NewLock(a, d).Acquire(within(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := guard.Do("ledger", leaseA.Token, nil); err != nil {
		t.Fatal(err)
	}
	type grant struct {
		lease *recipes.Lease
		at    time.Time
	}
	granted := make(chan grant, 1)
	go func() {
		l, err := recipes.NewLock(b, d).Acquire(within(t, 30*time.Second))
		if err != nil {
			t.Error(err)
		}
		granted <- grant{l, time.Now()}
	}()
	time.Sleep(100 * time.Millisecond) // b queues behind a
	p.Block()
	var lostAt time.Time
	select {
	case <-leaseA.Done():
		lostAt = time.Now()
	case <-time.After(3 * timeout):
		t.Fatal("the partitioned holder's lease was never cancelled")
	}
	if !errors.Is(context.Cause(leaseA.Context()), session.ErrGraceExpired) {
		t.Fatalf("cause %v", context.Cause(leaseA.Context()))
	}
	var g grant
	select {
	case g = <-granted:
	case <-time.After(4 * timeout):
		t.Fatal("the next contender never got the lock")
	}
	if g.lease == nil {
		t.FailNow()
	}
	defer g.lease.Release()
	if !lostAt.Before(g.at) {
		t.Fatalf("the old holder learned it lost the lock at %v, after the new holder got it at %v", lostAt, g.at)
	}
	t.Logf("old holder told %v before the next grant", g.at.Sub(lostAt).Round(time.Millisecond))
	if g.lease.Token <= leaseA.Token {
		t.Fatalf("new token %x not above %x", g.lease.Token, leaseA.Token)
	}
	if err := guard.Do("ledger", g.lease.Token, nil); err != nil {
		t.Fatalf("new holder refused: %v", err)
	}
	if err := guard.Do("ledger", leaseA.Token, nil); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("old holder's late write: %v, want ErrStale", err)
	}
	p.Unblock()
	if err := leaseA.Release(); err != nil {
		t.Fatalf("release of a lost lease: %v", err)
	}
}

// An operator deletes the holder's lock node: the lease ends with
// ErrNodeGone, and the next contender holds with a higher token.
func testLockNodeDeleted(t *testing.T, tg *clienttest.Target) {
	d := dir(t)
	lease, err := recipes.NewLock(open(t, tg.Addr()), d).Acquire(within(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(t, tg.Addr()).Delete(lease.Path, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease outlived its node")
	}
	if !errors.Is(context.Cause(lease.Context()), recipes.ErrNodeGone) {
		t.Fatalf("cause %v", context.Cause(lease.Context()))
	}
	if err := lease.Release(); err != nil {
		t.Fatal(err)
	}
	next, err := recipes.NewLock(open(t, tg.Addr()), d).Acquire(within(t, 10*time.Second))
	if err != nil || next.Token <= lease.Token {
		t.Fatalf("next: %v %v", next, err)
	}
	next.Release()
}

// With lock-delay, the next holder waits out the delay after a holder's
// session ended without a release, and not after a release.
func testLockDelay(t *testing.T, tg *clienttest.Target) {
	d := dir(t)
	const delay = 1500 * time.Millisecond
	creds := new(clienttest.Creds)
	ctx := within(t, 20*time.Second)
	a, err := session.Open(ctx, session.Config{Servers: []string{tg.Addr()}, SessionTimeout: timeout, Dialer: creds.Dial})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := open(t, tg.Addr())
	leaseA, err := recipes.NewLock(a, d, recipes.WithLockDelay(delay)).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, passwd := creds.Session()
	start := time.Now()
	if err := clienttest.KillSession(tg.Addr(), id, passwd); err != nil {
		t.Fatal(err)
	}
	leaseB, err := recipes.NewLock(b, d, recipes.WithLockDelay(delay)).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < delay {
		t.Fatalf("granted %v after the holder's session ended, within the lock-delay %v", waited, delay)
	}
	<-leaseA.Done()
	start = time.Now()
	if err := leaseB.Release(); err != nil {
		t.Fatal(err)
	}
	leaseC, err := recipes.NewLock(b, d, recipes.WithLockDelay(delay)).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer leaseC.Release()
	if waited := time.Since(start); waited >= delay {
		t.Fatalf("waited %v after a clean release", waited)
	}
	if leaseC.Token <= leaseB.Token || leaseB.Token <= leaseA.Token {
		t.Fatalf("tokens %x %x %x", leaseA.Token, leaseB.Token, leaseC.Token)
	}
}

// Readers share; a writer excludes readers and writers; a reader that
// queues behind a waiting writer waits for it.
func testRWLock(t *testing.T, tg *clienttest.Target) {
	d := dir(t)
	s1, s2, s3 := open(t, tg.Addr()), open(t, tg.Addr()), open(t, tg.Addr())
	ctx := within(t, 30*time.Second)
	r1, err := recipes.NewRWLock(s1, d).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := recipes.NewRWLock(s2, d).RLock(ctx) // shared: granted at once
	if err != nil {
		t.Fatal(err)
	}
	wch := make(chan *recipes.Lease, 1)
	go func() {
		w, err := recipes.NewRWLock(s3, d).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		wch <- w
	}()
	waitChildren(t, tg, d, 3)
	rch := make(chan *recipes.Lease, 1)
	go func() {
		r, err := recipes.NewRWLock(s1, d).RLock(ctx)
		if err != nil {
			t.Error(err)
		}
		rch <- r
	}()
	waitChildren(t, tg, d, 4)
	select {
	case <-wch:
		t.Fatal("the writer got the lock while readers held it")
	case <-rch:
		t.Fatal("a reader got ahead of a waiting writer")
	case <-time.After(300 * time.Millisecond):
	}
	r1.Release()
	select {
	case <-wch:
		t.Fatal("the writer got the lock while a reader held it")
	case <-time.After(200 * time.Millisecond):
	}
	r2.Release()
	var w *recipes.Lease
	select {
	case w = <-wch:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer never got the lock")
	}
	select {
	case <-rch:
		t.Fatal("a reader got the lock while the writer held it")
	case <-time.After(200 * time.Millisecond):
	}
	if w.Token <= r2.Token {
		t.Fatalf("writer token %x not above the readers'", w.Token)
	}
	w.Release()
	select {
	case r := <-rch:
		if r.Token <= w.Token {
			t.Fatalf("reader after the writer has token %x <= %x", r.Token, w.Token)
		}
		r.Release()
	case <-time.After(10 * time.Second):
		t.Fatal("the last reader never got the lock")
	}
}

func waitChildren(t *testing.T, tg *clienttest.Target, path string, n int) {
	t.Helper()
	c := dial(t, tg.Addr())
	deadline := time.Now().Add(10 * time.Second)
	for {
		kids, _, err := c.Children(path)
		if err == nil && len(kids) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %v (%v), want %d children", path, kids, err, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// At most max leases at once; a lost session frees its lease.
func testSemaphore(t *testing.T, tg *clienttest.Target) {
	d := dir(t)
	const max = 2
	var held, peak atomic.Int32
	var wg sync.WaitGroup
	for w := 0; w < 5; w++ {
		s := open(t, tg.Addr())
		sem := recipes.NewSemaphore(s, d, max)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 4; i++ {
				l, err := sem.Acquire(within(t, 30*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				n := held.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(5 * time.Millisecond)
				held.Add(-1)
				l.Release()
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > max || p < 1 {
		t.Fatalf("peak %d holders for %d leases", p, max)
	}
	// Two holders, one of which loses its session: a third gets in.
	a := open(t, tg.Addr())
	l1, err := recipes.NewSemaphore(a, d, max).Acquire(within(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l2, err := recipes.NewSemaphore(open(t, tg.Addr()), d, max).Acquire(within(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release()
	third := make(chan *recipes.Lease, 1)
	go func() {
		l, err := recipes.NewSemaphore(open(t, tg.Addr()), d, max).Acquire(within(t, 30*time.Second))
		if err != nil {
			t.Error(err)
		}
		third <- l
	}()
	select {
	case <-third:
		t.Fatal("a third lease with two held")
	case <-time.After(300 * time.Millisecond):
	}
	a.Close()
	if !errors.Is(context.Cause(l1.Context()), session.ErrClosed) {
		t.Fatalf("lease cause after Close: %v", context.Cause(l1.Context()))
	}
	select {
	case l := <-third:
		l.Release()
	case <-time.After(10 * time.Second):
		t.Fatal("the closed session's lease was never freed")
	}
}

// Observers see every leader in turn with strictly increasing epochs, and
// no leader while nobody campaigns.
func testElection(t *testing.T, tg *clienttest.Target) {
	d := dir(t)
	obs := recipes.NewElection(open(t, tg.Addr()), d).Observe(within(t, 60*time.Second))
	defer obs.Close()
	next := func() recipes.Leader {
		t.Helper()
		select {
		case l, ok := <-obs.C:
			if !ok {
				t.Fatalf("observer ended: %v", obs.Err())
			}
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no leader change observed")
		}
		return recipes.Leader{}
	}
	if l := next(); l.Epoch != 0 {
		t.Fatalf("leader %+v before any candidate", l)
	}
	var prev int64
	var wg sync.WaitGroup
	leases := make(chan *recipes.Lease, 3)
	for i := 0; i < 3; i++ {
		s := open(t, tg.Addr())
		e := recipes.NewElection(s, d)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l, err := e.Campaign(within(t, 30*time.Second), []byte(fmt.Sprintf("candidate-%d", i)))
			if err != nil {
				t.Error(err)
				return
			}
			leases <- l
		}(i)
	}
	for i := 0; i < 3; i++ {
		l := next()
		if l.Epoch == 0 {
			l = next()
		}
		if l.Epoch <= prev || !bytes.HasPrefix(l.Value, []byte("candidate-")) {
			t.Fatalf("leader %q epoch %x after %x", l.Value, l.Epoch, prev)
		}
		var lease *recipes.Lease
		select {
		case lease = <-leases:
		case <-time.After(10 * time.Second):
			t.Fatal("observed a leader that never returned from Campaign")
		}
		if lease.Token != l.Epoch {
			t.Fatalf("the leader's term token %x, observed epoch %x", lease.Token, l.Epoch)
		}
		cur, err := recipes.NewElection(open(t, tg.Addr()), d).Leader(within(t, 5*time.Second))
		if err != nil || cur.Epoch != l.Epoch {
			t.Fatalf("Leader() = %+v %v, observed %+v", cur, err, l)
		}
		prev = l.Epoch
		lease.Release()
	}
	wg.Wait()
	if l := next(); l.Epoch != 0 {
		t.Fatalf("leader %+v after every candidate resigned", l)
	}
}

// Latches: one leads at a time; when it closes another takes over, with a
// higher epoch.
func testLatch(t *testing.T, tg *clienttest.Target) {
	d := dir(t)
	var latches []*recipes.Latch
	for i := 0; i < 3; i++ {
		l := recipes.NewLatch(open(t, tg.Addr()), d, []byte{byte('a' + i)})
		defer l.Close()
		latches = append(latches, l)
	}
	var prev int64
	closed := map[int]bool{}
	for round := 0; round < 3; round++ {
		var leader = -1
		var lease *recipes.Lease
		deadline := time.Now().Add(15 * time.Second)
		for leader < 0 && time.Now().Before(deadline) {
			n := 0
			for i, l := range latches {
				if closed[i] {
					continue
				}
				if ls := l.Leading(); ls != nil {
					leader, lease = i, ls
					n++
				}
			}
			if n > 1 {
				t.Fatalf("%d latches lead at once", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if leader < 0 {
			t.Fatalf("round %d: no latch leads", round)
		}
		got, err := latches[leader].Await(within(t, time.Second))
		if err != nil || got != lease {
			t.Fatalf("Await: %v %v", got, err)
		}
		if lease.Token <= prev {
			t.Fatalf("epoch %x after %x", lease.Token, prev)
		}
		prev = lease.Token
		latches[leader].Close()
		closed[leader] = true
		if lease.Context().Err() == nil {
			t.Fatal("a closed latch's term is still on")
		}
	}
}

func testBarrier(t *testing.T, tg *clienttest.Target) {
	p := dir(t) + "/gate"
	s := open(t, tg.Addr())
	bar := recipes.NewBarrier(s, p)
	if err := bar.Wait(within(t, time.Second)); err != nil {
		t.Fatalf("wait on a barrier never raised: %v", err)
	}
	if err := bar.Set(within(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	var released atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		b := recipes.NewBarrier(open(t, tg.Addr()), p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Wait(within(t, 20*time.Second)); err != nil {
				t.Error(err)
			}
			released.Add(1)
		}()
	}
	time.Sleep(300 * time.Millisecond)
	if released.Load() != 0 {
		t.Fatal("released while raised")
	}
	if err := bar.Remove(within(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if released.Load() != 3 {
		t.Fatalf("%d released", released.Load())
	}
}

// Nobody passes Enter before all have entered, nobody passes Leave before
// all have left; the barrier can be used again.
func testDoubleBarrier(t *testing.T, tg *clienttest.Target) {
	d := dir(t)
	const n = 3
	for round := 0; round < 2; round++ {
		var entered, leaving, left atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			b := recipes.NewDoubleBarrier(open(t, tg.Addr()), d, n)
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				time.Sleep(time.Duration(i) * 150 * time.Millisecond) // arrive apart
				if err := b.Enter(within(t, 20*time.Second)); err != nil {
					t.Error(err)
					return
				}
				entered.Add(1)
				time.Sleep(time.Duration(n-i) * 100 * time.Millisecond) // leave apart
				leaving.Add(1)
				if err := b.Leave(within(t, 20*time.Second)); err != nil {
					t.Error(err)
					return
				}
				if l := leaving.Load(); l != n {
					t.Errorf("through Leave with %d of %d leaving", l, n)
				}
				left.Add(1)
			}(i)
		}
		// Before the last arrives (at 300 ms) nobody is through Enter.
		time.Sleep(200 * time.Millisecond)
		if e := entered.Load(); e != 0 {
			t.Fatalf("round %d: %d through Enter before all arrived", round, e)
		}
		wg.Wait()
		if left.Load() != n {
			t.Fatalf("round %d: %d left", round, left.Load())
		}
	}
}

// Every item put is taken exactly once, in order for one consumer; Take
// waits for an item.
func testQueue(t *testing.T, tg *clienttest.Target) {
	d := dir(t)
	s := open(t, tg.Addr())
	q := recipes.NewQueue(s, d)
	ctx := within(t, 30*time.Second)
	for i := 0; i < 5; i++ {
		if _, err := q.Put(ctx, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := q.Len(ctx); err != nil || n != 5 {
		t.Fatalf("len %d %v", n, err)
	}
	var last int64
	for i := 0; i < 5; i++ {
		it, err := q.Take(ctx)
		if err != nil || string(it.Data) != fmt.Sprint(i) || it.Zxid <= last {
			t.Fatalf("take %d: %q zxid %x (after %x) %v", i, it.Data, it.Zxid, last, err)
		}
		last = it.Zxid
	}
	// Concurrent consumers and producers: each item exactly once.
	const items = 60
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for c := 0; c < 3; c++ {
		cq := recipes.NewQueue(open(t, tg.Addr()), d)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := len(seen) >= items
				mu.Unlock()
				if done {
					return
				}
				tctx, cancel := context.WithTimeout(ctx, time.Second)
				it, err := cq.Take(tctx)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[string(it.Data)]++
				mu.Unlock()
			}
		}()
	}
	pq := recipes.NewQueue(open(t, tg.Addr()), d)
	for i := 0; i < items; i++ {
		if _, err := pq.Put(ctx, []byte(fmt.Sprintf("item-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i := 0; i < items; i++ {
		if n := seen[fmt.Sprintf("item-%d", i)]; n != 1 {
			t.Fatalf("item-%d taken %d times", i, n)
		}
	}
}

// Concurrent adds lose nothing; CompareAndSet fails on a stale version.
func testCounter(t *testing.T, tg *clienttest.Target) {
	p := dir(t) + "/hits"
	var wg sync.WaitGroup
	const workers, adds = 4, 25
	for w := 0; w < workers; w++ {
		c := recipes.NewCounter(open(t, tg.Addr()), p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < adds; i++ {
				if _, err := c.Add(within(t, 30*time.Second), 2); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	c := recipes.NewCounter(open(t, tg.Addr()), p)
	ctx := within(t, 10*time.Second)
	v, version, err := c.Get(ctx)
	if err != nil || v != 2*workers*adds {
		t.Fatalf("value %d %v, want %d", v, err, 2*workers*adds)
	}
	if ok, err := c.CompareAndSet(ctx, version, 7); err != nil || !ok {
		t.Fatalf("CAS at the current version: %v %v", ok, err)
	}
	if ok, err := c.CompareAndSet(ctx, version, 8); err != nil || ok {
		t.Fatalf("CAS at a stale version: %v %v", ok, err)
	}
	if v, _, _ := c.Get(ctx); v != 7 {
		t.Fatalf("value %d after CAS", v)
	}
	data, _, err := dial(t, tg.Addr()).Get(p)
	if err != nil || !bytes.Equal(data, []byte{0, 0, 0, 0, 0, 0, 0, 7}) {
		t.Fatalf("stored as %x %v, want eight bytes big endian", data, err)
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
