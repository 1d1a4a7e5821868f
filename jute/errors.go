package jute

import "errors"

// Sentinel errors. Decoding failures returned by Reader.Err and Unmarshal wrap
// one of these with %w, so callers test them with errors.Is.
var (
	// ErrShortBuffer means the input ended before a field was complete, or a
	// length or count asked for more bytes than remain.
	ErrShortBuffer = errors.New("jute: short buffer")
	// ErrBadLength means a buffer/string length or vector count was negative
	// but not the null marker -1.
	ErrBadLength = errors.New("jute: bad length")
	// ErrBadMultiOp means a multi request or response carried an op type that
	// has no record inside a multi.
	ErrBadMultiOp = errors.New("jute: bad multi op")
	// ErrFrameLength means a frame's length prefix was negative or above
	// the reader's limit (ReadFrame, FrameLength).
	ErrFrameLength = errors.New("jute: frame length out of range")
)
