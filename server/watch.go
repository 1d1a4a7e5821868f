package server

import (
	"sync"

	"github.com/zkraft/zkraft/jute"
)

// watchKind is the table a standard watch lives in: data watches (set by
// exists and getData) or child watches (set by getChildren).
type watchKind uint8

const (
	watchData watchKind = iota
	watchChild
)

type watchKey struct {
	kind watchKind
	path string
}

// registry is the member-local table of one-shot watches of a cell. It is
// fed by the state machine's triggers (under the state machine's write
// lock) and by reads (under its read lock), which is what makes a watch set
// by a read see every later change.
type registry struct {
	// mu guards the tables. Lock order: the state machine's lock, then mu,
	// then a connection's outbox lock.
	mu struct {
		sync.Mutex
		tables [2]map[string]map[*conn]struct{}
		byConn map[*conn]map[watchKey]struct{}
	}
}

func newRegistry() *registry {
	r := &registry{}
	r.mu.tables[watchData] = map[string]map[*conn]struct{}{}
	r.mu.tables[watchChild] = map[string]map[*conn]struct{}{}
	r.mu.byConn = map[*conn]map[watchKey]struct{}{}
	return r
}

func (r *registry) add(kind watchKind, path string, c *conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.mu.tables[kind]
	set := t[path]
	if set == nil {
		set = map[*conn]struct{}{}
		t[path] = set
	}
	set[c] = struct{}{}
	keys := r.mu.byConn[c]
	if keys == nil {
		keys = map[watchKey]struct{}{}
		r.mu.byConn[c] = keys
	}
	keys[watchKey{kind, path}] = struct{}{}
}

// takeLocked removes and returns the watchers of path in table kind.
func (r *registry) takeLocked(kind watchKind, path string) map[*conn]struct{} {
	set := r.mu.tables[kind][path]
	if set == nil {
		return nil
	}
	delete(r.mu.tables[kind], path)
	for c := range set {
		if keys := r.mu.byConn[c]; keys != nil {
			delete(keys, watchKey{kind, path})
			if len(keys) == 0 {
				delete(r.mu.byConn, c)
			}
		}
	}
	return set
}

// trigger fires the watches a change sets off. Each connection is notified
// once per trigger even when several of its watches match.
func (r *registry) trigger(zxid int64, typ jute.EventType, path string) {
	r.mu.Lock()
	var fired map[*conn]struct{}
	switch typ {
	case jute.EventNodeCreated, jute.EventNodeDataChanged:
		fired = r.takeLocked(watchData, path)
	case jute.EventNodeChildrenChanged:
		fired = r.takeLocked(watchChild, path)
	case jute.EventNodeDeleted:
		fired = r.takeLocked(watchData, path)
		for c := range r.takeLocked(watchChild, path) {
			if fired == nil {
				fired = map[*conn]struct{}{}
			}
			fired[c] = struct{}{}
		}
	}
	// Queue while holding mu so two triggers cannot interleave their events
	// on one connection out of zxid order.
	for c := range fired {
		c.notify(zxid, typ, path)
	}
	r.mu.Unlock()
}

// removeConn drops every watch of a closed connection.
func (r *registry) removeConn(c *conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.mu.byConn[c] {
		if set := r.mu.tables[k.kind][k.path]; set != nil {
			delete(set, c)
			if len(set) == 0 {
				delete(r.mu.tables[k.kind], k.path)
			}
		}
	}
	delete(r.mu.byConn, c)
}

// count returns the number of watches and of watched paths in the data
// table, as ZooKeeper's wchs reports.
func (r *registry) count() (watches, paths, conns int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, set := range r.mu.tables[watchData] {
		watches += len(set)
	}
	return watches, len(r.mu.tables[watchData]), len(r.mu.byConn)
}
