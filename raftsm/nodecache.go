package raftsm

// nodeCache keeps the stored (encoded) value of recently read or written
// znodes for the apply path, so that a write does not go to Pebble for the
// nodes it reads: the node it changes, its parent, and the quota root every
// write consults. A deep Pebble Get of a key flushed long ago (the quota
// root is written once, at start) walks every level, and was the larger part
// of a setData's apply time.
//
// Only Update's goroutine, under the state machine's write lock, touches it;
// Lookup does not use it. It is write-through: storeKV.Put and Delete of
// the open batch change it at the same time as the batch, so it always
// equals what the batch reads. Anything that writes nodes another way
// (snapshot recovery, import, a failed Update) drops it whole.
//
// Values are kept encoded, not as *znode.Node, so that a caller changing a
// node it got can never change the cache. An absent node is kept too (nil
// value), since a create first looks up the path it creates.
type nodeCache struct {
	max, used int
	entries   *lru[[]byte] // nil value: no such node
	// keys is storeKV's scratch for the keys it writes (keys.go): kept
	// here because the cache has the same single user.
	keys keyScratch
}

// entryOverhead approximates the bytes an entry costs beside its path and
// value: the entry, the map slot and the string and slice headers.
const entryOverhead = 96

func newNodeCache(maxBytes int) *nodeCache {
	return &nodeCache{max: maxBytes, entries: newLRU[[]byte]()}
}

// get returns the cached value of path and whether it was cached. A nil
// cache caches nothing.
func (c *nodeCache) get(path string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	e, ok := c.entries.get(path)
	if !ok {
		return nil, false
	}
	return e.val, true
}

// put records val (nil: absent) as path's stored value. val must not be
// changed afterwards.
func (c *nodeCache) put(path string, val []byte) {
	if c == nil {
		return
	}
	if e, ok := c.entries.get(path); ok {
		c.used += len(val) - len(e.val)
		e.val = val
	} else {
		c.entries.add(path, val)
		c.used += len(path) + len(val) + entryOverhead
	}
	for c.used > c.max {
		old := c.entries.oldest()
		if old == nil {
			break
		}
		c.entries.remove(old)
		c.used -= len(old.key) + len(old.val) + entryOverhead
	}
}

// reset drops every entry.
func (c *nodeCache) reset() {
	if c == nil {
		return
	}
	c.entries.clear()
	c.used = 0
}
