package zkdata

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// Restored is a ZooKeeper data directory restored the way ZooKeeper 3.8
// restores it at startup (FileTxnSnapLog.restore, then ZooKeeperServer's
// clean-up of dead sessions).
type Restored struct {
	// Tree is the result: every znode with ZooKeeper's stored Stat, the
	// ACLs resolved, quota stats recounted, the open sessions, and Zxid,
	// ZooKeeper's lastProcessedZxid.
	Tree *Tree
	// Snapshot is the snapshot the restore started from.
	Snapshot *SnapshotInfo
	// Skipped lists newer snapshots that could not be read, with why.
	// ZooKeeper skips them too and falls back to an older one.
	Skipped []string
	// Logs are the transaction logs read, in order.
	Logs []LogInfo
	// Applied counts the transactions replayed after the snapshot;
	// Ignored those among them that met NODEEXISTS or NONODE, which the
	// fuzzy snapshot makes normal (ZooKeeper ignores them too).
	Applied, Ignored int
	// DigestChecks counts the digests ZooKeeper recorded (in the snapshot
	// and after transactions) that were compared with the restored tree;
	// DigestMismatches lists those that differed.
	DigestChecks     int
	DigestMismatches []DigestCheck
	// LastDigestCheck is the last comparison made, or nil if none was.
	LastDigestCheck *DigestCheck
	// DeadSessions are sessions that owned ephemerals but were no longer
	// open; ZooKeeper deletes such ephemerals when it loads, and so does
	// Restore.
	DeadSessions []int64
	// Warnings are what ZooKeeper would only log.
	Warnings []string
}

// LogInfo describes one transaction log a restore read.
type LogInfo struct {
	File string
	// Entries counts the entries read; Applied those replayed (the others
	// were already in the snapshot).
	Entries, Applied int
	FirstZxid        int64
	LastZxid         int64
	End              LogEnd
}

// DigestCheck is one comparison of a digest ZooKeeper recorded with the
// digest of the restored tree at the same zxid.
type DigestCheck struct {
	Zxid     int64
	Recorded int64
	Computed int64
}

// maxSnapshotsTried is how many snapshots ZooKeeper tries, newest first.
const maxSnapshotsTried = 100

// VersionDir returns the version-2 directory of a ZooKeeper dataDir (or
// dataLogDir); dir may also name the version-2 directory itself.
func VersionDir(dir string) (string, error) {
	if filepath.Base(filepath.Clean(dir)) == "version-2" {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return dir, nil
		}
	}
	v := filepath.Join(dir, "version-2")
	st, err := os.Stat(v)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("%w: %s has no version-2 directory", ErrNotDataDir, dir)
	}
	return v, nil
}

// zxidFromName is Util.getZxidFromName: "<prefix>.<hex>[.<anything>]".
func zxidFromName(name, prefix string) (int64, bool) {
	parts := strings.Split(name, ".")
	if len(parts) < 2 || parts[0] != prefix {
		return 0, false
	}
	z, err := strconv.ParseInt(parts[1], 16, 64)
	if err != nil {
		return 0, false
	}
	return z, true
}

func baseName(path string) string { return filepath.Base(path) }

type zxidFile struct {
	path string
	zxid int64
}

// listFiles lists the files named <prefix>.<hex zxid> in dir, by zxid.
func listFiles(dir, prefix string, newestFirst bool) ([]zxidFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []zxidFile
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if z, ok := zxidFromName(e.Name(), prefix); ok {
			out = append(out, zxidFile{filepath.Join(dir, e.Name()), z})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].zxid != out[j].zxid {
			return (out[i].zxid > out[j].zxid) == newestFirst
		}
		return out[i].path < out[j].path
	})
	return out, nil
}

