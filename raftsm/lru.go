package raftsm

// lru is the recency order of a cache's entries, keyed by path: the node
// cache and the child-list cache share it. Not safe for concurrent use.
type lru[V any] struct {
	m    map[string]*lruEntry[V]
	ring lruEntry[V] // sentinel: ring.next is the most recent
}

type lruEntry[V any] struct {
	key        string
	val        V
	prev, next *lruEntry[V]
}

func newLRU[V any]() *lru[V] {
	l := &lru[V]{m: map[string]*lruEntry[V]{}}
	l.ring.next, l.ring.prev = &l.ring, &l.ring
	return l
}

// get returns key's entry and makes it the most recent.
func (l *lru[V]) get(key string) (*lruEntry[V], bool) {
	e, ok := l.m[key]
	if ok {
		l.unlink(e)
		l.pushFront(e)
	}
	return e, ok
}

// peek returns key's entry without changing the order.
func (l *lru[V]) peek(key string) (*lruEntry[V], bool) {
	e, ok := l.m[key]
	return e, ok
}

// add inserts an entry for a key not present, as the most recent.
func (l *lru[V]) add(key string, val V) *lruEntry[V] {
	e := &lruEntry[V]{key: key, val: val}
	l.m[key] = e
	l.pushFront(e)
	return e
}

// oldest returns the least recent entry, nil when empty.
func (l *lru[V]) oldest() *lruEntry[V] {
	if l.ring.prev == &l.ring {
		return nil
	}
	return l.ring.prev
}

func (l *lru[V]) remove(e *lruEntry[V]) {
	l.unlink(e)
	delete(l.m, e.key)
}

func (l *lru[V]) clear() {
	clear(l.m)
	l.ring.next, l.ring.prev = &l.ring, &l.ring
}

func (l *lru[V]) len() int { return len(l.m) }

func (l *lru[V]) unlink(e *lruEntry[V]) {
	e.prev.next = e.next
	e.next.prev = e.prev
}

func (l *lru[V]) pushFront(e *lruEntry[V]) {
	e.prev = &l.ring
	e.next = l.ring.next
	l.ring.next.prev = e
	l.ring.next = e
}
