package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lni/dragonboat/v4"

	"github.com/zkraft/zkraft/fleet"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/server"
	"github.com/zkraft/zkraft/zkdata"
	"github.com/zkraft/zkraft/znode"
)

// zkraft import and zkraft export move a data tree between an Apache
// ZooKeeper data directory and zkraft's state store:
//
//	zkraft import --zk-data-dir D [--zk-log-dir L] --data-dir OUT [--verify]
//	zkraft import --config zoo.cfg [--verify]        (in place: the same dataDir)
//	zkraft import --config zoo.cfg --dry-run         (print the last zxid and import id)
//	zkraft import --config zoo.cfg [--zk-data-dir SRC] --expect ID   (an ensemble member)
//	zkraft import --config zoo.cfg --show            (the import id of the member's store)
//	zkraft export --data-dir IN --zk-data-dir OUT [--zk-log-dir L] [--compression gz|snappy]
//	zkraft export --config zoo.cfg [--dry-run]       (into the zoo.cfg dataDir)
//
// Both run offline: ZooKeeper, respectively zkraft, must be stopped.
// docs/migration.md has the procedures, for a single server and for an
// ensemble.

const usageImport = `usage: zkraft import --zk-data-dir DIR [--zk-log-dir DIR] --data-dir DIR [--verify]
       zkraft import --config zoo.cfg [--zk-data-dir DIR] [--expect ID] [--verify]
       zkraft import --cell NAME --config zoo.cfg --zk-data-dir DIR [--expect ID] [--verify]
       zkraft import --config zoo.cfg --dry-run
       zkraft import --config zoo.cfg --show

Reads an Apache ZooKeeper data directory as ZooKeeper 3.8 restores it (the
newest valid snapshot, then the transaction logs after it) and writes zkraft's
state store in --data-dir, which must hold no zkraft state yet. zkraft then
serves the tree with the same Stats and ACLs, the open sessions (clients
reconnect with their session id and password), and zxids in the next epoch.
With --config, ZooKeeper's dataDir and dataLogDir are both the source and the
zkraft data directories (--zk-data-dir names another source), and the
replica id is the member's myid when zoo.cfg lists server.N lines.

Every member of an ensemble must import the same data: the one of the member
with the highest last zxid. --dry-run prints a data directory's last zxid and
import id and writes nothing; on an ensemble member, import requires
--expect with the chosen import id and refuses data that differs, and it
refuses a source older than the member's own ZooKeeper data. --show prints
the import id a member's store was made from.

--cell loads the ZooKeeper data into a named cell of a fleet instead of the
default one (docs/cells.md, Consolidation): create the cell with zkraft cell
create --import (no member starts it), stop each of its members in turn and
import the same data there (--expect when the cell has several replicas),
start the member again, then zkraft cell release.
`

const usageExport = `usage: zkraft export --data-dir DIR --zk-data-dir DIR [--zk-log-dir DIR] [--compression gz|snappy]
       zkraft export --config zoo.cfg [--zk-data-dir DIR] [--dry-run]

Writes the tree and sessions of a stopped zkraft as an Apache ZooKeeper 3.8
data directory (a snapshot and an empty transaction log). If the zkraft data
directory has a Raft log, the replica is started first (with no client
listener, and a standalone member's with no Raft listener either) until
everything committed is applied. With --config,
the zoo.cfg dataDir (and dataLogDir) is the target unless --zk-data-dir is
given, and on an ensemble member the replica id and Raft address come from
myid and the member's server.N line.

An ensemble member exports alone, every member stopped: it applies what its
own log holds as committed. Run --dry-run on every member, export on the one
with the highest zxid, and copy its version-2 to the others.
`

// runImport is "zkraft import".
func runImport(args []string) error { return importCmd(os.Stdout, args) }

// runExport is "zkraft export".
func runExport(args []string) error { return exportCmd(os.Stdout, args) }

// readZooCfg reads a zoo.cfg as zkraft serve does.
func readZooCfg(path string) (*server.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cfg server.Config
	if _, err := applyZooCfg(f, &cfg); err != nil {
		return nil, err
	}
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("%s has no dataDir", path)
	}
	return &cfg, nil
}

