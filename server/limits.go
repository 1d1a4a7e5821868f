package server

import (
	"net"
	"time"
)

// acquireOutstanding takes one slot of the member-wide outstanding-request
// limit (ZooKeeper's globalOutstandingLimit) before a request is
// dispatched. When every slot is taken the connection's reader waits: it
// reads nothing more, so TCP pushes back on the client, until replies
// free slots (ZooKeeper likewise stops reading from its connections). It
// returns net.ErrClosed if the connection closes meanwhile.
func (s *Server) acquireOutstanding(done <-chan struct{}) error {
	select {
	case s.outstanding <- struct{}{}:
		return nil
	default:
	}
	s.counters.throttled.Add(1)
	select {
	case s.outstanding <- struct{}{}:
		return nil
	case <-done:
		return net.ErrClosed
	}
}

// releaseOutstanding frees the slot of a request that was answered (or
// dropped with its connection).
func (s *Server) releaseOutstanding() { <-s.outstanding }

// outstandingRequests is the number of requests read and not yet answered.
func (s *Server) outstandingRequests() int { return len(s.outstanding) }

// outboxHighWater is the outbox size above which a connection's processor
// waits before queueing another reply, so a client that does not read its
// replies stalls its own pipeline (the request queue fills, then the
// reader stops reading) instead of growing the server's memory. Watch
// notifications are queued regardless (they are queued under the state
// machine's lock and must not block); maxOutbox closes a connection whose
// notifications alone pile up past it.
func (c *conn) outboxHighWater() int { return max(4<<20, 2*c.srv.cfg.MaxBuffer) }

// waitOutboxRoom waits until the outbox is below the high-water mark or the
// connection closes.
func (c *conn) waitOutboxRoom() {
	limit := c.outboxHighWater()
	for {
		c.out.Lock()
		n, closed := c.out.bytes, c.out.closed
		c.out.Unlock()
		if n <= limit || closed {
			return
		}
		select {
		case <-c.outDrained:
		case <-c.done:
			return
		}
	}
}

// outboxDrained is called by the flusher once it has taken the queued
// frames.
func (c *conn) outboxDrained() {
	select {
	case c.outDrained <- struct{}{}:
	default:
	}
}

// warnTooManyConnections logs a refusal under maxClientCnxns, at most once
// a second, so a connection flood cannot flood the log too.
func (s *Server) warnTooManyConnections(ip string) {
	now := time.Now().UnixNano()
	last := s.counters.lastFloodLog.Load()
	if now-last < int64(time.Second) || !s.counters.lastFloodLog.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("too many connections from one address: refused", "ip", ip, "limit", s.cfg.MaxClientCnxns,
		"refusedSoFar", s.counters.connRejected.Load()+1)
}

// logClosed writes the line of a session's connection closing (the
// session lives on until it expires or is closed).
func (c *conn) logClosed() {
	if c.sessionID == 0 || c.closingSession.Load() {
		return
	}
	c.log().Info("session connection closed", "session", hexID(c.sessionID))
}
