package fence_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"

	"github.com/zkraft/zkraft/client/fence"
)

// Ledger is a resource protected by a lock (recipes.Lock): every append
// carries the sender's fencing token, and the ledger applies it inside
// its Guard, which keeps the highest token per account on disk.
type Ledger struct {
	guard *fence.Guard
	mu    sync.Mutex
	lines []string
}

// Append applies entry to account for the holder of token.
func (l *Ledger) Append(account string, token int64, entry string) error {
	return l.guard.Do(account, token, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, account+": "+entry)
		return nil
	})
}

// Two holders of the lock in turn, and the first one's late write (it was
// paused past its session timeout, so the lock went to the second) is
// refused, even after the ledger restarts.
func Example() {
	dir, err := os.MkdirTemp("", "ledger")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := fence.NewDirStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	ledger := &Ledger{guard: fence.NewGuard(store)}

	const first, second = 0x100000007, 0x100000009 // tokens of two grants
	fmt.Println(ledger.Append("acct-1", first, "debit 10"))
	fmt.Println(ledger.Append("acct-1", second, "credit 5"))
	err = ledger.Append("acct-1", first, "debit 10 (late)")
	fmt.Println(errors.Is(err, fence.ErrStale))

	restarted := &Ledger{guard: fence.NewGuard(store)}
	err = restarted.Append("acct-1", first, "debit 10 (later still)")
	fmt.Println(errors.Is(err, fence.ErrStale))
	fmt.Println(strings.Join(ledger.lines, "; "))
	// Output:
	// <nil>
	// <nil>
	// true
	// true
	// acct-1: debit 10; acct-1: credit 5
}

// Readers under a read lock are checked against the highest writer token
// without being recorded, so concurrent readers do not refuse each other.
func ExampleGuard_Check() {
	g := fence.NewGuard(nil)
	read := func() error { return nil }
	fmt.Println(g.Do("doc", 10, nil))                                // a writer
	fmt.Println(g.Check("doc", 12, read), g.Check("doc", 11, read))  // two readers after it
	fmt.Println(g.Do("doc", 15, nil))                                // the next writer
	fmt.Println(errors.Is(g.Check("doc", 12, read), fence.ErrStale)) // a reader from before it
	// Output:
	// <nil>
	// <nil> <nil>
	// <nil>
	// true
}