// zooCfgMember is this member of the ensemble a zoo.cfg lists: its myid
// (from dataDir/myid) and server.N line. ok is false for a standalone
// zoo.cfg (no server.N lines).
func zooCfgMember(cfg *server.Config) (m server.Member, ok bool, err error) {
	if len(cfg.Members) == 0 {
		return m, false, nil
	}
	id, err := readMyID(cfg.DataDir)
	if err != nil {
		return m, false, fmt.Errorf("the config lists an ensemble, so this member needs its id: %w", err)
	}
	for _, x := range cfg.Members {
		if x.ID == id {
			return x, true, nil
		}
	}
	return m, false, fmt.Errorf("myid %d is not among the config's server.N lines", id)
}

// errImportMismatch: the ZooKeeper data is not the data --expect names.
var errImportMismatch = errors.New("the ZooKeeper data is not the expected import")

func importCmd(out io.Writer, args []string) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usageImport); fs.PrintDefaults() }
	var (
		configPath   = fs.String("config", "", "ZooKeeper zoo.cfg: its dataDir (and dataLogDir) are the source and the zkraft data directory, its myid the replica id")
		zkDataDir    = fs.String("zk-data-dir", "", "ZooKeeper dataDir (holding version-2/snapshot.*)")
		zkLogDir     = fs.String("zk-log-dir", "", "ZooKeeper dataLogDir (holding version-2/log.*; default: --zk-data-dir)")
		dataDir      = fs.String("data-dir", "", "zkraft data directory to write")
		dataLogDir   = fs.String("data-log-dir", "", "zkraft's Raft log directory (default: --data-dir); must hold no Raft log")
		shardID      = fs.Uint64("shard-id", 1, "Raft shard of the namespace")
		replicaID    = fs.Uint64("replica-id", 1, "this member's replica id (default: myid with an ensemble --config)")
		verify       = fs.Bool("verify", false, "read the written state back and compare it with the source: counts, every Stat, data and ACL, the ZooKeeper tree digest")
		ignoreDigest = fs.Bool("ignore-digest", false, "import even if a digest ZooKeeper recorded does not match the replayed tree")
		dryRun       = fs.Bool("dry-run", false, "restore and check the ZooKeeper data, print its last zxid and import id, and write nothing")
		expect       = fs.String("expect", "", "import only if the ZooKeeper data restores to this import id (as --dry-run prints it); required on an ensemble member")
		allowOlder   = fs.Bool("allow-older-source", false, "import even if this member's own ZooKeeper data (the zoo.cfg dataDir) has a later zxid than the source")
		show         = fs.Bool("show", false, "print the import id this member's zkraft store was made from, and write nothing")
		cellName     = fs.String("cell", "", "import into this cell of the fleet (docs/cells.md), created with zkraft cell create --import and not released yet: its shard and this member's replica of it are read from the stopped member's copy of the cell map (--replica-id or the zoo.cfg myid: the member id); needs --zk-data-dir")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("import: unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var (
		ensemble        int    // members the zoo.cfg lists
		ownData, ownLog string // the member's own ZooKeeper data, with --config
	)
	if *configPath != "" {
		zc, err := readZooCfg(*configPath)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		ownData, ownLog = zc.DataDir, zc.LogDir
		if !set["zk-data-dir"] {
			*zkDataDir = zc.DataDir
			if !set["zk-log-dir"] {
				*zkLogDir = zc.LogDir
			}
		}
		if *dataDir == "" {
			*dataDir = zc.DataDir
		}
		if *dataLogDir == "" {
			*dataLogDir = zc.LogDir
		}
		m, ok, err := zooCfgMember(zc)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		if ok && !set["replica-id"] {
			*replicaID = m.ID
		} else if !set["replica-id"] && zc.ReplicaID != 0 {
			*replicaID = zc.ReplicaID // a standalone config with its one server.N line and myid
		}
		ensemble = len(zc.Members)
	}
	if *show {
		if *dataDir == "" {
			fs.Usage()
			return errors.New("import: --show needs --data-dir or --config")
		}
		return showImport(out, *dataDir, *shardID, *replicaID)
	}
	if *zkDataDir == "" || (*dataDir == "" && !*dryRun) {
		fs.Usage()
		return errors.New("import: --zk-data-dir and --data-dir (or --config) are required")
	}
	cellImport := *cellName != "" && *cellName != fleet.DefaultCell
	if cellImport {
		if !set["zk-data-dir"] {
			return errors.New("import: --cell needs --zk-data-dir: the source is another ZooKeeper's data, not this member's own")
		}
		if *dataDir == "" {
			return errors.New("import: --cell needs the member's --data-dir (or --config)")
		}
		c, rid, err := importingCell(*dataDir, *cellName, *replicaID)
		if err != nil {
			return fmt.Errorf("import: --cell: %w", err)
		}
		*shardID, *replicaID = c.ShardID, rid
		// Every replica of the cell must import the same data.
		ensemble = len(c.Members())
		ownData, ownLog = "", ""
	}
	if ensemble > 1 && *expect == "" && !*dryRun {
		if cellImport {
			return fmt.Errorf("import: cell %q has %d replicas, which must all import the same ZooKeeper data: "+
				"run zkraft import --dry-run on the source, and import it into every replica's member with --expect <its import id>", *cellName, ensemble)
		}
		return fmt.Errorf("import: %s lists an ensemble of %d members, which must all import the same ZooKeeper data: "+
			"run zkraft import --dry-run on every stopped member, choose the highest last zxid, and import that member's data "+
			"on every member with --expect <its import id>", *configPath, ensemble)
	}
	if cellImport && !*dryRun {
		// The member has served (its Raft log holds the default cell's and
		// the system shard's entries); the cell's replica has never
		// started, so only its store must not exist yet.
		store := server.DataDirs{Data: *dataDir}.StateStore(*shardID, *replicaID)
		if entries, err := os.ReadDir(store); err == nil && len(entries) > 0 {
			return fmt.Errorf("import: %s already holds the cell's state: import each replica once, before cell release", store)
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("import: %w", err)
		}
	} else if !*dryRun {
		if err := checkNoZkraftState(*dataDir, *dataLogDir, *shardID, *replicaID); err != nil {
			return fmt.Errorf("import: %w", err)
		}
	}

	start := time.Now()
	res, err := zkdata.Restore(*zkDataDir, *zkLogDir)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	restored := time.Since(start)
	printRestore(out, *zkDataDir, *zkLogDir, res)
	if len(res.DigestMismatches) > 0 {
		m := res.DigestMismatches[0]
		err := fmt.Errorf("%w: %d of %d recorded digests differ from the replayed tree, first at zxid %#x (recorded %d, computed %d)",
			zkdata.ErrDigestMismatch, len(res.DigestMismatches), res.DigestChecks, m.Zxid, m.Recorded, m.Computed)
		if !*ignoreDigest {
			return fmt.Errorf("import: %w (--ignore-digest imports anyway)", err)
		}
		fmt.Fprintf(out, "  warning    %v; importing anyway (--ignore-digest)\n", err)
	}
	counts := res.Tree.Counts()
	src := &raftsm.ImportSource{Zxid: res.Tree.Zxid, Digest: res.Tree.Digest(), Nodes: int64(counts.Nodes), Sessions: int64(counts.Sessions)}
	fmt.Fprintf(out, "  import id  %s (last zxid %#x)\n", src.ID(), src.Zxid)
	if *expect != "" && strings.TrimSpace(*expect) != src.ID() {
		return fmt.Errorf("import: %w: %s restores to import id %s, not %s: import the same data on every member (copy the chosen member's version-2)",
			errImportMismatch, *zkDataDir, src.ID(), strings.TrimSpace(*expect))
	}
	if ownData != "" && !sameDir(ownData, *zkDataDir) {
		// The source is a copy from another member: this member's own
		// ZooKeeper data must not be ahead of it.
		own, err := lastLoggedZxid(ownData, ownLog)
		switch {
		case err != nil:
			fmt.Fprintf(out, "  note       this member's own ZooKeeper data was not compared with the source: %v\n", err)
		case own > src.Zxid && !*allowOlder:
			return fmt.Errorf("import: this member's own ZooKeeper data (%s) has zxid %#x, after the source's last zxid %#x: "+
				"import the data of the member with the highest last zxid (zkraft import --dry-run prints it), or pass --allow-older-source to drop the later transactions",
				ownData, own, src.Zxid)
		default:
			fmt.Fprintf(out, "  own data   this member's ZooKeeper data ends at zxid %#x, the source at %#x\n", own, src.Zxid)
		}
	}
	if *dryRun {
		fmt.Fprintf(out, "zkraft import: dry run: last zxid %#x, import id %s; nothing written\n", src.Zxid, src.ID())
		return nil
	}

	st := importedState(res.Tree)
	st.Source = src
	stateDir := server.DataDirs{Data: *dataDir}.State()
	if err := raftsm.ImportState(stateDir, *shardID, *replicaID, st); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	fmt.Fprintf(out, "zkraft import: wrote %s in %v (restore %v): %d znodes, %d sessions; ZooKeeper's last zxid %#x, zkraft continues from %#x; import id %s\n",
		raftsm.StoreDir(stateDir, *shardID, *replicaID), time.Since(start).Round(time.Millisecond), restored.Round(time.Millisecond),
		len(st.Nodes), len(st.Sessions), st.Zxid, raftsm.NextEpoch(st.Zxid), src.ID())
	if !*verify {
		return nil
	}
	return verifyImport(out, res, stateDir, *shardID, *replicaID)
}

