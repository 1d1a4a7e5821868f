package server

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// readRounds coalesces the ReadIndex requests of a replica's linearizable
// reads, as etcd's linearizableReadLoop does: at most maxReadRounds rounds
// (one ReadIndex each, with its retries) are in flight at once, and every
// read that arrives meanwhile joins the next round, which is asked as soon
// as one in flight ends. A round's reads are served once it completes.
//
// INVARIANT: a read joins only a round that has not been asked yet (the
// next round), never one in flight, so the ReadIndex that serves a read is
// always asked after the read arrived: one asked before it might return an
// index older than a write completed in between, and the read would miss
// that write.
//
// Without it each read took a ReadIndex of its own: Dragonboat batches the
// reads queued in one pass of its step worker into one ReadIndex, but at
// thousands of reads a second that was still a ReadIndex (a heartbeat
// round to the followers, a forward from a follower to the leader) for
// every few reads, and a request state, a step-worker wake-up and a
// notification for each (docs/performance.md, Linearizable reads).
type readRounds struct {
	// index takes one round's ReadIndex, with its retries, and returns
	// what the round's reads need to be served (nil error: completed).
	index func() (any, error)
	// goroutine runs fn on a goroutine of its own; false: refused (the
	// server is stopping), fn does not run.
	goroutine func(fn func()) bool
	// counts, when set, counts the rounds asked and the reads that
	// joined them (the member's zkraft_read_index_rounds_total and
	// zkraft_linearizable_reads_total).
	counts *readRoundCounts

	mu struct {
		sync.Mutex
		inFlight int        // rounds asked and not finished
		next     *readRound // the round arriving reads join; nil: none yet
	}
}

// readRoundCounts are the member's figures of readRounds.
type readRoundCounts struct {
	rounds, reads atomic.Int64
}

// maxReadRounds is how many rounds may be in flight at once: one, as
// etcd's loop; two (a read arriving just after a round was asked starts
// its own at once) cost more CPU per read in the A/B
// (docs/performance.md, Linearizable reads).
const maxReadRounds = 1

// readRound is one ReadIndex shared by the reads that joined it. done
// closes when it ended; err (nil: completed) and result are set before.
type readRound struct {
	done   chan struct{}
	err    error
	result any // what ask leaves for the reads (the request state)
}

func (*readRound) isReadTicket() {}

// join returns the round a read arriving now is served by, and asks it
// at once if fewer than maxReadRounds are in flight.
func (rr *readRounds) join() *readRound {
	rr.mu.Lock()
	r := rr.mu.next
	if r == nil {
		r = &readRound{done: make(chan struct{})}
		rr.mu.next = r
	}
	start := rr.mu.inFlight < maxReadRounds
	if start {
		rr.mu.inFlight++
		rr.mu.next = nil
	}
	rr.mu.Unlock()
	if rr.counts != nil {
		rr.counts.reads.Add(1)
		if start {
			rr.counts.rounds.Add(1)
		}
	}
	if start && !rr.goroutine(func() { rr.run(r) }) {
		// The server is stopping: this round and the ones handed on
		// fail.
		for n := r; n != nil; {
			n = rr.finish(n, nil, errReadStopping)
		}
	}
	return r
}

// run takes r's ReadIndex, then that of each next round handed on to it.
func (rr *readRounds) run(r *readRound) {
	for r != nil {
		res, err := rr.index()
		r = rr.finish(r, res, err)
	}
}

// finish ends r with err (nil: its ReadIndex completed, result what the
// reads need) and wakes its reads. It returns the next round if reads
// joined it meanwhile: the caller asks it, in r's place in flight.
func (rr *readRounds) finish(r *readRound, result any, err error) *readRound {
	r.result, r.err = result, err
	close(r.done)
	rr.mu.Lock()
	defer rr.mu.Unlock()
	n := rr.mu.next
	if n == nil {
		rr.mu.inFlight--
	} else if rr.counts != nil {
		rr.counts.rounds.Add(1)
	}
	rr.mu.next = nil
	return n
}

var errReadStopping = fmt.Errorf("%w: the server is stopping", errNotCompleted)