// Restore reads a ZooKeeper dataDir (snapshots) and dataLogDir (logs; ""
// means the dataDir): it loads the newest snapshot that reads cleanly and
// replays the logs after it with ZooKeeper's idempotent rules. A checksum
// error in a log, an undecodable entry or a tree that does not hold
// together is an error; so is a data directory without a snapshot.
func Restore(dataDir, logDir string) (*Restored, error) {
	snapDir, err := VersionDir(dataDir)
	if err != nil {
		return nil, err
	}
	if logDir == "" {
		logDir = dataDir
	}
	logVDir, err := VersionDir(logDir)
	if err != nil {
		return nil, err
	}
	snaps, err := listFiles(snapDir, "snapshot", true)
	if err != nil {
		return nil, err
	}
	logs, err := listFiles(logVDir, "log", false)
	if err != nil {
		return nil, err
	}
	if len(snaps) == 0 {
		if len(logs) > 0 {
			return nil, fmt.Errorf("%w in %s, but there are transaction logs (ZooKeeper refuses this too, unless zookeeper.snapshot.trust.empty is set)", ErrNoSnapshot, snapDir)
		}
		return nil, fmt.Errorf("%w: no snapshot and no transaction log in %s", ErrNotDataDir, snapDir)
	}
	res := &Restored{}
	var t *Tree
	var info *SnapshotInfo
	var reasons []error
	for i, s := range snaps {
		if i == maxSnapshotsTried {
			break
		}
		t, info, err = ReadSnapshotFile(s.path)
		if err == nil {
			break
		}
		reasons = append(reasons, err)
		res.Skipped = append(res.Skipped, err.Error())
	}
	if t == nil {
		return nil, fmt.Errorf("%w in %s: %w", ErrNoSnapshot, snapDir, errors.Join(reasons...))
	}
	res.Snapshot = info
	r := &restorer{res: res, t: t}
	if err := r.replay(info, logs); err != nil {
		return nil, err
	}
	// ZooKeeperServer.loadData: ephemerals of sessions that are gone.
	var dead []int64
	for owner := range t.ephemerals {
		if _, ok := t.Sessions[owner]; !ok {
			dead = append(dead, owner)
		}
	}
	sort.Slice(dead, func(i, j int) bool { return dead[i] < dead[j] })
	for _, owner := range dead {
		t.killSession(owner, t.Zxid, nil)
	}
	res.DeadSessions = dead
	if err := t.resolveACLs(); err != nil {
		return nil, err
	}
	res.Tree = t
	return res, nil
}

// restorer replays transactions onto a tree loaded from a snapshot.
type restorer struct {
	res *Restored
	t   *Tree
	// snapDigest is ZooKeeper's digestFromLoadedSnapshot: while set, the
	// tree is fuzzy and transaction digests are not compared.
	snapDigest *ZxidDigest
	warnedPast bool
}

func (r *restorer) warnf(format string, args ...any) {
	r.res.Warnings = append(r.res.Warnings, fmt.Sprintf(format, args...))
}

func (r *restorer) replay(info *SnapshotInfo, logs []zxidFile) error {
	snapZxid := info.Zxid
	if d := info.Digest; d != nil && d.Zxid > 0 && d.Zxid >= snapZxid {
		r.snapDigest = d
		r.compareSnapshotDigest(snapZxid)
	}
	// FileTxnLog.getLogFiles: the last log starting at or before the
	// snapshot, and every later one.
	first := 0
	for i, l := range logs {
		if l.zxid <= snapZxid {
			first = i
		}
	}
	logs = logs[first:]
	fastForward := true
	var highest int64 = snapZxid
	for i, lf := range logs {
		l, err := OpenLog(lf.path)
		if err != nil {
			return err
		}
		li := LogInfo{File: lf.path}
		for {
			txn, off, err := l.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				l.Close()
				return err
			}
			li.Entries++
			z := txn.Header.Zxid
			if li.Entries == 1 {
				li.FirstZxid = z
			}
			li.LastZxid = z
			if fastForward && z <= snapZxid {
				continue
			}
			fastForward = false
			if z < highest && highest != 0 {
				r.warnf("%s: offset %d: zxid %#x after %#x", lf.path, off, z, highest)
			} else {
				highest = z
			}
			if err := r.apply(txn); err != nil {
				l.Close()
				return &FileError{File: lf.path, Offset: off, Err: err}
			}
			li.Applied++
			r.res.Applied++
		}
		li.End = l.End()
		l.Close()
		if li.End == LogEndPartial && i < len(logs)-1 {
			r.warnf("%s ends with a partial entry at offset %d, and later logs follow", lf.path, l.Offset())
		}
		r.res.Logs = append(r.res.Logs, li)
	}
	if r.snapDigest != nil {
		r.warnf("the transactions end at %#x, before %#x, the zxid of the snapshot's digest: it was not checked", r.t.Zxid, r.snapDigest.Zxid)
	}
	r.forgiveFuzzySnapshotDigest(info)
	return nil
}

