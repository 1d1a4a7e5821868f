package raftsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"unsafe"

	"github.com/cockroachdb/pebble"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// Pebble key layout (format 2). Every key starts with a one-byte space tag.
// No key holds a whole path or name: paths appear as 32-byte SHA-256
// hashes (H) in keys and in full only in values, so a key's length does
// not grow with the depth or length of any path (ZooKeeper allows 1 MB
// names; format 1 put the whole parent path in every key, and index
// blocks grew to megabytes).
//
//	'N' H(parent)[:8] P(name) H(path)  a znode: uvarint len(path), then its
//	                                   record (znode.Node); the root's
//	                                   parent is ""
//	'K' H(parent) H(path)              a child of parent: a flag byte
//	                                   (childHasChildren), then its name
//	'E' owner(8, BE) H(path)           ephemeral index: the path a session owns
//	'C' H(path)                        containers and TTL nodes, for the
//	                                   leader's sweep: the path
//	's' session(8, BE)                 a session: int32 timeout (ms)
//	'o' session(8, BE)                 the connection holding a session: uint64 owner
//	't' session(8, BE)                 the Raft index of the session's last keep-alive
//	'h' ...                            the change history (history.go)
//	'm' name                           metadata: applied index, zxid, format, ...
//
// P(name) is the name's first namePrefixLen bytes, padded with 0x00 (never
// in a name): with the 8 bytes of the parent's hash before it, siblings
// sit together in name order as far as their first bytes go, so a
// sequence of creates (n0000000001, n0000000002, ...) writes and reads
// neighbouring keys, and reading a directory's children reads few blocks.
// Listing children walks 'K' H(parent), whose values are names only, so it
// never reads the children's data; listings are sorted after the walk. A
// walk of the tree needs no hashing: a child's 'K' key holds its path's
// hash, the prefix of its own children, and its flag says whether it has
// any.
const (
	spaceNode      = 'N'
	spaceChild     = 'K'
	spaceEphemeral = 'E'
	spaceSweep     = 'C'
	spaceSession   = 's'
	spaceMeta      = 'm'
	spaceOwner     = 'o'
	spaceTouch     = 't'
)

var (
	keyApplied = []byte("m:applied")
	keyZxid    = []byte("m:zxid")
	// keyFormat holds the key layout's version (formatVersion); a store
	// without it is format 1 and is converted at Open (convert.go).
	keyFormat = []byte("m:format")
	// keySealed is present (value 1) while the namespace is sealed
	// (KindSeal).
	keySealed = []byte("m:sealed")
)

// formatVersion is the key layout this code writes.
const formatVersion = 2

// pathHash is H(path): SHA-256 of the path's bytes.
type pathHash [sha256.Size]byte

func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// hashes returns H(parent) and H(path) in one pass over path's bytes
// (parent is a prefix of path: "/a" of "/a/b", "/" of "/a", "" of "/").
func hashes(path string) (parent, self pathHash) {
	pl := 0
	if path != "/" {
		p, _ := znode.Parent(path)
		pl = len(p)
	}
	h := sha256.New()
	h.Write(bytesOf(path[:pl]))
	h.Sum(parent[:0])
	h.Write(bytesOf(path[pl:]))
	h.Sum(self[:0])
	return parent, self
}

func hashOf(path string) pathHash { return sha256.Sum256(bytesOf(path)) }

// namePrefixLen is how much of a name a node key holds.
const namePrefixLen = 16

// nodeKeyLen is the length of every node key.
const nodeKeyLen = 1 + 8 + namePrefixLen + sha256.Size

func nodeKeyOf(parent, self *pathHash, name string) []byte {
	return nodeKeyInto(make([]byte, nodeKeyLen), parent, self, name)
}

// nodeKeyInto writes the node key into k, of nodeKeyLen bytes, and
// returns it.
func nodeKeyInto(k []byte, parent, self *pathHash, name string) []byte {
	k = k[:nodeKeyLen]
	k[0] = spaceNode
	copy(k[1:9], parent[:8])
	clear(k[9 : 9+namePrefixLen])
	copy(k[9:9+namePrefixLen], name) // at most namePrefixLen bytes; the rest stays 0x00
	copy(k[9+namePrefixLen:], self[:])
	return k
}