// importingCell finds, in the stopped member's copy of the cell map, the
// cell name, which must be importing (created with cell create --import and
// not released: no member has started a replica of it), and the member's
// replica id in it.
func importingCell(dataDir, name string, member uint64) (fleet.Cell, uint64, error) {
	state := server.DataDirs{Data: dataDir}.State()
	if raftsm.StoreLocked(fleet.StoreDir(state, fleet.SystemShardID, member)) {
		return fleet.Cell{}, 0, fmt.Errorf("member %d's cell map is in use: stop the member first", member)
	}
	m, err := fleet.ReadStore(state, fleet.SystemShardID, member)
	if err != nil {
		return fleet.Cell{}, 0, fmt.Errorf("read member %d's cell map (is the member stopped?): %w", member, err)
	}
	c, ok := m.Cell(name)
	if !ok {
		return fleet.Cell{}, 0, fmt.Errorf("no cell %q in member %d's map (version %d): create it with zkraft cell create --import first, "+
			"and stop the member once its map has it", name, member, m.Version())
	}
	if c.State != fleet.CellImporting {
		return fleet.Cell{}, 0, fmt.Errorf("cell %q is %v in member %d's map, not importing: only a cell created with --import and not released yet can be imported into", name, c.State, member)
	}
	rid, ok := c.ReplicaOf(member)
	if !ok {
		return fleet.Cell{}, 0, fmt.Errorf("member %d hosts no replica of cell %q (it is on members %v)", member, name, c.Members())
	}
	return c, rid, nil
}

