package raftsm

// nodeCache keeps the stored (encoded) value of recently read or written
// znodes for the apply path, so that a write does not go to Pebble for the
// nodes it reads: the node it changes, its parent, and the quota root every
// write consults. A deep Pebble Get of a key flushed long ago (the quota
// root is written once, at start) walks every level, and was the larger part
// of a setData's apply time.
//
// Only Update's goroutine, under the state machine's write lock, touches it;
// Lookup does not use it. It is write-through: pebbleKV.Put and Delete of
// the open batch change it at the same time as the batch, so it always
// equals what the batch reads. Anything that writes nodes another way
// (snapshot recovery, import, a failed Update) drops it whole.
//
// Values are kept encoded, not as *znode.Node, so that a caller changing a
// node it got can never change the cache. An absent node is kept too (nil
// value), since a create first looks up the path it creates.
type nodeCache struct {
	max, used int
	m         map[string]*cacheEntry
	lru       cacheEntry // ring sentinel: lru.next is the most recent
}

type cacheEntry struct {
	path       string
	val        []byte // nil: no such node
	prev, next *cacheEntry
}

// entryOverhead approximates the bytes an entry costs beside its path and
// value: the entry, the map slot and the string and slice headers.
const entryOverhead = 96

func newNodeCache(maxBytes int) *nodeCache {
	c := &nodeCache{max: maxBytes, m: map[string]*cacheEntry{}}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// get returns the cached value of path and whether it was cached. A nil
// cache caches nothing.
func (c *nodeCache) get(path string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	e, ok := c.m[path]
	if !ok {
		return nil, false
	}
	c.unlink(e)
	c.pushFront(e)
	return e.val, true
}

// put records val (nil: absent) as path's stored value. val must not be
// changed afterwards.
func (c *nodeCache) put(path string, val []byte) {
	if c == nil {
		return
	}
	if e, ok := c.m[path]; ok {
		c.used += len(val) - len(e.val)
		e.val = val
		c.unlink(e)
		c.pushFront(e)
	} else {
		e = &cacheEntry{path: path, val: val}
		c.m[path] = e
		c.used += len(path) + len(val) + entryOverhead
		c.pushFront(e)
	}
	for c.used > c.max && c.lru.prev != &c.lru {
		old := c.lru.prev
		c.unlink(old)
		delete(c.m, old.path)
		c.used -= len(old.path) + len(old.val) + entryOverhead
	}
}

// reset drops every entry.
func (c *nodeCache) reset() {
	if c == nil {
		return
	}
	clear(c.m)
	c.used = 0
	c.lru.next, c.lru.prev = &c.lru, &c.lru
}

func (c *nodeCache) unlink(e *cacheEntry) {
	e.prev.next = e.next
	e.next.prev = e.prev
}

func (c *nodeCache) pushFront(e *cacheEntry) {
	e.prev = &c.lru
	e.next = c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}