func nodeKey(path string) []byte {
	p, s := hashes(path)
	return nodeKeyOf(&p, &s, znode.Base(path))
}

// childHasChildren marks, in a child-index value, a child that has
// children of its own (CountDescendants looks under it).
const childHasChildren = 1

// appendChildValue appends the child-index value of n, named name, to dst.
func appendChildValue(dst []byte, name string, n *znode.Node) []byte {
	flag := byte(0)
	if n.NumChildren > 0 {
		flag = childHasChildren
	}
	return append(append(dst, flag), name...)
}

// childKeyLen is the length of every child-index key.
const childKeyLen = 1 + 2*sha256.Size

func childKeyOf(parent, self *pathHash) []byte {
	return childKeyInto(make([]byte, childKeyLen), parent, self)
}

// childKeyInto writes the child-index key into k, of childKeyLen bytes,
// and returns it.
func childKeyInto(k []byte, parent, self *pathHash) []byte {
	k = k[:childKeyLen]
	k[0] = spaceChild
	copy(k[1:], parent[:])
	copy(k[1+sha256.Size:], self[:])
	return k
}

// keyScratch holds the buffers storeKV encodes a write's keys and
// child-index values into: Pebble's batch copies both (Set and Delete),
// and the digest only hashes them, so nothing keeps them past the call.
// One setData made four such garbage slices.
type keyScratch struct {
	node  [nodeKeyLen]byte
	child [childKeyLen]byte
	cv    []byte // the child-index value
	oldCV []byte // the one it replaces
}

// scratch returns the buffers of kv's writes: the node cache's (only
// Update's goroutine, under the write lock, uses it, as it uses the
// cache), or new ones for a storeKV without a cache.
func (kv storeKV) scratch() *keyScratch {
	if kv.cache != nil {
		return &kv.cache.keys
	}
	return new(keyScratch)
}

// childPrefix is the key range holding the children of the node whose
// path hashes to self.
func childPrefix(self *pathHash) []byte {
	return append([]byte{spaceChild}, self[:]...)
}

func ephemeralPrefix(owner int64) []byte {
	k := make([]byte, 9, 9+sha256.Size)
	k[0] = spaceEphemeral
	binary.BigEndian.PutUint64(k[1:], uint64(owner))
	return k
}

func ephemeralKey(owner int64, path string) []byte {
	h := hashOf(path)
	return append(ephemeralPrefix(owner), h[:]...)
}

func sweepKey(path string) []byte {
	h := hashOf(path)
	return append([]byte{spaceSweep}, h[:]...)
}

func sessionKey(id int64) []byte {
	k := make([]byte, 9)
	k[0] = spaceSession
	binary.BigEndian.PutUint64(k[1:], uint64(id))
	return k
}

func ownerKey(id int64) []byte {
	k := sessionKey(id)
	k[0] = spaceOwner
	return k
}

func touchKey(id int64) []byte {
	k := sessionKey(id)
	k[0] = spaceTouch
	return k
}

// upperBound returns the smallest key greater than every key with prefix p.
func upperBound(p []byte) []byte {
	hi := append([]byte(nil), p...)
	for i := len(hi) - 1; i >= 0; i-- {
		if hi[i] < 0xff {
			hi[i]++
			return hi[:i+1]
		}
	}
	return nil
}

// nodeValue is the stored value of a node: the length of its path (for
// the tree's data size, without a walk) and its record.
func nodeValue(path string, n *znode.Node) []byte {
	// One buffer of the encoded size: the value is written once, not
	// grown from Marshal's 64 bytes and then copied behind the prefix.
	size := binary.MaxVarintLen64 + nodeRecordBytes + len(n.Data)
	for _, a := range n.ACL {
		size += 12 + len(a.ID.Scheme) + len(a.ID.ID)
	}
	w := jute.NewWriter(size)
	var pre [binary.MaxVarintLen64]byte
	w.Raw(pre[:binary.PutUvarint(pre[:], uint64(len(path)))])
	n.Encode(w)
	return w.Bytes()
}

