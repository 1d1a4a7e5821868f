package jute

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Writer appends Jute-encoded fields to a growing byte slice. It never fails.
type Writer struct {
	buf []byte
}

// NewWriter returns a Writer whose buffer has capacity capHint.
func NewWriter(capHint int) *Writer {
	if capHint < 0 {
		capHint = 0
	}
	return &Writer{buf: make([]byte, 0, capHint)}
}

// AppendWriter returns a Writer that appends to buf (from its length on),
// for a caller that reuses one buffer for many encodings.
func AppendWriter(buf []byte) *Writer { return &Writer{buf: buf} }

// Bytes returns the encoded bytes. The slice aliases the Writer's buffer until
// the next write or Reset.
func (w *Writer) Bytes() []byte { return w.buf }

// Len returns the number of bytes written so far.
func (w *Writer) Len() int { return len(w.buf) }

// Reset empties the buffer, keeping its capacity.
func (w *Writer) Reset() { w.buf = w.buf[:0] }

// Int appends a 4-byte big-endian int.
func (w *Writer) Int(v int32) { w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(v)) }

// Long appends an 8-byte big-endian long.
func (w *Writer) Long(v int64) { w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v)) }

// Bool appends a 1-byte boolean (0 or 1).
func (w *Writer) Bool(v bool) {
	if v {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

// Buffer appends a length-prefixed byte buffer; nil encodes as length -1
// (null), a non-nil empty slice as length 0.
func (w *Writer) Buffer(b []byte) {
	if b == nil {
		w.Int(-1)
		return
	}
	w.Int(int32(len(b)))
	w.buf = append(w.buf, b...)
}

// String appends a ustring. "" encodes as length 0; the null ustring (-1) is
// never written.
func (w *Writer) String(s string) {
	w.Int(int32(len(s)))
	w.buf = append(w.buf, s...)
}

// StringVector appends a vector<ustring>; nil encodes as count -1 (null).
func (w *Writer) StringVector(v []string) {
	if v == nil {
		w.Int(-1)
		return
	}
	w.Int(int32(len(v)))
	for _, s := range v {
		w.String(s)
	}
}

// ACLs appends a vector<ACL>; nil encodes as count -1 (null).
func (w *Writer) ACLs(a []ACL) {
	if a == nil {
		w.Int(-1)
		return
	}
	w.Int(int32(len(a)))
	for i := range a {
		a[i].Encode(w)
	}
}

// Raw appends b as is, with no length prefix.
func (w *Writer) Raw(b []byte) { w.buf = append(w.buf, b...) }

// Reader decodes Jute fields from a byte slice. Errors are sticky: after the
// first failure every read returns the zero value and Err reports the first
// error. A Reader never panics and never allocates more than the remaining
// input could justify.
type Reader struct {
	b   []byte
	off int
	err error
	// lossy is set when the input was valid but not in the form Encode
	// produces (a null ustring, a boolean byte other than 0 or 1, an ignored
	// multi header field), so re-encoding will not reproduce it byte for byte.
	lossy bool
	// shared: Buffer returns slices of b (capacity clipped, so an append
	// reallocates) instead of copies.
	shared bool
}

// NewReader returns a Reader over b. The Reader does not modify b; Buffer
// copies, so decoded records do not alias b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// NewSharedReader is NewReader whose Buffer returns slices of b instead of
// copies: decoded records alias b, which must then not change while they
// are in use. For hot paths that decode a buffer they own (a request frame,
// a Raft entry during its apply) and would otherwise copy each value.
func NewSharedReader(b []byte) *Reader { return &Reader{b: b, shared: true} }

// SharedReaderOf is NewSharedReader by value, so that a caller decoding
// a concrete record type (not through the Record interface) keeps the
// Reader on its stack.
func SharedReaderOf(b []byte) Reader { return Reader{b: b, shared: true} }

// Err returns the first decoding error, or nil.
func (r *Reader) Err() error { return r.err }

// Remaining returns the number of unread bytes.
func (r *Reader) Remaining() int { return len(r.b) - r.off }

// Offset returns the number of bytes consumed so far.
func (r *Reader) Offset() int { return r.off }

// Rest returns the unread bytes and consumes them. It returns nil after an
// error. The result aliases the input.
func (r *Reader) Rest() []byte {
	if r.err != nil {
		return nil
	}
	b := r.b[r.off:]
	r.off = len(r.b)
	return b
}

// fail records err if no error is recorded yet.
func (r *Reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// Fail records a decoding error on behalf of a Record implementation outside
// this package. The first error wins.
func (r *Reader) Fail(err error) { r.fail(err) }

// take consumes n bytes, or records ErrShortBuffer and returns nil.
func (r *Reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.Remaining() {
		r.fail(fmt.Errorf("%w: %s needs %d bytes at offset %d, %d remain", ErrShortBuffer, what, n, r.off, r.Remaining()))
		return nil
	}
	b := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

// Int reads a 4-byte big-endian int.
func (r *Reader) Int() int32 {
	b := r.take(4, "int")
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

// Long reads an 8-byte big-endian long.
func (r *Reader) Long() int64 {
	b := r.take(8, "long")
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

// Bool reads a 1-byte boolean; any nonzero byte is true (as in Java's
// DataInput.readBoolean).
func (r *Reader) Bool() bool {
	b := r.take(1, "boolean")
	if b == nil {
		return false
	}
	if b[0] > 1 {
		r.lossy = true
	}
	return b[0] != 0
}

// length reads a length or count prefix. It returns -1 for null, and -2 after
// an error (recorded). minElem is the minimum encoded size of one element, used
// to reject counts the remaining input cannot hold before allocating.
func (r *Reader) length(what string, minElem int) int {
	n := r.Int()
	if r.err != nil {
		return -2
	}
	if n == -1 {
		return -1
	}
	if n < -1 {
		r.fail(fmt.Errorf("%w: %s length %d at offset %d", ErrBadLength, what, n, r.off-4))
		return -2
	}
	if int64(n)*int64(minElem) > int64(r.Remaining()) {
		r.fail(fmt.Errorf("%w: %s length %d at offset %d exceeds the %d remaining bytes", ErrShortBuffer, what, n, r.off-4, r.Remaining()))
		return -2
	}
	return int(n)
}

// Buffer reads a length-prefixed buffer. Length -1 gives nil; length 0 gives a
// non-nil empty slice. The bytes are copied, unless the Reader is shared.
func (r *Reader) Buffer() []byte {
	n := r.length("buffer", 1)
	if n < 0 {
		return nil
	}
	b := r.take(n, "buffer")
	if b == nil {
		return nil
	}
	if r.shared {
		return b // take clips the capacity
	}
	out := make([]byte, n)
	copy(out, b)
	return out
}

// String reads a ustring. Length -1 (null) gives "", as does length 0; the
// two are not distinguished, so a null ustring re-encodes as length 0.
func (r *Reader) String() string {
	n := r.length("ustring", 1)
	if n == -1 {
		r.lossy = true
	}
	if n <= 0 {
		return ""
	}
	b := r.take(n, "ustring")
	if b == nil {
		return ""
	}
	if s, ok := interned(b); ok {
		return s
	}
	return string(b)
}

// interned returns the constant string equal to b when b is one of the
// ACL schemes and ids nearly every node carries ("world", "anyone", ...):
// decoded without a copy, and without aliasing the input, which a string
// that outlives the record (a watch trigger's ACL) would keep alive.
func interned(b []byte) (string, bool) {
	if len(b) < 2 || len(b) > 6 {
		return "", false
	}
	switch string(b) { // compiled without a conversion
	case "world":
		return "world", true
	case "anyone":
		return "anyone", true
	case "digest":
		return "digest", true
	case "ip":
		return "ip", true
	case "auth":
		return "auth", true
	case "sasl":
		return "sasl", true
	case "x509":
		return "x509", true
	}
	return "", false
}

// StringVector reads a vector<ustring>. Count -1 gives nil; count 0 a non-nil
// empty slice.
func (r *Reader) StringVector() []string {
	n := r.length("vector<ustring>", 4)
	if n < 0 {
		return nil
	}
	v := make([]string, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		v = append(v, r.String())
	}
	if r.err != nil {
		return nil
	}
	return v
}

// ACLs reads a vector<ACL>. Count -1 gives nil; count 0 a non-nil empty
// slice.
func (r *Reader) ACLs() []ACL {
	n := r.length("vector<ACL>", aclMinSize)
	if n < 0 {
		return nil
	}
	v := make([]ACL, n)
	for i := 0; i < n && r.err == nil; i++ {
		v[i].Decode(r)
	}
	if r.err != nil {
		return nil
	}
	return v
}

// Record is one Jute record: its fields encoded in order with no tags.
type Record interface {
	// Encode appends the record to w. It must not keep w.
	Encode(w *Writer)
	// Decode reads the record from r. On failure it records the error in r
	// (see Reader.Err) and never panics. It must not keep r: Unmarshal
	// reuses its Readers.
	Decode(r *Reader)
}

// writers holds the Writers of AppendRecord and AppendFrame: a Writer
// handed to Record.Encode, an interface call, escapes to the heap, one per
// encoding.
var writers = sync.Pool{New: func() any { return new(Writer) }}

// AppendRecord appends rec's encoding to dst and returns the extended
// slice.
func AppendRecord(dst []byte, rec Record) []byte {
	w := writers.Get().(*Writer)
	w.buf = dst
	rec.Encode(w)
	out := w.buf
	w.buf = nil // the pool keeps no caller's buffer
	writers.Put(w)
	return out
}

// Marshal encodes rec into a new slice.
func Marshal(rec Record) []byte { return AppendRecord(make([]byte, 0, 64), rec) }

// readers holds the Readers of Unmarshal and UnmarshalShared. A Reader
// handed to Record.Decode, an interface call, escapes to the heap: one per
// decode was about 5 of the 50 heap objects a setData cost the server
// (docs/performance.md, "Allocations and the collector").
var readers = sync.Pool{New: func() any { return new(Reader) }}

// unmarshal decodes rec from b with a pooled Reader in the given mode.
func unmarshal(b []byte, rec Record, shared bool) error {
	r := readers.Get().(*Reader)
	*r = Reader{b: b, shared: shared}
	rec.Decode(r)
	err := r.err
	*r = Reader{} // keep neither b nor the error alive in the pool
	readers.Put(r)
	return err
}

// Unmarshal decodes rec from b and returns the Reader's error. Trailing bytes
// after the record are allowed and ignored.
func Unmarshal(b []byte, rec Record) error { return unmarshal(b, rec, false) }

// UnmarshalShared is Unmarshal with NewSharedReader: the record's byte
// buffers alias b.
func UnmarshalShared(b []byte, rec Record) error { return unmarshal(b, rec, true) }

// AppendFrame appends a client-port frame to dst: a 4-byte big-endian length
// followed by the concatenated encodings of parts (nil parts are skipped).
func AppendFrame(dst []byte, parts ...Record) []byte {
	start := len(dst)
	w := writers.Get().(*Writer)
	w.buf = append(dst, 0, 0, 0, 0)
	for _, p := range parts {
		if p != nil {
			p.Encode(w)
		}
	}
	out := w.buf
	w.buf = nil
	writers.Put(w)
	binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-4))
	return out
}

// FrameLength is the length of the frame whose 4-byte big-endian prefix is
// prefix: ErrFrameLength when it is negative or above limit.
func FrameLength(prefix [4]byte, limit int) (int, error) {
	n := int32(binary.BigEndian.Uint32(prefix[:]))
	if n < 0 || int(n) > limit {
		return 0, fmt.Errorf("%w: %d (limit %d)", ErrFrameLength, n, limit)
	}
	return int(n), nil
}

// ReadFrame reads one length-prefixed frame from r and returns its body,
// in buf when it is large enough (nil: a new slice). A length prefix that
// FrameLength refuses is ErrFrameLength; a body cut short is
// io.ErrUnexpectedEOF, a stream that ends between frames io.EOF.
func ReadFrame(r io.Reader, buf []byte, limit int) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	n, err := FrameLength(prefix, limit)
	if err != nil {
		return nil, err
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}