// showImport prints what a member's store was imported from.
func showImport(out io.Writer, dataDir string, shardID, replicaID uint64) error {
	dirs := server.DataDirs{Data: dataDir}
	src, err := raftsm.ReadImportSource(dirs.State(), shardID, replicaID)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	store := dirs.StateStore(shardID, replicaID)
	served := "never served"
	if _, err := os.Stat(dirs.Raft()); err == nil {
		served = "served since"
	}
	if src == nil {
		fmt.Fprintf(out, "zkraft import: %s was not imported (%s)\n", store, served)
		return nil
	}
	fmt.Fprintf(out, "zkraft import: %s: import id %s (ZooKeeper's last zxid %#x, %d znodes, %d sessions), %s\n",
		store, src.ID(), src.Zxid, src.Nodes, src.Sessions, served)
	return nil
}

// sameDir reports whether a and b name the same directory.
func sameDir(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA != nil || errB != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return os.SameFile(sa, sb)
}

// lastLoggedZxid is the last zxid a ZooKeeper data directory holds, read
// cheaply: the newest snapshot's name and the last entry of the newest
// transaction log that has entries.
func lastLoggedZxid(dataDir, logDir string) (int64, error) {
	if logDir == "" {
		logDir = dataDir
	}
	snapDir, err := zkdata.VersionDir(dataDir)
	if err != nil {
		return 0, err
	}
	logVDir, err := zkdata.VersionDir(logDir)
	if err != nil {
		return 0, err
	}
	zxids := func(dir, prefix string) ([]int64, map[int64]string) {
		entries, _ := os.ReadDir(dir)
		var zs []int64
		names := map[int64]string{}
		for _, e := range entries {
			parts := strings.Split(e.Name(), ".")
			if e.IsDir() || len(parts) < 2 || parts[0] != prefix {
				continue
			}
			z, err := strconv.ParseInt(parts[1], 16, 64)
			if err != nil {
				continue
			}
			zs = append(zs, z)
			names[z] = filepath.Join(dir, e.Name())
		}
		sort.Slice(zs, func(i, j int) bool { return zs[i] > zs[j] })
		return zs, names
	}
	var last int64 = -1
	if snaps, _ := zxids(snapDir, "snapshot"); len(snaps) > 0 {
		last = snaps[0]
	}
	logs, names := zxids(logVDir, "log")
	for _, z := range logs {
		l, err := zkdata.OpenLog(names[z])
		if err != nil {
			return 0, err
		}
		n := 0
		for {
			txn, _, err := l.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				l.Close()
				return 0, err
			}
			n++
			last = max(last, txn.Header.Zxid)
		}
		l.Close()
		if n > 0 {
			break
		}
	}
	if last < 0 {
		return 0, fmt.Errorf("no snapshot or transaction in %s", dataDir)
	}
	return last, nil
}

