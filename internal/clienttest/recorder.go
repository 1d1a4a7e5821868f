package clienttest

import (
	"sync"
	"time"
)

// Recorder keeps what a callback reports (a session's events, a cache's
// changes), in order, for a test to wait on. The zero value is ready.
type Recorder[T any] struct {
	mu   sync.Mutex
	list []T
	ch   chan struct{} // a report since the last wake
}

func (r *Recorder[T]) wake() chan struct{} {
	if r.ch == nil {
		r.ch = make(chan struct{}, 1)
	}
	return r.ch
}

// On records v; it is the callback.
func (r *Recorder[T]) On(v T) {
	r.mu.Lock()
	r.list = append(r.list, v)
	ch := r.wake()
	r.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
	}
}

// All returns a copy of what was recorded.
func (r *Recorder[T]) All() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.list...)
}

// WaitUntil waits until ok holds for what was recorded, up to limit; it
// returns the records and whether ok held.
func (r *Recorder[T]) WaitUntil(limit time.Duration, ok func([]T) bool) ([]T, bool) {
	deadline := time.After(limit)
	for {
		if l := r.All(); ok(l) {
			return l, true
		}
		r.mu.Lock()
		ch := r.wake()
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			return r.All(), false
		}
	}
}
