package server

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	dbconfig "github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/plugin/tan"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/zkraft/zkraft/internal/storecheck"
)

// The Raft log store. Dragonboat offers two: its sharded Pebble store
// (logdb-N directories, a WAL, memtables, tables and compactions) and tan,
// an append-only log of its own (one directory of log, index and MANIFEST
// files per replica). A new data directory gets the Pebble store unless
// tan is asked for: tan costs a multi of four setData about a fifth less
// CPU (docs/performance.md, Raft log store) but stalled ensembles under
// faulttest (docs/operations.md, Raft log store) until zkraft bounded its
// reads (tanLogDB, tanreads.go). A directory that holds a Pebble log store keeps it:
// Dragonboat records the store's type in dragonboat.ds and refuses another
// one, and there is no conversion.
//
// Where tan's files go: Dragonboat hands a log store factory the NodeHost
// directory and the WAL directory, and tan takes the first, whatever
// WALDir says. zkraft's factory gives it the WAL directory when dataLogDir
// is set, so that the Raft log is on the disk the operator chose for
// ZooKeeper's transaction log:
//
//	LogDir/raft-wal/HOST/DEPLOYMENT/tandb/       with dataLogDir
//	DataDir/raft/HOST/DEPLOYMENT/tandb/          without
//	    node-S-R/                                replica R of shard S: *.log, *.index, MANIFEST-*, CURRENT
//	    bootstrap/                               each replica's bootstrap record
//
// and records the tandb directory it opened in DataDir/raft/zkraft-raft-log,
// so that a member whose dataLogDir has moved away from its log can say
// where the log is, rather than start on an empty one.

// LogStoreKind names a Raft log store.
type LogStoreKind string

const (
	// LogStoreAuto keeps the store a data directory has and gives a new
	// one Pebble.
	LogStoreAuto LogStoreKind = ""
	// LogStoreTan is Dragonboat's append-only log store, tan.
	LogStoreTan LogStoreKind = "tan"
	// LogStorePebble is Dragonboat's sharded Pebble log store, the only
	// one before tan became the default.
	LogStorePebble LogStoreKind = "pebble"
)

// ParseLogStoreKind reads auto, tan or pebble (the --raft-log-store flag).
func ParseLogStoreKind(s string) (LogStoreKind, error) {
	switch s {
	case "auto", "":
		return LogStoreAuto, nil
	case "tan":
		return LogStoreTan, nil
	case "pebble":
		return LogStorePebble, nil
	}
	return "", fmt.Errorf("raft log store %q: auto, tan or pebble", s)
}

func (k LogStoreKind) String() string {
	if k == LogStoreAuto {
		return "auto"
	}
	return string(k)
}

// tanWriteBufferBytes is the size of each of tan's 16 write buffers (one
// per step worker). Dragonboat's tan takes LogDBConfig.KVWriteBufferSize,
// which zkraft sets to 64 MiB for the Pebble store's memtables: 1 GiB of
// Go heap that is never touched but counts for the collector, so garbage
// could grow to a gigabyte before a collection. tan allocates a larger
// buffer itself for an update that does not fit (internal/tan db.write).
const tanWriteBufferBytes = 1 << 20

// tanDirName is tan's directory under the directory its factory is given.
const tanDirName = "tandb"

// logRecordName is zkraft's record, in the NodeHost directory, of the
// tandb directory the member last opened.
const logRecordName = "zkraft-raft-log"

// tanFactory creates Dragonboat's tan with zkraft's placement and buffers.
type tanFactory struct {
	// inWAL places tan under the WAL directory (dataLogDir is set), else
	// under the NodeHost directory.
	inWAL bool
}

var _ dbconfig.LogDBFactory = tanFactory{}

// Name is tan's, as Dragonboat records it in dragonboat.ds.
func (tanFactory) Name() string { return tan.Factory.Name() }

// Create opens tan in the directory zkraft places it in (dirs is the
// NodeHost directory and wals the WAL directory, each with the host and
// deployment below it) and records that directory. Its reads are bounded
// (tanLogDB).
func (f tanFactory) Create(nhc dbconfig.NodeHostConfig, cb dbconfig.LogDBCallback, dirs, wals []string) (raftio.ILogDB, error) {
	at := dirs
	if f.inWAL {
		at = wals
	}
	if len(at) == 0 {
		return nil, errors.New("server: Dragonboat gave the log store no directory")
	}
	nhc.Expert.LogDB.KVWriteBufferSize = tanWriteBufferBytes
	if err := writeLogRecord(nhc.NodeHostDir, filepath.Join(at[0], tanDirName)); err != nil {
		return nil, err
	}
	db, err := tan.Factory.Create(nhc, cb, at, wals)
	if err != nil {
		return nil, err
	}
	return tanLogDB{ILogDB: db}, nil
}

