package fleet

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cockroachdb/pebble"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/jute"
)

// Snapshot stream: the magic, the body's length (8 bytes, big-endian), the
// body and its CRC-32C (4 bytes). The body is the applied index, the
// number of records and each record's key and value, in key order: the
// same bytes the store holds, so the same map always streams the same
// bytes.
var snapshotMagic = []byte("ZKFLEET1")

// maxSnapshotBytes bounds a snapshot's body: a map of a hundred thousand
// cells is a few tens of MB. A longer length is damage, not a map.
const maxSnapshotBytes = 256 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errStopped must be Dragonboat's own sentinel, unwrapped: Dragonboat
// compares it with == and treats any other error as fatal.
var errStopped = sm.ErrSnapshotStopped

// snapshotState is what PrepareSnapshot pins: the map is immutable, so
// the pointer is the snapshot.
type snapshotState struct {
	m       *Map
	applied uint64
}

// PrepareSnapshot pins the current map and applied index.
func (s *StateMachine) PrepareSnapshot() (any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.db == nil {
		return nil, ErrClosed
	}
	return snapshotState{m: s.mu.m, applied: s.mu.applied}, nil
}

func encodeSnapshotBody(st snapshotState) []byte {
	rs := records(st.m)
	w := jute.NewWriter(256)
	w.Long(int64(st.applied))
	w.Int(int32(len(rs)))
	for _, r := range rs {
		w.Buffer(r.k)
		w.Buffer(r.v)
	}
	return w.Bytes()
}

// SaveSnapshot streams the pinned map to w.
func (s *StateMachine) SaveSnapshot(ctx any, w io.Writer, done <-chan struct{}) error {
	st, ok := ctx.(snapshotState)
	if !ok {
		return fmt.Errorf("%w: context %T", ErrBadSnapshot, ctx)
	}
	select {
	case <-done:
		return errStopped
	default:
	}
	body := encodeSnapshotBody(st)
	bw := bufio.NewWriter(w)
	bw.Write(snapshotMagic)
	bw.Write(binary.BigEndian.AppendUint64(nil, uint64(len(body))))
	bw.Write(body)
	bw.Write(binary.BigEndian.AppendUint32(nil, crc32c(body)))
	// A bufio.Writer keeps its first error and returns it from Flush: the
	// transport's ErrSnapshotStreaming among them, as Dragonboat wants it.
	return bw.Flush()
}

// RecoverFromSnapshot replaces the whole map with the streamed one, in one
// batch with its applied index.
func (s *StateMachine) RecoverFromSnapshot(r io.Reader, done <-chan struct{}) error {
	m, applied, err := readSnapshot(r)
	if err != nil {
		return err
	}
	select {
	case <-done:
		return errStopped
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.db == nil {
		return ErrClosed
	}
	b := s.mu.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{0}, []byte{0xff}, nil); err != nil {
		return err
	}
	if err := writeAll(b, m, applied); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("fleet: commit snapshot: %w", err)
	}
	s.mu.m, s.mu.applied, s.mu.digest = m, applied, digestOf(m)
	if s.sink != nil {
		s.sink.Applied(m, []Event{{Kind: EventReset, Version: m.version}})
	}
	return nil
}

// readSnapshot reads and checks a snapshot stream.
func readSnapshot(r io.Reader) (*Map, uint64, error) {
	var head [16]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, 0, fmt.Errorf("%w: header: %w", ErrBadSnapshot, err)
	}
	if !bytes.Equal(head[:8], snapshotMagic) {
		return nil, 0, fmt.Errorf("%w: magic %q", ErrBadSnapshot, head[:8])
	}
	n := binary.BigEndian.Uint64(head[8:])
	if n > maxSnapshotBytes {
		return nil, 0, fmt.Errorf("%w: body of %d bytes", ErrBadSnapshot, n)
	}
	// Grow with the data rather than trust the length.
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, int64(n)+4); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	body, sum := buf.Bytes()[:n], buf.Bytes()[n:]
	if got, want := crc32c(body), binary.BigEndian.Uint32(sum); got != want {
		return nil, 0, fmt.Errorf("%w: checksum %#x, want %#x", ErrBadSnapshot, got, want)
	}
	jr := jute.NewReader(body)
	applied := uint64(jr.Long())
	nrec := count(jr, 8)
	l := newMapLoader()
	var prev []byte
	for i := 0; i < nrec && jr.Err() == nil; i++ {
		k, v := jr.Buffer(), jr.Buffer()
		if jr.Err() != nil {
			break
		}
		if !isRecord(k) || prev != nil && bytes.Compare(prev, k) >= 0 {
			return nil, 0, fmt.Errorf("%w: record key %q", ErrBadSnapshot, k)
		}
		prev = k
		if err := l.add(k, v); err != nil {
			return nil, 0, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
		}
	}
	if err := finish(jr); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	m, _, err := l.done()
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	return m, applied, nil
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crcTable) }
