package raftsm

import (
	"encoding/binary"
	"errors"
	"io"

	"github.com/cockroachdb/pebble"

	"github.com/zkraft/zkraft/znode"
)

// Pebble key layout. Every key starts with a one-byte space tag.
//
//	'n' parent 0x00 name      a znode (parent "" and name "" for the root), so
//	                          the children of P are the range 'n' P 0x00 ...
//	'e' owner(8, BE) path     ephemeral index: the nodes a session owns
//	's' session(8, BE)        a session: int32 timeout (ms)
//	'o' session(8, BE)        the connection holding a session: uint64 owner
//	't' session(8, BE)        the Raft index of the session's last keep-alive
//	'c' path                  containers and TTL nodes, for the leader's sweep
//	'm' name                  metadata: applied index, zxid
//
// Names never contain 0x00 or '/', so the node encoding is unambiguous.
const (
	spaceNode      = 'n'
	spaceEphemeral = 'e'
	spaceSession   = 's'
	spaceMeta      = 'm'
	spaceSweep     = 'c'
	spaceOwner     = 'o'
	spaceTouch     = 't'
)

var (
	keyApplied = []byte("m:applied")
	keyZxid    = []byte("m:zxid")
)

func nodeKey(path string) []byte {
	if path == "/" {
		return []byte{spaceNode, 0}
	}
	parent, _ := znode.Parent(path)
	name := znode.Base(path)
	k := make([]byte, 0, 2+len(parent)+len(name))
	k = append(k, spaceNode)
	k = append(k, parent...)
	k = append(k, 0)
	return append(k, name...)
}

// childrenBounds returns the key range holding the children of path.
func childrenBounds(path string) (lo, hi []byte) {
	lo = append(append([]byte{spaceNode}, path...), 0)
	hi = append(append([]byte{spaceNode}, path...), 1)
	return lo, hi
}

func ephemeralPrefix(owner int64) []byte {
	k := make([]byte, 9, 9+32)
	k[0] = spaceEphemeral
	binary.BigEndian.PutUint64(k[1:], uint64(owner))
	return k
}

func ephemeralKey(owner int64, path string) []byte {
	return append(ephemeralPrefix(owner), path...)
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

// reader is what both a Pebble DB and an indexed batch offer for reads.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *pebble.IterOptions) *pebble.Iterator
}

// writer is what an indexed batch offers for writes.
type writer interface {
	Set(key, value []byte, _ *pebble.WriteOptions) error
	Delete(key []byte, _ *pebble.WriteOptions) error
}

// pebbleKV implements znode.KV over a Pebble reader, and over a batch when w
// is set. With a cache (Update's batch only), node reads are served from it
// and node writes go to it as well as to the batch.
type pebbleKV struct {
	r     reader
	w     writer
	cache *nodeCache
	kids  *childCache // child lists (childcache.go); Update's and Lookup's
}

var _ znode.KV = pebbleKV{}

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

func (kv pebbleKV) Get(path string) (*znode.Node, error) {
	v, ok := kv.cache.get(path)
	if !ok {
		var err error
		if v, err = getValue(kv.r, nodeKey(path)); err != nil {
			return nil, err
		}
		kv.cache.put(path, v)
	}
	if v == nil {
		return nil, nil
	}
	return znode.DecodeNodeShared(v) // v is a copy, or the cache's (never changed)
}

func sweepKey(path string) []byte { return append([]byte{spaceSweep}, path...) }

// Put stores a node, and indexes containers and TTL nodes for the sweep.
func (kv pebbleKV) Put(path string, n *znode.Node) error {
	switch znode.KindOf(n.EphemeralOwner) {
	case znode.OwnerContainer, znode.OwnerTTL:
		if err := kv.w.Set(sweepKey(path), nil, nil); err != nil {
			return err
		}
	}
	v := marshal(n)
	if err := kv.w.Set(nodeKey(path), v, nil); err != nil {
		return err
	}
	kv.cache.put(path, v)
	kv.kids.added(path)
	return nil
}

func (kv pebbleKV) Delete(path string) error {
	if err := kv.w.Delete(sweepKey(path), nil); err != nil {
		return err
	}
	if err := kv.w.Delete(nodeKey(path), nil); err != nil {
		return err
	}
	kv.cache.put(path, nil)
	kv.kids.removed(path)
	return nil
}

// sweepPaths lists the containers and TTL nodes in path order.
func (kv pebbleKV) sweepPaths() ([]string, error) {
	lo := []byte{spaceSweep}
	it := kv.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	var out []string
	for it.First(); it.Valid(); it.Next() {
		out = append(out, string(it.Key()[1:]))
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, err
	}
	return out, it.Close()
}

func (kv pebbleKV) Children(path string) ([]string, error) {
	if names, ok := kv.kids.get(path); ok {
		return names, nil
	}
	names, err := kv.listChildren(path)
	if err == nil {
		kv.kids.fill(path, names)
	}
	return names, err
}

func (kv pebbleKV) listChildren(path string) ([]string, error) {
	lo, hi := childrenBounds(path)
	it := kv.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	var out []string
	for it.First(); it.Valid(); it.Next() {
		out = append(out, string(it.Key()[len(lo):]))
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, err
	}
	return out, it.Close()
}

func (kv pebbleKV) SetEphemeral(owner int64, path string, present bool) error {
	if present {
		return kv.w.Set(ephemeralKey(owner, path), nil, nil)
	}
	return kv.w.Delete(ephemeralKey(owner, path), nil)
}

func (kv pebbleKV) Ephemerals(owner int64) ([]string, error) {
	lo := ephemeralPrefix(owner)
	it := kv.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	var out []string
	for it.First(); it.Valid(); it.Next() {
		out = append(out, string(it.Key()[len(lo):]))
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, err
	}
	return out, it.Close()
}
