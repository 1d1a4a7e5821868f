package zkdata

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/adler32"
	"io"
	"strings"

	"github.com/golang/snappy"
)

// Compression is the stream wrapper of a snapshot file, chosen by ZooKeeper
// from zookeeper.snapshot.compression.method when writing and from the file
// name's suffix when reading (SnapStream).
type Compression int

const (
	// CompressionNone is a plain snapshot ("snapshot.<zxid>").
	CompressionNone Compression = iota
	// CompressionGzip is a gzip stream ("snapshot.<zxid>.gz").
	CompressionGzip
	// CompressionSnappy is snappy-java's SnappyOutputStream framing
	// ("snapshot.<zxid>.snappy"): not the snappy framing format.
	CompressionSnappy
)

func (c Compression) String() string {
	switch c {
	case CompressionGzip:
		return "gz"
	case CompressionSnappy:
		return "snappy"
	}
	return "none"
}

// suffix is the file-name suffix ZooKeeper gives a snapshot so compressed.
func (c Compression) suffix() string {
	switch c {
	case CompressionGzip:
		return ".gz"
	case CompressionSnappy:
		return ".snappy"
	}
	return ""
}

// ParseCompression reads the value of zookeeper.snapshot.compression.method
// ("", "gz" or "snappy").
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "", "none", "checked":
		return CompressionNone, nil
	case "gz":
		return CompressionGzip, nil
	case "snappy":
		return CompressionSnappy, nil
	}
	return 0, fmt.Errorf("zkdata: unknown snapshot compression %q (want gz, snappy or empty)", s)
}

// compressionOf picks the wrapper from a file name as SnapStream does: the
// part after the last '.' is "gz", "snappy" or anything else (plain).
func compressionOf(name string) Compression {
	parts := strings.Split(name, ".")
	if len(parts) > 1 {
		switch parts[len(parts)-1] {
		case "gz":
			return CompressionGzip
		case "snappy":
			return CompressionSnappy
		}
	}
	return CompressionNone
}

// snappyMagic is snappy-java's stream header magic, followed by an int
// version and an int minimum compatible version (both 1).
var snappyMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	snappyHeaderLen = 16
	// snappyBlock is the uncompressed size of one snappy-java block
	// (SnappyOutputStream's default).
	snappyBlock = 32 << 10
	// maxSnappyBlock bounds the uncompressed size of one block we accept:
	// snappy-java lets writers choose larger blocks, but not this large.
	maxSnappyBlock = 4 << 20
)

// snappyJavaReader decodes snappy-java's SnappyOutputStream framing: a
// 16-byte header, then (int32 length, raw snappy block) chunks until EOF. A
// header may appear again between chunks (concatenated streams).
type snappyJavaReader struct {
	r     *bufio.Reader
	off   int64 // in the compressed input
	block []byte
	pos   int
	comp  bytes.Buffer
	err   error
}

func newSnappyJavaReader(r io.Reader) (*snappyJavaReader, error) {
	s := &snappyJavaReader{r: bufio.NewReaderSize(r, 64<<10)}
	var hdr [snappyHeaderLen]byte
	if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: snappy header: %v", ErrTruncated, err)
	}
	if err := checkSnappyHeader(hdr[:]); err != nil {
		return nil, err
	}
	s.off = snappyHeaderLen
	return s, nil
}

func checkSnappyHeader(hdr []byte) error {
	if !bytes.Equal(hdr[:8], snappyMagic) {
		return fmt.Errorf("%w: not a snappy-java stream", ErrBadMagic)
	}
	if compat := int32(binary.BigEndian.Uint32(hdr[12:])); compat > 1 {
		return fmt.Errorf("%w: snappy-java stream needs reader version %d", ErrUnsupported, compat)
	}
	return nil
}

func (s *snappyJavaReader) Read(p []byte) (int, error) {
	for s.pos == len(s.block) {
		if s.err != nil {
			return 0, s.err
		}
		s.err = s.next()
	}
	n := copy(p, s.block[s.pos:])
	s.pos += n
	return n, nil
}

