package server

import (
	"io"
	"sync"
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
type frameReader struct {
	src  io.Reader
	buf  *[]byte // nil when nothing is buffered
	r, w int
}

const readBufSize = 16 << 10

var readBufPool = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

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

// release returns a buffer still held (the connection is closing).
func (f *frameReader) release() {
	if f.buf != nil {
		readBufPool.Put(f.buf)
		f.buf, f.r, f.w = nil, 0, 0
	}
}
