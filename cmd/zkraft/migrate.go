package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/lni/dragonboat/v4"
	dbconfig "github.com/lni/dragonboat/v4/config"
	dblogger "github.com/lni/dragonboat/v4/logger"

	"github.com/zkraft/zkraft/compat"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/server"
	"github.com/zkraft/zkraft/znode"
)

// zkraft import and zkraft export move a data tree between an Apache
// ZooKeeper data directory and zkraft's state store:
//
//	zkraft import --zk-data-dir D [--zk-log-dir L] --data-dir OUT [--verify]
//	zkraft import --config zoo.cfg [--verify]        (in place: the same dataDir)
//	zkraft export --data-dir IN --zk-data-dir OUT [--zk-log-dir L] [--compression gz|snappy]
//
// Both run offline: ZooKeeper, respectively zkraft, must be stopped.

const usageImport = `usage: zkraft import --zk-data-dir DIR [--zk-log-dir DIR] --data-dir DIR [--verify]
       zkraft import --config zoo.cfg [--verify]

Reads an Apache ZooKeeper data directory as ZooKeeper 3.8 restores it (the
newest valid snapshot, then the transaction logs after it) and writes zkraft's
state store in --data-dir, which must hold no zkraft state yet. zkraft then
serves the tree with the same Stats and ACLs, the open sessions (clients
reconnect with their session id and password), and zxids in the next epoch.
With --config, ZooKeeper's dataDir and dataLogDir are both the source and the
zkraft data directories.
`

const usageExport = `usage: zkraft export --data-dir DIR --zk-data-dir DIR [--zk-log-dir DIR] [--compression gz|snappy]

Writes the tree and sessions of a stopped zkraft as an Apache ZooKeeper 3.8
data directory (a snapshot and an empty transaction log). If the zkraft data
directory has a Raft log, the replica is started first (on --raft-addr, with
no client listener) until everything committed is applied.
`

// runImport is "zkraft import".
func runImport(args []string) error { return importCmd(os.Stdout, args) }

// runExport is "zkraft export".
func runExport(args []string) error { return exportCmd(os.Stdout, args) }

// zooCfgDirs reads dataDir and dataLogDir from a zoo.cfg.
func zooCfgDirs(path string) (dataDir, logDir string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	var cfg server.Config
	if _, err := applyZooCfg(f, &cfg); err != nil {
		return "", "", err
	}
	if cfg.DataDir == "" {
		return "", "", fmt.Errorf("%s has no dataDir", path)
	}
	return cfg.DataDir, cfg.LogDir, nil
}

func importCmd(out io.Writer, args []string) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usageImport); fs.PrintDefaults() }
	var (
		configPath   = fs.String("config", "", "ZooKeeper zoo.cfg: its dataDir (and dataLogDir) are the source and the zkraft data directory")
		zkDataDir    = fs.String("zk-data-dir", "", "ZooKeeper dataDir (holding version-2/snapshot.*)")
		zkLogDir     = fs.String("zk-log-dir", "", "ZooKeeper dataLogDir (holding version-2/log.*; default: --zk-data-dir)")
		dataDir      = fs.String("data-dir", "", "zkraft data directory to write")
		dataLogDir   = fs.String("data-log-dir", "", "zkraft's Raft log directory (default: --data-dir); must hold no Raft log")
		shardID      = fs.Uint64("shard-id", 1, "Raft shard of the namespace")
		replicaID    = fs.Uint64("replica-id", 1, "this member's replica id")
		verify       = fs.Bool("verify", false, "read the written state back and compare it with the source: counts, every Stat, data and ACL, the ZooKeeper tree digest")
		ignoreDigest = fs.Bool("ignore-digest", false, "import even if a digest ZooKeeper recorded does not match the replayed tree")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("import: unexpected arguments %q", fs.Args())
	}
	if *configPath != "" {
		d, l, err := zooCfgDirs(*configPath)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		if *zkDataDir == "" {
			*zkDataDir = d
		}
		if *zkLogDir == "" {
			*zkLogDir = l
		}
		if *dataDir == "" {
			*dataDir = d
		}
		if *dataLogDir == "" {
			*dataLogDir = l
		}
	}
	if *zkDataDir == "" || *dataDir == "" {
		fs.Usage()
		return errors.New("import: --zk-data-dir and --data-dir (or --config) are required")
	}
	if err := checkNoZkraftState(*dataDir, *dataLogDir, *shardID, *replicaID); err != nil {
		return fmt.Errorf("import: %w", err)
	}

	start := time.Now()
	res, err := compat.Restore(*zkDataDir, *zkLogDir)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	restored := time.Since(start)
	printRestore(out, *zkDataDir, *zkLogDir, res)
	if len(res.DigestMismatches) > 0 {
		m := res.DigestMismatches[0]
		err := fmt.Errorf("%w: %d of %d recorded digests differ from the replayed tree, first at zxid %#x (recorded %d, computed %d)",
			compat.ErrDigestMismatch, len(res.DigestMismatches), res.DigestChecks, m.Zxid, m.Recorded, m.Computed)
		if !*ignoreDigest {
			return fmt.Errorf("import: %w (--ignore-digest imports anyway)", err)
		}
		fmt.Fprintf(out, "  warning    %v; importing anyway (--ignore-digest)\n", err)
	}

	st := importedState(res.Tree)
	stateDir := filepath.Join(*dataDir, "state")
	if err := raftsm.ImportState(stateDir, *shardID, *replicaID, st); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	fmt.Fprintf(out, "zkraft import: wrote %s in %v (restore %v): %d znodes, %d sessions; ZooKeeper's last zxid %#x, zkraft continues from %#x\n",
		raftsm.StoreDir(stateDir, *shardID, *replicaID), time.Since(start).Round(time.Millisecond), restored.Round(time.Millisecond),
		len(st.Nodes), len(st.Sessions), st.Zxid, raftsm.NextEpoch(st.Zxid))
	if !*verify {
		return nil
	}
	return verifyImport(out, res, stateDir, *shardID, *replicaID)
}

