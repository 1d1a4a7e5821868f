package server

import (
	"io"
	"os"
	"sync"
	"syscall"
)

// frameReader reads a connection's frames with as few read calls as the
// client's pipelining allows, without holding a buffer while the
// connection is idle (memory per session matters more than one read call
// for a quiet client).
//
// A read that finds nothing buffered and wants a frame's four-byte length
// blocks for exactly those bytes, with no buffer. A read of a body borrows
// a pooled buffer and takes whatever has arrived, at least the body: under
// load that is every frame queued on the socket. The buffer goes back to
// the pool as soon as it is drained.
//
// Over a TCP socket (raw set) the length's read waits for the socket to be
// readable with no buffer, then takes a pooled one and reads whatever has
// arrived: a client with one request in flight costs one read call per
// request, not two.
type frameReader struct {
	src  io.Reader
	raw  syscall.RawConn // src's socket, or nil
	buf  *[]byte         // nil when nothing is buffered
	r, w int
	// readFn is fill's callback for raw.Read, made at the first fill,
	// and rb, rn and rerr what it read: a closure made per fill escaped
	// with its three results, four heap objects per request.
	readFn func(fd uintptr) bool
	rb     *[]byte
	rn     int
	rerr   error
}

const readBufSize = 16 << 10

var readBufPool = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

// empty reports whether nothing is buffered.
func (f *frameReader) empty() bool { return f.buf == nil }

// hasFrame reports whether a whole frame (length and body) is buffered:
// the next read of one takes no read call and cannot block.
func (f *frameReader) hasFrame() bool {
	if f.buf == nil || f.w-f.r < 4 {
		return false
	}
	b := (*f.buf)[f.r:f.w]
	n := int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3])
	return n >= 0 && 4+n <= len(b)
}

// readFull fills p, as io.ReadFull.
func (f *frameReader) readFull(p []byte) error {
	for len(p) > 0 {
		if f.buf != nil {
			n := copy(p, (*f.buf)[f.r:f.w])
			f.r += n
			p = p[n:]
			if f.r == f.w {
				readBufPool.Put(f.buf)
				f.buf, f.r, f.w = nil, 0, 0
			}
			continue
		}
		if len(p) <= 4 && f.raw != nil {
			if err := f.fill(); err != nil {
				return err
			}
			continue
		}
		if len(p) <= 4 || len(p) >= readBufSize {
			_, err := io.ReadFull(f.src, p)
			return err
		}
		b := readBufPool.Get().(*[]byte)
		n, err := io.ReadAtLeast(f.src, *b, len(p))
		if n > 0 {
			f.buf, f.r, f.w = b, 0, n
		} else {
			readBufPool.Put(b)
		}
		if err != nil && n < len(p) {
			if f.buf != nil {
				// What arrived is not enough for p: give it back, as
				// io.ReadFull would have consumed it on error anyway.
				readBufPool.Put(f.buf)
				f.buf, f.r, f.w = nil, 0, 0
			}
			return err
		}
	}
	return nil
}

// fill waits until the socket is readable, then reads what it holds into
// a pooled buffer. The buffer is taken only once there is something to read
// (an idle connection holds none), and the wait keeps the read deadline.
func (f *frameReader) fill() error {
	if f.readFn == nil {
		f.readFn = f.readFD
	}
	err := f.raw.Read(f.readFn)
	b, n, rerr := f.rb, f.rn, f.rerr
	f.rb, f.rn, f.rerr = nil, 0, nil
	switch {
	case err == nil && rerr == nil && n > 0:
		f.buf, f.r, f.w = b, 0, n
		return nil
	case b != nil:
		readBufPool.Put(b)
	}
	if err != nil {
		return err
	}
	if rerr != nil {
		return os.NewSyscallError("read", rerr)
	}
	return io.EOF
}

// readFD is fill's callback: it reads what the socket holds into a
// pooled buffer (f.rb, f.rn, f.rerr), or asks to wait until it is
// readable.
func (f *frameReader) readFD(fd uintptr) bool {
	f.rb = readBufPool.Get().(*[]byte)
	for {
		f.rn, f.rerr = syscall.Read(int(fd), *f.rb)
		if f.rerr != syscall.EINTR {
			break
		}
	}
	if f.rerr == syscall.EAGAIN {
		readBufPool.Put(f.rb)
		f.rb = nil
		return false // wait until readable
	}
	return true
}

// release returns a buffer still held (the connection is closing).
func (f *frameReader) release() {
	if f.buf != nil {
		readBufPool.Put(f.buf)
		f.buf, f.r, f.w = nil, 0, 0
	}
}
