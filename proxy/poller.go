package proxy

import (
	"errors"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Idle clients hold no goroutine.
//
// Most of a proxy's clients are idle: a ping every few seconds. A
// goroutine blocked reading each would cost its stack (4 KiB once the
// handshake grew it, scripts/proxymem) and its g, more than all the
// rest of an idle session. So a client's reader is a goroutine only
// while bytes come: once the socket has nothing more to read (a
// non-blocking read says EAGAIN), the reader registers the socket with
// the proxy's own epoll instance (one-shot) and ends, releasing its read
// buffer when no frame is half read; the poller's goroutine starts a
// new reader when the socket is readable again (or closed by the peer).
// Go's own poller keeps the descriptor too, in edge-triggered mode; the
// two do not interfere (a descriptor may be in several epoll sets, and
// the reader's reads are non-blocking attempts through its RawConn).
//
// A parked client's liveness is the keep-alive loop's to judge
// (sweepIdle): the read deadline of a blocked reader is gone with it.

// poller is the proxy's epoll instance for parked clients.
type poller struct {
	p    *Proxy
	epfd int
	// wakeFd is an eventfd in the set, written by close to end run.
	wakeFd int

	// mu guards clients: the parked-or-registered clients by descriptor
	// (a descriptor is unique while its socket is open, and a client
	// leaves the map before its socket closes).
	mu      sync.Mutex
	clients map[int32]*client
	closed  bool
}

func newPoller(p *Proxy) (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wfd)}); err != nil {
		unix.Close(epfd)
		unix.Close(wfd)
		return nil, err
	}
	return &poller{p: p, epfd: epfd, wakeFd: wfd, clients: map[int32]*client{}}, nil
}

// run waits for parked clients' sockets and starts their readers, until
// close.
func (pl *poller) run() {
	events := make([]unix.EpollEvent, 256)
	for {
		n, err := unix.EpollWait(pl.epfd, events, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			pl.p.log.Error("epoll wait failed: parked clients are not served", "err", err)
			return
		}
		for _, ev := range events[:n] {
			if ev.Fd == int32(pl.wakeFd) {
				pl.mu.Lock()
				closed := pl.closed
				pl.mu.Unlock()
				if closed {
					return
				}
				continue
			}
			pl.mu.Lock()
			c := pl.clients[ev.Fd]
			pl.mu.Unlock()
			if c != nil {
				c.unpark()
			}
		}
	}
}

// close ends run; the clients are closed by their owner (Proxy.Close).
func (pl *poller) close() {
	pl.mu.Lock()
	pl.closed = true
	pl.mu.Unlock()
	var one [8]byte
	one[7] = 1
	unix.Write(pl.wakeFd, one[:])
}

// release closes the poller's descriptors once run has ended.
func (pl *poller) release() {
	unix.Close(pl.epfd)
	unix.Close(pl.wakeFd)
}

// arm registers (add) or re-arms c's descriptor for one readiness event.
// c.pmu is held and c is not closed, so the descriptor is open.
func (pl *poller) armLocked(c *client, fd int) error {
	ev := &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(fd)}
	if c.pollAdded {
		return unix.EpollCtl(pl.epfd, unix.EPOLL_CTL_MOD, fd, ev)
	}
	pl.mu.Lock()
	pl.clients[int32(fd)] = c
	pl.mu.Unlock()
	if err := unix.EpollCtl(pl.epfd, unix.EPOLL_CTL_ADD, fd, ev); err != nil {
		pl.mu.Lock()
		delete(pl.clients, int32(fd))
		pl.mu.Unlock()
		return err
	}
	c.pollAdded = true
	return nil
}

// forgetLocked removes c's descriptor before its socket closes; c.pmu is
// held.
func (pl *poller) forgetLocked(c *client, fd int) {
	if !c.pollAdded {
		return
	}
	unix.EpollCtl(pl.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	pl.mu.Lock()
	if pl.clients[int32(fd)] == c {
		delete(pl.clients, int32(fd))
	}
	pl.mu.Unlock()
	c.pollAdded = false
}

// rawFd is nc's descriptor, read once; the caller uses it only while the
// socket is open (under client.pmu, before closeNow closes it).
func rawFd(rc syscall.RawConn) (int, error) {
	fd := -1
	if err := rc.Control(func(f uintptr) { fd = int(f) }); err != nil {
		return -1, err
	}
	return fd, nil
}

// errParked: the reader parked the client and ended.
var errParked = errors.New("proxy: client parked")

// tryRead reads what is waiting on c's socket into b without waiting:
// 0 and errWouldBlock when nothing is.
func (c *client) tryRead(b []byte) (int, error) {
	var n int
	var rerr error
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = unix.Read(int(fd), b)
			if rerr != unix.EINTR {
				return true // never wait: the poller does
			}
		}
	})
	if err != nil {
		return 0, err
	}
	switch {
	case rerr == unix.EAGAIN:
		return 0, errWouldBlock
	case rerr != nil:
		return 0, rerr
	case n == 0:
		return 0, errEOF
	}
	return n, nil
}

var (
	errWouldBlock = errors.New("proxy: nothing to read")
	errEOF        = errors.New("proxy: client closed its connection")
)

// park registers c with the poller and ends its reader: false when c is
// closed (the reader then finishes it).
func (c *client) park() bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.pclosed {
		return false
	}
	if err := c.p.poll.armLocked(c, c.fd); err != nil {
		c.p.log.Warn("client not parked: epoll", "err", err)
		return false
	}
	c.parked = true
	return true
}

// unpark starts a reader for a parked client whose socket is readable.
func (c *client) unpark() {
	c.pmu.Lock()
	if !c.parked || c.pclosed {
		c.pmu.Unlock()
		return
	}
	c.parked = false
	c.pmu.Unlock()
	c.p.goTracked(c.pump)
}
