package raftsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
)

// The applied mark is a 16-byte file beside the store's Pebble files: the
// Raft index of the last entry Update applied, written (never synced) into
// the page cache after every Update's commit, before Dragonboat hands any
// of the Update's results to a proposer.
//
// It exists because the store has no WAL of its own (liveOptions): after a
// process is killed the store's tables hold only what its last flush
// wrote, and the newest WAL of the Raft log is the only copy of what was
// applied after it. If that WAL is then found damaged or cut short, the
// log ends lower than it did, and without a record of how far the replica
// had applied the member could not tell a log that lost acknowledged
// entries from one a crash cut before anything was applied from it. The
// mark survives the kill (the page cache does), so the member compares
// the Raft log with it before the store opens and refuses a log that ends
// below it (server's checkStores), naming the log's file.
//
// It survives a process kill, not a power loss: a mark that did not reach
// the disk is lower than the truth, which only weakens the check (the
// Raft log itself is fsynced before any entry is applied, so it is whole
// after a power loss unless the disk damaged it). A mark that does not
// decode is ignored (ReadAppliedMark's ErrBadMark): it holds no data, and
// Update writes a new one.
//
// Layout: uint64 applied index (big endian), uint32 CRC-32C of those 8
// bytes, then markMagic.

// markFile is the mark's name in the store's directory.
const markFile = "ZKRAFT-APPLIED"

// markLen is the mark's size.
const markLen = 16

var markMagic = [4]byte{'z', 'k', 'a', 'm'}

var markTable = crc32.MakeTable(crc32.Castagnoli)

// ErrBadMark means a store's applied mark does not decode.
var ErrBadMark = errors.New("raftsm: the applied mark does not decode")

// MarkPath is the applied mark's file of the store in storeDir.
func MarkPath(storeDir string) string { return filepath.Join(storeDir, markFile) }

// appliedMark is the open mark file of a replica's store.
type appliedMark struct {
	f   *os.File
	buf [markLen]byte
}

func openMark(storeDir string) (*appliedMark, error) {
	f, err := os.OpenFile(MarkPath(storeDir), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("raftsm: applied mark: %w", err)
	}
	return &appliedMark{f: f}, nil
}

// set records index as the last applied. One pwrite into the page cache.
func (m *appliedMark) set(index uint64) error {
	binary.BigEndian.PutUint64(m.buf[:8], index)
	binary.BigEndian.PutUint32(m.buf[8:12], crc32.Checksum(m.buf[:8], markTable))
	copy(m.buf[12:], markMagic[:])
	if _, err := m.f.WriteAt(m.buf[:], 0); err != nil {
		return fmt.Errorf("raftsm: applied mark: %w", err)
	}
	return nil
}

func (m *appliedMark) close() error { return m.f.Close() }

// ReadAppliedMark reads the applied mark of the store in storeDir: ok is
// false when there is none (a store written before the mark existed, or
// never opened); ErrBadMark when it does not decode.
func ReadAppliedMark(storeDir string) (index uint64, ok bool, err error) {
	b, err := os.ReadFile(MarkPath(storeDir))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if len(b) == 0 {
		// Created, but killed before the first Update wrote it.
		return 0, false, nil
	}
	if len(b) != markLen || [4]byte(b[12:16]) != markMagic ||
		binary.BigEndian.Uint32(b[8:12]) != crc32.Checksum(b[:8], markTable) {
		return 0, false, fmt.Errorf("%w: %s (%d bytes)", ErrBadMark, MarkPath(storeDir), len(b))
	}
	return binary.BigEndian.Uint64(b[:8]), true, nil
}
