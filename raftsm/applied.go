package raftsm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"
)

// StoreOptions are the Pebble options Open opens a store with, for a
// caller that opens it read-only first (to check it).
func StoreOptions() *pebble.Options { return pebbleOptions(nil) }

// StoredApplied is the applied index Open would report for the store db
// holds: 0 for a store that was never opened by a replica. The member reads
// it from a read-only open of a stopped member's store, to compare it with
// the Raft log before Dragonboat opens the store for writing.
func StoredApplied(db *pebble.DB) (uint64, error) {
	v, err := getValue(db, keyApplied)
	if err != nil || v == nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: applied index of %d bytes", ErrBadSnapshot, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// InspectApplied is a read-only store's inspection (what
// internal/storecheck.Check runs on the store it opened) that reads the
// stored applied index into *applied; an index that does not decode is
// returned as bad(err), the caller's report of a damaged store. With it
// the member checks its store without knowing Pebble.
func InspectApplied(applied *uint64, bad func(error) error) func(*pebble.DB) error {
	return func(db *pebble.DB) error {
		a, err := StoredApplied(db)
		if errors.Is(err, ErrBadSnapshot) {
			return bad(err)
		}
		*applied = a
		return err
	}
}
