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
	max, used int // names held, bounded by max
	m         map[string]*childEntry
	lru       childEntry // ring sentinel: lru.next is the most recent
}

type childEntry struct {
	parent     string
	names      []string // sorted
	prev, next *childEntry
}

func newChildCache(maxNames int) *childCache {
	c := &childCache{max: maxNames, m: map[string]*childEntry{}}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// get returns a copy of parent's child names and whether they are cached.
func (c *childCache) get(parent string) ([]string, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[parent]
	if !ok {
		return nil, false
	}
	c.touch(e)
	return slices.Clone(e.names), true
}

// fill records parent's child names as just listed from the store (sorted).
func (c *childCache) fill(parent string, names []string) {
	if c == nil || len(names) > c.max/4 {
		return // a huge list would push out everything else
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[parent]; ok {
		c.used += len(names) - len(e.names)
		e.names = slices.Clone(names)
		c.touch(e)
	} else {
		e = &childEntry{parent: parent, names: slices.Clone(names)}
		c.m[parent] = e
		c.used += len(names) + 1
		c.pushFront(e)
	}
	c.evict()
}

// added records that path exists (Update, after a Put).
func (c *childCache) added(path string) {
	if c == nil || path == "/" {
		return
	}
	parent, _ := znode.Parent(path)
	name := znode.Base(path)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[parent]
	if !ok {
		return
	}
	i, found := slices.BinarySearch(e.names, name)
	if found {
		return
	}
	e.names = slices.Insert(e.names, i, name)
	c.used++
	c.evict()
}

// removed records that path is gone (Update, after a Delete).
func (c *childCache) removed(path string) {
	if c == nil || path == "/" {
		return
	}
	parent, _ := znode.Parent(path)
	name := znode.Base(path)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[path]; ok { // the node's own list: it has no children
		c.drop(e)
	}
	e, ok := c.m[parent]
	if !ok {
		return
	}
	if i, found := slices.BinarySearch(e.names, name); found {
		e.names = slices.Delete(e.names, i, i+1)
		c.used--
	}
}

// reset drops every entry.
func (c *childCache) reset() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	c.used = 0
	c.lru.next, c.lru.prev = &c.lru, &c.lru
}

func (c *childCache) evict() {
	for c.used > c.max && c.lru.prev != &c.lru {
		c.drop(c.lru.prev)
	}
}

func (c *childCache) drop(e *childEntry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	delete(c.m, e.parent)
	c.used -= len(e.names) + 1
}

func (c *childCache) touch(e *childEntry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	c.pushFront(e)
}

func (c *childCache) pushFront(e *childEntry) {
	e.prev = &c.lru
	e.next = c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}