// forgiveFuzzySnapshotDigest turns a mismatch of the snapshot's own digest
// into a warning when the snapshot was fuzzy and a later recorded digest
// matched. ZooKeeper writes the digest of the last zxid it had fully
// applied once the tree is written, and the tree it wrote may already hold
// part of the next transaction (the replay then meets a result ZooKeeper
// ignores): the two differ, and ZooKeeper itself only logs it. The later
// match vouches for the restored tree.
func (r *restorer) forgiveFuzzySnapshotDigest(info *SnapshotInfo) {
	res := r.res
	last := res.LastDigestCheck
	if info.Digest == nil || res.Ignored == 0 || len(res.DigestMismatches) == 0 ||
		last == nil || last.Recorded != last.Computed || last.Zxid <= info.Digest.Zxid {
		return
	}
	m := res.DigestMismatches[0]
	if m.Zxid != info.Digest.Zxid {
		return
	}
	res.DigestMismatches = res.DigestMismatches[1:]
	if len(res.DigestMismatches) == 0 {
		res.DigestMismatches = nil
	}
	r.warnf("the snapshot's digest (zxid %#x) differs from the tree it holds, which is fuzzy (%d replayed transactions were already in it); the digest recorded at %#x matches the replayed tree", m.Zxid, res.Ignored, last.Zxid)
}

// apply is FileTxnSnapLog.processTransaction followed by the digest checks
// of DataTree.processTxn and compareDigest.
func (r *restorer) apply(txn *Txn) error {
	h := &txn.Header
	switch h.Type {
	case jute.OpCreateSession:
		r.t.Sessions[h.ClientID] = txn.Record.(*CreateSessionTxn).TimeOut
	case jute.OpCloseSession:
		delete(r.t.Sessions, h.ClientID)
	}
	rc, err := r.processTxn(h, h.Type, txn.Record)
	if err != nil {
		return err
	}
	if rc == jute.ErrNodeExists || rc == jute.ErrNoNode {
		if m, ok := txn.Record.(*MultiTxn); !ok || !m.failed() {
			r.res.Ignored++
		}
	}
	if h.Zxid > r.t.Zxid {
		r.t.Zxid = h.Zxid
	}
	if r.snapDigest != nil {
		r.compareSnapshotDigest(h.Zxid)
	}
	if d := txn.Digest; d != nil && r.snapDigest == nil {
		if d.Version != DigestVersion {
			return nil // ZooKeeper skips digests of another version
		}
		r.check(h.Zxid, d.TreeDigest)
	}
	return nil
}

func (r *restorer) check(zxid, recorded int64) {
	c := DigestCheck{Zxid: zxid, Recorded: recorded, Computed: r.t.Digest()}
	r.res.DigestChecks++
	r.res.LastDigestCheck = &c
	if c.Recorded != c.Computed {
		r.res.DigestMismatches = append(r.res.DigestMismatches, c)
	}
}

// compareSnapshotDigest is DataTree.compareSnapshotDigests.
func (r *restorer) compareSnapshotDigest(zxid int64) {
	d := r.snapDigest
	switch {
	case zxid == d.Zxid:
		if d.Version == DigestVersion {
			r.check(zxid, d.Digest)
		}
		r.snapDigest = nil
	case d.Zxid != 0 && zxid > d.Zxid && !r.warnedPast:
		r.warnedPast = true
		r.warnf("the snapshot's digest is for zxid %#x, which is not in the logs", d.Zxid)
	}
}

