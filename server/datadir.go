package server

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/lni/dragonboat/v4"
	dbconfig "github.com/lni/dragonboat/v4/config"
	sm "github.com/lni/dragonboat/v4/statemachine"

	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/zkraft/zkraft/internal/storecheck"
	"github.com/zkraft/zkraft/raftsm"
)

// A member's data directory, as Dragonboat (v4) and raftsm lay it out:
//
//	DataDir/raft/dragonboat.ds, NODEHOST.ID     Dragonboat's flag files
//	DataDir/raft/HOST/DEPLOYMENT/logdb-N/        shard N of the Raft log store (Pebble):
//	                                             CURRENT, MANIFEST-*, OPTIONS-*, *.sst
//	LogDir/raft-wal/dragonboat.ds
//	LogDir/raft-wal/HOST/DEPLOYMENT/logdb-N/     its WAL files (*.log)
//	DataDir/raft/HOST/DEPLOYMENT/tandb/          or, for a data directory on tan (logstore.go),
//	LogDir/raft-wal/HOST/DEPLOYMENT/tandb/       the Raft log store tan: node-S-R/ per replica
//	                                             (under raft-wal only when dataLogDir is set)
//	DataDir/raft/zkraft-raft-log                 zkraft's record of the tandb directory it opened
//	DataDir/raft/HOST/DEPLOYMENT/snapshot-part-P/snapshot-S-R/snapshot-INDEX/
//	                                             Dragonboat's snapshots of shard S, replica R
//	DataDir/state/shard-S-replica-R/             the state machine's store (Pebble)
//
// LogDir is DataDir unless dataLogDir is set. zkraft keeps its own metadata
// (applied index, zxid, import record) as keys of the state machine's store.
// DataDirs names these places; the server and the offline commands
// (import, export) take every path from it.

// DataDirs is a member's data directory and log directory (dataDir and
// dataLogDir; an empty Log is Data), and the places zkraft keeps in them.
type DataDirs struct{ Data, Log string }

// DataDirsOf is cfg's data directories.
func DataDirsOf(cfg Config) DataDirs { return DataDirs{Data: cfg.DataDir, Log: cfg.LogDir} }

// Raft is Dragonboat's NodeHost directory: its flag files, the Raft log
// store and the snapshots.
func (d DataDirs) Raft() string { return filepath.Join(d.Data, "raft") }

// RaftWAL is the directory of the Raft log store's WAL.
func (d DataDirs) RaftWAL() string {
	log := d.Log
	if log == "" {
		log = d.Data
	}
	return filepath.Join(log, "raft-wal")
}

// State is the directory under which the state machine keeps its stores.
func (d DataDirs) State() string { return filepath.Join(d.Data, "state") }

// StateStore is the state machine's store of one replica.
func (d DataDirs) StateStore(shardID, replicaID uint64) string {
	return raftsm.StoreDir(d.State(), shardID, replicaID)
}

// damageAdvice ends the error of a member that refuses a damaged data
// directory: what the operator does.
const damageAdvice = "the member cannot start on it: restore the data directory from a backup, " +
	"or, on a member of an ensemble, move the data directory aside and add the member again " +
	"(reconfig -remove, then -add, and start it with --join) so that it copies the data from its peers " +
	"(docs/operations.md, Damaged data files)"

// damaged is the error New returns for a damaged data directory: one line,
// the file, what is wrong and what to do. It matches storecheck.ErrDamaged.
func damaged(d error) error { return fmt.Errorf("%w; %s", d, damageAdvice) }

// ErrDamagedData is matched (errors.Is) by the error New returns when a
// file of the data directory is damaged.
var ErrDamagedData = storecheck.ErrDamaged

