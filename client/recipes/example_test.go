package recipes_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"github.com/zkraft/zkraft/client/fence"
	"github.com/zkraft/zkraft/client/recipes"
	"github.com/zkraft/zkraft/client/session"
	"github.com/zkraft/zkraft/internal/clienttest"
)

// servers are the addresses of the ensemble: the examples run against an
// in-process zkraft that TestMain starts.
var servers []string

func TestMain(m *testing.M) { os.Exit(clienttest.Main(m, &servers)) }

// connect opens a session for an example.
func connect() *session.Session {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Open(ctx, session.Config{Servers: servers})
	if err != nil {
		log.Fatal(err)
	}
	return s
}

// A holder takes the lock and sends its token with every write; the
// resource applies each write inside its fence.Guard, and the holder
// pauses while its session is in jeopardy and stops when it is lost.
func ExampleLock() {
	s := connect()
	defer s.Close()
	ledger := fence.NewGuard(nil) // kept by the resource, in its own process

	lock := recipes.NewLock(s, "/examples/locks/ledger")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := lock.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release()

	for _, entry := range []string{"debit 10", "credit 5"} {
		// Pause in jeopardy; give up once the lease is gone.
		if err := s.WaitSafe(lease.Context()); err != nil {
			log.Printf("lock lost: %v", err)
			return
		}
		err := ledger.Do("acct-1", lease.Token, func() error {
			fmt.Println("applied:", entry)
			return nil
		})
		if errors.Is(err, fence.ErrStale) {
			log.Print("a later holder has written: stop")
			return
		}
	}
	// Output:
	// applied: debit 10
	// applied: credit 5
}

// With lock-delay, a holder whose session ended without releasing keeps
// the lock unusable for the delay: for resources that cannot check tokens
// yet. A clean release hands the lock on at once.
func ExampleWithLockDelay() {
	s := connect()
	defer s.Close()
	lock := recipes.NewLock(s, "/examples/locks/legacy", recipes.WithLockDelay(30*time.Second))
	ctx := context.Background()
	first, err := lock.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	first.Release() // a release, not a crash: no delay for the next
	start := time.Now()
	second, err := lock.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release()
	fmt.Println("waited out a lock-delay:", time.Since(start) > 30*time.Second)
	fmt.Println("later token:", second.Token > first.Token)
	// Output:
	// waited out a lock-delay: false
	// later token: true
}

// Readers share the lock; a writer has it alone. Writer tokens fence
// writes (Guard.Do); reader tokens are checked against them (Guard.Check).
func ExampleRWLock() {
	s := connect()
	defer s.Close()
	doc := fence.NewGuard(nil)
	rw := recipes.NewRWLock(s, "/examples/rwlocks/doc")
	ctx := context.Background()

	w, err := rw.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("write:", doc.Do("doc", w.Token, nil))
	w.Release()

	r1, _ := rw.RLock(ctx)
	r2, _ := rw.RLock(ctx) // readers together
	fmt.Println("reads:", doc.Check("doc", r1.Token, nil), doc.Check("doc", r2.Token, nil))
	r1.Release()
	r2.Release()
	// Output:
	// write: <nil>
	// reads: <nil> <nil>
}

// At most two leases at a time: a third Acquire waits for a release (or
// for a holder's session to be lost).
func ExampleSemaphore() {
	s := connect()
	defer s.Close()
	sem := recipes.NewSemaphore(s, "/examples/semaphores/encoders", 2)
	ctx := context.Background()
	a, _ := sem.Acquire(ctx)
	b, _ := sem.Acquire(ctx)

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := sem.Acquire(short)
	fmt.Println("third while two are held:", err)

	a.Release()
	c, err := sem.Acquire(ctx)
	fmt.Println("third after a release:", err)
	b.Release()
	c.Release()
	// Output:
	// third while two are held: context deadline exceeded
	// third after a release: <nil>
}

// A candidate campaigns; the term's token is its epoch, which followers
// and resources use to refuse a deposed leader.
func ExampleElection_Campaign() {
	s := connect()
	defer s.Close()
	e := recipes.NewElection(s, "/examples/elections/scheduler")
	term, err := e.Campaign(context.Background(), []byte("host-a:8080"))
	if err != nil {
		log.Fatal(err)
	}
	defer term.Release() // resign
	leader, _ := e.Leader(context.Background())
	fmt.Printf("%s leads, epoch is the term's token: %v\n", leader.Value, leader.Epoch == term.Token)
	// Output:
	// host-a:8080 leads, epoch is the term's token: true
}

