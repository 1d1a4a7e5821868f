//go:build linux

// Package epollwake makes an epoll instance with an eventfd already in its
// set, the way an event loop that another goroutine must be able to wake
// (to stop it) starts: the proxy's poller and proxyscale's load loop.
package epollwake

import "golang.org/x/sys/unix"

// New returns a close-on-exec epoll descriptor and a non-blocking eventfd
// registered in it for EPOLLIN (its event's Fd is the eventfd). A write of
// an 8-byte count to the eventfd wakes the loop's epoll_wait. On error
// nothing is left open.
func New() (epfd, wakeFd int, err error) {
	epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return -1, -1, err
	}
	wakeFd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return -1, -1, err
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakeFd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wakeFd)}); err != nil {
		unix.Close(epfd)
		unix.Close(wakeFd)
		return -1, -1, err
	}
	return epfd, wakeFd, nil
}