// flagFiles lists Dragonboat's flag files that it reads at start-up and
// panics on when they are damaged: the NodeHost's, and the one a snapshot
// keeps while it is not yet complete (a snapshot Dragonboat finished
// writing but did not finish publishing is such an orphan; its
// snapshot.metadata is not read at start-up).
func flagFiles(nhc dbconfig.NodeHostConfig) []string {
	files := []string{
		filepath.Join(nhc.NodeHostDir, "dragonboat.ds"),
		filepath.Join(nhc.NodeHostDir, "NODEHOST.ID"),
	}
	if nhc.WALDir != "" && nhc.WALDir != nhc.NodeHostDir {
		files = append(files, filepath.Join(nhc.WALDir, "dragonboat.ds"))
	}
	orphans, _ := filepath.Glob(filepath.Join(nhc.NodeHostDir, "*", "*", "snapshot-part-*", "snapshot-*-*", "snapshot-*", "dragonboat.snapshot.message"))
	for _, f := range orphans {
		if d := filepath.Base(filepath.Dir(f)); !strings.HasSuffix(d, ".generating") && !strings.HasSuffix(d, ".receiving") {
			files = append(files, f)
		}
	}
	return files
}

// logStores lists the shards of the Raft log store that exist, in either
// of the two directories.
func logStores(nhc dbconfig.NodeHostConfig) []storecheck.Store {
	walDir := nhc.WALDir
	if walDir == "" {
		walDir = nhc.NodeHostDir
	}
	seen := map[string]bool{}
	var out []storecheck.Store
	for _, root := range []string{nhc.NodeHostDir, walDir} {
		dirs, _ := filepath.Glob(filepath.Join(root, "*", "*", "logdb-*"))
		for _, d := range dirs {
			rel, err := filepath.Rel(root, d)
			if err != nil || seen[rel] {
				continue
			}
			seen[rel] = true
			st := storecheck.Store{Dir: filepath.Join(nhc.NodeHostDir, rel)}
			if walDir != nhc.NodeHostDir {
				st.WALDir = filepath.Join(walDir, rel)
			}
			out = append(out, st)
		}
	}
	return out
}

// logStoreOf is the shard of the Raft log store that holds a Raft shard's
// log: Dragonboat's log store keeps shard S in logdb-(S mod its shard
// count).
func logStoreOf(nhc dbconfig.NodeHostConfig, shardID uint64) (storecheck.Store, bool) {
	n := nhc.Expert.LogDB.Shards
	if n == 0 {
		return storecheck.Store{}, false
	}
	name := fmt.Sprintf("logdb-%d", shardID%n)
	for _, st := range logStores(nhc) {
		if filepath.Base(st.Dir) == name {
			return st, true
		}
	}
	return storecheck.Store{}, false
}

// dataDirReport is what checkDataDir found: the stores as they were
// before Dragonboat opened them, and the applied index in the state
// machine's store.
type dataDirReport struct {
	logStores  map[string]*storecheck.Report // by Store.Dir
	stateStore *storecheck.Report
	applied    uint64
	// mark is the state machine's applied mark (raftsm/mark.go): the
	// highest index it had applied when it last ran, at or above applied
	// (the store has no WAL: after a kill its tables hold only what its
	// last flush wrote). 0 when there is none or it does not decode.
	mark uint64
}

// checkDataDir checks the data directory before Dragonboat opens it:
// Dragonboat's flag files, every shard of the Raft log store and the state
// machine's store (storecheck.Check). It repairs what holds no data (an
// OPTIONS file) and logs it.
func checkDataDir(nhc dbconfig.NodeHostConfig, stateStore string, log *slog.Logger) (*dataDirReport, error) {
	start := time.Now()
	for _, f := range flagFiles(nhc) {
		if err := storecheck.FlagFile(f); err != nil {
			return nil, checkErr(err)
		}
	}
	rep := &dataDirReport{logStores: map[string]*storecheck.Report{}}
	logged := func(r *storecheck.Report) {
		for _, f := range r.Repaired {
			log.Warn("moved a damaged Pebble OPTIONS file aside (it holds no data; Pebble writes a new one)", "file", f, "moved_to", f+".damaged")
		}
	}
	for _, st := range logStores(nhc) {
		r, err := storecheck.Check(st, nil)
		logged(r)
		if err != nil {
			return nil, checkErr(err)
		}
		rep.logStores[st.Dir] = r
	}
	if err := checkTanStores(nhc, log); err != nil {
		return nil, checkErr(err)
	}
	r, err := storecheck.Check(storecheck.Store{Dir: stateStore, Options: raftsm.StoreOptions()}, raftsm.InspectApplied(&rep.applied, func(err error) error {
		return &storecheck.Damage{File: stateStore, Problem: "zkraft's applied index in the state machine's store does not decode", Err: err}
	}))
	logged(r)
	if err != nil {
		return nil, checkErr(err)
	}
	rep.stateStore = r
	switch mark, ok, err := raftsm.ReadAppliedMark(stateStore); {
	case errors.Is(err, raftsm.ErrBadMark):
		// It holds no data, and the first Update writes it again; what is
		// lost is only the check of the Raft log against it.
		log.Warn("ignored the state machine's applied mark, which does not decode (it holds no data; the check of the Raft log's end against it is skipped this once)",
			"file", raftsm.MarkPath(stateStore), "err", err)
	case err != nil:
		return nil, checkErr(err)
	case ok:
		rep.mark = mark
	}
	log.Info("data directory checked", "stores", len(rep.logStores)+1, "took", time.Since(start).Round(time.Millisecond).String())
	return rep, nil
}

