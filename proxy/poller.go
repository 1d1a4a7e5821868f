package proxy

import (
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zkraft/zkraft/internal/epollwake"
	"github.com/zkraft/zkraft/jute"
)

// Idle clients hold no goroutine.
//
// Most of a proxy's clients are idle: a ping every few seconds. A
// goroutine blocked reading each would cost its stack (4 KiB once the
// handshake grew it, scripts/proxymem) and its g, more than all the
// rest of an idle session. So a client's reader is a goroutine only
// while bytes come: once the socket has nothing more to read (a
// non-blocking read says EAGAIN), the reader parks the client and ends,
// releasing its read buffer when no frame is half read. Go's own poller
// keeps the descriptor too, in edge-triggered mode; the two do not
// interfere (a descriptor may be in several epoll sets, and the
// reader's reads are non-blocking attempts through its RawConn).
//
// The descriptor is in the proxy's epoll set once, edge-triggered, from
// the client's first park to its close: a park is no system call. An
// edge comes for every arrival, also while a reader runs; the poller
// then only marks the client (pollPending) and the reader, about to
// park, reads again instead, so that no arrival after the reader's last
// EAGAIN is missed.
//
// A parked client's readiness is most often one ping. The poller reads
// it itself (one non-blocking read into its own buffer) and, when the
// bytes are exactly one ping frame and the client has nothing forwarded
// and unanswered and no notification held, answers it on the spot with
// the reader's own code (request: the same zxid, keep-alive record and
// figures; the answer written with a non-blocking write when nothing is
// queued before it, else queued for the flusher behind what is) and
// parks the client again: no goroutine is started, no buffer taken, no
// epoll_ctl made. Anything else (more or less than one ping, a frame
// half read, requests in flight, an error or the peer's close) is handed
// to a reader goroutine with the bytes read, as before.
//
// A parked client's liveness is the keep-alive loop's to judge
// (sweepIdle): the read deadline of a blocked reader is gone with it.

// The poller's goroutine does not block in epoll_wait: the proxy's epoll
// instance is itself a descriptor in Go's own poller (an epoll set is
// readable while it has events), and the goroutine waits there, through
// its RawConn, and then takes the events with a non-blocking
// epoll_wait. A parked client's socket is in Go's set too (see above), so
// its readiness wakes Go's poller anyway; with the proxy's set waiting
// in a thread of its own, every ping woke two threads (Go's, to find no
// goroutine waiting on the socket, and the poller's, which then had to
// get a P back). Now the one wake-up of Go's poller finds both and runs
// the poller goroutine.

// poller is the proxy's epoll instance for parked clients.
type poller struct {
	p    *Proxy
	epfd int
	// ep is epfd in Go's poller; rc its raw connection, which run waits
	// on. ep owns epfd (release closes it).
	ep *os.File
	rc syscall.RawConn
	// wakeFd is an eventfd in the set, written by close to end run.
	wakeFd int

	// mu guards clients: the parked-or-registered clients by descriptor
	// (a descriptor is unique while its socket is open, and a client
	// leaves the map before its socket closes).
	mu      sync.Mutex
	clients map[int32]*client
	closed  bool

	// buf is the poller goroutine's read buffer for parked clients'
	// bytes (readable); blocking says it waits in epoll_wait (wait). Both
	// are the poller goroutine's.
	buf      []byte
	blocking bool

	// fan counts the large fan-outs running (fanOut, at least
	// fanOutChunk sessions); done is closed when the last ends. The
	// poller waits for it before it takes more events (run).
	fan struct {
		sync.Mutex
		n    int
		done chan struct{}
	}
}

// fanDeferMax bounds how long the poller leaves parked clients' bytes
// (mostly pings) unread while a fan-out runs: a ping's answer is late by
// at most this (a client's read timeout is two thirds of its session
// timeout, 2.7 s at ZooKeeper's smallest, 4 s).
const fanDeferMax = 500 * time.Millisecond

// fanStart and fanEnd bracket a large fan-out (fanOut).
func (pl *poller) fanStart() {
	pl.fan.Lock()
	if pl.fan.n == 0 {
		pl.fan.done = make(chan struct{})
	}
	pl.fan.n++
	pl.fan.Unlock()
}

func (pl *poller) fanEnd() {
	pl.fan.Lock()
	pl.fan.n--
	if pl.fan.n == 0 {
		close(pl.fan.done)
		pl.fan.done = nil
	}
	pl.fan.Unlock()
}

// fanWait waits while a large fan-out runs, at most fanDeferMax.
//
// Notifications first: on a proxy a fan-out of thousands is CPU-bound
// (each notification a loopback send, docs/proxy.md, "The fan-out's
// cost"), and every ping the poller answers meanwhile is CPU taken from
// it. A ping answered a fan-out later costs the client nothing (its
// next ping is a third of the timeout away), and the pings that
// arrived meanwhile are then taken in a few epoll_waits, without a
// wake-up each. The events wait in the edge-triggered set: none is
// lost. A parked client's request waits too, as it would behind the
// fan-out's CPU.
func (pl *poller) fanWait() {
	pl.fan.Lock()
	done := pl.fan.done
	pl.fan.Unlock()
	if done == nil {
		return
	}
	t := time.NewTimer(fanDeferMax)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()
}

