package proxy

import "time"

// SetStallTimeout sets the flusher's write deadline for a test and
// returns a function that restores it. Tests that use it must not run in
// parallel with others.
func SetStallTimeout(d time.Duration) (restore func()) {
	old := stallTimeout
	stallTimeout = d
	return func() { stallTimeout = old }
}

// PingsInPlace is how many pings p's poller answered itself.
func PingsInPlace(p *Proxy) int64 { return p.stats.pingsInPlace.Load() }

// HandshakeFigures are p's handshake admission's figures: handshakes
// forwarded and unanswered now, and in all those that queued, were
// refused (at once or after waiting) and whose client left while queued.
func HandshakeFigures(p *Proxy) (inFlight int, queued, refused, gone int64) {
	a := p.admit
	return len(a.slots), a.queued.Load(), a.refusedAtOnce.Load() + a.refusedWaited.Load(), a.gone.Load()
}

// FanOutRunning marks a large fan-out as running on p (as fanOut does)
// until the returned function is called.
func FanOutRunning(p *Proxy) (end func()) {
	p.poll.fanStart()
	return p.poll.fanEnd
}