// checkServeImported is zkraft serve's check before it opens a member's
// store. A data directory that holds Apache ZooKeeper data but no zkraft
// store was not imported: serving it would start an empty tree, and an
// ensemble member would then serve a different tree from the others (Raft
// does not reconcile states that differ at index 0), so it is refused. A
// store about to be served for the first time that was imported is logged
// with its import id, which must be the same on every member.
func checkServeImported(cfg *server.Config, logger *slog.Logger) error {
	if cfg.Join || cfg.DataDir == "" {
		return nil
	}
	shard, replica := max(cfg.ShardID, 1), max(cfg.ReplicaID, 1)
	dirs := server.DataDirsOf(*cfg)
	store := dirs.StateStore(shard, replica)
	_, err := os.Stat(dirs.Raft())
	served := err == nil
	if _, err := os.Stat(store); err == nil {
		if served {
			return nil
		}
		src, err := raftsm.ReadImportSource(dirs.State(), shard, replica)
		if err != nil || src == nil {
			return nil // the server reports what is wrong with the store
		}
		logger.Info("first start from a store imported from ZooKeeper; every member of the ensemble must show the same import id",
			"import_id", src.ID(), "zookeeper_zxid", fmt.Sprintf("%#x", src.Zxid), "znodes", src.Nodes, "sessions", src.Sessions, "member", replica)
		return nil
	}
	if served {
		return nil
	}
	logDir := cfg.LogDir
	if logDir == "" {
		logDir = cfg.DataDir
	}
	for _, d := range []struct{ dir, prefix string }{{cfg.DataDir, "snapshot."}, {logDir, "log."}} {
		entries, _ := os.ReadDir(filepath.Join(d.dir, "version-2"))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), d.prefix) {
				return fmt.Errorf("%s holds Apache ZooKeeper data (%s) but no zkraft store for member %d: "+
					"import it first (zkraft import --config zoo.cfg, see docs/migration.md), or move version-2 aside to start with an empty tree",
					d.dir, filepath.Join("version-2", e.Name()), replica)
			}
		}
	}
	return nil
}

