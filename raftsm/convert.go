package raftsm

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/zkraft/zkraft/znode"
)

// Format 1, the key layout of stores written before format 2 (keys.go):
//
//	'n' parent 0x00 name      a znode (parent "" and name "" for the root):
//	                          its record, with no path length before it
//	'e' owner(8, BE) path     ephemeral index (empty value)
//	'c' path                  containers and TTL nodes (empty value)
//
// Sessions, history and metadata are the same in both; a format 1 store
// has no m:format.
const (
	v1Node      = 'n'
	v1Ephemeral = 'e'
	v1Sweep     = 'c'
)

// convertBatchBytes is the batch size at which a conversion commits. A
// variable so that tests can force several batches.
var convertBatchBytes = 64 << 20

// convertIfOld converts a format 1 store to format 2 in place, and checks
// that any other store is format 2. The conversion writes the new keys in
// batches, then deletes the old ones and records the format in one last
// batch: a crash before that batch leaves a format 1 store (the new keys
// written so far are written again, with the same values), so Open can
// always start it over.
func convertIfOld(db *pebble.DB) error {
	f, err := getValue(db, keyFormat)
	if err != nil {
		return err
	}
	if f != nil {
		if len(f) != 1 || f[0] != formatVersion {
			return fmt.Errorf("%w: %x (this zkraft reads format %d)", ErrBadFormat, f, formatVersion)
		}
		return nil
	}
	b := db.NewBatch()
	flush := func() error {
		if b.Len() < convertBatchBytes {
			return nil
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return err
		}
		b = db.NewBatch()
		return nil
	}
	kv := storeKV{w: b} // every Put creates: node, child and sweep keys
	err = scanPrefix(db, []byte{v1Node}, func(k, v []byte) error {
		sep := bytes.IndexByte(k[1:], 0)
		if sep < 0 {
			return fmt.Errorf("%w: format 1 node key %q", ErrBadSnapshot, k)
		}
		parent, name := string(k[1:1+sep]), string(k[2+sep:])
		path := "/"
		if parent != "" {
			path = znode.Join(parent, name)
		}
		n, err := znode.DecodeNode(v)
		if err != nil {
			return fmt.Errorf("format 1 node %q: %w", path, err)
		}
		kv.w = b
		if err := kv.Put(path, n); err != nil {
			return err
		}
		return flush()
	})
	if err != nil {
		b.Close()
		return err
	}
	err = scanPrefix(db, []byte{v1Ephemeral}, func(k, _ []byte) error {
		if len(k) < 9 {
			return fmt.Errorf("%w: format 1 ephemeral key %q", ErrBadSnapshot, k)
		}
		owner := int64(uint64(k[1])<<56 | uint64(k[2])<<48 | uint64(k[3])<<40 | uint64(k[4])<<32 |
			uint64(k[5])<<24 | uint64(k[6])<<16 | uint64(k[7])<<8 | uint64(k[8]))
		kv.w = b
		if err := kv.SetEphemeral(owner, string(k[9:]), true); err != nil {
			return err
		}
		return flush()
	})
	if err != nil {
		b.Close()
		return err
	}
	for _, space := range []byte{v1Node, v1Ephemeral, v1Sweep} {
		lo := []byte{space}
		if err := b.DeleteRange(lo, upperBound(lo), nil); err != nil {
			b.Close()
			return err
		}
	}
	if err := putFormat(b); err != nil {
		b.Close()
		return err
	}
	return commitDurable(db, b)
}

// scanPrefix calls fn for every key with prefix lo, in order.
func scanPrefix(r reader, lo []byte, fn func(k, v []byte) error) error {
	it := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	for it.First(); it.Valid(); it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	return it.Close()
}
