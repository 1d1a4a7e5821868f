package main

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/zkraft/zkraft/internal/epollwake"
	"github.com/zkraft/zkraft/jute"
)

// A load process's connected sessions are read by one event loop over
// their raw descriptors (2026-12-02; before, a goroutine blocked reading
// each session's net.Conn, with a read deadline for its next ping).
//
// Why: the harness's clients share the proxies' 2 cores, and what they
// spend is taken from the system they measure. A goroutine per session
// cost, per ping, the read deadline's timer, two goroutine wake-ups (the
// timer's, the answer's) and a read that found nothing (EAGAIN) after
// each frame; per notification one wake-up and two reads. The loop waits
// in one epoll_wait for all of its sessions (edge-triggered since
// 2026-12-03), reads each readable socket until a read does not fill its
// buffer, and keeps the pings' times in a heap: a ping is one send(2),
// its answer one recv(2), a notification one recv(2).
//
// What a session does is unchanged (it remains a faithful minimal
// client): a handshake (still a goroutine and a net.Conn, as the
// ephemeral's create and a reconnect's handshake and rewatch are), a ping
// every third of its timeout whatever it reads, a connection given up
// when a ping goes unanswered for half the timeout or the socket fails,
// then a reconnect elsewhere with its id, password and last zxid as
// ZooKeeper's clients do (reconnect), its watch re-sent or re-set there;
// every notification read and timed when the loop reads it.
//
// A session's descriptor is the loop's only: it is a duplicate of its
// connection's, taken out of Go's poller (the net.Conn is closed), so a
// readiness wakes one poller, not two. Writes to it (pings, the watch's
// getData) are non-blocking and must be taken whole, under the session's
// wmu, which also guards the descriptor's closing.

// loop is a load process's event loop.
type loop struct {
	l      *loadProc
	epfd   int
	wakeFd int // an eventfd in the set: stop writes it
	done   chan struct{}

	// mu guards byFd (the attached sessions) and timers.
	mu     sync.Mutex
	byFd   map[int32]*loadSession
	timers timerHeap

	buf []byte // the loop's read buffer
}

func newLoop(l *loadProc) (*loop, error) {
	epfd, wfd, err := epollwake.New()
	if err != nil {
		return nil, err
	}
	return &loop{l: l, epfd: epfd, wakeFd: wfd, done: make(chan struct{}), byFd: map[int32]*loadSession{}, buf: make([]byte, 64<<10)}, nil
}

// timer is a session's next ping (gen: the session's attachment it was
// set for; an older one is stale).
type timer struct {
	at  time.Time
	s   *loadSession
	gen uint64
}

type timerHeap []timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = timer{}
	*h = old[:len(old)-1]
	return t
}

// attach hands s's connection (s.nc, just handshaken, its watch perhaps
// re-sent) to the loop: its descriptor is duplicated out of Go's poller
// and the net.Conn closed. false if the socket cannot be taken (s is then
// as after a failed connection: the caller reconnects or loses it).
func (lp *loop) attach(s *loadSession) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	rc := rawConn(s.nc)
	if rc == nil {
		return errors.New("not a socket")
	}
	fd := -1
	var derr error
	if err := rc.Control(func(f uintptr) { fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return err
	}
	if derr != nil {
		return derr
	}
	// The duplicate shares the socket and its O_NONBLOCK; closing the
	// net.Conn takes its own descriptor out of Go's poller.
	s.nc.Close()
	s.nc = nil
	s.fd = fd
	s.partial = nil
	s.pingSent = time.Time{}
	s.nextPing = time.Now().Add(s.to / 3)
	lp.mu.Lock()
	s.gen++
	lp.byFd[int32(fd)] = s
	heap.Push(&lp.timers, timer{s.nextPing, s, s.gen})
	lp.mu.Unlock()
	// Edge-triggered (readable drains the socket): a level-triggered set
	// polls each reported socket again at the next epoll_wait only to
	// find it empty (sock_poll, 3 % of the machine over a fan-out).
	if err := unix.EpollCtl(lp.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(fd)}); err != nil {
		lp.mu.Lock()
		delete(lp.byFd, int32(fd))
		s.gen++
		lp.mu.Unlock()
		unix.Close(fd)
		s.fd = -1
		return err
	}
	return nil
}

