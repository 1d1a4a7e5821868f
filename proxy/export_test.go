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
