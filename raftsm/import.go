package raftsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cockroachdb/pebble"

	"github.com/zkraft/zkraft/znode"
)

// Import and export: a whole tree with its sessions written into a fresh
// state-machine store (from a ZooKeeper data directory, see package zkdata)
// or read back out of one.

var (
	// ErrStoreExists means ImportState was pointed at a replica that
	// already has a store.
	ErrStoreExists = errors.New("raftsm: the state store exists already")
	// ErrNoStore means ExportState found no store for the replica.
	ErrNoStore = errors.New("raftsm: no state store")
	// ErrBadImport means an ImportedState does not hold together.
	ErrBadImport = errors.New("raftsm: bad imported state")
)

// ImportedNode is one znode of an ImportedState.
type ImportedNode struct {
	Path string
	Node *znode.Node
}

// ImportedState is a whole data tree with its sessions.
type ImportedState struct {
	// Zxid is the last zxid of the tree. ImportState stores the first zxid
	// of the next epoch (NextEpoch), so that zkraft's zxids continue above
	// every imported one; ExportState returns the stored zxid.
	Zxid int64
	// Nodes holds every znode, the root ("/") first and each parent before
	// its children. NumChildren is counted by ImportState, whatever it
	// says here, and filled in by ExportState.
	Nodes []ImportedNode
	// Sessions are the open sessions with their timeouts.
	Sessions []SessionInfo
	// Source, if set, identifies the data the state was imported from;
	// ImportState records it in the store (ReadImportSource reads it).
	Source *ImportSource
}

// ImportSource identifies the data a store was imported from. The members
// of an ensemble must all start from the same imported state (their Raft
// log is empty after an import, so Raft will not reconcile different
// trees): comparing the members' import ids before they start shows it.
type ImportSource struct {
	// Zxid is the source's last zxid (ZooKeeper's lastProcessedZxid).
	Zxid int64
	// Digest is ZooKeeper's tree digest of the source tree.
	Digest int64
	// Nodes and Sessions count the source's znodes and open sessions.
	Nodes, Sessions int64
}

// ImportID is the import id of a tree: its last zxid and ZooKeeper's tree
// digest, as "0x<zxid>/<digest as 16 hex digits>".
func ImportID(zxid, digest int64) string {
	return fmt.Sprintf("%#x/%016x", zxid, uint64(digest))
}

// ID is the import id of the source: ImportID(Zxid, Digest).
func (s ImportSource) ID() string { return ImportID(s.Zxid, s.Digest) }

// keyImport holds a store's ImportSource: four big-endian int64s (zxid,
// digest, nodes, sessions).
var keyImport = []byte("m:import")

// keyImportChecked marks a store whose import record the ensemble has
// compared (KindCheckImport).
var keyImportChecked = []byte("m:import-checked")

// ImportRecord is the stored import record and whether the ensemble has
// compared it yet; nil when the state was not imported.
func (v View) ImportRecord() (record []byte, checked bool, err error) {
	record, err = getValue(v.tree.r, keyImport)
	if err != nil || record == nil {
		return nil, false, err
	}
	c, err := getValue(v.tree.r, keyImportChecked)
	return record, c != nil, err
}

// NextEpoch returns the first zxid of the epoch after zxid's:
// ((zxid>>32)+1)<<32.
func NextEpoch(zxid int64) int64 { return ((zxid >> 32) + 1) << 32 }

// StoreDir is the directory of a replica's store under dir (Config.Dir).
func StoreDir(dir string, shardID, replicaID uint64) string {
	return New(Config{Dir: dir}, shardID, replicaID).dir
}

// importBatchBytes is the batch size at which ImportState commits.
var importBatchBytes = 64 << 20