// checkNoZkraftState refuses a data directory that already has zkraft
// state: a state store for the replica, or a Raft log (whose entries would
// be replayed onto the imported tree).
func checkNoZkraftState(dataDir, logDir string, shardID, replicaID uint64) error {
	dirs := server.DataDirs{Data: dataDir, Log: logDir}
	paths := []string{dirs.StateStore(shardID, replicaID), dirs.Raft(), dirs.RaftWAL()}
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

func printRestore(out io.Writer, dataDir, logDir string, res *zkdata.Restored) {
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
func importedState(t *zkdata.Tree) *raftsm.ImportedState {
	st := &raftsm.ImportedState{Zxid: t.Zxid}
	_ = t.Walk(func(path string, n *zkdata.Node) error {
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
func treeOf(st *raftsm.ImportedState) (*zkdata.Tree, error) {
	t := zkdata.NewTree()
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
func verifyImport(out io.Writer, res *zkdata.Restored, stateDir string, shardID, replicaID uint64) error {
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
	diffs := zkdata.Compare(want, got, 50)
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
		configPath  = fs.String("config", "", "zoo.cfg zkraft ran with (its dataDir and dataLogDir; the member's myid and server.N line)")
		dataDir     = fs.String("data-dir", "", "zkraft data directory to read")
		dataLogDir  = fs.String("data-log-dir", "", "zkraft's Raft log directory (default: --data-dir)")
		raftAddr    = fs.String("raft-addr", "", "the Raft address an ensemble member ran with (the replica is started on it to apply its log; a standalone member's is read from its data directory)")
		shardID     = fs.Uint64("shard-id", 1, "Raft shard of the namespace")
		replicaID   = fs.Uint64("replica-id", 1, "this member's replica id (with --cell: its member id, myid)")
		cellName    = fs.String("cell", "", "export this cell of the fleet (docs/cells.md) instead of the default one: its shard and this member's replica of it are read from the member's copy of the cell map")
		extended    = fs.Bool("extended-types", false, "as zkraft ran: TTL nodes enabled (applies log entries the same way)")
		enforceQ    = fs.Bool("enforce-quota", false, "as zkraft ran: hard quota limits enforced")
		zkDataDir   = fs.String("zk-data-dir", "", "ZooKeeper dataDir to write (version-2/snapshot.*; default with --config: its dataDir)")
		zkLogDir    = fs.String("zk-log-dir", "", "ZooKeeper dataLogDir to write (version-2/log.*; default: --zk-data-dir, or the zoo.cfg dataLogDir)")
		compression = fs.String("compression", "", "snapshot compression, as zookeeper.snapshot.compression.method: gz, snappy or empty")
		dryRun      = fs.Bool("dry-run", false, "catch the replica up and print its zxid, applied index and export id; write nothing")
		wait        = fs.Duration("wait", 30*time.Second, "how long the replica may take to apply its log")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("export: unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	ensemble := false
	if *configPath != "" {
		zc, err := readZooCfg(*configPath)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if *dataDir == "" {
			*dataDir = zc.DataDir
		}
		if *dataLogDir == "" {
			*dataLogDir = zc.LogDir
		}
		if !set["zk-data-dir"] {
			*zkDataDir = zc.DataDir
			if !set["zk-log-dir"] {
				*zkLogDir = zc.LogDir
			}
		}
		m, ok, err := zooCfgMember(zc)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if ok {
			if !set["replica-id"] {
				*replicaID = m.ID
			}
			if !set["raft-addr"] {
				*raftAddr = m.RaftAddr
			}
		} else if !set["replica-id"] && zc.ReplicaID != 0 {
			*replicaID = zc.ReplicaID // a standalone config with its one server.N line and myid
		}
		ensemble = len(zc.Members) > 1
	}
	if *dataDir == "" || (*zkDataDir == "" && !*dryRun) {
		fs.Usage()
		return errors.New("export: --data-dir and --zk-data-dir (or --config) are required")
	}
	if *cellName != "" && *cellName != fleet.DefaultCell {
		state := filepath.Join(*dataDir, "state")
		if raftsm.StoreLocked(fleet.StoreDir(state, fleet.SystemShardID, *replicaID)) {
			return fmt.Errorf("export: --cell: member %d's cell map is in use: stop the member first", *replicaID)
		}
		m, err := fleet.ReadStore(state, fleet.SystemShardID, *replicaID)
		if err != nil {
			return fmt.Errorf("export: --cell: %w", err)
		}
		c, ok := m.Cell(*cellName)
		if !ok {
			return fmt.Errorf("export: --cell: no cell %q in this member's map (version %d)", *cellName, m.Version())
		}
		rid, ok := c.ReplicaOf(*replicaID)
		if !ok {
			return fmt.Errorf("export: --cell: member %d hosts no replica of cell %q (it is on members %v)", *replicaID, c.Name, c.Members())
		}
		*shardID, *replicaID = c.ShardID, rid
		// A cell of several replicas is caught up alone, as an ensemble
		// member's default cell is.
		ensemble = len(c.Members()) > 1
	}
	comp, err := zkdata.ParseCompression(*compression)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	start := time.Now()
	dirs := server.DataDirs{Data: *dataDir, Log: *dataLogDir}
	stateDir := dirs.State()
	var st *raftsm.ImportedState
	progress := ""
	if _, err := os.Stat(dirs.Raft()); err == nil {
		cfg := server.Config{DataDir: *dataDir, LogDir: *dataLogDir, RaftAddr: *raftAddr, ShardID: *shardID, ReplicaID: *replicaID}
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		opts := znode.Options{ExtendedTypes: *extended, EnforceQuota: *enforceQ}
		if ensemble {
			var applied, commit uint64
			st, applied, commit, err = catchUpAlone(cfg, opts, *wait)
			progress = fmt.Sprintf("; applied index %d (commit index %d in this member's log)", applied, commit)
		} else {
			st, err = catchUp(cfg, opts, *wait)
		}
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
	id := raftsm.ImportID(t.Zxid, t.Digest())
	if *dryRun {
		fmt.Fprintf(out, "zkraft export: dry run: %v; zxid %#x%s; export id %s; nothing written\n", t.Counts(), t.Zxid, progress, id)
		return nil
	}
	ex, err := zkdata.WriteDataDir(*zkDataDir, *zkLogDir, t, comp)
	if errors.Is(err, zkdata.ErrExists) {
		return fmt.Errorf("export: %w (move the old ZooKeeper version-2 directory aside first: ZooKeeper must not mix it with the export)", err)
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	// Read what we wrote as ZooKeeper will.
	back, err := zkdata.Restore(*zkDataDir, *zkLogDir)
	if err != nil {
		return fmt.Errorf("export: reading back %s: %w", ex.Snapshot, err)
	}
	if d := zkdata.Compare(t, back.Tree, 10); len(d) > 0 || back.Tree.Zxid != t.Zxid {
		return fmt.Errorf("export: %s does not read back as written: %s", ex.Snapshot, strings.Join(d, "; "))
	}
	fmt.Fprintf(out, "zkraft export: wrote %s and %s in %v: %v; zxid %#x%s; digest %d; export id %s\n",
		ex.Snapshot, ex.Log, time.Since(start).Round(time.Millisecond), t.Counts(), t.Zxid, progress, t.Digest(), id)
	return nil
}

// startReplica starts the replica of cfg with no client listener and no
// session expiry.
func startReplica(cfg server.Config, opts znode.Options, ensemble bool) (*dragonboat.NodeHost, error) {
	server.QuietRaftLogs()
	nhc, err := server.NodeHostConfig(cfg)
	if err != nil {
		return nil, err
	}
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		return nil, fmt.Errorf("start the replica on %s (is zkraft still running? was it started with another --raft-addr?): %w", nhc.RaftAddress, err)
	}
	// The member's own Raft and state machine configuration (the tree
	// rules from the command line), except that an export takes no Raft
	// snapshot: it reads.
	cfg.ExtendedTypes, cfg.EnforceQuota = opts.ExtendedTypes, opts.EnforceQuota
	rc, smCfg := server.ReplicaConfig(cfg, nil)
	rc.SnapshotEntries, rc.CompactionOverhead = 0, 0
	// A replica that has run before keeps the membership it was started
	// with (Dragonboat checks a non-empty map against it): a standalone
	// store is restarted as the one member it is, an ensemble member with
	// no map.
	var members map[uint64]dragonboat.Target
	if !ensemble {
		members = map[uint64]dragonboat.Target{cfg.ReplicaID: nhc.RaftAddress}
	}
	if err := nh.StartOnDiskReplica(members, false, raftsm.NewFactory(smCfg), rc); err != nil {
		nh.Close()
		return nil, fmt.Errorf("start shard %d: %w", cfg.ShardID, err)
	}
	return nh, nil
}

func retryable(err error) bool {
	return errors.Is(err, dragonboat.ErrShardNotReady) || errors.Is(err, dragonboat.ErrTimeout) ||
		errors.Is(err, dragonboat.ErrSystemBusy) || errors.Is(err, dragonboat.ErrShardNotFound) ||
		errors.Is(err, dragonboat.ErrShardNotInitialized)
}

// catchUp starts a standalone replica (no client listener, no session
// expiry) until everything committed in its Raft log is applied, and reads
// the whole state through a linearizable read.
func catchUp(cfg server.Config, opts znode.Options, wait time.Duration) (*raftsm.ImportedState, error) {
	nh, err := startReplica(cfg, opts, false)
	if err != nil {
		return nil, err
	}
	defer nh.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		v, err := nh.SyncRead(ctx, cfg.ShardID, raftsm.ReadFunc(func(v raftsm.View) (any, error) { return v.State() }))
		if err == nil {
			return v.(*raftsm.ImportedState), nil
		}
		if ctx.Err() != nil || !retryable(err) {
			return nil, fmt.Errorf("read the state (is this an ensemble member? export it with its zoo.cfg, --config): %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// catchUpAlone starts an ensemble member's replica while the other members
// are stopped, lets it apply what its own log holds as committed (the
// commit index it persisted), and reads its state. No quorum is needed;
// the member may lack entries that others knew to be committed, so the
// operator exports the member with the highest zxid (--dry-run on each).
func catchUpAlone(cfg server.Config, opts znode.Options, wait time.Duration) (st *raftsm.ImportedState, applied, commit uint64, err error) {
	nh, err := startReplica(cfg, opts, true)
	if err != nil {
		return nil, 0, 0, err
	}
	defer nh.Close()
	deadline := time.Now().Add(wait)
	for {
		applied, commit, done, err := caughtUp(nh, cfg.ShardID)
		if err == nil && done {
			if leader, _, ok, _ := nh.GetLeaderID(cfg.ShardID); ok {
				return nil, 0, 0, fmt.Errorf("member %d leads shard %d: other members still run zkraft; stop every member before exporting", leader, cfg.ShardID)
			}
			v, err := nh.StaleRead(cfg.ShardID, raftsm.ReadFunc(func(v raftsm.View) (any, error) { return v.State() }))
			if err != nil {
				return nil, 0, 0, fmt.Errorf("read the state: %w", err)
			}
			return v.(*raftsm.ImportedState), applied, commit, nil
		}
		if err != nil && !retryable(err) {
			return nil, 0, 0, err
		}
		if time.Now().After(deadline) {
			return nil, 0, 0, fmt.Errorf("the replica applied index %d of the %d committed in its log within %v (%v)", applied, commit, wait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// caughtUp reports whether the state machine has applied every entry of
// the log up to the persisted commit index that Dragonboat hands to it
// (no-ops and membership changes never reach it).
func caughtUp(nh *dragonboat.NodeHost, shardID uint64) (applied, commit uint64, done bool, err error) {
	lr, err := nh.GetLogReader(shardID)
	if err != nil {
		return 0, 0, false, err
	}
	state, _ := lr.NodeState()
	commit = state.Commit
	v, err := nh.StaleRead(shardID, raftsm.ReadFunc(func(v raftsm.View) (any, error) { return v.AppliedIndex() }))
	if err != nil {
		return 0, commit, false, err
	}
	applied = v.(uint64)
	if applied >= commit {
		return applied, commit, true, nil
	}
	first, _ := lr.GetRange()
	for lo := max(applied+1, first); lo <= commit; {
		ents, err := lr.Entries(lo, commit+1, 64<<20)
		if err != nil {
			return applied, commit, false, err
		}
		if len(ents) == 0 {
			return applied, commit, false, fmt.Errorf("no log entries from index %d", lo)
		}
		for i := range ents {
			if ents[i].IsUpdateEntry() {
				return applied, commit, false, nil
			}
		}
		lo = ents[len(ents)-1].Index + 1
	}
	return applied, commit, true, nil
}