// nodeRecordBytes is the size of znode.Node's record without its data and
// its ACL entries: version, data and ACL lengths, five longs, three ints,
// the ephemeral owner and the child count.
const nodeRecordBytes = 4 + 4 + 4 + 5*8 + 3*4 + 8 + 4

// splitNodeValue returns the path length and the record of a stored node.
func splitNodeValue(v []byte) (pathLen int, rec []byte, err error) {
	l, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: node value without a path length", znode.ErrCorruptNode)
	}
	return int(l), v[n:], nil
}

// nodeTail reads from a stored node only the fields of the fixed-size end
// of its record (Czxid to NumChildren) and the length of its data: what
// Put needs of the node it replaces. Data and ACL are left empty.
func nodeTail(v []byte) (znode.Node, int64, error) {
	_, rec, err := splitNodeValue(v)
	if err != nil {
		return znode.Node{}, 0, err
	}
	const tail = 5*8 + 3*4 + 8 + 4
	if len(rec) < nodeRecordBytes || binary.BigEndian.Uint32(rec) != 1 {
		return znode.Node{}, 0, fmt.Errorf("%w: stored node of %d bytes", znode.ErrCorruptNode, len(rec))
	}
	dlen, err := dataLen(rec)
	if err != nil {
		return znode.Node{}, 0, err
	}
	t := rec[len(rec)-tail:]
	long := func(off int) int64 { return int64(binary.BigEndian.Uint64(t[off:])) }
	i32 := func(off int) int32 { return int32(binary.BigEndian.Uint32(t[off:])) }
	return znode.Node{
		Czxid: long(0), Mzxid: long(8), Pzxid: long(16), Ctime: long(24), Mtime: long(32),
		Version: i32(40), Cversion: i32(44), Aversion: i32(48),
		EphemeralOwner: long(52), NumChildren: i32(60),
	}, dlen, nil
}

func decodeNodeValue(v []byte) (*znode.Node, error) {
	_, rec, err := splitNodeValue(v)
	if err != nil {
		return nil, err
	}
	// Every caller's v is immutable: a fresh copy from getValue, or the
	// node cache's value, which is never changed (nodecache.go).
	return znode.DecodeNodeShared(rec)
}

// reader is what a Pebble DB, a snapshot and an indexed batch offer for
// reads.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *pebble.IterOptions) *pebble.Iterator
}

// writer is what a batch offers for writes.
type writer interface {
	Set(key, value []byte, _ *pebble.WriteOptions) error
	Delete(key []byte, _ *pebble.WriteOptions) error
}

func getValue(r reader, key []byte) ([]byte, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := append([]byte{}, v...)
	return out, closer.Close()
}

// scanValues returns copies of the values of every key with prefix lo.
func scanValues(r reader, lo []byte) ([][]byte, error) {
	it := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	var out [][]byte
	for it.First(); it.Valid(); it.Next() {
		out = append(out, append([]byte(nil), it.Value()...))
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, err
	}
	return out, it.Close()
}

// sortedStrings turns scanned values into sorted strings.
func sortedStrings(vals [][]byte) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	slices.Sort(out)
	return out
}

// treeReader reads the tree from a Pebble reader: Update's batch or a
// view's snapshot.
type treeReader struct {
	r    reader
	kids *childCache // child lists (childcache.go); nil: none
	// gen and zxid identify the state r shows to the child cache: the
	// cache's generation when the view was taken and the view's zxid.
	gen  uint64
	zxid int64
}

var _ znode.ReadKV = treeReader{}

func (t treeReader) Get(path string) (*znode.Node, error) {
	v, err := getValue(t.r, nodeKey(path))
	if err != nil || v == nil {
		return nil, err
	}
	return decodeNodeValue(v) // v is a copy
}

// Children lists path's children, from the child cache when its list is
// that of the state t shows (same parent pzxid).
func (t treeReader) Children(path string) ([]string, error) {
	return t.children(path, t.Get, t.gen, t.zxid)
}

