package zkdata

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"os"
)

// LogEnd says how a transaction log ended.
type LogEnd int

const (
	// LogEndEOF: the file ended after a complete entry (or after the header).
	LogEndEOF LogEnd = iota
	// LogEndPadding: an entry of length 0, the zeros ZooKeeper preallocates.
	LogEndPadding
	// LogEndPartial: the last entry was cut short (a crash mid-write); it
	// was never acknowledged and is not part of the log.
	LogEndPartial
)

func (e LogEnd) String() string {
	switch e {
	case LogEndPadding:
		return "preallocated padding"
	case LogEndPartial:
		return "a partial last entry"
	}
	return "end of file"
}

// LogReader reads a ZooKeeper transaction log: a FileHeader ("ZKLG",
// version 2, dbid 0), then entries of (long Adler32, int length, entry
// bytes, 'B'). A checksum mismatch is an error; the end is EOF, a zero
// length (preallocated padding) or a partial last entry.
type LogReader struct {
	name string
	r    *bufio.Reader
	f    *os.File
	off  int64
	end  LogEnd
	done bool
}

// OpenLog opens a log file and reads its header.
func OpenLog(path string) (*LogReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	l, err := NewLogReader(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	l.f = f
	return l, nil
}

// NewLogReader reads a log's header from r; name is used in errors.
func NewLogReader(r io.Reader, name string) (*LogReader, error) {
	l := &LogReader{name: name, r: bufio.NewReaderSize(r, 256<<10)}
	var hdr [16]byte
	n, err := io.ReadFull(l.r, hdr[:])
	if err != nil {
		return nil, &FileError{File: name, Offset: int64(n), Err: fmt.Errorf("%w: the log header needs 16 bytes, the file has %d", ErrTruncated, n)}
	}
	if m := binary.BigEndian.Uint32(hdr[:]); m != logMagic {
		return nil, &FileError{File: name, Err: fmt.Errorf("%w: %#08x is not a transaction log (want %#08x \"ZKLG\")", ErrBadMagic, m, logMagic)}
	}
	if v := int32(binary.BigEndian.Uint32(hdr[4:])); v != formatVersion {
		return nil, &FileError{File: name, Offset: 4, Err: fmt.Errorf("%w: log version %d (want %d)", ErrUnsupported, v, formatVersion)}
	}
	l.off = 16
	return l, nil
}

// Close closes the file OpenLog opened.
func (l *LogReader) Close() error {
	if l.f != nil {
		return l.f.Close()
	}
	return nil
}

// End says how the log ended, once Next has returned io.EOF.
func (l *LogReader) End() LogEnd { return l.end }

// Offset is the offset of the next entry; once Next has returned io.EOF,
// the end of the last complete entry.
func (l *LogReader) Offset() int64 { return l.off }

func (l *LogReader) stop(e LogEnd) (*Txn, int64, error) {
	l.done, l.end = true, e
	return nil, l.off, io.EOF
}

// Next returns the next transaction and the offset of its entry, or io.EOF
// at the end of the log.
func (l *LogReader) Next() (*Txn, int64, error) {
	if l.done {
		return nil, l.off, io.EOF
	}
	start := l.off
	var head [12]byte
	n, err := io.ReadFull(l.r, head[:])
	if err == io.EOF {
		return l.stop(LogEndEOF)
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return l.stop(LogEndPartial)
		}
		return nil, start, &FileError{File: l.name, Offset: start + int64(n), Err: err}
	}
	crc := int64(binary.BigEndian.Uint64(head[:]))
	size := int32(binary.BigEndian.Uint32(head[8:]))
	switch {
	case size == 0 || size == -1:
		// Zeros from preallocation (ZooKeeper reads a null buffer the same).
		return l.stop(LogEndPadding)
	case size < 0 || size > maxRecord:
		return nil, start, &FileError{File: l.name, Offset: start + 8, Err: fmt.Errorf("%w: entry length %d", ErrCorrupt, size)}
	}
	entry := make([]byte, 0, min(int(size), 1<<20))
	buf := bufWriter{&entry}
	if got, err := io.CopyN(buf, l.r, int64(size)); err != nil {
		if errors.Is(err, io.EOF) {
			return l.stop(LogEndPartial)
		}
		return nil, start, &FileError{File: l.name, Offset: start + 12 + got, Err: err}
	}
	b, err := l.r.ReadByte()
	if err != nil || b != 'B' {
		if err != nil && err != io.EOF {
			return nil, start, &FileError{File: l.name, Offset: start + 12 + int64(size), Err: err}
		}
		// ZooKeeper: "Last transaction was partial."
		return l.stop(LogEndPartial)
	}
	l.off = start + 12 + int64(size) + 1
	if sum := int64(adler32.Checksum(entry)); sum != crc {
		return nil, start, &FileError{File: l.name, Offset: start, Err: fmt.Errorf("%w: entry checksum is %#x, its %d bytes sum to %#x (ZooKeeper: \"CRC check failed\")", ErrChecksum, crc, size, sum)}
	}
	t, err := decodeTxn(entry)
	if err != nil {
		return nil, start, &FileError{File: l.name, Offset: start, Err: fmt.Errorf("%w: %v", ErrCorrupt, err)}
	}
	return t, start, nil
}

// bufWriter appends to a byte slice.
type bufWriter struct{ b *[]byte }

func (w bufWriter) Write(p []byte) (int, error) {
	*w.b = append(*w.b, p...)
	return len(p), nil
}

// appendLogEntry appends the log entry of t to dst (for writers and tests).
func appendLogEntry(dst []byte, t *Txn) []byte {
	b := encodeTxn(t)
	dst = binary.BigEndian.AppendUint64(dst, uint64(adler32.Checksum(b)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	dst = append(dst, b...)
	return append(dst, 'B')
}

// logHeader is the FileHeader of a transaction log.
func logHeader() []byte {
	b := binary.BigEndian.AppendUint32(nil, logMagic)
	b = binary.BigEndian.AppendUint32(b, formatVersion)
	return binary.BigEndian.AppendUint64(b, logDBID)
}
