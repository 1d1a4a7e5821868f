package raftsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// EventKind says what an Event reports.
type EventKind int

const (
	// EventWatch is a watch trigger: Type on Path at Zxid.
	EventWatch EventKind = iota + 1
	// EventSessionCreated: Session now exists with Timeout (ms).
	EventSessionCreated
	// EventSessionClosed: Session is gone (closed or expired) at Zxid.
	EventSessionClosed
	// EventKeepAlive: Sessions were heard from by some member.
	EventKeepAlive
	// EventSessionAttached: Session is now held by the connection Owner.
	EventSessionAttached
	// EventReset: the whole state was replaced from a snapshot streamed by
	// another replica. Watches may have missed changes and sessions may
	// differ: the member closes its clients (they reconnect and re-send
	// their watches) and reloads sessions.
	EventReset
)

// Event is what applying a command tells the member that hosts the replica.
type Event struct {
	Kind     EventKind
	Zxid     int64
	Type     jute.EventType
	Path     string
	ACL      []jute.ACL // of the node a watch event is about
	Session  int64
	Timeout  int32
	Sessions []int64
	Owner    uint64
	// Index is the Raft index of the entry (keep-alive, session created,
	// attached): the leader hands it back when it expires a session.
	Index uint64
}

// EventSink receives the events of each Update, in log order, after the
// Update's batch is committed and before any proposer learns its result.
// It is called with the state machine's write lock held, so it must not
// call back into the state machine and must not block.
//
// INVARIANT: a reader that observes a change takes its snapshot after the
// sink has been given that change's triggers (the snapshot is taken under
// the read lock). A ReadFunc may run while later Updates deliver their
// events; what it registers to hear about changes must be registered as of
// View.Zxid and caught up from there (the server's watch registry does).
// A LockedReadFunc sees no Update and no event while it runs.
// Open also calls Applied once, with no events, to report the stored zxid.
type EventSink interface {
	Applied(shardID uint64, zxid int64, events []Event)
}

// Config configures a state machine. Every replica of a shard must be given
// the same Options.
type Config struct {
	// Dir is the directory under which each replica keeps its Pebble store.
	Dir string
	// Options are the tree rules.
	Options znode.Options
	// Sink receives applied events; nil discards them.
	Sink EventSink
	// HistoryMax bounds the change history kept for resumable watches, in
	// events (trimmed once 1/32 over). Default 100000.
	HistoryMax int64
	// HistoryMaxAge drops history older than this many milliseconds (by
	// the time carried in the commands). 0 keeps history by count only.
	HistoryMaxAge int64
	// BlockCacheBytes sizes the Pebble block cache of each replica's
	// store. 0 means DefaultBlockCacheBytes.
	BlockCacheBytes int64
	// SnapshotEntries is Dragonboat's Config.SnapshotEntries for the
	// replica: how many entries pass between Raft snapshots, each of which
	// Sync precedes. Update starts a flush of the store in the background
	// shortly before the next one is due (preflush), so that Sync, which
	// flushes with Dragonboat's lock held, finds little left to write. 0:
	// no early flush.
	SnapshotEntries uint64
}

// DefaultBlockCacheBytes is the block cache of a store when Config leaves
// it 0: enough for the index and filter blocks of a tree of tens of
// millions of znodes and the hot part of its data.
const DefaultBlockCacheBytes = 256 << 20

// NewFactory returns a Dragonboat factory for on-disk state machines.
func NewFactory(cfg Config) sm.CreateOnDiskStateMachineFunc {
	return func(shardID, replicaID uint64) sm.IOnDiskStateMachine {
		return New(cfg, shardID, replicaID)
	}
}