func checkErr(err error) error {
	if errors.Is(err, storecheck.ErrDamaged) {
		return damaged(err)
	}
	if storecheck.IsLocked(err) {
		return &oneLineError{prefix: "server: the data directory is in use by another process (is a member already running on it?): ", err: err}
	}
	return &oneLineError{prefix: "server: check the data directory: ", err: err}
}

// oneLineError is err with a prefix, on one line; it wraps err.
type oneLineError struct {
	prefix string
	err    error
}

func (e *oneLineError) Error() string { return e.prefix + storecheck.OneLine(e.err.Error()) }
func (e *oneLineError) Unwrap() error { return e.err }

// raftFailure is the error of a failed (or panicked) start of Dragonboat
// on the data directory: the damaged file if one explains it, else the
// error itself, on one line.
func raftFailure(nhc dbconfig.NodeHostConfig, cause error) error {
	for _, f := range flagFiles(nhc) {
		if err := storecheck.FlagFile(f); errors.Is(err, storecheck.ErrDamaged) {
			return damaged(err)
		}
	}
	for _, st := range logStores(nhc) {
		if d := storecheck.Diagnose(st, cause); d != nil {
			return damaged(d)
		}
	}
	if isTan(nhc) {
		if tanDamage(cause) {
			return damaged(&storecheck.Damage{File: raftLogPlace(nhc), Problem: "tan cannot read the Raft log", Err: cause})
		}
		return &oneLineError{prefix: "server: start raft (tan log in " + raftLogPlace(nhc) + "): ", err: cause}
	}
	return &oneLineError{prefix: "server: start raft: ", err: cause}
}

