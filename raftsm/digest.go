package raftsm

import (
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble"
)

// The store's digest: the sum, modulo 2^64, of xxhash64(key || value) over
// every key of the digested spaces, the tree and its indexes and the
// sessions. Update keeps it as it writes (each write subtracts the old
// entry's hash and adds the new one's) and stores it with the applied
// index (m:digest), so the digest always describes the state that applied
// index names. Open recomputes it from the store and refuses a store whose
// keys do not add up to it: a store that lost or changed data (a torn
// MANIFEST that drops the last flush's table, a damaged table) is never
// served as if whole. The change history and the metadata are not
// digested. Keys within one space have one length, so key || value splits
// one way only.
var keyDigest = []byte("m:digest")

var digestedSpaces = []byte{spaceNode, spaceChild, spaceEphemeral, spaceSweep, spaceSession, spaceOwner, spaceTouch}

func entryHash(k, v []byte) uint64 {
	var d xxhash.Digest
	d.Reset()
	d.Write(k)
	d.Write(v)
	return d.Sum64()
}

func putDigest(w writer, d uint64) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], d)
	return w.Set(keyDigest, v[:], nil)
}

// storedDigest reads m:digest; ok is false when the store has none (one
// written before the digest existed).
func storedDigest(r reader) (d uint64, ok bool, err error) {
	v, err := getValue(r, keyDigest)
	if err != nil || v == nil {
		return 0, false, err
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("%w: digest of %d bytes", ErrDamaged, len(v))
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// checkDigest recomputes the digest of db and compares it with the stored
// one; a store without one gets it. It returns the digest and the tree's
// figures, which it stores when they are missing or differ (they are
// derived from the tree the digest vouches for).
func checkDigest(db *pebble.DB, dir string, applied uint64) (uint64, TreeStats, error) {
	got, st, err := computeDigest(db)
	if err != nil {
		return 0, st, fmt.Errorf("%w: %s: reading it back: %w", ErrDamaged, dir, err)
	}
	want, ok, err := storedDigest(db)
	if err != nil {
		return 0, st, fmt.Errorf("%s: %w", dir, err)
	}
	if ok && got != want {
		return 0, st, fmt.Errorf("%w: %s does not add up to its digest at applied index %d "+
			"(recorded %016x, its keys give %016x): it has lost or changed data since it was written",
			ErrDamaged, dir, applied, want, got)
	}
	have, haveOK, err := storedStats(db)
	if err != nil {
		return 0, st, fmt.Errorf("%s: %w", dir, err)
	}
	if ok && haveOK && have == st {
		return got, st, nil
	}
	b := db.NewBatch()
	if err := putDigest(b, got); err != nil {
		b.Close()
		return 0, st, err
	}
	if err := putStats(b, st); err != nil {
		b.Close()
		return 0, st, err
	}
	return got, st, commitDurable(db, b)
}

// set writes k=v over the entry's current value old (nil: none), keeping
// the digest.
func (kv storeKV) set(k, v, old []byte) error {
	if kv.digest != nil {
		if old != nil {
			*kv.digest -= entryHash(k, old)
		}
		*kv.digest += entryHash(k, v)
	}
	return kv.w.Set(k, v, nil)
}

// del deletes k, whose current value is old (nil: none), keeping the
// digest.
func (kv storeKV) del(k, old []byte) error {
	if kv.digest != nil && old != nil {
		*kv.digest -= entryHash(k, old)
	}
	return kv.w.Delete(k, nil)
}

// current reads k's value in the batch (nil: none), for set and del; a
// write-only storeKV (no reader) keeps no digest and reads nothing.
func (kv storeKV) current(k []byte) ([]byte, error) {
	if kv.digest == nil {
		return nil, nil
	}
	return getValue(kv.r, k)
}

// recentDigests remembers a replica's digest after each of its last
// applied entries, for KindCheckDigest.
type recentDigests struct {
	buf  [maxRecentDigests]indexDigest
	next int // slots written, ever
}

type indexDigest struct {
	index  uint64
	digest uint64
}

// maxRecentDigests bounds the entries whose digests a replica remembers:
// a check that arrives later than that many entries after the index it
// names is not compared.
const maxRecentDigests = 4096

func (r *recentDigests) add(index, digest uint64) {
	r.buf[r.next%maxRecentDigests] = indexDigest{index, digest}
	r.next++
}

// at returns the digest after the entry at index, if remembered.
func (r *recentDigests) at(index uint64) (uint64, bool) {
	n := min(r.next, maxRecentDigests)
	for i := 1; i <= n; i++ {
		e := r.buf[(r.next-i)%maxRecentDigests]
		if e.index == index {
			return e.digest, true
		}
		if e.index < index {
			return 0, false
		}
	}
	return 0, false
}

// DigestCheck encodes a KindCheckDigest body: the digest after index.
func DigestCheck(index, digest uint64) []byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], index)
	binary.BigEndian.PutUint64(b[8:], digest)
	return b[:]
}

// checkDigest compares a KindCheckDigest with what this replica
// remembers; it is an error only if the digests differ.
func (a *applier) checkDigestCommand(c *Command) (*Reply, error) {
	if len(c.Body) != 16 {
		return nil, fmt.Errorf("%w: digest check of %d bytes", ErrBadCommand, len(c.Body))
	}
	index, want := binary.BigEndian.Uint64(c.Body[:8]), binary.BigEndian.Uint64(c.Body[8:])
	got, ok := uint64(0), false
	for i := len(a.digests) - 1; i >= 0 && !ok; i-- {
		if a.digests[i].index == index {
			got, ok = a.digests[i].digest, true
		}
	}
	if !ok {
		got, ok = a.recent.at(index)
	}
	if ok && got != want {
		return nil, fmt.Errorf("%w: after entry %d this replica's digest is %016x, the proposer's %016x",
			ErrDigestMismatch, index, got, want)
	}
	return &Reply{Zxid: a.zxid}, nil
}