// StateMachine is the Dragonboat IOnDiskStateMachine of one replica.
type StateMachine struct {
	shardID    uint64
	replicaID  uint64
	dir        string
	opts       znode.Options
	sink       EventSink
	histMax    int64
	histMaxAge int64
	cacheBytes int64
	snapshotAt uint64 // Config.SnapshotEntries

	// syncedAt is the applied index at the last Sync (or Open); preflushed
	// says Update has started the early flush for the next one. Update
	// reads them under mu; Sync, which holds mu only for reading while it
	// flushes, writes them.
	syncedAt   atomic.Uint64
	preflushed atomic.Bool

	// dbMu keeps the store open under readers: a Lookup holds it for
	// reading while its query runs on a snapshot, outside mu; Close holds
	// it for writing. Lock order: dbMu, then mu.
	dbMu sync.RWMutex

	// mu orders Update against the start of reads: Update holds it for
	// writing from the first read of its batch until the sink has taken
	// its events; a Lookup holds it for reading only to take its snapshot
	// (or, for a LockedReadFunc, for the whole query). Lock order: dbMu,
	// mu, then the sink's own locks.
	mu struct {
		sync.RWMutex
		db       *pebble.DB
		cache    *pebble.Cache
		applied  uint64
		zxid     int64
		digest   uint64                   // of the applied state (digest.go)
		digests  recentDigests            // after each recent entry (digest.go)
		stats    TreeStats                // of the applied state (stats.go)
		sessions map[int64]*cachedSession // every stored session (apply.go)
		sealed   bool                     // keySealed is set (KindSeal)
		nodes    *nodeCache               // recent nodes, for Update only (nodecache.go)
		kids     *childCache              // recent child lists (childcache.go)
		mark     *appliedMark             // the applied mark (mark.go)
	}
}

var _ sm.IOnDiskStateMachine = (*StateMachine)(nil)

// New returns an unopened state machine.
func New(cfg Config, shardID, replicaID uint64) *StateMachine {
	s := &StateMachine{
		shardID:    shardID,
		replicaID:  replicaID,
		dir:        filepath.Join(cfg.Dir, fmt.Sprintf("shard-%d-replica-%d", shardID, replicaID)),
		opts:       cfg.Options,
		sink:       cfg.Sink,
		histMax:    cfg.HistoryMax,
		histMaxAge: cfg.HistoryMaxAge,
		cacheBytes: cfg.BlockCacheBytes,
		snapshotAt: cfg.SnapshotEntries,
	}
	if s.histMax <= 0 {
		s.histMax = 100000
	}
	if s.cacheBytes <= 0 {
		s.cacheBytes = DefaultBlockCacheBytes
	}
	s.mu.nodes = newNodeCache(nodeCacheBytes)
	s.mu.kids = newChildCache(childCacheBytes)
	return s
}

// nodeCacheBytes bounds the apply path's node cache: the hot part of most
// trees, and a small share of the memory a large tree takes.
const nodeCacheBytes = 32 << 20

// childCacheBytes bounds the child-list cache.
const childCacheBytes = 16 << 20

// pebbleOptions are the store's options over a block cache (nil: Pebble's
// own small default, for short-lived stores such as an import's). Every
// level has a bloom filter: node keys are hashes, so point reads have no
// locality for the index alone to exploit, and a create first reads the
// path it creates, which is usually absent.
//
// These options keep Pebble's WAL: they are the options of the stores
// written outside a replica (an import's) and of a read-only open. A
// replica's own store opens with liveOptions.
func pebbleOptions(cache *pebble.Cache) *pebble.Options {
	o := &pebble.Options{
		MemTableSize: memTableBytes,
		Cache:        cache,
		// Where a WAL is written (an import's store), write it back as it
		// grows rather than all at its close (docs/performance.md, "Write
		// tail").
		WALBytesPerSync: 512 << 10,
	}
	// One entry: Pebble derives the deeper levels from the last one given
	// (file sizes doubling), as with its defaults.
	o.Levels = []pebble.LevelOptions{{FilterPolicy: bloom.FilterPolicy(10), FilterType: pebble.TableFilter}}
	return o
}

// memTableBytes is the size of the store's memtable.
const memTableBytes = 32 << 20

// liveOptions are the options of a replica's own store: pebbleOptions
// without Pebble's write-ahead log. The Raft log is the state machine's
// write-ahead log: what Update wrote and a crash lost from the memtable,
// Dragonboat applies again from the log, which it keeps past the index
// Open reports. That holds because
//
//   - every Update is one batch holding its data, the applied index and the
//     digest, and a batch lands in one memtable, which Pebble flushes whole
//     and in order; so the tables on disk always hold the whole state of
//     some applied index, and Open reports that index;
//   - Dragonboat compacts the log only below a snapshot, and before it
//     records a snapshot of an on-disk state machine (rsm's concurrentSave:
//     prepare, then sync, then the dummy snapshot at the prepared index) or
//     after it recovers one streamed from a peer it calls Sync, which
//     flushes the memtables: the store is durable at or above every index
//     below which the log may be compacted, and at or above the index of
//     every snapshot recorded (which a restart takes as applied; the
//     member refuses a store below it, server's checkStores);
//   - the store's writes that are not replayed from the log (the initial
//     tree, a recovered snapshot, a conversion, a new digest record) are
//     flushed before they are relied on (commitDurable), and Close flushes,
//     so that a clean stop leaves nothing to replay.
//
// What the WAL gave besides, the member's view of how far the replica had
// applied when it was killed, the applied mark keeps (mark.go): without it
// a damaged newest WAL of the Raft log would lose acknowledged writes
// without the member knowing.
//
// Each write thus reaches the disk once less (no WAL record, no WAL bytes
// to write back), and a memtable's rotation closes no WAL (with one, the
// close synced it on the apply path).
func liveOptions(cache *pebble.Cache) *pebble.Options {
	o := pebbleOptions(cache)
	o.DisableWAL = true
	o.WALBytesPerSync = 0
	return o
}