// tanDamage reports whether cause is one of tan's errors (or panics) for
// a file it cannot read: a record's checksum, a chunk, an index file, the
// MANIFEST or CURRENT. tan's own error values are internal to Dragonboat,
// so they are matched by their text.
func tanDamage(cause error) bool {
	msg := cause.Error()
	for _, s := range []string{"tan: crc mismatch", "invalid chunk", "zeroed chunk", "corrupt index file", "corrupt manifest",
		"CURRENT file for DB", "MANIFEST name"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// openGate holds the state machine's Open until the member has compared
// the state machine's store with the Raft log, so that Dragonboat never
// opens a store it would panic on in one of its goroutines: one behind the
// snapshot Dragonboat recorded as durable in it, or one that fails to open
// (Dragonboat panics on any error of Open but ErrOpenStopped). The gated
// Open returns sm.ErrOpenStopped instead, once the member, refusing to
// start, stops the replica (stopc closes): Dragonboat then treats the
// replica as stopped while it opened, which is what it is.
type openGate struct {
	verdict chan error      // the member's go (nil) or refusal, sent once
	opened  chan openResult // Open's outcome, sent once (buffered)
}

type openResult struct {
	applied uint64
	err     error
}

func newOpenGate() *openGate {
	return &openGate{verdict: make(chan error, 1), opened: make(chan openResult, 1)}
}

// factory wraps raftsm's factory.
func (g *openGate) factory(f sm.CreateOnDiskStateMachineFunc) sm.CreateOnDiskStateMachineFunc {
	return func(shardID, replicaID uint64) sm.IOnDiskStateMachine {
		return g.wrap(f(shardID, replicaID))
	}
}

// wrap returns inner with its Open held by the gate, and with the optional
// interfaces of Dragonboat's (IHash, IExtended) that inner implements:
// Dragonboat looks for them on the value the factory returns.
func (g *openGate) wrap(inner sm.IOnDiskStateMachine) sm.IOnDiskStateMachine {
	gs := &gatedSM{IOnDiskStateMachine: inner, gate: g}
	h, hash := inner.(sm.IHash)
	x, ext := inner.(sm.IExtended)
	switch {
	case hash && ext:
		return struct {
			*gatedSM
			sm.IHash
			sm.IExtended
		}{gs, h, x}
	case hash:
		return struct {
			*gatedSM
			sm.IHash
		}{gs, h}
	case ext:
		return struct {
			*gatedSM
			sm.IExtended
		}{gs, x}
	}
	return gs
}

// gatedSM is a state machine with its Open held by the gate.
type gatedSM struct {
	sm.IOnDiskStateMachine
	gate *openGate
}

// Open waits for the member's verdict, opens the store if it is a go, and
// reports the outcome (on every path, so that awaitOpen never waits for an
// Open that will not come).
func (g *gatedSM) Open(stopc <-chan struct{}) (uint64, error) {
	select {
	case v := <-g.gate.verdict:
		if v != nil {
			g.gate.opened <- openResult{err: v}
			<-stopc
			return 0, sm.ErrOpenStopped
		}
	case <-stopc:
		g.gate.opened <- openResult{err: errStoppedOpening}
		return 0, sm.ErrOpenStopped
	}
	applied, err := g.open(stopc)
	g.gate.opened <- openResult{applied, err}
	if err == nil || errors.Is(err, sm.ErrOpenStopped) {
		return applied, err
	}
	<-stopc
	return 0, sm.ErrOpenStopped
}

// errStoppedOpening: the replica stopped before its state machine opened.
var errStoppedOpening = errors.New("server: the replica stopped while it started")

// open is raftsm's Open, with a panic in it turned into its error. The
// boundary is safe for the same reason as raftCall's: an Open that
// panicked ends the start-up, and the half-opened store is never used.
func (g *gatedSM) open(stopc <-chan struct{}) (applied uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			applied, err = 0, fmt.Errorf("raftsm: open panicked: %v", r)
		}
	}()
	return g.IOnDiskStateMachine.Open(stopc)
}

// awaitOpen checks the state machine's store (as checkDataDir found it,
// before anything opened it for writing) against the Raft log, lets the
// state machine's Open go on if they agree, and waits for it:
//
//   - Dragonboat records in each snapshot the index up to which the state
//     machine's store was durable (it calls Sync first); a store below it
//     has lost writes that were synced;
//   - the state machine applies only entries the Raft log holds durably; a
//     log that ends below the applied index, or below the applied mark (the
//     highest index applied before a kill; the store itself may hold less,
//     having no WAL), has lost entries, some of them acknowledged.
//
// Either refuses the start, naming the store's files. A failed Open is
// refused too, naming the damaged file if there is one.
func awaitOpen(nh *dragonboat.NodeHost, nhc dbconfig.NodeHostConfig, g *openGate, shardID, replicaID uint64, rep *dataDirReport) error {
	err := checkStores(nh, nhc, shardID, replicaID, rep)
	g.verdict <- err
	if err != nil {
		return err
	}
	res := <-g.opened
	switch {
	case res.err == nil:
		return nil
	case errors.Is(res.err, sm.ErrOpenStopped) || errors.Is(res.err, errStoppedOpening):
		return errStoppedOpening
	}
	return openFailure(rep.stateStore, res.err)
}

