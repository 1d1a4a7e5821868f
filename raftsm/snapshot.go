package raftsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble"
)

// recoverBatchBytes is the batch size at which RecoverFromSnapshot commits
// and starts a new batch. A variable so that tests can force several
// batches.
var recoverBatchBytes = 64 << 20

// Snapshot stream: the magic, then (uvarint keyLen, key, uvarint valueLen,
// value) for every key in order, then a zero keyLen.
var snapshotMagic = []byte("ZKRAFTS1")

// PrepareSnapshot pins a Pebble snapshot of the applied state. Dragonboat
// does not run it concurrently with Update.
func (s *StateMachine) PrepareSnapshot() (any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.db == nil {
		return nil, ErrClosed
	}
	return s.mu.db.NewSnapshot(), nil
}

// SaveSnapshot streams the pinned state to w.
func (s *StateMachine) SaveSnapshot(ctx any, w io.Writer, done <-chan struct{}) error {
	snap, ok := ctx.(*pebble.Snapshot)
	if !ok {
		return fmt.Errorf("%w: context %T", ErrBadSnapshot, ctx)
	}
	defer snap.Close()
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.Write(snapshotMagic); err != nil {
		return err
	}
	it := snap.NewIter(&pebble.IterOptions{})
	var lenBuf [binary.MaxVarintLen64]byte
	for it.First(); it.Valid(); it.Next() {
		select {
		case <-done:
			it.Close()
			return errStopped
		default:
		}
		for _, b := range [][]byte{it.Key(), it.Value()} {
			n := binary.PutUvarint(lenBuf[:], uint64(len(b)))
			if _, err := bw.Write(lenBuf[:n]); err != nil {
				it.Close()
				return err
			}
			if _, err := bw.Write(b); err != nil {
				it.Close()
				return err
			}
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	if _, err := bw.Write([]byte{0}); err != nil {
		return err
	}
	return bw.Flush()
}

// RecoverFromSnapshot replaces the whole state with the streamed one.
func (s *StateMachine) RecoverFromSnapshot(r io.Reader, done <-chan struct{}) error {
	br := bufio.NewReaderSize(r, 1<<20)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != string(snapshotMagic) {
		return fmt.Errorf("%w: magic", ErrBadSnapshot)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	db := s.mu.db
	if db == nil {
		return ErrClosed
	}
	s.mu.nodes.reset()
	s.mu.kids.reset()
	b := db.NewBatch()
	if err := b.DeleteRange([]byte{0}, []byte{0xff}, nil); err != nil {
		return err
	}
	readChunk := func() ([]byte, error) {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
		}
		if n > 1<<30 {
			return nil, fmt.Errorf("%w: chunk of %d bytes", ErrBadSnapshot, n)
		}
		// Grow with the data rather than trusting the length: a corrupt
		// length must not allocate a gigabyte.
		var buf bytes.Buffer
		if _, err := io.CopyN(&buf, br, int64(n)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
		}
		return buf.Bytes(), nil
	}
	// The applied index and zxid are written in the last batch, after every
	// other key: a large snapshot is committed in several batches, and a
	// crash between them must not leave the new applied index over a
	// partial tree (Open would report the snapshot as applied).
	var applied, zxid []byte
	for {
		select {
		case <-done:
			b.Close()
			return errStopped
		default:
		}
		k, err := readChunk()
		if err != nil {
			b.Close()
			return err
		}
		if len(k) == 0 {
			break
		}
		v, err := readChunk()
		if err != nil {
			b.Close()
			return err
		}
		switch string(k) {
		case string(keyApplied):
			applied = v
			continue
		case string(keyZxid):
			zxid = v
			continue
		}
		if err := b.Set(k, v, nil); err != nil {
			b.Close()
			return err
		}
		if b.Len() > recoverBatchBytes {
			if err := b.Commit(pebble.NoSync); err != nil {
				return err
			}
			b = db.NewBatch()
		}
	}
	if len(applied) != 8 || len(zxid) != 8 {
		b.Close()
		return fmt.Errorf("%w: no applied index", ErrBadSnapshot)
	}
	if err := b.Set(keyApplied, applied, nil); err != nil {
		b.Close()
		return err
	}
	if err := b.Set(keyZxid, zxid, nil); err != nil {
		b.Close()
		return err
	}
	if err := commitDurable(db, b); err != nil {
		return err
	}
	if err := convertIfOld(db); err != nil {
		return fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	digest, stats, err := checkDigest(db, s.dir, binary.BigEndian.Uint64(applied))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	s.mu.digest, s.mu.stats = digest, stats
	s.mu.applied = binary.BigEndian.Uint64(applied)
	// The new state's index, even below the old one: the Raft log now
	// continues from the snapshot.
	if err := s.mu.mark.set(s.mu.applied); err != nil {
		return err
	}
	s.mu.zxid = int64(binary.BigEndian.Uint64(zxid))
	sessions, err := loadSessions(db)
	if err != nil {
		return err
	}
	s.mu.sessions = sessions
	sealed, err := getValue(db, keySealed)
	if err != nil {
		return err
	}
	s.mu.sealed = sealed != nil
	if s.sink != nil {
		s.sink.Applied(s.shardID, s.mu.zxid, []Event{{Kind: EventReset, Zxid: s.mu.zxid}})
	}
	return nil
}