// run serves the attached sessions until stop.
func (lp *loop) run() {
	defer close(lp.done)
	events := make([]unix.EpollEvent, 256)
	for {
		wait := 100 * time.Millisecond
		lp.mu.Lock()
		if len(lp.timers) > 0 {
			wait = min(wait, max(time.Until(lp.timers[0].at), 0))
		}
		lp.mu.Unlock()
		n, err := unix.EpollWait(lp.epfd, events, int((wait+time.Millisecond-1)/time.Millisecond))
		if err != nil && err != unix.EINTR {
			fmt.Fprintln(os.Stderr, "epoll_wait:", err)
			return
		}
		for _, ev := range events[:max(n, 0)] {
			if ev.Fd == int32(lp.wakeFd) {
				return
			}
			lp.mu.Lock()
			s := lp.byFd[ev.Fd]
			lp.mu.Unlock()
			if s != nil {
				lp.readable(s)
			}
		}
		lp.timersDue()
	}
}

// stop ends run and waits for it.
func (lp *loop) stop() {
	var one [8]byte
	one[7] = 1
	unix.Write(lp.wakeFd, one[:])
	<-lp.done
}

// readable reads what s's socket has and takes its whole frames. The set
// is edge-triggered: a read that fills the buffer is followed by another,
// one that does not has emptied the socket (what arrives after it is a
// new edge, reported again).
func (lp *loop) readable(s *loadSession) {
	for {
		n, err := recvFd(s.fd, lp.buf)
		switch {
		case err == unix.EAGAIN:
			return
		case err != nil:
			lp.fail(s, err)
			return
		case n == 0:
			lp.fail(s, errors.New("EOF"))
			return
		}
		if !lp.take(s, lp.buf[:n]) || n < len(lp.buf) {
			return
		}
	}
}

// recvFd is one non-blocking recv(2) on fd, as a raw system call (it
// never blocks), not read(2): read passes through vfs_read (2 % of the
// machine over a fan-out on its own) where recv goes to the socket.
func recvFd(fd int, b []byte) (int, error) {
	for {
		n, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(fd),
			uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unix.MSG_DONTWAIT), 0, 0)
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, errno
	}
}

// take takes the whole frames of data, read from s's socket, and keeps a
// frame's start read without its end; false when it failed s.
func (lp *loop) take(s *loadSession, data []byte) bool {
	if len(s.partial) > 0 {
		s.partial = append(s.partial, data...)
		data = s.partial
	}
	for len(data) >= 4 {
		size := int(int32(binary.BigEndian.Uint32(data)))
		if size < 0 || size > 1<<20 {
			lp.fail(s, fmt.Errorf("frame of %d bytes", size))
			return false
		}
		if len(data) < 4+size {
			break
		}
		if size < 16 {
			lp.fail(s, errors.New("short reply"))
			return false
		}
		s.frame(data[4 : 4+size])
		data = data[4+size:]
	}
	if len(data) > 0 {
		s.partial = append([]byte(nil), data...) // a frame half read: rare
	} else {
		s.partial = nil
	}
	return true
}

// frame takes one frame's body (at least a reply header) read by the
// loop.
func (s *loadSession) frame(body []byte) {
	xid := int32(binary.BigEndian.Uint32(body))
	if z := int64(binary.BigEndian.Uint64(body[4:])); z > s.lastZxid {
		s.lastZxid = z
	}
	switch xid {
	case jute.XidPing:
		s.pingSent = time.Time{}
	case jute.XidNotification:
		s.notified.CompareAndSwap(0, time.Now().UnixNano())
	case watchXid:
		if binary.BigEndian.Uint32(body[12:]) == 0 {
			s.watchOK.Store(true)
		}
		s.acked.Do(s.watchDone)
	}
}

