// Package freeport picks loopback TCP ports for servers that tests start
// and configure before they listen.
//
// A port the kernel hands out for "127.0.0.1:0" comes from its ephemeral
// range, the same range every outgoing connection takes its local port
// from: between the pick and the server's bind, another test's client
// socket can take it ("address already in use"). Ports here are picked at
// random below that range, and checked free when picked.
//
// A port checked free is not yet bound: until the server binds it, the
// same pick could hand it out again. So a port is handed out once per
// process, and is reserved for the life of the process against every
// other process that picks through this package (go test runs several
// test binaries at once): a byte-range lock on the port's byte of one
// shared file, which the kernel drops when the process ends. The
// reservation outlives the server, so a test that stops a server and
// starts it again on the same port finds it still free of other tests.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const low = 10000 // well above the well-known and registered services tests meet

var reserved struct {
	sync.Mutex
	once sync.Once
	lock *os.File // nil if the shared file could not be opened
	// ports are those handed out by this process.
	ports map[int]bool
}

// lockPath is the file whose byte p reserves port p; one per user, so
// that one user's file never stands in another's way.
func lockPath() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("go-freeport-%d.lock", os.Getuid()))
}

// reserveLocked reserves p for this process: false if this process
// handed it out before or another process holds it. Without the shared
// file (a read-only temporary directory) only this process is kept from
// handing it out twice.
func reserveLocked(p int) bool {
	if reserved.ports[p] {
		return false
	}
	if reserved.lock != nil {
		lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: int64(p), Len: 1}
		if err := syscall.FcntlFlock(reserved.lock.Fd(), syscall.F_SETLK, &lk); err != nil {
			return false // another process holds it (EAGAIN/EACCES)
		}
	}
	reserved.ports[p] = true
	return true
}

// Get returns a loopback port that is free now, outside the kernel's
// ephemeral range, never returned before in this process and reserved
// against other processes that use this package.
func Get() (int, error) {
	reserved.Lock()
	defer reserved.Unlock()
	reserved.once.Do(func() {
		reserved.ports = map[int]bool{}
		// The file is never closed: closing any descriptor of it would
		// drop every lock this process holds on it.
		if f, err := os.OpenFile(lockPath(), os.O_RDWR|os.O_CREATE, 0o600); err == nil {
			reserved.lock = f
		}
	})
	high := ephemeralLow()
	for range 200 {
		p := low + rand.IntN(high-low)
		if reserved.ports[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		ok := reserveLocked(p)
		ln.Close()
		if ok {
			return p, nil
		}
	}
	// Crowded below the range (or no room there): let the kernel pick.
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("freeport: %w", err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ok := reserveLocked(p)
		ln.Close()
		if ok {
			return p, nil
		}
	}
	return 0, fmt.Errorf("freeport: no free port below %d nor from the kernel", high)
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
