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
// getChildren stepped over thousands of tombstones (250 µs where a getData
// took 65).
//
// An entry is made by a listing (Lookup or Update) that missed, from the
// store as that reader sees it, and from then on kept by Update's writes:
// pebbleKV.Put adds the name (a no-op for an existing node) and Delete
// removes it, for parents that have an entry. The state machine's lock
// orders it: Update (which changes entries) holds it for writing, Lookup
// for reading, so a listing never sees an entry a concurrent Update is
// changing; mu only guards the map and the LRU order between concurrent
// Lookups. Anything that writes nodes another way (snapshot recovery, a
// failed Update) drops it whole.
type childCache struct {
	mu        sync.Mutex
	max, used int // names held (and one per list), bounded by max
	lists     *lru[[]string]
}

func newChildCache(maxNames int) *childCache {
	return &childCache{max: maxNames, lists: newLRU[[]string]()}
}

// get returns a copy of parent's child names and whether they are cached.
func (c *childCache) get(parent string) ([]string, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.lists.get(parent)
	if !ok {
		return nil, false
	}
	return slices.Clone(e.val), true
}

// fill records parent's child names as just listed from the store (sorted).
func (c *childCache) fill(parent string, names []string) {
	if c == nil || len(names) > c.max/4 {
		return // a huge list would push out everything else
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.lists.get(parent); ok {
		c.used += len(names) - len(e.val)
		e.val = slices.Clone(names)
	} else {
		c.lists.add(parent, slices.Clone(names))
		c.used += len(names) + 1
	}
	c.evict()
}

// added records that path exists (Update, after a Put).
func (c *childCache) added(path string) {
	c.edit(path, false, func(e *lruEntry[[]string], name string) {
		i, found := slices.BinarySearch(e.val, name)
		if !found {
			e.val = slices.Insert(e.val, i, name)
			c.used++
			c.evict()
		}
	})
}

// removed records that path is gone (Update, after a Delete). The node's
// own list is dropped too, to free it: it was empty (a node with children
// is not deleted), and a node created again at path starts empty as well.
func (c *childCache) removed(path string) {
	c.edit(path, true, func(e *lruEntry[[]string], name string) {
		if i, found := slices.BinarySearch(e.val, name); found {
			e.val = slices.Delete(e.val, i, i+1)
			c.used--
		}
	})
}

// edit runs fn on the cached list of path's parent, if there is one, with
// path's name; with dropOwn, path's own list is dropped first.
func (c *childCache) edit(path string, dropOwn bool, fn func(parent *lruEntry[[]string], name string)) {
	if c == nil || path == "/" {
		return
	}
	parent, _ := znode.Parent(path)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.lists.peek(path); ok && dropOwn {
		c.drop(e)
	}
	if e, ok := c.lists.peek(parent); ok {
		fn(e, znode.Base(path))
	}
}

// reset drops every entry.
func (c *childCache) reset() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lists.clear()
	c.used = 0
}

func (c *childCache) evict() {
	for c.used > c.max {
		old := c.lists.oldest()
		if old == nil {
			return
		}
		c.drop(old)
	}
}

func (c *childCache) drop(e *lruEntry[[]string]) {
	c.lists.remove(e)
	c.used -= len(e.val) + 1
}
