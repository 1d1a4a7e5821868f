package raftsm

import "errors"

var (
	// ErrBadCommand means a log entry could not be decoded. Update stops the
	// replica rather than skip it.
	ErrBadCommand = errors.New("raftsm: undecodable command")
	// ErrAppliedIndex means Dragonboat handed Update an entry at or below the
	// applied index.
	ErrAppliedIndex = errors.New("raftsm: applied index did not increase")
	// ErrClosed is returned by Lookup after Close.
	ErrClosed = errors.New("raftsm: state machine closed")
	// ErrBadSnapshot means a snapshot stream is damaged.
	ErrBadSnapshot = errors.New("raftsm: bad snapshot")
	// ErrImportMismatch means the members of a shard started from
	// different imported states; the replica stops rather than diverge.
	ErrImportMismatch = errors.New("raftsm: this replica's imported state differs from the ensemble's")
	// ErrUnknownQuery means Lookup was given a query of the wrong type.
	ErrUnknownQuery = errors.New("raftsm: unknown query type")
	// ErrNotLocked means a ReadFunc asked for what only a LockedReadFunc
	// may have (an iterator that outlives the query).
	ErrNotLocked = errors.New("raftsm: needs a LockedReadFunc")
	// ErrDamaged means a store's keys do not add up to its digest, or it
	// cannot be read back: it lost or changed data after it was written.
	ErrDamaged = errors.New("raftsm: the state store is damaged")
	// ErrDigestMismatch means this replica's state differs from the one a
	// KindCheckDigest carried for the same applied index: it diverged,
	// and stops rather than serve a different tree.
	ErrDigestMismatch = errors.New("raftsm: this replica's digest differs from the ensemble's")
	// ErrBadFormat means a store's key layout version is unknown.
	ErrBadFormat = errors.New("raftsm: unknown store format")
)
