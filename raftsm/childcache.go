package raftsm

import (
	"slices"
	"sync"

	"github.com/zkraft/zkraft/znode"
)

// childCache keeps the sorted child names of recently listed znodes. Listing
// children from Pebble walks every key under the parent, deleted ones
// included, until a flush or compaction drops them: under a lock or queue
// recipe's parent, whose children are created and deleted all the time, a
// getChildren stepped over thousands of tombstones.
//
// Readers run on Pebble snapshots, outside the state machine's lock, so
// the cache serves states of several ages at once. An entry is therefore
// tagged with the parent's pzxid: every change to a node's children sets
// the node's pzxid to the changing transaction's zxid (znode.Txn.Create
// and remove), so two states of a node with the same pzxid have the same
// children, and a reader holding the parent as of its snapshot may use an
// entry exactly when the pzxids are equal.
//
// INVARIANT: a valid entry for P tagged z holds P's children in every
// state, committed or being applied, in which P's pzxid is z.
//
// Update keeps it (changed, under the state machine's write lock): it
// edits an existing list copy-on-write (a reader may hold the old one) and
// retags it with the transaction's zxid; for a parent without an entry it
// leaves a marker (no list) tagged with that zxid. A reader that missed
// fills an entry from its snapshot (fill) only if nothing newer can have
// happened to that parent: no entry or marker newer than its listing, no
// eviction of a newer one (evicted), no reset since its view was taken
// (gen). Anything that writes nodes another way (snapshot recovery, a
// failed Update) resets it.
type childCache struct {
	mu struct {
		sync.Mutex
		max, used int // bytes held (names, paths and overhead), bounded by max
		gen       uint64
		evicted   int64 // highest tag of an entry evicted since the last reset
		lists     *lru[childList]
	}
}

type childList struct {
	pzxid int64
	valid bool     // false: a marker, the children changed at pzxid
	names []string // sorted; never changed in place
}

const childEntryOverhead = 96

func (l *childList) size(path string) int {
	n := len(path) + childEntryOverhead
	for _, s := range l.names {
		n += len(s) + 16
	}
	return n
}

func newChildCache(maxBytes int) *childCache {
	c := &childCache{}
	c.mu.max = maxBytes
	c.mu.lists = newLRU[childList]()
	return c
}

// generation is the cache's generation, for a view being taken.
func (c *childCache) generation() uint64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.gen
}

// get returns parent's child names if the cache holds them for a parent
// whose pzxid is pzxid. The slice is shared: callers must not change it.
func (c *childCache) get(parent string, pzxid int64) ([]string, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.mu.lists.get(parent)
	if !ok || !e.val.valid || e.val.pzxid != pzxid {
		return nil, false
	}
	return e.val.names, true
}

// fill records parent's child names as listed from a state in which
// parent's pzxid is pzxid: a view of cache generation gen at zxid (Update
// passes the newest possible zxid).
func (c *childCache) fill(parent string, pzxid int64, names []string, gen uint64, zxid int64) {
	if c == nil {
		return
	}
	l := childList{pzxid: pzxid, valid: true, names: names}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.mu.gen || c.mu.evicted > zxid || l.size(parent) > c.mu.max/4 {
		return // a reset since, a newer entry evicted, or a huge list
	}
	if e, ok := c.mu.lists.get(parent); ok {
		if e.val.pzxid > pzxid {
			return // the children changed after this listing
		}
		c.mu.used += l.size(parent) - e.val.size(parent)
		e.val = l
	} else {
		c.mu.lists.add(parent, l)
		c.mu.used += l.size(parent)
	}
	c.evictLocked()
}

// changed records, during Update, that path was created (add) or deleted
// by the transaction at zxid. A deleted node's own entry is dropped too: it
// had no children, and a node created again at path has another pzxid.
func (c *childCache) changed(path string, zxid int64, add bool) {
	if c == nil || path == "/" {
		return
	}
	parent, _ := znode.Parent(path)
	name := znode.Base(path)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !add {
		if e, ok := c.mu.lists.peek(path); ok {
			c.dropLocked(e)
		}
	}
	e, ok := c.mu.lists.peek(parent)
	if !ok {
		l := childList{pzxid: zxid}
		c.mu.lists.add(parent, l)
		c.mu.used += l.size(parent)
		c.evictLocked()
		return
	}
	old := e.val
	e.val.pzxid = zxid
	if !old.valid {
		return
	}
	i, found := slices.BinarySearch(old.names, name)
	switch {
	case add && !found:
		e.val.names = slices.Insert(slices.Clip(old.names), i, name)
	case !add && found:
		e.val.names = slices.Delete(slices.Clone(old.names), i, i+1)
	}
	c.mu.used += e.val.size(parent) - old.size(parent)
	c.evictLocked()
}

// reset drops every entry; fills from views taken before are refused.
func (c *childCache) reset() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.lists.clear()
	c.mu.used = 0
	c.mu.evicted = 0
	c.mu.gen++
}

func (c *childCache) evictLocked() {
	for c.mu.used > c.mu.max {
		old := c.mu.lists.oldest()
		if old == nil {
			return
		}
		c.mu.evicted = max(c.mu.evicted, old.val.pzxid)
		c.dropLocked(old)
	}
}

func (c *childCache) dropLocked(e *lruEntry[childList]) {
	c.mu.lists.remove(e)
	c.mu.used -= e.val.size(e.key)
}