var pingFrame = jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing})

// timersDue pings the sessions whose ping is due, and gives up the
// connections whose ping went unanswered for half their timeout.
func (lp *loop) timersDue() {
	now := time.Now()
	for {
		lp.mu.Lock()
		if len(lp.timers) == 0 || lp.timers[0].at.After(now) {
			lp.mu.Unlock()
			return
		}
		t := heap.Pop(&lp.timers).(timer)
		stale := t.gen != t.s.gen
		lp.mu.Unlock()
		if stale {
			continue
		}
		s := t.s
		if !s.pingSent.IsZero() && now.Sub(s.pingSent) > s.to/2 {
			if unreadFd(s.fd) > 0 {
				// The answer came and the loop is late to it: the
				// process's own starvation (load.go, run), not the
				// server's silence. It is read next.
				s.l.starved.Add(1)
				lp.rearm(s, now)
				continue
			}
			lp.fail(s, errors.New("ping unanswered"))
			continue
		}
		s.wmu.Lock()
		err := writeFd(s.fd, pingFrame)
		s.wmu.Unlock()
		if s.pingSent.IsZero() {
			s.pingSent = now
		}
		if err != nil {
			lp.fail(s, err)
			continue
		}
		lp.rearm(s, now)
	}
}

// rearm sets s's next ping a third of its timeout after now.
func (lp *loop) rearm(s *loadSession, now time.Time) {
	s.nextPing = now.Add(s.to / 3)
	lp.mu.Lock()
	heap.Push(&lp.timers, timer{s.nextPing, s, s.gen})
	lp.mu.Unlock()
}

// fail gives up s's connection and reconnects it elsewhere on a goroutine
// of its own (as run did), attaching it again when it is back.
func (lp *loop) fail(s *loadSession, err error) {
	if s.l.stopped.Load() {
		return
	}
	fmt.Fprintf(os.Stderr, "session %#x on %s: %v: reconnecting\n", s.resp.SessionID, s.l.addrs[s.order[s.at]], err)
	unix.EpollCtl(lp.epfd, unix.EPOLL_CTL_DEL, s.fd, nil)
	lp.mu.Lock()
	delete(lp.byFd, int32(s.fd))
	s.gen++ // its timers are stale
	lp.mu.Unlock()
	s.wmu.Lock()
	unix.Close(s.fd)
	s.fd = -1
	s.wmu.Unlock()
	s.partial = nil
	lp.l.wg.Add(1)
	go func() {
		defer lp.l.wg.Done()
		lp.resume(s)
	}()
}

// resume reconnects s and attaches it again, until it is back or lost.
func (lp *loop) resume(s *loadSession) {
	for {
		if !s.reconnect(s.to) {
			s.gone.Store(true)
			if s.wantWatch.Load() {
				s.acked.Do(s.watchDone)
			}
			return
		}
		err := lp.attach(s)
		if err == nil {
			return
		}
		fmt.Fprintf(os.Stderr, "session %#x: not attached: %v: reconnecting\n", s.resp.SessionID, err)
	}
}

// writeFd writes a small frame to fd without waiting: a socket that does
// not take all of it at once is a connection that failed (writeNow).
func writeFd(fd int, b []byte) error {
	if fd < 0 {
		return errors.New("no connection")
	}
	var n uintptr
	var errno syscall.Errno
	for {
		// send(2) as a raw system call, as recvFd.
		n, _, errno = syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(fd),
			uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL), 0, 0)
		if errno != unix.EINTR {
			break
		}
	}
	switch {
	case errno != 0:
		return errno
	case int(n) != len(b):
		return fmt.Errorf("the socket took %d of a %d-byte frame", n, len(b))
	}
	return nil
}

// unreadFd is how many bytes wait unread in fd's socket (SIOCINQ), 0
// when it cannot tell.
func unreadFd(fd int) int {
	var v int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCINQ, uintptr(unsafe.Pointer(&v))); e != 0 {
		return 0
	}
	return int(v)
}