// children lists path's children as get sees path; a listing that missed
// the cache fills it as of (gen, zxid).
func (t treeReader) children(path string, get func(string) (*znode.Node, error), gen uint64, zxid int64) ([]string, error) {
	n, err := get(path)
	if err != nil || n == nil {
		return nil, err
	}
	if names, ok := t.kids.get(path, n.Pzxid); ok {
		return names, nil
	}
	self := hashOf(path)
	vals, err := scanValues(t.r, childPrefix(&self))
	if err != nil {
		return nil, err
	}
	names := make([]string, len(vals))
	for i, v := range vals {
		if len(v) == 0 {
			return nil, fmt.Errorf("%w: empty child-index value under %q", znode.ErrCorruptNode, path)
		}
		names[i] = string(v[1:])
	}
	slices.Sort(names)
	t.kids.fill(path, n.Pzxid, names, gen, zxid)
	return names, nil
}

func (t treeReader) Ephemerals(owner int64) ([]string, error) {
	vals, err := scanValues(t.r, ephemeralPrefix(owner))
	if err != nil {
		return nil, err
	}
	return sortedStrings(vals), nil
}

// sweepPaths lists the containers and TTL nodes in path order.
func (t treeReader) sweepPaths() ([]string, error) {
	vals, err := scanValues(t.r, []byte{spaceSweep})
	if err != nil {
		return nil, err
	}
	return sortedStrings(vals), nil
}

// CountDescendants counts the nodes below path by walking the child index
// with one iterator and no hashing: each child's key holds its path's
// hash, the prefix of its own children, and its value says whether it has
// any, so the walk seeks only into nodes with children. It is
// O(descendants) whatever the depth or the length of the names.
func (t treeReader) CountDescendants(path string) (int32, error) {
	lo := []byte{spaceChild}
	it := t.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	stack := []pathHash{hashOf(path)}
	var count int32
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		prefix := childPrefix(&h)
		for it.SeekGE(prefix); it.Valid() && bytes.HasPrefix(it.Key(), prefix); it.Next() {
			count++
			if v := it.Value(); len(v) > 0 && v[0]&childHasChildren != 0 {
				var child pathHash
				copy(child[:], it.Key()[len(prefix):])
				stack = append(stack, child)
			}
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return 0, err
	}
	return count, it.Close()
}

// storeKV is Update's znode.KV over its indexed batch (reads see the
// batch's writes). Node reads are served from the node cache, node writes
// go to it as well as to the batch, child lists are kept current in the
// child cache and the digest (digest.go) is kept with every write. A
// storeKV with no reader (initTree, import, conversion) only writes: every
// Put creates, and no digest is kept (it is computed afterwards).
type storeKV struct {
	treeReader
	w      writer
	cache  *nodeCache
	digest *uint64
	stats  *TreeStats
	// zxid points at the applier's current zxid, the transaction whose
	// writes these are (for the child cache's tags).
	zxid *int64
}

var _ znode.KV = storeKV{}

// rawGet returns path's stored value (nil: no such node).
func (kv storeKV) rawGet(path string) ([]byte, error) {
	if kv.r == nil {
		return nil, nil
	}
	v, ok := kv.cache.get(path)
	if !ok {
		var err error
		p, s := hashes(path)
		if v, err = getValue(kv.r, nodeKeyInto(kv.scratch().node[:], &p, &s, znode.Base(path))); err != nil {
			return nil, err
		}
		kv.cache.put(path, v)
	}
	return v, nil
}

func (kv storeKV) Get(path string) (*znode.Node, error) {
	v, err := kv.rawGet(path)
	if err != nil || v == nil {
		return nil, err
	}
	return decodeNodeValue(v) // v is a copy, or the cache's (never changed)
}

// NumChildren reads the count from the stored node's fixed-size tail
// (nodeTail), without decoding it.
func (kv storeKV) NumChildren(path string) (int32, bool, error) {
	v, err := kv.rawGet(path)
	if err != nil || v == nil {
		return 0, false, err
	}
	t, _, err := nodeTail(v)
	if err != nil {
		return 0, false, err
	}
	return t.NumChildren, true, nil
}

var _ znode.ChildCounter = storeKV{}

// Children lists from the batch, the parent's pzxid as the batch holds
// it; the batch is newer than every view.
func (kv storeKV) Children(path string) ([]string, error) {
	return kv.children(path, kv.Get, kv.kids.generation(), 1<<63-1)
}

