package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPortsAreFreeAndBelowTheEphemeralRange(t *testing.T) {
	high := ephemeralLow()
	for range 20 {
		p := Port(t)
		if p < low || p >= high {
			t.Fatalf("port %d outside [%d, %d)", p, low, high)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		ln.Close()
	}
}