func checkStores(nh *dragonboat.NodeHost, nhc dbconfig.NodeHostConfig, shardID, replicaID uint64, rep *dataDirReport) error {
	lr, err := nh.GetLogReader(shardID)
	if err != nil {
		return nil // nothing to compare with
	}
	applied := rep.applied
	ss := lr.Snapshot()
	if !pb.IsEmptySnapshot(ss) {
		defer ss.Unref()
	}
	// Only a partial snapshot (Dragonboat's record of an on-disk state
	// machine's progress) says the store itself was durable to
	// OnDiskIndex; a whole snapshot above the store is one it still has to
	// recover from (it was received but not yet applied).
	if ss.Dummy && !ss.Imported && ss.OnDiskIndex > applied {
		return damaged(storecheck.LostWrites(rep.stateStore, fmt.Sprintf(
			"the state machine's store is at applied index %d, but Raft recorded it as durable up to index %d (snapshot %d): writes that were synced are gone",
			applied, ss.OnDiskIndex, ss.Index)))
	}
	if _, last := lr.GetRange(); max(applied, rep.mark) > last {
		problem := fmt.Sprintf("the Raft log ends at index %d, but the state machine applied index %d from it: entries that were synced are gone", last, applied)
		if rep.mark > applied {
			problem = fmt.Sprintf("the Raft log ends at index %d, but the state machine had applied index %d from it (its applied mark; its store holds index %d): entries that were synced and applied are gone", last, rep.mark, applied)
		}
		if isTan(nhc) {
			// tan cuts a log whose records stop decoding short when it
			// opens it (internal/tan rebuildLog), so the entries after
			// the damage are gone without a word from it.
			return damaged(&storecheck.Damage{File: tanReplicaDir(nhc, shardID, replicaID), Problem: problem +
				"; this replica's tan log lost records (tan cuts a log short at the first record it cannot read; or the log was put back from an older copy)"})
		}
		if st, ok := logStoreOf(nhc, shardID); ok && rep.logStores[st.Dir] != nil {
			return damaged(storecheck.LostWrites(rep.logStores[st.Dir], problem))
		}
		return damaged(&storecheck.Damage{File: nhc.WALDir, Problem: problem})
	}
	return nil
}

// checkCellLog is checkStores' applied-mark check for the replica of a
// cell other than the default one (whose store checkDataDir does not
// read): a Raft log that ends below the index the replica's store had
// applied (its applied mark: the store keeps no WAL, so after a kill the
// log is the only copy of what was applied since its last flush) has lost
// entries, some of them acknowledged, and the replica is not started. A
// mark that does not decode holds no data and is only logged.
func checkCellLog(s *Server, shardID, replicaID uint64, store string) error {
	mark, ok, err := raftsm.ReadAppliedMark(store)
	switch {
	case errors.Is(err, raftsm.ErrBadMark):
		s.log.Warn("ignored a cell replica's applied mark, which does not decode (it holds no data; the check of the Raft log's end against it is skipped this once)",
			"shard", shardID, "file", raftsm.MarkPath(store), "err", err)
		return nil
	case err != nil:
		return err
	case !ok:
		return nil
	}
	lr, err := s.nh.GetLogReader(shardID)
	if err != nil {
		return nil // nothing to compare with
	}
	if _, last := lr.GetRange(); mark > last {
		file := DataDirsOf(s.cfg).RaftWAL()
		if nhc := s.nh.NodeHostConfig(); isTan(nhc) {
			file = tanReplicaDir(nhc, shardID, replicaID)
		}
		return damaged(&storecheck.Damage{File: file, Problem: fmt.Sprintf(
			"the Raft log of shard %d ends at index %d, but its state machine had applied index %d from it (its applied mark, %s): entries that were synced and applied are gone",
			shardID, last, mark, raftsm.MarkPath(store))})
	}
	return nil
}

// openFailure is the error of a failed Open of the state machine's store,
// whose report checkDataDir made before Open changed anything (Pebble's
// open for writing replaces the MANIFEST and deletes what it no longer
// lists, so a damaged one is seen only in the report).
func openFailure(r *storecheck.Report, cause error) error {
	if d := storecheck.Diagnose(r.Store, cause); d != nil {
		return damaged(d)
	}
	if errors.Is(cause, raftsm.ErrDamaged) || errors.Is(cause, raftsm.ErrBadSnapshot) {
		// raftsm's own metadata in the store (applied index, zxid,
		// sessions, the digest) does not decode or does not match the
		// data.
		return damaged(storecheck.LostWrites(r, "the state machine's store does not hold what zkraft recorded in it ("+storecheck.OneLine(cause.Error())+")"))
	}
	return &oneLineError{prefix: "server: open the state machine: ", err: cause}
}