// commitDurable commits b and makes it durable whether or not db has a
// WAL: a flush of the memtables (a store without a WAL refuses a synced
// commit).
func commitDurable(db *pebble.DB, b *pebble.Batch) error {
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	return db.Flush()
}

// Open opens or creates the store and returns the applied index: the
// index of the state its tables hold (liveOptions). A store an earlier
// zkraft wrote with a WAL opens with that WAL replayed.
func (s *StateMachine) Open(stopc <-chan struct{}) (uint64, error) {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return 0, err
	}
	cache := pebble.NewCache(s.cacheBytes)
	db, err := pebble.Open(s.dir, liveOptions(cache))
	if err != nil {
		cache.Unref()
		return 0, fmt.Errorf("raftsm: open %s: %w", s.dir, err)
	}
	mark, err := openMark(s.dir)
	if err != nil {
		db.Close()
		cache.Unref()
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.db, s.mu.cache, s.mu.mark = db, cache, mark
	s.mu.nodes.reset()
	s.mu.kids.reset()
	// The mark is left as it is: after a kill it is above the index the
	// tables hold until the replay from the log passes it again, and it
	// must stay so if the member is killed again meanwhile.
	index, err := s.openLocked(db)
	s.syncedAt.Store(index)
	s.preflushed.Store(false)
	if err != nil {
		db.Close()
		cache.Unref()
		mark.close()
		s.mu.db, s.mu.cache, s.mu.mark = nil, nil, nil
	}
	return index, err
}

// openLocked reads (or initialises) the opened store.
func (s *StateMachine) openLocked(db *pebble.DB) (uint64, error) {
	v, err := getValue(db, keyApplied)
	if err != nil {
		return 0, err
	}
	if v == nil {
		if err := initTree(db); err != nil {
			return 0, err
		}
		s.mu.sessions = map[int64]*cachedSession{}
		s.mu.sealed = false
		s.mu.digest, s.mu.stats, err = checkDigest(db, s.dir, 0)
		return 0, err
	}
	if err := convertIfOld(db); err != nil {
		return 0, fmt.Errorf("raftsm: %s: %w", s.dir, err)
	}
	if s.mu.sessions, err = loadSessions(db); err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: applied index of %d bytes", ErrBadSnapshot, len(v))
	}
	s.mu.applied = binary.BigEndian.Uint64(v)
	if s.mu.digest, s.mu.stats, err = checkDigest(db, s.dir, s.mu.applied); err != nil {
		return 0, err
	}
	z, err := getValue(db, keyZxid)
	if err != nil {
		return 0, err
	}
	if len(z) != 8 {
		return 0, fmt.Errorf("%w: zxid of %d bytes", ErrBadSnapshot, len(z))
	}
	s.mu.zxid = int64(binary.BigEndian.Uint64(z))
	sealed, err := getValue(db, keySealed)
	if err != nil {
		return 0, err
	}
	s.mu.sealed = sealed != nil
	if s.sink != nil {
		// The member learns the stored zxid before any entry is applied:
		// reconnecting clients compare their lastZxidSeen with it.
		s.sink.Applied(s.shardID, s.mu.zxid, nil)
	}
	return s.mu.applied, nil
}

