package fleet

import "errors"

var (
	// ErrBadCommand means an entry did not decode, or names a kind its
	// version does not have. Update refuses such an entry as a result
	// (CodeMalformed, CodeUnknownKind): every replica that knows the
	// entry's version refuses it the same way.
	ErrBadCommand = errors.New("fleet: bad command")
	// ErrNewerCommand means an entry is of a command version above
	// CommandVersion: a newer binary proposed it. Update stops the replica
	// rather than guess what the newer replicas did with it.
	ErrNewerCommand = errors.New("fleet: command of a newer version")
	// ErrAppliedIndex means Dragonboat handed Update an entry at or below
	// the applied index.
	ErrAppliedIndex = errors.New("fleet: applied index did not increase")
	// ErrClosed is returned by Lookup after Close.
	ErrClosed = errors.New("fleet: state machine closed")
	// ErrBadSnapshot means a snapshot stream is damaged.
	ErrBadSnapshot = errors.New("fleet: bad snapshot")
	// ErrDamaged means the store's records do not add up to its digest, do
	// not decode, or break the map's invariants.
	ErrDamaged = errors.New("fleet: the map store is damaged")
	// ErrBadFormat means the store's format version is unknown.
	ErrBadFormat = errors.New("fleet: unknown store format")
	// ErrUnknownQuery means Lookup was given a query of the wrong type.
	ErrUnknownQuery = errors.New("fleet: unknown query type")

	errMalformed   = errors.New("malformed")
	errUnknownKind = errors.New("unknown kind")
)