// next decodes the next chunk into s.block.
func (s *snappyJavaReader) next() error {
	var lenBuf [4]byte
	n, err := io.ReadFull(s.r, lenBuf[:])
	if err == io.EOF {
		return io.EOF
	}
	if err != nil {
		return fmt.Errorf("%w: snappy chunk length at compressed offset %d", ErrTruncated, s.off+int64(n))
	}
	if bytes.Equal(lenBuf[:], snappyMagic[:4]) {
		// Another stream's header: skip it.
		var rest [snappyHeaderLen - 4]byte
		if _, err := io.ReadFull(s.r, rest[:]); err != nil {
			return fmt.Errorf("%w: snappy header at compressed offset %d", ErrTruncated, s.off)
		}
		if err := checkSnappyHeader(append(lenBuf[:], rest[:]...)); err != nil {
			return err
		}
		s.off += snappyHeaderLen
		s.block, s.pos = s.block[:0], 0
		return nil
	}
	clen := int64(int32(binary.BigEndian.Uint32(lenBuf[:])))
	if clen < 0 || clen > int64(snappy.MaxEncodedLen(maxSnappyBlock)) {
		return fmt.Errorf("%w: snappy chunk length %d at compressed offset %d", ErrCorrupt, clen, s.off)
	}
	s.off += 4
	s.comp.Reset()
	// CopyN grows the buffer as bytes arrive, so a huge length on a short
	// file cannot allocate much.
	if got, err := io.CopyN(&s.comp, s.r, clen); err != nil {
		return fmt.Errorf("%w: snappy chunk of %d bytes at compressed offset %d has %d", ErrTruncated, clen, s.off, got)
	}
	dlen, err := snappy.DecodedLen(s.comp.Bytes())
	if err != nil || dlen > maxSnappyBlock {
		return fmt.Errorf("%w: snappy chunk at compressed offset %d: bad length", ErrCorrupt, s.off)
	}
	if cap(s.block) < dlen {
		s.block = make([]byte, dlen)
	}
	s.block, err = snappy.Decode(s.block[:dlen], s.comp.Bytes())
	if err != nil {
		return fmt.Errorf("%w: snappy chunk at compressed offset %d: %v", ErrCorrupt, s.off, err)
	}
	s.off += clen
	s.pos = 0
	return nil
}

// snappyJavaWriter writes snappy-java's SnappyOutputStream framing.
type snappyJavaWriter struct {
	w     io.Writer
	buf   []byte
	out   []byte
	wrote bool
}

func newSnappyJavaWriter(w io.Writer) *snappyJavaWriter {
	return &snappyJavaWriter{w: w, buf: make([]byte, 0, snappyBlock)}
}

func (s *snappyJavaWriter) header() error {
	if s.wrote {
		return nil
	}
	s.wrote = true
	hdr := append([]byte{}, snappyMagic...)
	hdr = binary.BigEndian.AppendUint32(hdr, 1) // version
	hdr = binary.BigEndian.AppendUint32(hdr, 1) // minimum compatible version
	_, err := s.w.Write(hdr)
	return err
}

func (s *snappyJavaWriter) Write(p []byte) (int, error) {
	if err := s.header(); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), snappyBlock-len(s.buf))
		s.buf = append(s.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(s.buf) == snappyBlock {
			if err := s.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (s *snappyJavaWriter) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	s.out = snappy.Encode(s.out[:cap(s.out)], s.buf)
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(s.out)))
	if _, err := s.w.Write(l[:]); err != nil {
		return err
	}
	s.buf = s.buf[:0]
	_, err := s.w.Write(s.out)
	return err
}

// Close writes the last block. It does not close the underlying writer.
func (s *snappyJavaWriter) Close() error {
	if err := s.header(); err != nil {
		return err
	}
	return s.flush()
}

// openSnapshotStream unwraps a snapshot file's compression.
func openSnapshotStream(r io.Reader, c Compression) (io.Reader, error) {
	switch c {
	case CompressionGzip:
		z, err := gzip.NewReader(r)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("%w: gzip header", ErrTruncated)
			}
			return nil, fmt.Errorf("%w: gzip: %v", ErrBadMagic, err)
		}
		return z, nil
	case CompressionSnappy:
		return newSnappyJavaReader(r)
	}
	return r, nil
}