func (kv storeKV) txZxid() int64 {
	if kv.zxid == nil {
		return 0
	}
	return *kv.zxid
}

func swept(n *znode.Node) bool {
	k := znode.KindOf(n.EphemeralOwner)
	return k == znode.OwnerContainer || k == znode.OwnerTTL
}

// Put stores a node with its child-index entry (its flag rewritten when
// the node gains its first child or loses its last) and, for containers
// and TTL nodes, its sweep entry.
func (kv storeKV) Put(path string, n *znode.Node) error {
	parent, self := hashes(path)
	name := znode.Base(path)
	oldRaw, err := kv.rawGet(path)
	if err != nil {
		return err
	}
	var old *znode.Node
	var oldDataLen int64
	if oldRaw != nil {
		// Only the fields at the record's fixed-size tail and the length
		// of its data are needed of the old node: no need to decode its
		// ACL or copy its data.
		tail, dlen, err := nodeTail(oldRaw)
		if err != nil {
			return err
		}
		old, oldDataLen = &tail, dlen
	}
	v := nodeValue(path, n)
	ks := kv.scratch()
	if err := kv.set(nodeKeyInto(ks.node[:], &parent, &self, name), v, oldRaw); err != nil {
		return err
	}
	kv.cache.put(path, v)
	if kv.stats != nil {
		if old == nil {
			kv.stats.Nodes++
			kv.stats.DataSize += int64(len(path))
		} else {
			kv.stats.DataSize -= oldDataLen
		}
		kv.stats.DataSize += int64(len(n.Data))
	}
	if path == "/" {
		return nil
	}
	// The child-index value holds the name and whether the node has
	// children: rewritten only when it is new or that flag changes.
	if old == nil || (old.NumChildren > 0) != (n.NumChildren > 0) {
		ks.cv = appendChildValue(ks.cv[:0], name, n)
		var oldCV []byte
		if old != nil {
			ks.oldCV = appendChildValue(ks.oldCV[:0], name, old)
			oldCV = ks.oldCV
		}
		if err := kv.set(childKeyInto(ks.child[:], &parent, &self), ks.cv, oldCV); err != nil {
			return err
		}
	}
	if was, is := old != nil && swept(old), swept(n); was != is {
		sk := sweepKey(path)
		if is {
			err = kv.set(sk, []byte(path), nil)
		} else {
			err = kv.del(sk, []byte(path))
		}
		if err != nil {
			return err
		}
	}
	if old == nil || old.Czxid != n.Czxid {
		kv.kids.changed(path, kv.txZxid(), true) // created (again)
	}
	return nil
}

func (kv storeKV) Delete(path string) error {
	parent, self := hashes(path)
	name := znode.Base(path)
	oldRaw, err := kv.rawGet(path)
	if err != nil {
		return err
	}
	if oldRaw != nil {
		old, err := decodeNodeValue(oldRaw)
		if err != nil {
			return err
		}
		ks := kv.scratch()
		if err := kv.del(nodeKeyInto(ks.node[:], &parent, &self, name), oldRaw); err != nil {
			return err
		}
		if kv.stats != nil {
			kv.stats.Nodes--
			kv.stats.DataSize -= int64(len(path) + len(old.Data))
		}
		ks.oldCV = appendChildValue(ks.oldCV[:0], name, old)
		if err := kv.del(childKeyInto(ks.child[:], &parent, &self), ks.oldCV); err != nil {
			return err
		}
		if swept(old) {
			if err := kv.del(sweepKey(path), []byte(path)); err != nil {
				return err
			}
		}
	}
	kv.cache.put(path, nil)
	kv.kids.changed(path, kv.txZxid(), false)
	return nil
}

func (kv storeKV) SetEphemeral(owner int64, path string, present bool) error {
	k := ephemeralKey(owner, path)
	old, err := kv.current(k)
	if err != nil {
		return err
	}
	if kv.stats != nil && present != (old != nil) {
		if present {
			kv.stats.Ephemerals++
		} else {
			kv.stats.Ephemerals--
		}
	}
	if present {
		return kv.set(k, []byte(path), old)
	}
	if old == nil {
		return nil
	}
	return kv.del(k, old)
}