// checkNoZkraftState refuses a data directory that already has zkraft
// state: a state store for the replica, or a Raft log (whose entries would
// be replayed onto the imported tree).
func checkNoZkraftState(dataDir, logDir string, shardID, replicaID uint64) error {
	if logDir == "" {
		logDir = dataDir
	}
	paths := []string{
		raftsm.StoreDir(filepath.Join(dataDir, "state"), shardID, replicaID),
		filepath.Join(dataDir, "raft"),
		filepath.Join(logDir, "raft-wal"),
	}
	for _, p := range paths {
		entries, err := os.ReadDir(p)
		if err == nil && len(entries) > 0 {
			return fmt.Errorf("%s already holds zkraft state: import only into a zkraft data directory that has never been served", p)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func printRestore(out io.Writer, dataDir, logDir string, res *compat.Restored) {
	if logDir == "" {
		logDir = dataDir
	}
	fmt.Fprintf(out, "zkraft import: ZooKeeper data %s, logs %s\n", dataDir, logDir)
	for _, s := range res.Skipped {
		fmt.Fprintf(out, "  skipped    %s\n", s)
	}
	s := res.Snapshot
	digest := "no digest"
	if s.Digest != nil {
		digest = fmt.Sprintf("digest at zxid %#x", s.Digest.Zxid)
	}
	fmt.Fprintf(out, "  snapshot   %s: zxid %#x, %d znodes, %d sessions, %d ACLs, %s\n",
		filepath.Base(s.File), s.Zxid, s.Nodes, s.Sessions, s.ACLs, digest)
	for _, l := range res.Logs {
		if l.Entries == 0 {
			fmt.Fprintf(out, "  log        %s: empty\n", filepath.Base(l.File))
			continue
		}
		fmt.Fprintf(out, "  log        %s: %d entries (zxid %#x..%#x), %d replayed, ends with %v\n",
			filepath.Base(l.File), l.Entries, l.FirstZxid, l.LastZxid, l.Applied, l.End)
	}
	fmt.Fprintf(out, "  replayed   %d transactions (%d with a result ZooKeeper ignores on a fuzzy snapshot)\n", res.Applied, res.Ignored)
	if c := res.LastDigestCheck; c != nil {
		fmt.Fprintf(out, "  digests    %d of %d recorded tree digests match the replayed tree (last: zxid %#x, %d)\n",
			res.DigestChecks-len(res.DigestMismatches), res.DigestChecks, c.Zxid, c.Recorded)
	} else {
		fmt.Fprintf(out, "  digests    none recorded after the snapshot\n")
	}
	if len(res.DeadSessions) > 0 {
		fmt.Fprintf(out, "  dead sessions  %s: their ephemerals were deleted, as ZooKeeper does on load\n", hexList(res.DeadSessions))
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(out, "  warning    %s\n", w)
	}
	fmt.Fprintf(out, "  tree       %v; last zxid %#x; digest %d\n", res.Tree.Counts(), res.Tree.Zxid, res.Tree.Digest())
	ids := make([]int64, 0, len(res.Tree.Sessions))
	for id := range res.Tree.Sessions {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		fmt.Fprintf(out, "  session    %#x timeout %dms, %d ephemerals\n", id, res.Tree.Sessions[id], len(res.Tree.Ephemerals(id)))
	}
}

func hexList(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%#x", id)
	}
	return strings.Join(parts, ", ")
}

// importedState is a restored ZooKeeper tree as raftsm imports it.
func importedState(t *compat.Tree) *raftsm.ImportedState {
	st := &raftsm.ImportedState{Zxid: t.Zxid}
	_ = t.Walk(func(path string, n *compat.Node) error {
		st.Nodes = append(st.Nodes, raftsm.ImportedNode{Path: path, Node: n.ZNode()})
		return nil
	})
	for id, to := range t.Sessions {
		st.Sessions = append(st.Sessions, raftsm.SessionInfo{ID: id, Timeout: to})
	}
	sort.Slice(st.Sessions, func(i, j int) bool { return st.Sessions[i].ID < st.Sessions[j].ID })
	return st
}

// treeOf is zkraft's state as a ZooKeeper tree: without zkraft's feature
// node, which ZooKeeper does not have.
func treeOf(st *raftsm.ImportedState) (*compat.Tree, error) {
	t := compat.NewTree()
	t.Zxid = st.Zxid
	for _, n := range st.Nodes {
		if n.Path == znode.FeaturesPath {
			continue
		}
		if err := t.Add(n.Path, n.Node); err != nil {
			return nil, err
		}
	}
	for _, s := range st.Sessions {
		t.Sessions[s.ID] = s.Timeout
	}
	return t, nil
}

// verifyImport reads the written store back and compares it with the
// restored ZooKeeper tree.
func verifyImport(out io.Writer, res *compat.Restored, stateDir string, shardID, replicaID uint64) error {
	back, err := raftsm.ExportState(stateDir, shardID, replicaID)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	got, err := treeOf(back)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	want := res.Tree
	var problems []string
	wc, gc := want.Counts(), got.Counts()
	fmt.Fprintf(out, "verify: source   %v\n", wc)
	fmt.Fprintf(out, "verify: imported %v\n", gc)
	if wc != gc {
		problems = append(problems, "the counts differ")
	}
	fmt.Fprintf(out, "verify: ZooKeeper tree digest: source %d, imported %d", want.Digest(), got.Digest())
	if c := res.LastDigestCheck; c != nil {
		fmt.Fprintf(out, "; ZooKeeper recorded %d at zxid %#x", c.Recorded, c.Zxid)
	}
	fmt.Fprintln(out)
	if want.Digest() != got.Digest() {
		problems = append(problems, "the digests differ")
	}
	if back.Zxid != raftsm.NextEpoch(want.Zxid) {
		problems = append(problems, fmt.Sprintf("zxid %#x, want %#x", back.Zxid, raftsm.NextEpoch(want.Zxid)))
	}
	diffs := compat.Compare(want, got, 50)
	for _, d := range diffs {
		fmt.Fprintf(out, "verify: differs: %s\n", d)
	}
	if len(diffs) > 0 {
		problems = append(problems, fmt.Sprintf("%d nodes or sessions differ", len(diffs)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("verify: %s", strings.Join(problems, "; "))
	}
	fmt.Fprintf(out, "verify: OK: %d znodes and %d sessions identical (Stat, data, ACL, child count)\n", gc.Nodes, gc.Sessions)
	return nil
}

func exportCmd(out io.Writer, args []string) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usageExport); fs.PrintDefaults() }
	var (
		configPath  = fs.String("config", "", "zoo.cfg zkraft ran with (for its dataDir and dataLogDir)")
		dataDir     = fs.String("data-dir", "", "zkraft data directory to read")
		dataLogDir  = fs.String("data-log-dir", "", "zkraft's Raft log directory (default: --data-dir)")
		raftAddr    = fs.String("raft-addr", "127.0.0.1:2888", "the Raft address zkraft ran with (the replica is started on it to apply its log)")
		shardID     = fs.Uint64("shard-id", 1, "Raft shard of the namespace")
		replicaID   = fs.Uint64("replica-id", 1, "this member's replica id")
		extended    = fs.Bool("extended-types", false, "as zkraft ran: TTL nodes enabled (applies log entries the same way)")
		enforceQ    = fs.Bool("enforce-quota", false, "as zkraft ran: hard quota limits enforced")
		zkDataDir   = fs.String("zk-data-dir", "", "ZooKeeper dataDir to write (version-2/snapshot.*)")
		zkLogDir    = fs.String("zk-log-dir", "", "ZooKeeper dataLogDir to write (version-2/log.*; default: --zk-data-dir)")
		compression = fs.String("compression", "", "snapshot compression, as zookeeper.snapshot.compression.method: gz, snappy or empty")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("export: unexpected arguments %q", fs.Args())
	}
	if *configPath != "" {
		d, l, err := zooCfgDirs(*configPath)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if *dataDir == "" {
			*dataDir = d
		}
		if *dataLogDir == "" {
			*dataLogDir = l
		}
	}
	if *dataDir == "" || *zkDataDir == "" {
		fs.Usage()
		return errors.New("export: --data-dir and --zk-data-dir are required")
	}
	comp, err := compat.ParseCompression(*compression)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	start := time.Now()
	stateDir := filepath.Join(*dataDir, "state")
	var st *raftsm.ImportedState
	if _, err := os.Stat(filepath.Join(*dataDir, "raft")); err == nil {
		cfg := server.Config{DataDir: *dataDir, LogDir: *dataLogDir, RaftAddr: *raftAddr, ShardID: *shardID, ReplicaID: *replicaID}
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		st, err = catchUp(cfg, znode.Options{ExtendedTypes: *extended, EnforceQuota: *enforceQ})
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
	} else {
		st, err = raftsm.ExportState(stateDir, *shardID, *replicaID)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	t, err := treeOf(st)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	ex, err := compat.WriteDataDir(*zkDataDir, *zkLogDir, t, comp)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	// Read what we wrote as ZooKeeper will.
	back, err := compat.Restore(*zkDataDir, *zkLogDir)
	if err != nil {
		return fmt.Errorf("export: reading back %s: %w", ex.Snapshot, err)
	}
	if d := compat.Compare(t, back.Tree, 10); len(d) > 0 || back.Tree.Zxid != t.Zxid {
		return fmt.Errorf("export: %s does not read back as written: %s", ex.Snapshot, strings.Join(d, "; "))
	}
	fmt.Fprintf(out, "zkraft export: wrote %s and %s in %v: %v; zxid %#x; digest %d\n",
		ex.Snapshot, ex.Log, time.Since(start).Round(time.Millisecond), t.Counts(), t.Zxid, t.Digest())
	return nil
}

// catchUp starts the replica (no client listener, no session expiry)
// until everything committed in its Raft log is applied, and reads the
// whole state through a linearizable read.
func catchUp(cfg server.Config, opts znode.Options) (*raftsm.ImportedState, error) {
	for _, name := range []string{"raft", "rsm", "transport", "grpc", "dragonboat", "logdb", "raftpb", "config", "settings", "tan", "registry"} {
		dblogger.GetLogger(name).SetLevel(dblogger.ERROR)
	}
	logDir := cfg.LogDir
	if logDir == "" {
		logDir = cfg.DataDir
	}
	nhc := dbconfig.NodeHostConfig{
		NodeHostDir:    filepath.Join(cfg.DataDir, "raft"),
		WALDir:         filepath.Join(logDir, "raft-wal"),
		RTTMillisecond: uint64(cfg.RTT / time.Millisecond),
		RaftAddress:    cfg.RaftAddr,
		Expert:         dbconfig.GetDefaultExpertConfig(),
	}
	nhc.Expert.LogDB = dbconfig.GetSmallMemLogDBConfig()
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		return nil, fmt.Errorf("start the replica on %s (is zkraft still running? was it started with another --raft-addr?): %w", cfg.RaftAddr, err)
	}
	defer nh.Close()
	rc := dbconfig.Config{
		ShardID: cfg.ShardID, ReplicaID: cfg.ReplicaID,
		CheckQuorum: true, PreVote: true,
		ElectionRTT: cfg.ElectionRTT, HeartbeatRTT: cfg.HeartbeatRTT,
	}
	smCfg := raftsm.Config{Dir: filepath.Join(cfg.DataDir, "state"), Options: opts}
	members := map[uint64]dragonboat.Target{cfg.ReplicaID: cfg.RaftAddr}
	if err := nh.StartOnDiskReplica(members, false, raftsm.NewFactory(smCfg), rc); err != nil {
		return nil, fmt.Errorf("start shard %d: %w", cfg.ShardID, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		v, err := nh.SyncRead(ctx, cfg.ShardID, raftsm.ReadFunc(func(v raftsm.View) (any, error) { return v.State() }))
		if err == nil {
			return v.(*raftsm.ImportedState), nil
		}
		if ctx.Err() != nil || !(errors.Is(err, dragonboat.ErrShardNotReady) || errors.Is(err, dragonboat.ErrTimeout) || errors.Is(err, dragonboat.ErrSystemBusy)) {
			return nil, fmt.Errorf("read the state (an ensemble member cannot export alone): %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