// nopCloser adds a no-op Close to a writer.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// newSnapshotStream wraps w in the compression c; Close finishes the
// compressed stream without closing w.
func newSnapshotStream(w io.Writer, c Compression) io.WriteCloser {
	switch c {
	case CompressionGzip:
		return gzip.NewWriter(w)
	case CompressionSnappy:
		return newSnappyJavaWriter(w)
	}
	return nopCloser{w}
}

// maxRecord bounds one length-prefixed field (a node's data, a path, a
// log entry). ZooKeeper's own bound is jute.maxbuffer (1 MiB by default,
// often raised); this is far above any sane setting and exists only so that
// garbage cannot ask for gigabytes.
const maxRecord = 512 << 20

// dataReader decodes Jute fields from a stream, keeping the Adler32 of
// every byte consumed so far (the CheckedInputStream under ZooKeeper's
// BinaryInputArchive) and the offset. Errors are sticky.
type dataReader struct {
	r   *bufio.Reader
	sum hash.Hash32
	off int64
	err error

	scratch [8]byte
	big     bytes.Buffer
}

func newDataReader(r io.Reader) *dataReader {
	return &dataReader{r: bufio.NewReaderSize(r, 256<<10), sum: adler32.New()}
}

func (d *dataReader) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// read fills p, or records ErrTruncated naming what.
func (d *dataReader) read(p []byte, what string) bool {
	if d.err != nil {
		return false
	}
	n, err := io.ReadFull(d.r, p)
	d.sum.Write(p[:n])
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			d.fail(&FileError{Offset: d.off, Err: fmt.Errorf("%w: %s needs %d bytes, %d remain", ErrTruncated, what, len(p), n)})
		} else {
			d.fail(&FileError{Offset: d.off, Err: err})
		}
		d.off += int64(n)
		return false
	}
	d.off += int64(n)
	return true
}

// atEOF reports whether the stream has no more bytes (without consuming).
func (d *dataReader) atEOF() bool {
	if d.err != nil {
		return false
	}
	_, err := d.r.Peek(1)
	return err == io.EOF
}

func (d *dataReader) Int(what string) int32 {
	if !d.read(d.scratch[:4], what) {
		return 0
	}
	return int32(binary.BigEndian.Uint32(d.scratch[:4]))
}

func (d *dataReader) Long(what string) int64 {
	if !d.read(d.scratch[:8], what) {
		return 0
	}
	return int64(binary.BigEndian.Uint64(d.scratch[:8]))
}

// Buffer reads a length-prefixed buffer; -1 gives nil.
func (d *dataReader) Buffer(what string) []byte {
	start := d.off
	n := d.Int(what)
	if d.err != nil {
		return nil
	}
	if n == -1 {
		return nil
	}
	if n < -1 || n > maxRecord {
		d.fail(&FileError{Offset: start, Err: fmt.Errorf("%w: %s length %d", ErrCorrupt, what, n)})
		return nil
	}
	if n <= 64<<10 {
		b := make([]byte, n)
		if !d.read(b, what) {
			return nil
		}
		return b
	}
	// A large length: grow as the bytes arrive.
	d.big.Reset()
	got, err := io.CopyN(&d.big, d.r, int64(n))
	d.sum.Write(d.big.Bytes())
	d.off += got
	if err != nil {
		d.fail(&FileError{Offset: d.off, Err: fmt.Errorf("%w: %s needs %d bytes, %d remain", ErrTruncated, what, n, got)})
		return nil
	}
	return append([]byte{}, d.big.Bytes()...)
}

// String reads a ustring; null gives "".
func (d *dataReader) String(what string) string {
	return string(d.Buffer(what))
}

// errorf records a corrupt-data error at offset off.
func (d *dataReader) errorf(off int64, format string, args ...any) {
	d.fail(&FileError{Offset: off, Err: fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)})
}
