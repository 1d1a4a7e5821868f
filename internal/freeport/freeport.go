// Package freeport picks loopback TCP ports for servers that tests start
// and configure before they listen.
//
// A port the kernel hands out for "127.0.0.1:0" comes from its ephemeral
// range, the same range every outgoing connection takes its local port
// from: between the pick and the server's bind, another test's client
// socket can take it ("address already in use"). Ports here are picked at
// random below that range, and checked free when picked.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

const low = 10000 // well above the well-known and registered services tests meet

// Get returns a loopback port that is free now and outside the kernel's
// ephemeral range.
func Get() (int, error) {
	high := ephemeralLow()
	for range 100 {
		p := low + rand.IntN(high-low)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		ln.Close()
		return p, nil
	}
	// Crowded below the range (or no room there): let the kernel pick.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("freeport: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Port is Get for tests: it fails t on error.
func Port(t testing.TB) int {
	t.Helper()
	p, err := Get()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Addr is Port as "127.0.0.1:port".
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Port(t)))
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux),
// 32768 when it cannot be read, and never below low+1000.
func ephemeralLow() int {
	first := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				first = n
			}
		}
	}
	return max(first, low+1000)
}
