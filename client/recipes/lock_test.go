package recipes_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/recipes"
	"github.com/zkraft/zkraft/internal/testserver"
)

func startServer(t *testing.T) string { return testserver.Start(t) }

func dial(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestLockTokensStrictlyIncrease: holders never overlap, every grant's
// token is accepted by the guard and is strictly greater than the
// previous holder's.
func TestLockTokensStrictlyIncrease(t *testing.T) {
	addr := startServer(t)
	var guard recipes.Guard
	var holders atomic.Int32
	var mu sync.Mutex
	var tokens []int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, addr)
			for i := 0; i < 10; i++ {
				l := recipes.NewLock(c, "/locks/a")
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				tok, err := l.Acquire(ctx)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				if n := holders.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				if !guard.Accept(tok) {
					t.Errorf("guard refused the current holder's token %x", tok)
				}
				mu.Lock()
				if len(tokens) > 0 && tok <= tokens[len(tokens)-1] {
					t.Errorf("token %x not above the previous holder's %x", tok, tokens[len(tokens)-1])
				}
				tokens = append(tokens, tok)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				holders.Add(-1)
				if err := l.Release(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if len(tokens) != 40 {
		t.Fatalf("%d grants, want 40", len(tokens))
	}
}

// TestLockStaleHolderIsFenced: a holder whose session ends loses the lock
// to the next contender, whose higher token makes the guard refuse the
// stale one.
func TestLockStaleHolderIsFenced(t *testing.T) {
	addr := startServer(t)
	var guard recipes.Guard
	a := dial(t, addr)
	b := dial(t, addr)
	la, lb := recipes.NewLock(a, "/locks/b"), recipes.NewLock(b, "/locks/b")
	ta, err := la.Acquire(context.Background())
	if err != nil || !guard.Accept(ta) {
		t.Fatalf("a: %x %v", ta, err)
	}
	got := make(chan int64, 1)
	go func() {
		tb, err := lb.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- tb
	}()
	a.Close() // a's session ends: its ephemeral lock node goes
	var tb int64
	select {
	case tb = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("b never got the lock")
	}
	if tb <= ta || !guard.Accept(tb) {
		t.Fatalf("b's token %x vs a's %x", tb, ta)
	}
	if guard.Accept(ta) {
		t.Fatalf("guard accepted the stale token %x after %x", ta, tb)
	}
}

func TestElectionEpochs(t *testing.T) {
	addr := startServer(t)
	a, b := dial(t, addr), dial(t, addr)
	ea := recipes.NewElection(a, "/election", []byte("a"))
	eb := recipes.NewElection(b, "/election", []byte("b"))
	epochA, err := ea.Campaign(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	won := make(chan int64, 1)
	go func() {
		e, err := eb.Campaign(context.Background())
		if err != nil {
			t.Error(err)
		}
		won <- e
	}()
	if v, ep, err := recipes.Leader(b, "/election"); err != nil || string(v) != "a" || ep != epochA {
		t.Fatalf("leader %q epoch %x %v, want a at %x", v, ep, err, epochA)
	}
	if err := ea.Resign(); err != nil {
		t.Fatal(err)
	}
	select {
	case epochB := <-won:
		if epochB <= epochA {
			t.Fatalf("epoch %x not above %x", epochB, epochA)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b never led")
	}
}