// ImportState writes st into a fresh store for the replica under dir (the
// Config.Dir the replica will run with): every znode with its child count
// (plus zkraft's feature node, znode.FeaturesPath, if st lacks it),
// the container/TTL sweep index, the ephemeral index, the sessions, zxid =
// NextEpoch(st.Zxid), an empty change history whose floor is that zxid,
// and applied index 0, so that Dragonboat replays its log from index 1
// onto it. It refuses a replica that has a store, and it
// is all or nothing: the store is built under a temporary name and renamed
// into place only when complete.
func ImportState(dir string, shardID, replicaID uint64, st *ImportedState) error {
	target := StoreDir(dir, shardID, replicaID)
	if _, err := os.Stat(target); err == nil {
		return fmt.Errorf("%w: %s", ErrStoreExists, target)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	children, err := checkImport(st)
	if err != nil {
		return err
	}
	nodes := st.Nodes
	if _, ok := children[znode.FeaturesPath]; !ok {
		// zkraft's feature node, as initTree makes it; ZooKeeper has none.
		nodes = append(nodes[:len(nodes):len(nodes)], ImportedNode{Path: znode.FeaturesPath,
			Node: &znode.Node{Data: []byte(znode.Features), ACL: znode.ReadACLUnsafe}})
		children[znode.FeaturesPath] = 0
		children[znode.ZooKeeperPath]++
	}
	tmp := target + ".importing"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	if err := writeImport(tmp, nodes, st, children); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if d, err := os.Open(filepath.Dir(target)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// checkImport checks that st is a tree (root first, parents before
// children, no path twice, the /zookeeper nodes present, every ephemeral's
// session open) and returns each node's child count.
func checkImport(st *ImportedState) (map[string]int32, error) {
	if len(st.Nodes) == 0 || st.Nodes[0].Path != "/" {
		return nil, fmt.Errorf("%w: the root must come first", ErrBadImport)
	}
	sessions := make(map[int64]bool, len(st.Sessions))
	for _, s := range st.Sessions {
		if s.ID == 0 || s.Timeout <= 0 {
			return nil, fmt.Errorf("%w: session %#x with timeout %d", ErrBadImport, s.ID, s.Timeout)
		}
		sessions[s.ID] = true
	}
	children := make(map[string]int32, len(st.Nodes))
	for i, n := range st.Nodes {
		if n.Node == nil {
			return nil, fmt.Errorf("%w: node %q is nil", ErrBadImport, n.Path)
		}
		if _, dup := children[n.Path]; dup {
			return nil, fmt.Errorf("%w: node %q appears twice", ErrBadImport, n.Path)
		}
		children[n.Path] = 0
		if i == 0 {
			continue
		}
		if err := znode.ValidatePath(n.Path); err != nil {
			return nil, fmt.Errorf("%w: node %q: %v", ErrBadImport, n.Path, err)
		}
		parent, _ := znode.Parent(n.Path)
		c, ok := children[parent]
		if !ok {
			return nil, fmt.Errorf("%w: node %q comes before its parent", ErrBadImport, n.Path)
		}
		children[parent] = c + 1
		if owner := n.Node.EphemeralOwner; znode.KindOf(owner) == znode.OwnerSession && !sessions[owner] {
			return nil, fmt.Errorf("%w: ephemeral %q belongs to session %#x, which is not open", ErrBadImport, n.Path, owner)
		}
	}
	for _, p := range []string{znode.ZooKeeperPath, znode.QuotaPath, znode.ConfigPath} {
		if _, ok := children[p]; !ok {
			return nil, fmt.Errorf("%w: %s is missing", ErrBadImport, p)
		}
	}
	return children, nil
}

func writeImport(path string, nodes []ImportedNode, st *ImportedState, children map[string]int32) (err error) {
	db, err := pebble.Open(path, pebbleOptions(nil))
	if err != nil {
		return fmt.Errorf("raftsm: open %s: %w", path, err)
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	b := db.NewBatch()
	defer func() { b.Close() }()
	flush := func(force bool) error {
		if !force && b.Len() < importBatchBytes {
			return nil
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return err
		}
		b.Close()
		b = db.NewBatch()
		return nil
	}
	kv := func() storeKV { return storeKV{w: b} }
	for _, in := range nodes {
		n := in.Node.Clone()
		n.NumChildren = children[in.Path]
		if err := kv().Put(in.Path, n); err != nil {
			return err
		}
		if znode.KindOf(n.EphemeralOwner) == znode.OwnerSession {
			if err := kv().SetEphemeral(n.EphemeralOwner, in.Path, true); err != nil {
				return err
			}
		}
		if err := flush(false); err != nil {
			return err
		}
	}
	for _, s := range st.Sessions {
		var v [4]byte
		binary.BigEndian.PutUint32(v[:], uint32(s.Timeout))
		if err := b.Set(sessionKey(s.ID), v[:], nil); err != nil {
			return err
		}
	}
	if src := st.Source; src != nil {
		var v [32]byte
		for i, x := range []int64{src.Zxid, src.Digest, src.Nodes, src.Sessions} {
			binary.BigEndian.PutUint64(v[8*i:], uint64(x))
		}
		if err := b.Set(keyImport, v[:], nil); err != nil {
			return err
		}
	}
	// The change history starts empty at the import: a resumable watch
	// from any earlier zxid is answered "compacted".
	if err := putInt64(b, keyHistFloor, NextEpoch(st.Zxid)); err != nil {
		return err
	}
	if err := putFormat(b); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	// The metadata last: a store without it would be taken for a new one.
	b = db.NewBatch()
	digest, stats, err := computeDigest(db)
	if err != nil {
		return err
	}
	if err := putDigest(b, digest); err != nil {
		return err
	}
	if err := putStats(b, stats); err != nil {
		return err
	}
	if err := putMeta(b, 0, NextEpoch(st.Zxid)); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

// ExportState reads the whole state of a replica's store under dir. The
// store must not be open elsewhere (zkraft must be stopped). It reads what
// the state machine has applied; entries committed to the Raft log but not
// yet applied are not in it, so run the replica until it has caught up
// first (cmd/zkraft export does) or use View.State from a ReadFunc.
func ExportState(dir string, shardID, replicaID uint64) (*ImportedState, error) {
	db, target, err := openStopped(dir, shardID, replicaID)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	z, err := getValue(db, keyZxid)
	if err != nil {
		return nil, err
	}
	if len(z) != 8 {
		return nil, fmt.Errorf("%w in %s: no zxid", ErrNoStore, target)
	}
	v := View{tree: treeReader{r: db}, zxid: int64(binary.BigEndian.Uint64(z))}
	return v.State()
}

// openStopped opens a replica's store under dir read-only, for the offline
// commands: ErrNoStore when there is none, an error when zkraft holds it.
func openStopped(dir string, shardID, replicaID uint64) (db *pebble.DB, target string, err error) {
	target = StoreDir(dir, shardID, replicaID)
	if _, err := os.Stat(filepath.Join(target, "CURRENT")); err != nil {
		return nil, target, fmt.Errorf("%w in %s", ErrNoStore, target)
	}
	if StoreLocked(target) {
		return nil, target, fmt.Errorf("raftsm: %s is in use (is zkraft still running?)", target)
	}
	opts := pebbleOptions(nil)
	opts.ReadOnly = true
	opts.ErrorIfNotExists = true
	db, err = pebble.Open(target, opts)
	if err != nil {
		return nil, target, fmt.Errorf("raftsm: open %s (is zkraft still running?): %w", target, err)
	}
	return db, target, nil
}

// ReadImportSource reads what a replica's store under dir was imported
// from: nil (and no error) for a store that was not imported. The store
// must not be open elsewhere (zkraft must be stopped).
func ReadImportSource(dir string, shardID, replicaID uint64) (*ImportSource, error) {
	db, _, err := openStopped(dir, shardID, replicaID)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return View{tree: treeReader{r: db}}.ImportSource()
}

// ImportSource is what the state was imported from, or nil. Raft snapshots
// carry it: a member that caught up from a snapshot reports the sender's.
func (v View) ImportSource() (*ImportSource, error) {
	b, err := getValue(v.tree.r, keyImport)
	if err != nil || b == nil {
		return nil, err
	}
	if len(b) != 32 {
		return nil, fmt.Errorf("%w: import record of %d bytes", ErrBadSnapshot, len(b))
	}
	x := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[8*i:])) }
	return &ImportSource{Zxid: x(0), Digest: x(1), Nodes: x(2), Sessions: x(3)}, nil
}

// StoreLocked reports whether another process holds the LOCK file of the
// Pebble store in dir (a replica's, or the system shard's). Pebble panics
// (closing a file twice) when Open cannot take the lock, so look first. A
// lock held by this process does not show.
func StoreLocked(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "LOCK"))
	if err != nil {
		return false
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return false
	}
	return lk.Type != syscall.F_UNLCK
}

// State reads the whole tree and the sessions of v: the root first, then
// parents before children (depth first, children in name order).
func (v View) State() (*ImportedState, error) {
	st := &ImportedState{Zxid: v.zxid}
	stack := []string{"/"}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n, err := v.tree.Get(p)
		if err != nil {
			return nil, fmt.Errorf("raftsm: read %s: %w", p, err)
		}
		if n == nil {
			return nil, fmt.Errorf("%w: %s is listed as a child but missing", ErrBadSnapshot, p)
		}
		names, err := v.tree.Children(p)
		if err != nil {
			return nil, err
		}
		if int(n.NumChildren) != len(names) {
			return nil, fmt.Errorf("%w: %s says %d children, the store has %d", ErrBadSnapshot, p, n.NumChildren, len(names))
		}
		st.Nodes = append(st.Nodes, ImportedNode{Path: p, Node: n})
		for i := len(names) - 1; i >= 0; i-- {
			stack = append(stack, znode.Join(p, names[i]))
		}
	}
	sessions, err := v.Sessions()
	if err != nil {
		return nil, err
	}
	st.Sessions = sessions
	return st, nil
}