// Observe streams (leader, epoch): here to route requests to whoever
// leads.
func ExampleElection_Observe() {
	s := connect()
	defer s.Close()
	e := recipes.NewElection(s, "/examples/elections/router")
	obs := e.Observe(context.Background())
	defer obs.Close()

	fmt.Println("epoch", (<-obs.C).Epoch) // nobody yet
	a, _ := e.Campaign(context.Background(), []byte("a"))
	b := make(chan *recipes.Lease)
	go func() {
		l, _ := e.Campaign(context.Background(), []byte("b")) // waits behind a
		b <- l
	}()
	first := <-obs.C
	fmt.Printf("%s leads\n", first.Value)
	a.Release()
	second := <-obs.C
	if second.Epoch == 0 { // between the two terms, maybe nobody
		second = <-obs.C
	}
	fmt.Printf("%s leads, later epoch: %v\n", second.Value, second.Epoch > first.Epoch)
	(<-b).Release()
	// Output:
	// epoch 0
	// a leads
	// b leads, later epoch: true
}

// A latch stays in the election in the background, across session
// losses: Await returns the current term when this process leads.
func ExampleLatch() {
	s := connect()
	defer s.Close()
	latch := recipes.NewLatch(s, "/examples/latches/compactor", []byte("host-a"))
	defer latch.Close()
	term, err := latch.Await(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	// Work until the term ends (<-term.Done()), sending term.Token along.
	fmt.Println("leading:", latch.Leading() == term)
	// Output:
	// leading: true
}

// A barrier holds workers back until the coordinator removes it.
func ExampleBarrier() {
	s := connect()
	defer s.Close()
	gate := recipes.NewBarrier(s, "/examples/barriers/deploy")
	ctx := context.Background()
	gate.Set(ctx)
	released := make(chan error)
	go func() { released <- gate.Wait(ctx) }()
	time.Sleep(100 * time.Millisecond)
	gate.Remove(ctx)
	fmt.Println("released:", <-released)
	// Output:
	// released: <nil>
}

// Three workers start a computation together and finish it together.
func ExampleDoubleBarrier() {
	done := make(chan string, 3)
	for i := 0; i < 3; i++ {
		go func(i int) {
			s := connect()
			defer s.Close()
			b := recipes.NewDoubleBarrier(s, "/examples/barriers/round", 3)
			ctx := context.Background()
			if err := b.Enter(ctx); err != nil { // returns once all three are in
				log.Fatal(err)
			}
			// ... the computation ...
			if err := b.Leave(ctx); err != nil { // returns once all three are out
				log.Fatal(err)
			}
			done <- "worker done"
		}(i)
	}
	for i := 0; i < 3; i++ {
		fmt.Println(<-done)
	}
	// Output:
	// worker done
	// worker done
	// worker done
}

// Producers put, consumers take; each item goes to one consumer, oldest
// first.
func ExampleQueue() {
	s := connect()
	defer s.Close()
	q := recipes.NewQueue(s, "/examples/queues/jobs")
	ctx := context.Background()
	for _, job := range []string{"resize a.png", "resize b.png"} {
		if _, err := q.Put(ctx, []byte(job)); err != nil {
			log.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ {
		it, err := q.Take(ctx) // waits while the queue is empty
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(it.Data))
	}
	// Output:
	// resize a.png
	// resize b.png
}

// Add is a compare-and-set loop on the node's version: concurrent adds
// lose nothing.
func ExampleCounter() {
	s := connect()
	defer s.Close()
	c := recipes.NewCounter(s, "/examples/counters/visits")
	ctx := context.Background()
	c.Add(ctx, 5)
	v, _ := c.Add(ctx, 2)
	fmt.Println(v)
	_, version, _ := c.Get(ctx)
	ok, _ := c.CompareAndSet(ctx, version, 100)
	fmt.Println(ok)
	ok, _ = c.CompareAndSet(ctx, version, 200) // version moved on
	fmt.Println(ok)
	// Output:
	// 7
	// true
	// false
}

// Instances register themselves (ephemeral, registered again on every new
// session until Close); clients keep a View.
func ExampleRegister() {
	s := connect()
	defer s.Close()
	ctx := context.Background()
	reg, err := recipes.Register(ctx, s, "/examples/services/api", recipes.Instance{ID: "api-1", Address: "10.0.0.1:8080"})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()

	view, err := recipes.NewView(ctx, s, "/examples/services/api")
	if err != nil {
		log.Fatal(err)
	}
	defer view.Close()
	for _, in := range view.Instances() {
		fmt.Println(in.ID, in.Address)
	}
	// Output:
	// api-1 10.0.0.1:8080
}