// initTree writes the tree every ZooKeeper starts with: the root,
// /zookeeper, /zookeeper/quota and /zookeeper/config, all with zero stats.
func initTree(db *pebble.DB) error {
	b := db.NewBatch()
	kv := storeKV{w: b}
	nodes := []struct {
		path string
		n    *znode.Node
	}{
		// DataTree creates them with new byte[0]: getData answers an
		// empty buffer, not a null one.
		{"/", &znode.Node{Data: []byte{}, ACL: znode.OpenACL, NumChildren: 1}},
		{znode.ZooKeeperPath, &znode.Node{Data: []byte{}, ACL: znode.OpenACL, NumChildren: 3}},
		{znode.QuotaPath, &znode.Node{Data: []byte{}, ACL: znode.OpenACL}},
		{znode.ConfigPath, &znode.Node{Data: []byte{}, ACL: znode.ReadACLUnsafe, Aversion: -1}},
		// zkraft's feature node: how clients discover the extensions.
		{znode.FeaturesPath, &znode.Node{Data: []byte(znode.Features), ACL: znode.ReadACLUnsafe}},
	}
	for _, x := range nodes {
		if err := kv.Put(x.path, x.n); err != nil {
			return err
		}
	}
	if err := putMeta(b, 0, 0); err != nil {
		return err
	}
	if err := putFormat(b); err != nil {
		return err
	}
	return commitDurable(db, b)
}

func putFormat(w writer) error { return w.Set(keyFormat, []byte{formatVersion}, nil) }

func putMeta(w writer, applied uint64, zxid int64) error {
	var a, z [8]byte
	binary.BigEndian.PutUint64(a[:], applied)
	binary.BigEndian.PutUint64(z[:], uint64(zxid))
	if err := w.Set(keyApplied, a[:], nil); err != nil {
		return err
	}
	return w.Set(keyZxid, z[:], nil)
}

// Update applies committed entries in one Pebble batch.
func (s *StateMachine) Update(entries []sm.Entry) ([]sm.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.mu.db.NewIndexedBatch()
	defer b.Close()
	committed := false
	defer func() {
		if !committed {
			s.mu.nodes.reset() // they hold the batch's writes
			s.mu.kids.reset()
		}
	}()
	a := applier{opts: s.opts, zxid: s.mu.zxid, sess: s.mu.sessions, digest: s.mu.digest, recent: &s.mu.digests, stats: s.mu.stats, sealed: s.mu.sealed}
	a.kv = storeKV{treeReader: treeReader{r: b, kids: s.mu.kids}, w: b, cache: s.mu.nodes, zxid: &a.zxid, digest: &a.digest, stats: &a.stats}
	applied := s.mu.applied
	times := map[int64]int64{} // zxid -> command time, for history
	var now int64
	for i := range entries {
		e := &entries[i]
		if e.Index <= applied {
			return nil, fmt.Errorf("%w: entry %d after %d", ErrAppliedIndex, e.Index, applied)
		}
		applied = e.Index
		if len(e.Cmd) == 0 {
			a.digests = append(a.digests, indexDigest{e.Index, a.digest})
			continue
		}
		cmd, err := DecodeCommand(e.Cmd)
		if err != nil {
			return nil, fmt.Errorf("raftsm: entry %d: %w", e.Index, err)
		}
		before := a.zxid
		a.index = e.Index
		reply, err := a.apply(cmd)
		if err != nil {
			return nil, fmt.Errorf("raftsm: entry %d (%s): %w", e.Index, cmd.Kind, err)
		}
		e.Result = sm.Result{Value: uint64(reply.Zxid), Data: encodeReply(reply)}
		a.digests = append(a.digests, indexDigest{e.Index, a.digest})
		if cmd.Time > now {
			now = cmd.Time
		}
		if a.zxid != before {
			times[a.zxid] = cmd.Time
		}
	}
	if err := s.appendHistory(b, a.events, times, now); err != nil {
		return nil, fmt.Errorf("raftsm: history: %w", err)
	}
	if err := putMeta(b, applied, a.zxid); err != nil {
		return nil, err
	}
	if err := putDigest(b, a.digest); err != nil {
		return nil, err
	}
	if err := putStats(b, a.stats); err != nil {
		return nil, err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return nil, fmt.Errorf("raftsm: commit: %w", err)
	}
	committed = true
	// Before any result leaves: every acknowledged entry is at or below
	// the mark (mark.go).
	if err := s.mu.mark.set(applied); err != nil {
		return nil, err
	}
	if err := s.preflushLocked(applied); err != nil {
		return nil, err
	}
	s.mu.applied = applied
	s.mu.zxid = a.zxid
	s.mu.digest = a.digest
	s.mu.stats = a.stats
	s.mu.sealed = a.sealed
	for _, d := range a.digests {
		s.mu.digests.add(d.index, d.digest)
	}
	if s.sink != nil {
		s.sink.Applied(s.shardID, a.zxid, a.events)
	}
	return entries, nil
}

