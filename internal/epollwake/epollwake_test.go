//go:build linux

package epollwake

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestWakeFdWakesTheWait(t *testing.T) {
	epfd, wfd, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(epfd)
	defer unix.Close(wfd)
	evs := make([]unix.EpollEvent, 4)
	if n, err := unix.EpollWait(epfd, evs, 0); err != nil || n != 0 {
		t.Fatalf("before the write: %d events, %v; want none", n, err)
	}
	one := [8]byte{1}
	if _, err := unix.Write(wfd, one[:]); err != nil {
		t.Fatal(err)
	}
	n, err := unix.EpollWait(epfd, evs, 1000)
	if err != nil || n != 1 || evs[0].Fd != int32(wfd) || evs[0].Events&unix.EPOLLIN == 0 {
		t.Fatalf("after the write: %d events %+v, %v; want the eventfd readable", n, evs[:max(n, 0)], err)
	}
}
