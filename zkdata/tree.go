package zkdata

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"
	"strings"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// Stat is ZooKeeper's StatPersisted, the Stat a snapshot stores. Cversion is
// the stored value: the number of child creates ever made under the node
// (clients see 2*Cversion - numChildren).
type Stat struct {
	Czxid          int64
	Mzxid          int64
	Ctime          int64
	Mtime          int64
	Version        int32
	Cversion       int32
	Aversion       int32
	EphemeralOwner int64
	Pzxid          int64
}

// Node is one znode as ZooKeeper stores it.
type Node struct {
	// Data is nil for a null buffer, which clients tell from an empty one.
	Data []byte
	// ACL is the node's ACL list. While a tree is being restored it is
	// resolved from the ACL cache only at the end.
	ACL  []jute.ACL
	Stat Stat

	children map[string]struct{}
	aclKey   int64
}

// NumChildren is the number of children of n.
func (n *Node) NumChildren() int { return len(n.children) }

// ZNode returns n as zkraft stores a znode.
func (n *Node) ZNode() *znode.Node {
	return &znode.Node{
		Data:           n.Data,
		ACL:            n.ACL,
		Czxid:          n.Stat.Czxid,
		Mzxid:          n.Stat.Mzxid,
		Pzxid:          n.Stat.Pzxid,
		Ctime:          n.Stat.Ctime,
		Mtime:          n.Stat.Mtime,
		Version:        n.Stat.Version,
		Cversion:       n.Stat.Cversion,
		Aversion:       n.Stat.Aversion,
		EphemeralOwner: n.Stat.EphemeralOwner,
		NumChildren:    int32(len(n.children)),
	}
}

// Tree is a ZooKeeper data tree with its sessions, as a snapshot and the
// transaction logs after it describe it. Paths are absolute; the root is
// "/" (ZooKeeper's snapshots write it as "").
//
// A Tree is not safe for concurrent use.
type Tree struct {
	nodes map[string]*Node
	// Sessions maps each open session to its timeout in ms.
	Sessions map[int64]int32
	// Zxid is the last transaction the tree reflects (ZooKeeper's
	// lastProcessedZxid).
	Zxid int64

	ephemerals map[int64]map[string]struct{} // owner -> paths (NORMAL ephemerals)
	acls       *aclCache
	quotas     *pathTrie
	digest     uint64 // running sum of the node digests
}

// NewTree returns an empty tree: not even a root. Add the root first.
func NewTree() *Tree {
	return &Tree{
		nodes:      map[string]*Node{},
		Sessions:   map[int64]int32{},
		ephemerals: map[int64]map[string]struct{}{},
		acls:       newACLCache(),
		quotas:     newPathTrie(),
	}
}

// Len is the number of znodes, the root included.
func (t *Tree) Len() int { return len(t.nodes) }

// Get returns the node at path, or nil.
func (t *Tree) Get(path string) *Node { return t.lookup(path) }

func (t *Tree) lookup(path string) *Node {
	if path == "" {
		path = "/"
	}
	return t.nodes[path]
}

