package fleet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/jute"
)

// EventKind says what an Event reports.
type EventKind int

const (
	EventMemberAdded EventKind = iota + 1
	// EventMemberChanged: the member's state changed.
	EventMemberChanged
	EventMemberRemoved
	EventCellCreated
	// EventCellChanged: the cell's state, placement, target or limits
	// changed.
	EventCellChanged
	// EventCellRemoved: a deleting cell was purged from the map.
	EventCellRemoved
	// EventReset: the whole map was replaced from a snapshot streamed by
	// another replica; compare the new map with what you run.
	EventReset
)

func (k EventKind) String() string {
	switch k {
	case EventMemberAdded:
		return "memberAdded"
	case EventMemberChanged:
		return "memberChanged"
	case EventMemberRemoved:
		return "memberRemoved"
	case EventCellCreated:
		return "cellCreated"
	case EventCellChanged:
		return "cellChanged"
	case EventCellRemoved:
		return "cellRemoved"
	case EventReset:
		return "reset"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one change an Update made to the map.
type Event struct {
	Kind EventKind
	// Version is the map version of the change.
	Version int64
	// Cell and ShardID name the cell of a cell event; Member the member of
	// a member event.
	Cell    string
	ShardID uint64
	Member  uint64
}

// EventSink hears of every change to a replica's map, in log order, after
// the change is committed to the replica's store and before any proposer
// learns its result. m is the map after the changes (immutable: keep it);
// events are the changes. It is called with the state machine's lock
// held, so it must not block or call back into the state machine (hand m
// to a goroutine of your own). Open also calls it once with no events to
// report the stored map.
type EventSink interface {
	Applied(m *Map, events []Event)
}

// Config configures the system shard's state machine.
type Config struct {
	// Dir is the directory under which each replica keeps its store
	// (StoreDir).
	Dir string
	// Sink hears of changes; nil discards them.
	Sink EventSink
}

// StoreDir is the directory of a replica's store under dir.
func StoreDir(dir string, shardID, replicaID uint64) string {
	return filepath.Join(dir, fmt.Sprintf("fleet-shard-%d-replica-%d", shardID, replicaID))
}

// NewFactory returns a Dragonboat factory for the system shard's on-disk
// state machine.
func NewFactory(cfg Config) sm.CreateOnDiskStateMachineFunc {
	return func(shardID, replicaID uint64) sm.IOnDiskStateMachine {
		return New(cfg, shardID, replicaID)
	}
}

// StateMachine is the Dragonboat IOnDiskStateMachine of one replica of the
// system shard.
type StateMachine struct {
	shardID, replicaID uint64
	dir                string
	sink               EventSink

	// mu guards the store and the map. Update holds it for writing for the
	// whole of its batch and the sink's call; Lookup holds it for reading
	// only to take the map (which is immutable). Lock order: mu, then the
	// sink's own locks.
	mu struct {
		sync.RWMutex
		db *pebble.DB
		// INVARIANT: m, digest and applied are the state of the last
		// committed batch: m's records hash to digest, and applied is the
		// index stored with them.
		m       *Map
		digest  uint64
		applied uint64
	}
}

var _ sm.IOnDiskStateMachine = (*StateMachine)(nil)

// New returns an unopened state machine.
func New(cfg Config, shardID, replicaID uint64) *StateMachine {
	return &StateMachine{shardID: shardID, replicaID: replicaID, dir: StoreDir(cfg.Dir, shardID, replicaID), sink: cfg.Sink}
}

// Open opens or creates the store, loads the map and checks it against its
// digest (ErrDamaged), and returns the applied index.
func (s *StateMachine) Open(stopc <-chan struct{}) (uint64, error) {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return 0, err
	}
	db, err := pebble.Open(s.dir, &pebble.Options{})
	if err != nil {
		return 0, fmt.Errorf("fleet: open %s: %w", s.dir, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, digest, applied, err := load(db)
	if err != nil {
		db.Close()
		return 0, fmt.Errorf("fleet: %s: %w", s.dir, err)
	}
	s.mu.db, s.mu.m, s.mu.digest, s.mu.applied = db, m, digest, applied
	if s.sink != nil {
		s.sink.Applied(m, nil)
	}
	return applied, nil
}

// ReadStore reads the map a stopped replica's store holds (dir as
// Config.Dir), read-only and checked against its digest, for the offline
// commands (export --cell). A missing store is an error.
func ReadStore(dir string, shardID, replicaID uint64) (*Map, error) {
	d := StoreDir(dir, shardID, replicaID)
	if _, err := os.Stat(filepath.Join(d, "CURRENT")); err != nil {
		return nil, fmt.Errorf("fleet: no store of the system shard in %s: %w", d, err)
	}
	db, err := pebble.Open(d, &pebble.Options{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("fleet: open %s: %w", d, err)
	}
	defer db.Close()
	m, _, _, err := load(db)
	if err != nil {
		return nil, fmt.Errorf("fleet: %s: %w", d, err)
	}
	return m, nil
}

// load reads the map from db, initialising a new store.
func load(db *pebble.DB) (*Map, uint64, uint64, error) {
	f, err := get(db, keyFormat)
	if err != nil {
		return nil, 0, 0, err
	}
	if f == nil {
		m := emptyMap()
		b := db.NewBatch()
		defer b.Close()
		if err := writeAll(b, m, 0); err != nil {
			return nil, 0, 0, err
		}
		return m, digestOf(m), 0, b.Commit(pebble.Sync)
	}
	if len(f) != 1 || f[0] != formatVersion {
		return nil, 0, 0, fmt.Errorf("%w: %x", ErrBadFormat, f)
	}
	a, err := get(db, keyApplied)
	if err != nil {
		return nil, 0, 0, err
	}
	d, err := get(db, keyDigest)
	if err != nil {
		return nil, 0, 0, err
	}
	if len(a) != 8 || len(d) != 8 {
		return nil, 0, 0, fmt.Errorf("%w: applied index of %d bytes, digest of %d", ErrDamaged, len(a), len(d))
	}
	l := newMapLoader()
	it := db.NewIter(&pebble.IterOptions{})
	for it.First(); it.Valid(); it.Next() {
		if !isRecord(it.Key()) {
			continue
		}
		if err := l.add(slices.Clone(it.Key()), slices.Clone(it.Value())); err != nil {
			it.Close()
			return nil, 0, 0, fmt.Errorf("%w: %w", ErrDamaged, err)
		}
	}
	if err := it.Close(); err != nil {
		return nil, 0, 0, err
	}
	m, digest, err := l.done()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	if want := binary.BigEndian.Uint64(d); digest != want {
		return nil, 0, 0, fmt.Errorf("%w: records hash to %#x, the stored digest is %#x", ErrDamaged, digest, want)
	}
	return m, digest, binary.BigEndian.Uint64(a), nil
}

// writeAll writes the whole of m, with the applied index, the digest and
// the format, into b (which a caller has cleared or which is new).
func writeAll(b *pebble.Batch, m *Map, applied uint64) error {
	for _, r := range records(m) {
		if err := b.Set(r.k, r.v, nil); err != nil {
			return err
		}
	}
	if err := putMeta(b, applied, digestOf(m)); err != nil {
		return err
	}
	return b.Set(keyFormat, []byte{formatVersion}, nil)
}

func putMeta(b *pebble.Batch, applied, digest uint64) error {
	if err := b.Set(keyApplied, binary.BigEndian.AppendUint64(nil, applied), nil); err != nil {
		return err
	}
	return b.Set(keyDigest, binary.BigEndian.AppendUint64(nil, digest), nil)
}

func get(db *pebble.DB, k []byte) ([]byte, error) {
	v, closer, err := db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return slices.Clone(v), nil
}

// Update applies committed entries in one Pebble batch: the changed
// records, the digest and the applied index together. Each entry's Result
// is its Reply (Data) and the map's version after it (Value).
func (s *StateMachine) Update(entries []sm.Entry) ([]sm.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.db == nil {
		return nil, ErrClosed
	}
	old := s.mu.m
	a := applier{m: old.shallow()}
	applied := s.mu.applied
	for i := range entries {
		e := &entries[i]
		if e.Index <= applied {
			return nil, fmt.Errorf("%w: entry %d after %d", ErrAppliedIndex, e.Index, applied)
		}
		applied = e.Index
		reply := Reply{Code: CodeOK, Version: a.m.version}
		if len(e.Cmd) > 0 { // an empty entry changes nothing
			d, err := Decode(e.Cmd)
			if errors.Is(err, ErrNewerCommand) {
				return nil, fmt.Errorf("fleet: entry %d: %w", e.Index, err)
			}
			reply = a.apply(d, err)
		}
		e.Result = sm.Result{Value: uint64(reply.Version), Data: jute.Marshal(&reply)}
	}
	b := s.mu.db.NewBatch()
	defer b.Close()
	digest := s.mu.digest
	if a.m.version != old.version { // every change advances the version
		var err error
		if digest, err = writeChanges(b, old, a.m, &a, digest); err != nil {
			return nil, err
		}
	}
	if err := putMeta(b, applied, digest); err != nil {
		return nil, err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return nil, fmt.Errorf("fleet: commit: %w", err)
	}
	s.mu.m, s.mu.applied, s.mu.digest = a.m, applied, digest
	if s.sink != nil && len(a.events) > 0 {
		s.sink.Applied(a.m, a.events)
	}
	return entries, nil
}

// writeChanges writes the records the applier changed into b and returns
// the digest advanced from old's records to m's.
func writeChanges(b *pebble.Batch, old, m *Map, a *applier, digest uint64) (uint64, error) {
	set := func(k, was, now []byte) error {
		if was != nil {
			digest ^= recordHash(k, was)
		}
		if now == nil {
			return b.Delete(k, nil)
		}
		digest ^= recordHash(k, now)
		return b.Set(k, now, nil)
	}
	if err := set(keyHeader, encodeHeader(old), encodeHeader(m)); err != nil {
		return 0, err
	}
	slices.Sort(a.dirtyMembers)
	for _, id := range slices.Compact(a.dirtyMembers) {
		var was, now []byte
		if x := old.member(id); x != nil {
			was = encodeMember(x)
		}
		if x := m.member(id); x != nil {
			now = encodeMember(x)
		}
		if err := set(memberKey(id), was, now); err != nil {
			return 0, err
		}
	}
	slices.SortFunc(a.dirtyCells, strings.Compare)
	for _, name := range slices.Compact(a.dirtyCells) {
		var was, now []byte
		if c := old.cell(name); c != nil {
			was = encodeCell(c)
		}
		if c := m.cell(name); c != nil {
			now = encodeCell(c)
		}
		if err := set(cellKey(name), was, now); err != nil {
			return 0, err
		}
	}
	return digest, nil
}

// MapQuery asks Lookup for the whole map (a *Map).
type MapQuery struct{}

// Query is a read Lookup runs on the current map.
type Query func(m *Map) (any, error)

// StatusQuery asks Lookup for the replica's Status.
type StatusQuery struct{}

// Status is a replica's position: what a member compares with its peers.
type Status struct {
	Applied uint64 // the Raft index of the last entry applied
	Version int64  // the map's version
	Digest  uint64 // of the map's records
}

// Lookup answers a MapQuery, a Query or a StatusQuery from the current
// map. Reads take the lock only to take the map: a *Map never changes.
func (s *StateMachine) Lookup(q any) (any, error) {
	s.mu.RLock()
	m, st := s.mu.m, Status{Applied: s.mu.applied, Digest: s.mu.digest}
	closed := s.mu.db == nil
	s.mu.RUnlock()
	if closed || m == nil {
		return nil, ErrClosed
	}
	st.Version = m.version
	switch q := q.(type) {
	case MapQuery:
		return m, nil
	case Query:
		return q(m)
	case StatusQuery:
		return st, nil
	}
	return nil, fmt.Errorf("%w: %T", ErrUnknownQuery, q)
}

// Sync makes everything applied so far durable.
func (s *StateMachine) Sync() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.db == nil {
		return ErrClosed
	}
	return s.mu.db.LogData(nil, pebble.Sync)
}

// Close closes the store.
func (s *StateMachine) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.db == nil {
		return nil
	}
	err := s.mu.db.Close()
	s.mu.db = nil
	return err
}
