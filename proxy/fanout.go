package proxy

import (
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The tail of a shared watch: one Event from the member becomes one
// notification for each of thousands of sessions (watches.go, event).
//
// Where the time went before (docs/proxy.md, "The fan-out's cost"): every
// session's notification started a flusher goroutine, which set a write
// deadline (a timer) and wrote the frame through net.Buffers, one
// goroutine creation, wake-up and timer per session on top of the write
// itself. So the fan-out
//
//  1. encodes the notification once (event) and gives every session the
//     same bytes;
//  2. writes them straight to the socket of each session with nothing else
//     queued, with a non-blocking write from the fan-out's own goroutine,
//     parked client or not: no goroutine is woken or started for it. Only
//     a session whose socket does not take the whole frame (its client
//     reads slowly) or that has replies queued gets its flusher, which
//     writes the rest in order with the write deadline;
//  3. splits a large list over a few goroutines (Config.FanOutWorkers),
//     and waits for them before the upstream reader reads the member's
//     next frame, so that on every session the notification is queued or
//     written before any later reply from the member: per session, the
//     order of one connection is kept as before.
//
// A session's notifications may still be held behind its requests in
// flight (client.held): that rule is unchanged.

// fanOutChunk is the fewest sessions worth a goroutine of their own.
const fanOutChunk = 512

// fanRecord is the last fan-out's timing, for the upstream command
// (operator.go): when the Event was read, when the fan-out began and
// ended (every target's notification written, queued or held), its
// targets, how many the fan-out wrote whole itself, and the slowest
// worker's share.
type fanRecord struct {
	read, start, end time.Time
	sessions, direct int
	workers          int
}

// fanOut gives the notification frame of zxid to every target (each a
// distinct client). It runs on the upstream reader and returns when every
// target has it queued, held or written. read is when the Event was read.
func (p *Proxy) fanOut(targets []*client, zxid int64, frame []byte, read time.Time) {
	workers := p.cfg.FanOutWorkers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, (len(targets)+fanOutChunk-1)/fanOutChunk)
	rec := fanRecord{read: read, start: time.Now(), sessions: len(targets), workers: max(workers, 1)}
	if len(targets) >= fanOutChunk {
		// Notifications before pings (poller.fanWait).
		p.poll.fanStart()
		defer p.poll.fanEnd()
	}
	if workers <= 1 {
		for _, c := range targets {
			if c.heldNote(zxid, frame) {
				rec.direct++
			}
		}
		p.stats.sent.Add(int64(rec.direct))
	} else {
		var wg sync.WaitGroup
		var mu sync.Mutex
		per := (len(targets) + workers - 1) / workers
		for i := 0; i < len(targets); i += per {
			part := targets[i:min(i+per, len(targets))]
			wg.Add(1)
			go func() {
				defer wg.Done()
				direct := 0
				for _, c := range part {
					if c.heldNote(zxid, frame) {
						direct++
					}
				}
				p.stats.sent.Add(int64(direct))
				mu.Lock()
				rec.direct += direct
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	rec.end = time.Now()
	p.stats.fan.Lock()
	p.stats.fan.last = rec
	p.stats.fan.Unlock()
}

// heldNote is held for a shared watch's notification: it is delivered at
// once (written straight to the socket when nothing else waits for it)
// unless requests are outstanding. The upstream reader, or one fan-out
// goroutine for this client while the reader waits for it.
// It says whether the frame was written whole to the socket here.
func (c *client) heldNote(zxid int64, frame []byte) bool {
	if len(c.evq) == 0 && c.outstanding() == 0 {
		return c.deliverDirect(zxid, frame)
	}
	c.held(zxid, frame)
	return false
}

// deliverDirect is deliver, writing frame straight to the socket when the
// outbox is empty and no flusher runs (writeNow).
func (c *client) deliverDirect(zxid int64, frame []byte) bool {
	if zxid > c.zxid.Load() {
		c.zxid.Store(zxid)
	}
	c.tell(zxid)
	return c.queueDirect(frame)
}

// queueDirect is queue, but tries a non-blocking write of frame first
// when nothing is queued before it; what the socket does not take is
// queued for the flusher, in order. frame is shared by every session and
// never written to. It says whether the socket took the whole frame; then
// the caller counts it in p.stats.sent.
func (c *client) queueDirect(frame []byte) bool {
	c.out.Lock()
	if c.out.closed {
		c.out.Unlock()
		return false
	}
	if c.out.flushing || len(c.out.frames) > 0 || c.fd < 0 {
		c.out.Unlock()
		c.queue(frame)
		return false
	}
	// INVARIANT: no flusher runs and nothing is queued, and c.out is held:
	// no other write to the socket can start before this one ends.
	n, err := c.writeNow(frame)
	switch {
	case err == nil && n == len(frame):
		c.out.Unlock()
		c.stats.sent.Add(1)
		// The proxy's count (p.stats.sent) is the caller's to add: the
		// fan-out adds its whole share once, not one atomic add per
		// session on a counter its workers all write.
		return true
	case err != nil && err != errWouldBlock:
		c.out.closed, c.out.frames, c.out.bytes = true, nil, 0
		c.out.Unlock()
		c.close()
		return false
	}
	c.queueLocked(frame[n:])
	return false
}

// writeNow writes b to c's socket without waiting: how much the socket
// took (0 and errWouldBlock when nothing). c.out must be held, and
// c.out.closed false: closeNow sets it under c.out before the socket
// closes, so the descriptor is c's own for the whole call and cannot be
// closed, and its number reused, under it.
//
// It is one send(2) with MSG_DONTWAIT on the descriptor, not the
// RawConn's Write: on the fan-out's path (docs/proxy.md, "The fan-out's
// cost, part 2") that took the descriptor's lock and reset its poll
// state for every notification, and write(2) passes through vfs_write
// (its fsnotify hook touches the socket's inode) where send(2) goes
// straight to the socket. The call never blocks, so it is a raw system
// call (no hand-off of the P around it).
func (c *client) writeNow(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, _, errno := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(c.fd),
			uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
			uintptr(unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL), 0, 0)
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, errWouldBlock
		}
		return 0, errno
	}
}
