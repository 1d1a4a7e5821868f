package wire

import (
	"errors"
	"sync"
)

// ErrOutboxClosed is Send's error once the outbox is closed.
var ErrOutboxClosed = errors.New("wire: upstream connection closed")

// Outbox is the queue of whole frames between the goroutines that send on
// an upstream connection and its one writer, on both ends (member and
// proxy): frames go out in the order they were queued, as many at once as
// are queued. Its zero value is not usable: make it with NewOutbox.
type Outbox struct {
	limit int // bytes queued above which a blocking Send waits
	mu    sync.Mutex
	cond  sync.Cond
	// guarded by mu
	frames [][]byte
	bytes  int
	closed bool
}

// NewOutbox returns an empty outbox whose blocking sends wait while more
// than limit bytes are queued.
func NewOutbox(limit int) *Outbox {
	o := &Outbox{limit: limit}
	o.cond.L = &o.mu
	return o
}

// Send queues frames. With block it first waits while the queue is over
// its limit (the sender then feels the connection's backpressure); without
// it never waits (a Close frame sent from under another lock). After
// Close it returns ErrOutboxClosed.
func (o *Outbox) Send(block bool, frames ...[]byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for block && o.bytes > o.limit && !o.closed {
		o.cond.Wait()
	}
	if o.closed {
		return ErrOutboxClosed
	}
	for _, f := range frames {
		o.frames = append(o.frames, f)
		o.bytes += len(f)
	}
	o.cond.Broadcast()
	return nil
}

// Take waits for queued frames and returns all of them, in order, for the
// writer to write at once; ok is false once the outbox is closed.
func (o *Outbox) Take() (frames [][]byte, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.frames) == 0 && !o.closed {
		o.cond.Wait()
	}
	if o.closed {
		return nil, false
	}
	frames = o.frames
	o.frames, o.bytes = nil, 0
	o.cond.Broadcast()
	return frames, true
}

// Close drops what is queued and wakes every waiting Send and Take.
func (o *Outbox) Close() {
	o.mu.Lock()
	o.closed = true
	o.frames, o.bytes = nil, 0
	o.cond.Broadcast()
	o.mu.Unlock()
}

// Queued is the number of bytes queued and not yet taken by the writer.
func (o *Outbox) Queued() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.bytes
}