// processTxn is DataTree.processTxn. typ may differ from h.Type for the
// sub-transactions of a multi. The error code is ZooKeeper's result, which
// a restore ignores; an error means data ZooKeeper itself would fail on.
func (r *restorer) processTxn(h *TxnHeader, typ jute.OpCode, rec jute.Record) (jute.ErrCode, error) {
	t := r.t
	zxid, time := h.Zxid, h.Time
	wrong := func() (jute.ErrCode, error) {
		return 0, fmt.Errorf("%w: zxid %#x: %v with a %T record", ErrCorrupt, zxid, typ, rec)
	}
	badPath := func(rc jute.ErrCode, path string) (jute.ErrCode, error) {
		if rc == jute.ErrBadArguments {
			return 0, fmt.Errorf("%w: zxid %#x: %v of path %q", ErrCorrupt, zxid, typ, path)
		}
		return rc, nil
	}
	switch typ {
	case jute.OpCreate, jute.OpCreate2:
		c, ok := rec.(*CreateTxn)
		if !ok {
			return wrong()
		}
		var owner int64
		if c.Ephemeral {
			owner = h.ClientID
		}
		rc := t.createNode(c.Path, c.Data, c.ACL, owner, c.ParentCVersion, zxid, time)
		if rc == jute.ErrNodeExists && typ == jute.OpCreate {
			// The node was deleted and created again inside the fuzzy
			// window: the parent still takes the logged cversion.
			parent, _, _ := split(c.Path)
			if prc := t.setCversionPzxid(parent, c.ParentCVersion, zxid); prc != jute.ErrOK {
				rc = prc
			}
		}
		return badPath(rc, c.Path)
	case jute.OpCreateTTL:
		c, ok := rec.(*CreateTTLTxn)
		if !ok {
			return wrong()
		}
		if c.TTL <= 0 || c.TTL > znode.MaxTTL {
			return 0, fmt.Errorf("%w: zxid %#x: TTL %d of %q", ErrCorrupt, zxid, c.TTL, c.Path)
		}
		return badPath(t.createNode(c.Path, c.Data, c.ACL, znode.TTLOwner(c.TTL), c.ParentCVersion, zxid, time), c.Path)
	case jute.OpCreateContainer:
		c, ok := rec.(*CreateContainerTxn)
		if !ok {
			return wrong()
		}
		return badPath(t.createNode(c.Path, c.Data, c.ACL, znode.ContainerOwner, c.ParentCVersion, zxid, time), c.Path)
	case jute.OpDelete, jute.OpDeleteContainer:
		c, ok := rec.(*DeleteTxn)
		if !ok {
			return wrong()
		}
		return badPath(t.deleteNode(c.Path, zxid), c.Path)
	case jute.OpSetData, jute.OpReconfig:
		c, ok := rec.(*SetDataTxn)
		if !ok {
			return wrong()
		}
		return t.setData(c.Path, c.Data, c.Version, zxid, time), nil
	case jute.OpSetACL:
		c, ok := rec.(*SetACLTxn)
		if !ok {
			return wrong()
		}
		return t.setACL(c.Path, c.ACL, c.Version), nil
	case jute.OpCloseSession:
		var paths []string
		if c, ok := rec.(*CloseSessionTxn); ok && c != nil {
			paths = c.Paths
		}
		t.killSession(h.ClientID, zxid, paths)
		return jute.ErrOK, nil
	case jute.OpCreateSession, jute.OpCheck:
		return jute.ErrOK, nil
	case jute.OpError:
		c, ok := rec.(*ErrorTxn)
		if !ok {
			return wrong()
		}
		return c.Err, nil
	case jute.OpMulti:
		m, ok := rec.(*MultiTxn)
		if !ok {
			return wrong()
		}
		failed := m.failed()
		rc := jute.ErrOK
		postFailed := false
		for i, s := range m.Txns {
			if s.Err != nil {
				// ZooKeeper's processTxn catches the IOException and
				// leaves the multi half applied.
				r.warnf("zxid %#x: multi op %d: %v; ZooKeeper stops applying the multi there", zxid, i, s.Err)
				break
			}
			st, srec := s.Type, s.Record
			if st == jute.OpError {
				postFailed = true
			}
			if failed && st != jute.OpError {
				code := jute.ErrOK
				if postFailed {
					code = jute.ErrRuntimeInconsistency
				}
				st, srec = jute.OpError, &ErrorTxn{Err: code}
			}
			src, err := r.processTxn(h, st, srec)
			if err != nil {
				return 0, err
			}
			if src != jute.ErrOK && rc == jute.ErrOK {
				rc = src
			}
		}
		return rc, nil
	}
	return 0, fmt.Errorf("%w: zxid %#x: transaction type %v", ErrCorrupt, zxid, typ)
}