// isTan reports whether nhc opens tan.
func isTan(nhc dbconfig.NodeHostConfig) bool {
	_, ok := nhc.Expert.LogDBFactory.(tanFactory)
	return ok
}

// tanRoot is the directory under which tan keeps HOST/DEPLOYMENT/tandb.
func tanRoot(nhc dbconfig.NodeHostConfig) string {
	if f, ok := nhc.Expert.LogDBFactory.(tanFactory); ok && f.inWAL {
		return nhc.WALDir
	}
	return nhc.NodeHostDir
}

// tanDirs lists the tandb directories under root (HOST/DEPLOYMENT/tandb).
func tanDirs(root string) []string {
	d, _ := filepath.Glob(filepath.Join(root, "*", "*", tanDirName))
	return d
}

// tanDir is tan's tandb directory as Dragonboat places it: under the
// host name and the deployment id (internal/server Env.GetLogDBDirs).
func tanDir(nhc dbconfig.NodeHostConfig) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		if d := tanDirs(tanRoot(nhc)); len(d) > 0 {
			return d[0]
		}
		host = "HOST"
	}
	return filepath.Join(tanRoot(nhc), host, fmt.Sprintf("%020d", nhc.GetDeploymentID()), tanDirName)
}

// tanReplicaDir is the directory of a replica's log in tan (log, index
// and MANIFEST files): the file the member names when that log is
// damaged or short.
func tanReplicaDir(nhc dbconfig.NodeHostConfig, shardID, replicaID uint64) string {
	return filepath.Join(tanDir(nhc), fmt.Sprintf("node-%d-%d", shardID, replicaID))
}

// raftLogPlace names the Raft log store's files for messages: tan's
// directory, or the Pebble store's WAL directory.
func raftLogPlace(nhc dbconfig.NodeHostConfig) string {
	if isTan(nhc) {
		return tanDir(nhc)
	}
	return nhc.WALDir
}

// foundLogStore is what a data directory holds.
type foundLogStore struct {
	kind LogStoreKind // LogStoreAuto: none yet (a new directory)
	how  string       // how it is known, for messages
	// tan: the tandb directories in either place, and the one the member
	// last opened (its record; "" when there is none).
	tanDirs  []string
	recorded string
}

// findLogStore reads which log store the data directory holds: first
// Dragonboat's dragonboat.ds (the NodeHost directory's, then the WAL
// directory's), which names it; then, for a directory without one, the
// stores' own directories. A damaged dragonboat.ds is passed over here;
// checkDataDir refuses it.
func findLogStore(dirs DataDirs) foundLogStore {
	var f foundLogStore
	for _, root := range []string{dirs.Raft(), dirs.RaftWAL()} {
		f.tanDirs = append(f.tanDirs, tanDirs(root)...)
	}
	f.recorded, _ = readLogRecord(dirs.Raft())
	for _, root := range []string{dirs.Raft(), dirs.RaftWAL()} {
		ds := filepath.Join(root, "dragonboat.ds")
		name, ok := recordedLogDBType(ds)
		if !ok {
			continue
		}
		f.how = ds + " records the log store " + name
		if name == tan.Factory.Name() {
			f.kind = LogStoreTan
		} else {
			f.kind = LogStorePebble
		}
		return f
	}
	for _, root := range []string{dirs.Raft(), dirs.RaftWAL()} {
		if d, _ := filepath.Glob(filepath.Join(root, "*", "*", "logdb-*")); len(d) > 0 {
			f.kind, f.how = LogStorePebble, d[0]+" is a shard of the Pebble log store"
			return f
		}
	}
	switch {
	case len(f.tanDirs) > 0:
		f.kind, f.how = LogStoreTan, f.tanDirs[0]+" is tan's"
	case f.recorded != "":
		f.kind, f.how = LogStoreTan, filepath.Join(dirs.Raft(), logRecordName)+" records tan's directory"
	}
	return f
}

