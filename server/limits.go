package server

import (
	"net"
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