// Children returns the names of the children of path in sorted order.
func (t *Tree) Children(path string) []string {
	n := t.lookup(path)
	if n == nil {
		return nil
	}
	out := make([]string, 0, len(n.children))
	for c := range n.children {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Walk calls fn for every node, parents before children and siblings in
// name order.
func (t *Tree) Walk(fn func(path string, n *Node) error) error {
	root := t.lookup("/")
	if root == nil {
		return nil
	}
	var walk func(path string, n *Node) error
	walk = func(path string, n *Node) error {
		if err := fn(path, n); err != nil {
			return err
		}
		for _, c := range t.Children(path) {
			p := znode.Join(path, c)
			if err := walk(p, t.nodes[p]); err != nil {
				return err
			}
		}
		return nil
	}
	return walk("/", root)
}

// Add puts a znode into the tree, as zkraft stores it. The root comes first
// and every parent before its children. NumChildren is ignored (it is the
// count of children added).
func (t *Tree) Add(path string, zn *znode.Node) error {
	n := &Node{
		Data: zn.Data,
		ACL:  zn.ACL,
		Stat: Stat{
			Czxid: zn.Czxid, Mzxid: zn.Mzxid, Ctime: zn.Ctime, Mtime: zn.Mtime,
			Version: zn.Version, Cversion: zn.Cversion, Aversion: zn.Aversion,
			EphemeralOwner: zn.EphemeralOwner, Pzxid: zn.Pzxid,
		},
	}
	if path != "/" {
		if err := znode.ValidatePath(path); err != nil {
			return fmt.Errorf("zkdata: node %q: %w", path, err)
		}
	}
	return t.insert(path, n)
}

// insert links a node under its parent, which must exist (the root has
// none), and indexes it.
func (t *Tree) insert(path string, n *Node) error {
	if path == "" {
		path = "/"
	}
	if _, dup := t.nodes[path]; dup {
		return fmt.Errorf("%w: node %q appears twice", ErrCorrupt, path)
	}
	if path == "/" {
		t.nodes[path] = n
		t.digest += nodeDigest("/", n)
		return nil
	}
	i := strings.LastIndexByte(path, '/')
	if i < 0 || i == len(path)-1 {
		return fmt.Errorf("%w: bad node path %q", ErrCorrupt, path)
	}
	parent := t.lookup(path[:i])
	if parent == nil {
		return fmt.Errorf("%w: the parent of %q is missing", ErrCorrupt, path)
	}
	if parent.children == nil {
		parent.children = map[string]struct{}{}
	}
	parent.children[path[i+1:]] = struct{}{}
	t.nodes[path] = n
	t.digest += nodeDigest(path, n)
	t.indexOwner(path, n.Stat.EphemeralOwner, true)
	return nil
}

// indexOwner keeps the per-session ephemeral index.
func (t *Tree) indexOwner(path string, owner int64, present bool) {
	if znode.KindOf(owner) != znode.OwnerSession {
		return
	}
	set := t.ephemerals[owner]
	if present {
		if set == nil {
			set = map[string]struct{}{}
			t.ephemerals[owner] = set
		}
		set[path] = struct{}{}
		return
	}
	if set != nil {
		delete(set, path)
		if len(set) == 0 {
			delete(t.ephemerals, owner)
		}
	}
}

// Ephemerals returns the paths of the ephemerals session owns, sorted.
func (t *Tree) Ephemerals(session int64) []string {
	out := make([]string, 0, len(t.ephemerals[session]))
	for p := range t.ephemerals[session] {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Digest is ZooKeeper's tree digest (DigestCalculator version 2) of t.
func (t *Tree) Digest() int64 { return int64(t.digest) }

// computeDigest recomputes the digest from scratch.
func (t *Tree) computeDigest() int64 {
	var sum uint64
	for p, n := range t.nodes {
		sum += nodeDigest(p, n)
	}
	return int64(sum)
}

// DigestVersion is the DigestCalculator version this package computes.
const DigestVersion = 2

// nodeDigest is DigestCalculator.calculateDigest: CRC32 of the path ("" for
// the root), the data and 60 bytes of stat with pzxid third. Nodes under
// /zookeeper/ count 0.
func nodeDigest(path string, n *Node) uint64 {
	if strings.HasPrefix(path, "/zookeeper/") {
		return 0
	}
	if path == "/" {
		path = ""
	}
	var b [60]byte
	binary.BigEndian.PutUint64(b[0:], uint64(n.Stat.Czxid))
	binary.BigEndian.PutUint64(b[8:], uint64(n.Stat.Mzxid))
	binary.BigEndian.PutUint64(b[16:], uint64(n.Stat.Pzxid))
	binary.BigEndian.PutUint64(b[24:], uint64(n.Stat.Ctime))
	binary.BigEndian.PutUint64(b[32:], uint64(n.Stat.Mtime))
	binary.BigEndian.PutUint32(b[40:], uint32(n.Stat.Version))
	binary.BigEndian.PutUint32(b[44:], uint32(n.Stat.Cversion))
	binary.BigEndian.PutUint32(b[48:], uint32(n.Stat.Aversion))
	binary.BigEndian.PutUint64(b[52:], uint64(n.Stat.EphemeralOwner))
	crc := crc32.NewIEEE()
	crc.Write([]byte(path))
	crc.Write(n.Data)
	crc.Write(b[:])
	return uint64(crc.Sum32())
}

// change runs f, which modifies n in place, keeping the digest current
// (ZooKeeper's preChange/postChange).
func (t *Tree) change(path string, n *Node, f func()) {
	t.digest -= nodeDigest(path, n)
	f()
	t.digest += nodeDigest(path, n)
}

// split returns the parent path (as ZooKeeper computes it, "" for the root)
// and the last name of path.
func split(path string) (parent, name string, ok bool) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "", "", false
	}
	return path[:i], path[i+1:], true
}

func normalize(path string) string {
	if path == "" {
		return "/"
	}
	return path
}

// createNode is DataTree.createNode during a restore.
func (t *Tree) createNode(path string, data []byte, acl []jute.ACL, owner int64, parentCVersion int32, zxid, time int64) jute.ErrCode {
	parentName, childName, ok := split(path)
	if !ok || childName == "" {
		return jute.ErrBadArguments
	}
	parent := t.lookup(parentName)
	if parent == nil {
		return jute.ErrNoNode
	}
	// ZooKeeper adds the ACL to its cache before it checks for the node,
	// so the keys it hands out during a replay follow this order.
	key := t.acls.convert(acl)
	if _, exists := parent.children[childName]; exists {
		return jute.ErrNodeExists
	}
	t.change(normalize(parentName), parent, func() {
		if parentCVersion == -1 {
			parentCVersion = parent.Stat.Cversion + 1
		}
		if parentCVersion > parent.Stat.Cversion {
			parent.Stat.Cversion = parentCVersion
			parent.Stat.Pzxid = zxid
		}
		if parent.children == nil {
			parent.children = map[string]struct{}{}
		}
		parent.children[childName] = struct{}{}
	})
	child := &Node{
		Data:   data,
		aclKey: key,
		Stat:   Stat{Czxid: zxid, Mzxid: zxid, Pzxid: zxid, Ctime: time, Mtime: time, EphemeralOwner: owner},
	}
	t.nodes[path] = child
	t.digest += nodeDigest(path, child)
	t.indexOwner(path, owner, true)
	if strings.HasPrefix(parentName, znode.QuotaPath) {
		switch childName {
		case quotaLimitNode:
			t.quotas.add(parentName[len(znode.QuotaPath):])
		case quotaStatNode:
			t.updateQuotaForPath(parentName[len(znode.QuotaPath):])
		}
	}
	if prefix, ok := t.maxPrefixWithQuota(path); ok {
		t.updateQuotaStat(prefix, int64(len(data)), 1)
	}
	return jute.ErrOK
}

// deleteNode is DataTree.deleteNode during a restore.
func (t *Tree) deleteNode(path string, zxid int64) jute.ErrCode {
	parentName, childName, ok := split(path)
	if !ok {
		return jute.ErrBadArguments
	}
	parent := t.lookup(parentName)
	if parent == nil {
		return jute.ErrNoNode
	}
	// The child may be gone already (a fuzzy snapshot), but the parent's
	// pzxid still moves.
	t.change(normalize(parentName), parent, func() {
		delete(parent.children, childName)
		if zxid > parent.Stat.Pzxid {
			parent.Stat.Pzxid = zxid
		}
	})
	n := t.lookup(path)
	if n == nil || path == "/" {
		return jute.ErrNoNode
	}
	delete(t.nodes, path)
	t.digest -= nodeDigest(path, n)
	t.acls.removeUsage(n.aclKey)
	t.indexOwner(path, n.Stat.EphemeralOwner, false)
	if strings.HasPrefix(parentName, znode.ZooKeeperPath) && childName == quotaLimitNode && len(parentName) >= len(znode.QuotaPath) {
		t.quotas.remove(parentName[len(znode.QuotaPath):])
	}
	if prefix, ok := t.maxPrefixWithQuota(path); ok {
		t.updateQuotaStat(prefix, -int64(len(n.Data)), -1)
	}
	return jute.ErrOK
}

// setData is DataTree.setData: version is the new version, as logged.
func (t *Tree) setData(path string, data []byte, version int32, zxid, time int64) jute.ErrCode {
	n := t.lookup(path)
	if n == nil {
		return jute.ErrNoNode
	}
	last := n.Data
	t.change(normalize(path), n, func() {
		n.Data = data
		n.Stat.Mtime = time
		n.Stat.Mzxid = zxid
		n.Stat.Version = version
	})
	if prefix, ok := t.maxPrefixWithQuota(path); ok {
		t.updateQuotaStat(prefix, int64(len(data)-len(last)), 0)
	}
	return jute.ErrOK
}

// setACL is DataTree.setACL: version is the new aversion, as logged.
func (t *Tree) setACL(path string, acl []jute.ACL, version int32) jute.ErrCode {
	n := t.lookup(path)
	if n == nil {
		return jute.ErrNoNode
	}
	t.acls.removeUsage(n.aclKey)
	t.change(normalize(path), n, func() {
		n.Stat.Aversion = version
		n.aclKey = t.acls.convert(acl)
	})
	return jute.ErrOK
}

// setCversionPzxid is DataTree.setCversionPzxid, used when a replayed
// create meets a node that exists already.
func (t *Tree) setCversionPzxid(path string, cversion int32, zxid int64) jute.ErrCode {
	path = strings.TrimSuffix(path, "/")
	n := t.lookup(path)
	if n == nil {
		return jute.ErrNoNode
	}
	if cversion == -1 {
		cversion = n.Stat.Cversion + 1
	}
	if cversion > n.Stat.Cversion {
		t.change(normalize(path), n, func() {
			n.Stat.Cversion = cversion
			n.Stat.Pzxid = zxid
		})
	}
	return jute.ErrOK
}

// killSession is DataTree.killSession: it deletes the paths a closeSession
// transaction lists (nil for old logs), then whatever ephemerals the session
// still owns.
func (t *Tree) killSession(session, zxid int64, paths []string) {
	local := t.Ephemerals(session)
	delete(t.ephemerals, session)
	listed := map[string]bool{}
	for _, p := range paths {
		listed[p] = true
		t.deleteNode(p, zxid)
	}
	for _, p := range local {
		if !listed[p] {
			t.deleteNode(p, zxid)
		}
	}
}

// resolveACLs replaces every node's ACL key by its list, once the restore
// is complete.
func (t *Tree) resolveACLs() error {
	for p, n := range t.nodes {
		acl, ok := t.acls.lookup(n.aclKey)
		if !ok {
			return fmt.Errorf("%w: node %q refers to ACL %d, which is not in the ACL cache", ErrCorrupt, p, n.aclKey)
		}
		n.ACL = acl
	}
	return nil
}

// aclCache is ZooKeeper's ReferenceCountedACLCache: snapshots store each
// node's ACL as a key into it.
type aclCache struct {
	lists map[int64][]jute.ACL
	keys  map[string]int64
	refs  map[int64]int64
	index int64
}

// openACLKey stands for OPEN_ACL_UNSAFE; it is never stored.
const openACLKey = -1

func newACLCache() *aclCache {
	return &aclCache{lists: map[int64][]jute.ACL{}, keys: map[string]int64{}, refs: map[int64]int64{}}
}

func aclString(acl []jute.ACL) string {
	w := jute.NewWriter(32)
	w.ACLs(acl)
	return string(w.Bytes())
}

// load adds an entry read from a snapshot.
func (c *aclCache) load(key int64, acl []jute.ACL) {
	if c.index < key {
		c.index = key
	}
	c.lists[key] = acl
	c.keys[aclString(acl)] = key
	c.refs[key] = 0
}

func (c *aclCache) convert(acl []jute.ACL) int64 {
	if acl == nil {
		return openACLKey
	}
	s := aclString(acl)
	key, ok := c.keys[s]
	if !ok {
		c.index++
		key = c.index
		c.lists[key] = acl
		c.keys[s] = key
	}
	c.addUsage(key)
	return key
}

func (c *aclCache) addUsage(key int64) {
	if _, ok := c.lists[key]; ok && key != openACLKey {
		c.refs[key]++
	}
}

func (c *aclCache) removeUsage(key int64) {
	acl, ok := c.lists[key]
	if !ok || key == openACLKey {
		return
	}
	c.refs[key]--
	if c.refs[key] <= 0 {
		delete(c.refs, key)
		delete(c.keys, aclString(acl))
		delete(c.lists, key)
	}
}

func (c *aclCache) purgeUnused() {
	for key, acl := range c.lists {
		if c.refs[key] <= 0 {
			delete(c.refs, key)
			if c.keys[aclString(acl)] == key {
				delete(c.keys, aclString(acl))
			}
			delete(c.lists, key)
		}
	}
}

func (c *aclCache) lookup(key int64) ([]jute.ACL, bool) {
	if key == openACLKey {
		return znode.OpenACL, true
	}
	acl, ok := c.lists[key]
	return acl, ok
}
