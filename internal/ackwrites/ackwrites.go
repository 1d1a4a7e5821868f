// Package ackwrites is the writer the tests of an online change (a cell
// moving between members) run through it: one session creating znodes one
// after another, keeping the paths whose create was acknowledged, so that
// the test can then check that every one of them is still there. It
// imports go-zookeeper and the standard library only.
package ackwrites

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Writer creates prefix/n000000, prefix/n000001, ... on one session, each
// once: a create that fails is not retried, the next comes after a pause.
type Writer struct {
	stop, done chan struct{}
	mu         sync.Mutex
	acked      []string
}

// Start starts writing on c under prefix (which must exist), pausing for
// retry after a failed create; at most 100000 creates.
func Start(c *zk.Conn, prefix string, retry time.Duration) *Writer {
	w := &Writer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; i < 100000; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			p := fmt.Sprintf("%s/n%06d", prefix, i)
			if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				time.Sleep(retry)
				continue
			}
			w.mu.Lock()
			w.acked = append(w.acked, p)
			w.mu.Unlock()
		}
	}()
	return w
}

// Acked is how many creates have been acknowledged so far.
func (w *Writer) Acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// WaitMore waits until more creates than now are acknowledged, failing
// the test after limit.
func (w *Writer) WaitMore(t testing.TB, more int, limit time.Duration) {
	t.Helper()
	n := w.Acked()
	for deadline := time.Now().Add(limit); ; {
		got := w.Acked() - n
		if got >= more {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d writes acknowledged after the move", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop ends the writing, waits for the create in flight, and returns the
// acknowledged paths in order.
func (w *Writer) Stop() []string {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.acked...)
}
