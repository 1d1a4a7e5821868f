package server

import (
	"math/bits"
	"sync"
)

// bufPool holds byte buffers for reuse on the write path, in power-of-two
// size classes from 512 bytes to 64 KiB; larger requests get a buffer of
// their own that is never pooled. Two copies of every write's body used to
// be garbage at once: the request frame as read, and the command encoded
// from it for Dragonboat, which copies it into its log entry before
// Propose returns. Pooling both cut the bytes allocated per setData from
// 8.5 to 6.1 KB and per multi of 4 from 32 to 17 KB (docs/performance.md,
// "CPU per operation").
type bufPool struct {
	classes [bufClasses]sync.Pool // of *[]byte with cap 1<<(minBufShift+i)
}

const (
	minBufShift = 9  // 512 B
	maxBufShift = 16 // 64 KiB
	bufClasses  = maxBufShift - minBufShift + 1
)

// bufClass is the class of a buffer of at least n bytes; -1 when n is
// larger than the largest.
func bufClass(n int) int {
	if n <= 1<<minBufShift {
		return 0
	}
	c := bits.Len(uint(n-1)) - minBufShift
	if c >= bufClasses {
		return -1
	}
	return c
}

// get returns a buffer of length n, its contents undefined.
func (p *bufPool) get(n int) *[]byte {
	c := bufClass(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if v, ok := p.classes[c].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<(minBufShift+c))
	return &b
}

// put gives b back: the caller, and every slice it handed out of it, are
// done with it. A buffer whose capacity is not a class's (one get made for
// a large request, or one that grew) is left to the collector.
func (p *bufPool) put(b *[]byte) {
	k := cap(*b)
	c := bufClass(k)
	if c < 0 || k != 1<<(minBufShift+c) {
		return
	}
	*b = (*b)[:0]
	p.classes[c].Put(b)
}

// frameBufs holds the frames of write requests (conn.readLoop), cmdBufs
// the commands encoded for a proposal (raftReplica.proposeRS).
var frameBufs, cmdBufs bufPool