// View is a consistent read-only view of a replica's state, valid only
// inside the ReadFunc it is passed to.
//
// A View cannot write: its tree is a znode.ReadKV over a Pebble reader
// (Get and NewIter only) and its store handle offers snapshots and metrics
// only (TestViewCannotWrite checks that no field of a View has a write
// method). Every read path in the server reads through one.
type View struct {
	tree    treeReader
	db      storeReader
	zxid    int64
	applied uint64
	digest  uint64
	stats   TreeStats
	// locked: the view is the live store under the state machine's read
	// lock (a LockedReadFunc), not a snapshot.
	locked bool
}

// storeReader is the read-only part of the Pebble DB a View keeps: a
// snapshot for the history iterator, the store's metrics.
type storeReader interface {
	NewSnapshot() *pebble.Snapshot
	Metrics() *pebble.Metrics
}

var _ storeReader = (*pebble.DB)(nil)

// Zxid is the last applied zxid.
func (v View) Zxid() int64 { return v.zxid }

// Applied is the Raft index of the last entry applied.
func (v View) Applied() uint64 { return v.applied }

// Digest is the store's digest after the last entry applied (digest.go),
// what a KindCheckDigest for Applied carries.
func (v View) Digest() uint64 { return v.digest }

// Sealed reports whether the namespace is sealed (KindSeal).
func (v View) Sealed() (bool, error) {
	b, err := getValue(v.tree.r, keySealed)
	return b != nil, err
}

// Tree is the read-only data tree.
func (v View) Tree() znode.ReadKV { return v.tree }

// Session returns a session's timeout in ms.
func (v View) Session(id int64) (timeout int32, ok bool, err error) {
	b, err := getValue(v.tree.r, sessionKey(id))
	if err != nil || b == nil {
		return 0, false, err
	}
	if len(b) != 4 {
		return 0, false, fmt.Errorf("%w: session record of %d bytes", ErrBadSnapshot, len(b))
	}
	return int32(binary.BigEndian.Uint32(b)), true, nil
}