// recordedLogDBType is the log store type a dragonboat.ds records (a
// RaftDataStatus after the flag file's checksum); false when the file
// does not exist or does not decode.
func recordedLogDBType(path string) (string, bool) {
	if storecheck.FlagFile(path) != nil {
		return "", false
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 8 {
		return "", false
	}
	var s pb.RaftDataStatus
	if err := s.Unmarshal(b[8:]); err != nil || s.LogdbType == "" {
		return "", false
	}
	return s.LogdbType, true
}

// chooseLogStore is the log store a member on cfg's directories opens,
// or the refusal, with what to do, of one that contradicts the data
// directory: a store other than the one it holds, or a tan log that is
// not where cfg's dataLogDir puts it.
func chooseLogStore(cfg Config) (LogStoreKind, error) {
	dirs := DataDirsOf(cfg)
	found := findLogStore(dirs)
	want := cfg.RaftLogStore
	switch {
	case found.kind == LogStoreAuto && want == LogStorePebble:
		return LogStorePebble, nil
	case found.kind == LogStoreAuto && want == LogStoreTan:
		return LogStoreTan, nil
	case found.kind == LogStoreAuto:
		// A new data directory gets Pebble unless tan is asked for: under
		// faulttest (pause the leader, then cut a follower off) tan's
		// ensembles stalled 15-42 s after the cut healed in 4 of 9 runs
		// and failed TestFaults on session expiries, Pebble's at most
		// 5.2 s in 5 (docs/operations.md, "Raft log store").
		return LogStorePebble, nil
	case want != LogStoreAuto && want != found.kind:
		return "", fmt.Errorf("server: --raft-log-store=%s, but the data directory %s holds a Raft log in the %s log store (%s), "+
			"and Dragonboat opens only the store a directory was created with: start it with --raft-log-store=auto (or %s), "+
			"or give --raft-log-store=%s a new data directory (an existing tree moves with zkraft export and zkraft import, docs/migration.md)",
			want, cfg.DataDir, found.kind, found.how, found.kind, want)
	}
	if found.kind == LogStoreTan {
		if err := checkTanPlace(cfg, found); err != nil {
			return "", err
		}
	}
	return found.kind, nil
}

// checkTanPlace refuses a tan log that is not under the directory cfg
// puts it in (the operator moved dataLogDir, or set or unset it): tan
// would start an empty log there, and a replica with an empty log has
// lost every entry it acknowledged.
func checkTanPlace(cfg Config, found foundLogStore) error {
	dirs := DataDirsOf(cfg)
	root, setting := dirs.Raft(), "dataLogDir is not set"
	if cfg.LogDir != "" {
		root, setting = dirs.RaftWAL(), "dataLogDir is "+cfg.LogDir
	}
	if len(tanDirs(root)) > 0 {
		return nil
	}
	where := found.recorded
	for _, d := range found.tanDirs {
		if filepath.Dir(filepath.Dir(filepath.Dir(d))) != root {
			where = d
			break
		}
	}
	if where == "" {
		return fmt.Errorf("server: the data directory %s holds a tan Raft log (%s), but there is none under %s (%s) "+
			"and none at the place it was last opened: the log was moved or removed. Start the member with the dataLogDir "+
			"its log is under, or restore the log", cfg.DataDir, found.how, root, setting)
	}
	whereRoot := filepath.Dir(filepath.Dir(filepath.Dir(where)))
	rel, _ := filepath.Rel(whereRoot, where)
	ran := "no dataLogDir"
	if filepath.Base(whereRoot) == "raft-wal" {
		ran = "dataLogDir " + filepath.Dir(whereRoot)
	}
	return fmt.Errorf("server: the Raft log (tan) of the data directory %s is in %s, not under %s (%s): "+
		"start the member with the setting it ran with (%s), or stop it and move %s to %s, then start it",
		cfg.DataDir, where, root, setting, ran, where, filepath.Join(root, rel))
}

// readLogRecord is the tandb directory the member last opened, as
// recorded in the NodeHost directory; false when there is no record.
func readLogRecord(nodeHostDir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(nodeHostDir, logRecordName))
	if err != nil {
		return "", false
	}
	kind, dir, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !ok || kind != string(LogStoreTan) || dir == "" {
		return "", false
	}
	return dir, true
}

// writeLogRecord records the tandb directory (absolute) the member opens,
// if the record does not already say so: written to a temporary file,
// synced and renamed over the old one.
func writeLogRecord(nodeHostDir, tanDir string) error {
	abs, err := filepath.Abs(tanDir)
	if err != nil {
		return fmt.Errorf("server: record the Raft log's directory: %w", err)
	}
	content := []byte(string(LogStoreTan) + " " + abs + "\n")
	path := filepath.Join(nodeHostDir, logRecordName)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("server: record the Raft log's directory: %w", err)
	}
	tmp := path + ".tmp"
	if err := writeSynced(tmp, content); err != nil {
		return fmt.Errorf("server: record the Raft log's directory: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("server: record the Raft log's directory: %w", err)
	}
	if d, err := os.Open(nodeHostDir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("server: record the Raft log's directory: %w", err)
		}
	}
	return nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
