package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Handshake admission: a burst of handshakes (the clients of a dead proxy
// all reconnecting here, say) must not take the proxy and its member from
// the sessions they already serve.
//
// Every handshake the proxy forwards is work for the cell: the member
// serves the channel's handshake and proposes its createSession or attach
// through the cell's log (server's session batcher, up to 1,024 per
// entry). The proxy keeps at most Config.HandshakesInFlight handshakes
// forwarded and unanswered; the ones beyond wait in arrival order (Go's
// channel senders are served first in, first out), each for at most a
// third of its session timeout, and the one that finds the queue longer
// than the member's recent pace can clear within that is refused at once:
// its connection is closed, and its client tries its next address, as
// from a ZooKeeper server that does not serve it. So the rate at which a
// proxy admits handshakes is the rate at which its member answers them,
// and the queue never holds a client longer than it can afford.
//
// A handshake that waited is forwarded only if its client is still there
// (a client that gave up closed its socket): an abandoned reconnect
// reaching the log would attach the session to a channel nobody reads and
// close the connection its client made meanwhile elsewhere.
//
// Pings and requests of established sessions never wait here: the
// poller and the clients' readers serve them as before; only the
// handshakes queue.

// admission bounds the handshakes in flight upstream.
type admission struct {
	// slots holds one token per handshake forwarded and unanswered.
	slots chan struct{}
	// waiting is the handshakes queued for a slot.
	waiting atomic.Int64
	// Figures (the upstream command): handshakes that waited for a slot,
	// refused because the queue would outlast their budget (at once, or
	// after waiting it), and dropped because their client left while
	// they waited.
	queued, refusedAtOnce, refusedWaited, gone atomic.Int64

	// mu guards the pace: the times of the last answers (a ring) and
	// when the slots last became all taken.
	mu struct {
		sync.Mutex
		ring      [64]int64 // Unix ns of answered handshakes
		n         int       // answers recorded in all
		busySince int64     // Unix ns; 0 while a slot is free
	}
}

func newAdmission(inFlight int) *admission {
	return &admission{slots: make(chan struct{}, inFlight)}
}

// admitResult is how a handshake's admission ended.
type admitResult int

const (
	admitted admitResult = iota
	refusedBusy
	clientGone
)

// budgetOf is how long a handshake asking for timeout (ms) may wait for a
// slot: a third of it (at least a second), so that its client has time
// for two more addresses within its timeout.
func budgetOf(timeoutMs int32) time.Duration {
	return max(time.Duration(timeoutMs)*time.Millisecond/3, time.Second)
}

// acquire takes a slot for a handshake whose client's socket is rc,
// waiting in arrival order for at most budget. It refuses at once when
// the handshakes ahead would take the member longer than budget at its
// recent pace.
func (a *admission) acquire(ctx context.Context, done <-chan struct{}, rc syscall.RawConn, budget time.Duration) admitResult {
	select {
	case a.slots <- struct{}{}:
		return admitted
	default:
	}
	now := time.Now()
	ahead := a.waiting.Add(1)
	defer a.waiting.Add(-1)
	a.mu.Lock()
	if a.mu.busySince == 0 {
		a.mu.busySince = now.UnixNano()
	}
	rate := a.rateLocked(now)
	a.mu.Unlock()
	if rate > 0 && float64(ahead)/rate > budget.Seconds() {
		a.refusedAtOnce.Add(1)
		return refusedBusy
	}
	a.queued.Add(1)
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
	case <-t.C:
		a.refusedWaited.Add(1)
		return refusedBusy
	case <-done:
		a.gone.Add(1)
		return clientGone
	case <-ctx.Done():
		return clientGone
	}
	if !socketOpen(rc) {
		a.release(false)
		a.gone.Add(1)
		return clientGone
	}
	return admitted
}

// release gives a slot back; answered: the member answered the handshake
// (its pace).
func (a *admission) release(answered bool) {
	<-a.slots
	now := time.Now().UnixNano()
	a.mu.Lock()
	if answered {
		a.mu.ring[a.mu.n%len(a.mu.ring)] = now
		a.mu.n++
	}
	if a.waiting.Load() == 0 {
		a.mu.busySince = 0
	}
	a.mu.Unlock()
}

// paceWindow is how far back the member's pace is taken.
const paceWindow = 2 * time.Second

// rateLocked is the handshakes the member answered per second lately,
// while the slots were all taken; 0 when too few to tell.
func (a *admission) rateLocked(now time.Time) float64 {
	from := now.Add(-paceWindow).UnixNano()
	k, oldest := 0, int64(0)
	for i := range min(a.mu.n, len(a.mu.ring)) {
		if t := a.mu.ring[i]; t > from {
			k++
			if oldest == 0 || t < oldest {
				oldest = t
			}
		}
	}
	if k < 8 {
		return 0
	}
	if k == len(a.mu.ring) {
		// The ring holds less than the window: its own span.
		if span := now.UnixNano() - oldest; span > 0 {
			return float64(k) / (float64(span) / 1e9)
		}
		return 0
	}
	span := min(paceWindow, now.Sub(time.Unix(0, a.mu.busySince)))
	if span < 200*time.Millisecond {
		return 0
	}
	return float64(k) / span.Seconds()
}

// socketOpen is false when the peer closed rc's socket (a peek reads
// end of file) or it failed; bytes waiting, or none yet, are open.
func socketOpen(rc syscall.RawConn) bool {
	if rc == nil {
		return false
	}
	open := true
	var b [1]byte
	rc.Read(func(fd uintptr) bool {
		for {
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
			case err != nil || n == 0:
				open = false
			}
			return true // never wait
		}
	})
	return open
}