func newPoller(p *Proxy) (*poller, error) {
	epfd, wfd, err := epollwake.New()
	if err != nil {
		return nil, err
	}
	// Non-blocking, so that os.NewFile puts it in Go's poller.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		unix.Close(wfd)
		return nil, err
	}
	ep := os.NewFile(uintptr(epfd), "proxy-epoll")
	rc, err := ep.SyscallConn()
	if err != nil {
		ep.Close()
		unix.Close(wfd)
		return nil, err
	}
	return &poller{p: p, epfd: epfd, ep: ep, rc: rc, wakeFd: wfd, clients: map[int32]*client{}, buf: make([]byte, readBufBytes)}, nil
}

// wait returns the events ready in the set, waiting in Go's poller while
// there are none. Should Go's poller refuse the set (it never has on
// Linux, which nests epoll sets), the poller waits in epoll_wait as it
// did before.
func (pl *poller) wait(events []unix.EpollEvent) (int, error) {
	if pl.blocking {
		for {
			n, err := unix.EpollWait(pl.epfd, events, -1)
			if err != unix.EINTR {
				return n, err
			}
		}
	}
	var n int
	var werr error
	err := pl.rc.Read(func(fd uintptr) bool {
		for {
			n, werr = unix.EpollWait(int(fd), events, 0)
			if werr != unix.EINTR {
				break
			}
		}
		// Wait only when the set had nothing: an event added after this
		// look makes the set readable, which wakes the wait.
		return werr != nil || n > 0
	})
	if err != nil {
		pl.p.log.Warn("the poller waits in epoll_wait: Go's poller does not take its set", "err", err)
		pl.blocking = true
		return 0, nil
	}
	return n, werr
}

// run waits for parked clients' sockets and starts their readers, until
// close.
func (pl *poller) run() {
	events := make([]unix.EpollEvent, 256)
	for {
		pl.fanWait()
		n, err := pl.wait(events)
		if err != nil {
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
				c.readable(pl.buf)
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
	pl.ep.Close()
	unix.Close(pl.wakeFd)
}

// armLocked adds c's descriptor to the set, edge-triggered, unless it is
// in it already. c.pmu is held and c is not closed, so the descriptor is
// open.
func (pl *poller) armLocked(c *client, fd int) error {
	if c.pollAdded {
		return nil
	}
	ev := &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(fd)}
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

// park registers c with the poller and ends its reader: parked true. A
// readiness edge that came while the reader ran (pollPending) makes it
// read again instead (again true). Neither when c is closed (the reader
// then finishes it).
func (c *client) park() (parked, again bool) {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.pclosed {
		return false, false
	}
	if c.pollPending {
		c.pollPending = false
		return false, true
	}
	if err := c.p.poll.armLocked(c, c.fd); err != nil {
		c.p.log.Warn("client not parked: epoll", "err", err)
		return false, false
	}
	c.parked = true
	return true, false
}

// readable is the poller's answer to a readiness edge of c's socket: a
// parked client's lone ping is answered here and the client parked
// again; anything else starts a reader with what was read. A client with
// a reader running is only marked (park reads again). buf is the
// poller's.
func (c *client) readable(buf []byte) {
	c.pmu.Lock()
	if c.pclosed {
		c.pmu.Unlock()
		return
	}
	if !c.parked {
		c.pollPending = true
		c.pmu.Unlock()
		return
	}
	// The poller is c's reader until it parks c again or hands it on.
	c.parked = false
	c.pmu.Unlock()
	for c.rbuf == nil && c.pingInPlace(buf) {
		parked, again := c.park()
		if parked {
			return
		}
		if !again {
			break // closed: the reader finishes it
		}
	}
	c.p.goTracked(c.pump)
}

// pingFrameLen is a ping request's frame: the length, xid and op code.
const pingFrameLen = 4 + requestHeaderLen

// pingInPlace reads what waits on c's socket into buf without waiting
// and answers it when it is exactly one ping and c has nothing in flight
// and no notification held: true when c has nothing more to read now.
// Otherwise what was read is c's reader's (c.rbuf, a buffer of its own),
// and false. The poller owns c's reading; c.rbuf is nil.
func (c *client) pingInPlace(buf []byte) bool {
	n, err := c.tryRead(buf)
	switch {
	case err == errWouldBlock:
		return true // an edge already read by the reader
	case err != nil:
		return false // the reader reads it again and finishes the client
	}
	if n == pingFrameLen && isPing(buf[:n]) && !c.holding.Load() && c.outstanding() == 0 {
		if err := c.request(buf[4:n]); err == nil {
			c.p.stats.pingsInPlace.Add(1)
			return true
		}
		// A ping that does not decode cannot come here (isPing).
	}
	b := *readBufs.Get().(*[]byte)
	if n > cap(b) {
		c.putBuf(b)
		b = make([]byte, n)
	}
	c.rbuf = append(b[:0], buf[:n]...)
	return false
}

// isPing says whether frame is one whole ping request: a length of 8,
// the ping's xid and op code.
func isPing(frame []byte) bool {
	return len(frame) == pingFrameLen &&
		binary.BigEndian.Uint32(frame) == requestHeaderLen &&
		int32(binary.BigEndian.Uint32(frame[4:])) == jute.XidPing &&
		jute.OpCode(binary.BigEndian.Uint32(frame[8:])) == jute.OpPing
}
