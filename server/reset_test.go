package server

import (
	"net"
	"sync"
	"testing"
	"time"
)

// TestResetClosesOnlyEarlierConnections: a state installed from another
// replica's snapshot closes the client connections the member accepted
// before it (their watches may have missed changes) and keeps those it
// accepted since, even when the closing runs after they arrived: it runs
// on its own goroutine, and under load that goroutine once closed the
// connection TestClusterLaggingMemberCatchesUpFromSnapshot opened after
// the member had caught up ("zk: connection closed").
func TestResetClosesOnlyEarlierConnections(t *testing.T) {
	s := startStandalone(t, nil)
	addr := s.Addr().String()
	var mu sync.Mutex
	var locals []string
	dial := func(network, address string, timeout time.Duration) (net.Conn, error) {
		nc, err := net.DialTimeout(network, address, timeout)
		if err == nil {
			mu.Lock()
			locals = append(locals, nc.LocalAddr().String())
			mu.Unlock()
		}
		return nc, err
	}
	connectZKDial(t, addr, dial)
	n := s.cell.resets.Add(1) // as cell.Applied does for raftsm.EventReset
	after := connectZKDial(t, addr, dial)
	mu.Lock()
	if len(locals) != 2 {
		t.Fatalf("%d connections dialled, want 2", len(locals))
	}
	beforeAddr, afterAddr := locals[0], locals[1]
	mu.Unlock()

	// The closing goroutine, running late.
	s.closeClientsBeforeReset(s.cell, n)
	closed := map[string]bool{}
	s.mu.Lock()
	for cn := range s.mu.conns {
		select {
		case <-cn.done:
			closed[cn.nc.RemoteAddr().String()] = true
		default:
			closed[cn.nc.RemoteAddr().String()] = false
		}
	}
	s.mu.Unlock()
	if c, ok := closed[beforeAddr]; ok && !c {
		t.Errorf("the connection accepted before the reset is open")
	}
	if c, ok := closed[afterAddr]; !ok || c {
		t.Fatalf("the connection accepted after the reset: registered %v, closed %v", ok, c)
	}
	if _, _, err := after.Get("/"); err != nil {
		t.Fatalf("get on the connection accepted after the reset: %v", err)
	}
}