// SweepCandidates returns the containers that are empty and have had a
// child, and the TTL nodes that are empty and whose mtime is more than
// their TTL before now (ms): what ZooKeeper's ContainerManager deletes.
func (v View) SweepCandidates(now int64, limit int) ([]string, error) {
	paths, err := v.tree.sweepPaths()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range paths {
		if len(out) >= limit {
			break
		}
		n, err := v.tree.Get(p)
		if err != nil {
			return nil, err
		}
		if n == nil || n.NumChildren > 0 {
			continue
		}
		switch znode.KindOf(n.EphemeralOwner) {
		case znode.OwnerContainer:
			if n.Cversion > 0 {
				out = append(out, p)
			}
		case znode.OwnerTTL:
			if now-n.Mtime > znode.TTLOf(n.EphemeralOwner) {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// SessionInfo is a stored session.
type SessionInfo struct {
	ID      int64
	Timeout int32
}

// Sessions lists every session in id order.
func (v View) Sessions() ([]SessionInfo, error) {
	lo := []byte{spaceSession}
	it := v.tree.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	var out []SessionInfo
	for it.First(); it.Valid(); it.Next() {
		k, val := it.Key(), it.Value()
		if len(k) != 9 || len(val) != 4 {
			it.Close()
			return nil, fmt.Errorf("%w: session record", ErrBadSnapshot)
		}
		out = append(out, SessionInfo{
			ID:      int64(binary.BigEndian.Uint64(k[1:])),
			Timeout: int32(binary.BigEndian.Uint32(val)),
		})
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, err
	}
	return out, it.Close()
}

// ReadFunc is the query type Lookup takes. It runs on a Pebble snapshot
// of the state after some Update, outside the state machine's lock, so a
// read, however large, never holds up Update. Whatever it registers to
// hear about later changes (a watch) must therefore be registered as of
// View.Zxid: every change after that zxid may already have been applied
// and its events delivered by the time the read ends.
type ReadFunc func(v View) (any, error)

// LockedReadFunc is a query that runs under the state machine's read lock:
// no Update is applied while it runs, so something it registers sees every
// change after what it read. It must be short (it holds up Update); open
// iterators (View.HistoryAfter) rather than read much.
type LockedReadFunc func(v View) (any, error)

// Lookup runs a ReadFunc on a snapshot of the current state, or a
// LockedReadFunc under the read lock.
func (s *StateMachine) Lookup(query any) (any, error) {
	switch fn := query.(type) {
	case ReadFunc:
		v, release, err := s.snapshotView()
		if err != nil {
			return nil, err
		}
		defer release()
		return fn(v)
	case LockedReadFunc:
		s.mu.RLock()
		defer s.mu.RUnlock()
		if s.mu.db == nil {
			return nil, ErrClosed
		}
		tree := treeReader{r: s.mu.db, kids: s.mu.kids, gen: s.mu.kids.generation(), zxid: s.mu.zxid}
		return fn(View{tree: tree, db: s.mu.db, zxid: s.mu.zxid, applied: s.mu.applied, digest: s.mu.digest, stats: s.mu.stats, locked: true})
	}
	return nil, fmt.Errorf("%w: %T", ErrUnknownQuery, query)
}

// snapshotView takes a snapshot of the applied state; release closes it.
func (s *StateMachine) snapshotView() (View, func(), error) {
	s.dbMu.RLock()
	s.mu.RLock()
	db := s.mu.db
	if db == nil {
		s.mu.RUnlock()
		s.dbMu.RUnlock()
		return View{}, nil, ErrClosed
	}
	snap := db.NewSnapshot()
	tree := treeReader{r: snap, kids: s.mu.kids, gen: s.mu.kids.generation(), zxid: s.mu.zxid}
	v := View{tree: tree, db: db, zxid: s.mu.zxid, applied: s.mu.applied, digest: s.mu.digest, stats: s.mu.stats}
	s.mu.RUnlock()
	return v, func() {
		snap.Close()
		s.dbMu.RUnlock()
	}, nil
}

// preflushLead is how far ahead of the next Raft snapshot, as a fraction
// of SnapshotEntries (1/preflushLead), Update starts the early flush: at
// 100,000 entries, 5,000 entries, about 0.45 s at 11k writes/s, for the
// flush of a full memtable to end before Sync; Sync then flushes what
// those entries wrote (5 % of the interval's, a few MiB at 1 KiB values).
const preflushLead = 20

// preflushLocked starts a flush of the memtable in the background once the
// applied index comes within SnapshotEntries/preflushLead of the next
// snapshot (the last Sync plus SnapshotEntries; Dragonboat counts from its
// last snapshot, which Sync preceded). Without a WAL the store rotates its
// memtable at no cost, so the flush runs beside Update; Sync then flushes
// only what was applied since. It changes no state: only when the bytes
// reach the disk.
func (s *StateMachine) preflushLocked(applied uint64) error {
	n := s.snapshotAt
	if n == 0 || s.preflushed.Load() || applied+n/preflushLead < s.syncedAt.Load()+n {
		return nil
	}
	s.preflushed.Store(true)
	_, err := s.mu.db.AsyncFlush()
	return err
}

// Sync makes everything applied so far durable: it flushes the memtables
// (the store has no WAL, see liveOptions). Dragonboat calls it before it
// records a snapshot and so before it compacts the log, after it recovers
// a streamed snapshot, and every few minutes; it holds its own lock over
// the call, so no Update runs meanwhile.
func (s *StateMachine) Sync() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.db == nil {
		return ErrClosed
	}
	applied := s.mu.applied
	if err := s.mu.db.Flush(); err != nil {
		return err
	}
	s.syncedAt.Store(applied)
	s.preflushed.Store(false)
	return nil
}

// Close closes the store once the reads running on it have ended.
func (s *StateMachine) Close() error {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.db == nil {
		return nil
	}
	// Without a WAL a close would drop the memtables; the log has their
	// entries, but a restart that does not replay them is faster.
	err := s.mu.db.Flush()
	err = errors.Join(err, s.mu.db.Close(), s.mu.mark.close())
	s.mu.cache.Unref()
	s.mu.db, s.mu.cache, s.mu.mark = nil, nil, nil
	return err
}

// errStopped is what SaveSnapshot and RecoverFromSnapshot return when their
// done channel closes. It must be Dragonboat's own sentinel, unwrapped:
// Dragonboat compares it with == and treats any other error as fatal.
var errStopped = sm.ErrSnapshotStopped
