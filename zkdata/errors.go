package zkdata

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns about a file wraps one
// of them, usually inside a *FileError that names the file and the offset.
var (
	// ErrNotDataDir means a directory holds no ZooKeeper data: no version-2
	// subdirectory, or no snapshot and no transaction log in it.
	ErrNotDataDir = errors.New("zkdata: not a ZooKeeper data directory")
	// ErrBadMagic means a file does not start with the magic number of its
	// kind ("ZKSN" for snapshots, "ZKLG" for logs, snappy-java's header).
	ErrBadMagic = errors.New("zkdata: wrong magic number")
	// ErrUnsupported means a format version this package does not know.
	ErrUnsupported = errors.New("zkdata: unsupported format version")
	// ErrTruncated means a file ended inside a record.
	ErrTruncated = errors.New("zkdata: truncated")
	// ErrChecksum means an Adler32 checksum (snapshot seal, log entry) does
	// not match the bytes it covers.
	ErrChecksum = errors.New("zkdata: checksum mismatch")
	// ErrCorrupt means a record that decodes but makes no sense: a length
	// out of range, a node without its parent, an unknown transaction type.
	ErrCorrupt = errors.New("zkdata: corrupt data")
	// ErrNoSnapshot means no snapshot in a data directory could be read.
	ErrNoSnapshot = errors.New("zkdata: no valid snapshot")
	// ErrDigestMismatch means the tree digest ZooKeeper recorded differs
	// from the digest of the restored tree.
	ErrDigestMismatch = errors.New("zkdata: tree digest mismatch")
	// ErrExists means an export target already holds ZooKeeper data.
	ErrExists = errors.New("zkdata: target already holds ZooKeeper data")
)

// FileError is an error found at an offset of a file. For a compressed
// snapshot the offset counts uncompressed bytes.
type FileError struct {
	File   string
	Offset int64
	Err    error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("%s: offset %d: %v", e.File, e.Offset, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }
