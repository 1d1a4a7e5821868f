package server

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/proxy/wire"
	"github.com/zkraft/zkraft/znode"
)

// watchTable is one of ZooKeeper's two watch tables: data watches (set by
// exists, getData and addWatch) and child watches (set by getChildren and
// addWatch PERSISTENT).
type watchTable uint8

const (
	tableData watchTable = iota
	tableChild
)

// watchMode is a bit set of the modes one connection holds on one path in
// one table (ZooKeeper's WatchStats).
type watchMode uint8

const (
	modeStandard watchMode = 1 << iota // one-shot
	modePersistent
	modeRecursive
)

type watchKey struct {
	table watchTable
	path  string
}

// registry is the member-local watch manager of a cell, following
// ZooKeeper's WatchManager: a standard watch fires once, a persistent one
// stays, a recursive one (data table only) also fires for every descendant
// and never for NodeChildrenChanged.
//
// It is fed by the state machine's triggers (under the state machine's
// write lock, in zxid order) and by reads. A read runs on a snapshot at
// some zxid Z, outside that lock, while later changes are applied and
// their triggers delivered; so a read's watches are registered as of Z
// (finishRead): the registry keeps the most recent triggers (recent) and
// fires, on registration, what the new watch would have fired for every
// trigger after Z.
//
// INVARIANT (per connection, as ZooKeeper's single pipeline gives it):
// while a read that sets watches runs, the connection's notifications are
// held (hold); finishRead then queues those of zxid <= Z, the read's reply,
// and the rest merged in zxid order with what the new watches fire, one
// notification per (zxid, type, path). So an event is queued before any
// reply that reflects its change, after the reply of the read that set
// its watch, and events go out in zxid order.
type registry struct {
	// mu guards the tables, the recent triggers and the connections'
	// held notifications. Lock order: the state machine's lock, then mu,
	// then a connection's outbox lock.
	mu struct {
		sync.Mutex
		tables    [2]map[string]map[*conn]watchMode
		recursive int // recursive watches held, to skip walking parents when 0
		recent    recentTriggers
	}
	// Each connection's own watch keys are kept on it (conn.watchKeys,
	// guarded by mu), for removeConn.

	// entries counts the (table, path, connection) entries of the tables,
	// what total counts, for a cell's watch limit without taking mu.
	// INVARIANT: changed only in setLocked, with mu held.
	entries atomic.Int64
}

// recentTriggers is a ring of the last triggers, in zxid order.
type recentTriggers struct {
	buf   []recentTrigger
	start int
	// floor: every trigger of a zxid above it is in buf (the oldest ones
	// overwritten were of zxids at or below it).
	floor int64
	last  int64 // zxid of the newest trigger
}

type recentTrigger struct {
	zxid int64
	typ  jute.EventType
	path string
	acl  []jute.ACL
}

// maxRecentTriggers bounds the ring: a read whose run overlaps more
// triggers than this cannot be caught up, and its connection is closed
// (the client's setWatches then catches it up from its last zxid).
var maxRecentTriggers = 1 << 16 // a variable for tests

// maxHeld bounds the notifications held for a connection while a read
// runs; past it the connection is closed.
const maxHeld = 1 << 16

func (rt *recentTriggers) push(t recentTrigger) {
	if len(rt.buf) < maxRecentTriggers {
		rt.buf = append(rt.buf, t)
	} else {
		old := rt.buf[rt.start]
		rt.floor = max(rt.floor, old.zxid)
		rt.buf[rt.start] = t
		rt.start = (rt.start + 1) % len(rt.buf)
	}
	rt.last = t.zxid
}

func (rt *recentTriggers) at(i int) *recentTrigger { return &rt.buf[(rt.start+i)%len(rt.buf)] }

// after returns the index of the first trigger of a zxid above z.
func (rt *recentTriggers) after(z int64) int {
	lo, hi := 0, len(rt.buf)
	for lo < hi {
		m := (lo + hi) / 2
		if rt.at(m).zxid <= z {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// note is one notification for a connection.
type note struct {
	zxid int64
	typ  jute.EventType
	path string
}

// watchReq is a watch a read asks for, registered as of the read's zxid.
type watchReq struct {
	table watchTable
	path  string
	mode  watchMode
}

// fires reports whether a watch of mode m in table on path fires for a
// trigger (the same rules as trigger and collectLocked).
func (w watchReq) fires(t *recentTrigger) bool {
	switch w.table {
	case tableData:
		if t.typ == jute.EventNodeChildrenChanged {
			return false
		}
		if t.path == w.path {
			return true
		}
		return w.mode&modeRecursive != 0 && isBelow(t.path, w.path)
	case tableChild:
		return t.path == w.path && (t.typ == jute.EventNodeChildrenChanged || t.typ == jute.EventNodeDeleted)
	}
	return false
}

// isBelow reports whether p is a strict descendant of dir.
func isBelow(p, dir string) bool {
	if dir == "/" {
		return p != "/"
	}
	return len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir
}

// hold starts holding c's notifications (a read that sets watches is
// about to run).
func (r *registry) hold(c *conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.held.on = true
	c.held.notes = c.held.notes[:0]
}

// finishRead ends a read of c that ran as of zxid at (see the registry's
// INVARIANT): it queues the held notifications of zxid <= at, then before
// (a setWatches' own notifications), then reply (nil when the read failed:
// the connection is closing), registers want as of at, and queues what the
// new watches fire merged with the rest of the held notifications.
func (r *registry) finishRead(c *conn, at int64, before []note, reply []byte, want []watchReq) {
	r.mu.Lock()
	defer r.mu.Unlock()
	held, i, ok := c.releaseHeldLocked(at, before, reply)
	if !ok {
		return
	}
	c.enqueue(reply)
	if len(want) == 0 && i == len(held) {
		return
	}
	rt := &r.mu.recent
	if len(want) > 0 && at < rt.last && at < rt.floor {
		// Too many changes since the read to know what its watches missed.
		c.log().Info("watch registration fell behind the recent changes: closing the connection",
			"session", hexID(c.sessionID), "readZxid", at, "oldestKnown", rt.floor)
		c.closeAfterFlush()
		return
	}
	caught := held[i:]
	for _, w := range want {
		consumed := false
		if at < rt.last {
			for j := rt.after(at); j < len(rt.buf); j++ {
				t := rt.at(j)
				if !w.fires(t) {
					continue
				}
				if znode.CheckACL(t.acl, jute.PermRead, c.authIDs()) == nil {
					caught = append(caught, note{t.zxid, t.typ, t.path})
				}
				if w.mode&modeStandard != 0 {
					consumed = true
					break
				}
			}
		}
		if !consumed {
			r.setLocked(w.table, w.path, c, r.getLocked(w.table, w.path, c)|w.mode)
		}
	}
	slices.SortStableFunc(caught, func(a, b note) int { return cmp.Compare(a.zxid, b.zxid) })
	for k, n := range caught {
		if k > 0 && n == caught[k-1] {
			continue // one notification per change, as trigger sends
		}
		c.notify(n.zxid, n.typ, n.path)
	}
}

// releaseHeldLocked ends the hold of c's notifications for a read as of
// zxid at: it queues the held notifications of zxid <= at and, if the read
// succeeded (reply is not nil), before. It returns the held notifications
// and the index of the first not yet queued; ok is false when the read
// failed, and nothing else is to be queued. The caller holds registry.mu.
func (c *conn) releaseHeldLocked(at int64, before []note, reply []byte) (held []note, i int, ok bool) {
	held = c.held.notes
	c.held.on, c.held.notes = false, nil
	for ; i < len(held) && held[i].zxid <= at; i++ {
		c.notify(held[i].zxid, held[i].typ, held[i].path)
	}
	if reply == nil {
		return held, i, false
	}
	for _, n := range before {
		c.notify(n.zxid, n.typ, n.path)
	}
	return held, i, true
}

// finishSharedRead is finishRead for a read a proxy sent as DataShared
// (upstream.go) on a version 2 upstream connection: the watches the read
// asks for become the connection's shared watches (sw.conn), registered
// as of at in persistent or recursive mode (the proxy keeps each
// session's one-shot watches itself), and what they would have fired
// since at goes out as Events. On the upstream connection the Watching
// frame naming them, then those Events, are queued under mu, so before
// the read's reply (queued here on the channel's outbox, written to the
// upstream connection later) and before any later Event.
func (r *registry) finishSharedRead(c *conn, sw *sharedWatcher, xid int32, gen, at int64, before []note, reply []byte, want []watchReq) {
	r.mu.Lock()
	defer r.mu.Unlock()
	held, i, ok := c.releaseHeldLocked(at, before, reply)
	if !ok {
		return
	}
	if len(want) > 0 {
		rt := &r.mu.recent
		if at < rt.last && at < rt.floor {
			c.log().Info("shared watch registration fell behind the recent changes: closing the channel",
				"session", hexID(c.sessionID), "readZxid", at, "oldestKnown", rt.floor)
			c.enqueue(reply)
			c.closeAfterFlush()
			return
		}
		mark := &wire.Watching{Xid: xid, Zxid: at, Watches: make([]wire.Watch, 0, len(want))}
		for _, w := range want {
			m := sharedMode(w.mode)
			r.setLocked(w.table, w.path, sw.conn, r.getLocked(w.table, w.path, sw.conn)|m)
			if k := (sharedKey{w.table, w.path, m}); sw.gens[k] < gen {
				sw.gens[k] = gen
			}
			mark.Watches = append(mark.Watches, wire.Watch{Table: int32(w.table), Mode: int32(w.mode), Path: w.path})
		}
		frames := [][]byte{wire.AppendRecord(nil, wire.KindWatching, sw.channelOf(c), mark)}
		if at < rt.last {
			for j := rt.after(at); j < len(rt.buf); j++ {
				t := rt.at(j)
				for _, w := range want {
					if w.fires(t) {
						frames = append(frames, sw.eventFrame(t.zxid, t.typ, t.path, t.acl))
						break
					}
				}
			}
		}
		sw.send(frames...)
	}
	c.enqueue(reply)
	for _, n := range held[i:] {
		c.notify(n.zxid, n.typ, n.path)
	}
}

// sharedMode is the mode a shared watch is held in on the member: a
// one-shot watch is kept persistent (the proxy uses each session's up
// itself, and drops the upstream one with Unwatch when nobody wants it),
// so that no change between two sessions' reads is missed.
func sharedMode(m watchMode) watchMode {
	if m&modeRecursive != 0 {
		return modeRecursive
	}
	return modePersistent
}

// unwatch drops the shared watch k of sw unless a DataShared of a later
// generation than gen registered it again.
func (r *registry) unwatch(sw *sharedWatcher, k sharedKey, gen int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g, ok := sw.gens[k]; !ok || g > gen {
		return
	}
	delete(sw.gens, k)
	r.setLocked(k.table, k.path, sw.conn, r.getLocked(k.table, k.path, sw.conn)&^k.mode)
}

// keySet is the watch keys of one connection: a slice while there are few
// (most connections watch a handful of paths, and a map per connection
// would be most of the memory of a watch), a map once there are many.
type keySet struct {
	few  []watchKey
	many map[watchKey]struct{}
}

const fewKeys = 8

func (s *keySet) add(k watchKey) {
	switch {
	case s.many != nil:
		s.many[k] = struct{}{}
	case slices.Contains(s.few, k):
	case len(s.few) < fewKeys:
		s.few = append(s.few, k)
	default:
		s.many = make(map[watchKey]struct{}, 2*fewKeys)
		for _, x := range s.few {
			s.many[x] = struct{}{}
		}
		s.many[k] = struct{}{}
		s.few = nil
	}
}

func (s *keySet) remove(k watchKey) {
	if s.many != nil {
		delete(s.many, k)
		return
	}
	if i := slices.Index(s.few, k); i >= 0 {
		last := len(s.few) - 1
		s.few[i] = s.few[last]
		s.few[last] = watchKey{}
		s.few = s.few[:last]
		if last == 0 {
			s.few = nil
		}
	}
}

// keys returns a copy of the set.
func (s *keySet) keys() []watchKey {
	if s.many == nil {
		return slices.Clone(s.few)
	}
	out := make([]watchKey, 0, len(s.many))
	for k := range s.many {
		out = append(out, k)
	}
	return out
}

func newRegistry() *registry {
	r := &registry{}
	r.mu.tables[tableData] = map[string]map[*conn]watchMode{}
	r.mu.tables[tableChild] = map[string]map[*conn]watchMode{}
	return r
}

func (r *registry) add(table watchTable, path string, c *conn, m watchMode) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setLocked(table, path, c, r.getLocked(table, path, c)|m)
}

func (r *registry) getLocked(table watchTable, path string, c *conn) watchMode {
	return r.mu.tables[table][path][c]
}

// setLocked stores the modes c holds on path, removing the entry when m is 0.
func (r *registry) setLocked(table watchTable, path string, c *conn, m watchMode) {
	old := r.getLocked(table, path, c)
	if old&modeRecursive != 0 {
		r.mu.recursive--
	}
	if m&modeRecursive != 0 {
		r.mu.recursive++
	}
	switch {
	case old == 0 && m != 0:
		r.entries.Add(1)
	case old != 0 && m == 0:
		r.entries.Add(-1)
	}
	t := r.mu.tables[table]
	key := watchKey{table, path}
	if m == 0 {
		if set := t[path]; set != nil {
			delete(set, c)
			if len(set) == 0 {
				delete(t, path)
			}
		}
		c.watchKeys.remove(key)
		return
	}
	set := t[path]
	if set == nil {
		set = map[*conn]watchMode{}
		t[path] = set
	}
	set[c] = m
	c.watchKeys.add(key)
}

// collectLocked gathers the watchers a change on path fires in table,
// dropping standard watches at path.
func (r *registry) collectLocked(table watchTable, path string, fired map[*conn]struct{}) {
	t := r.mu.tables[table]
	for c, m := range t[path] {
		fired[c] = struct{}{}
		if m&modeStandard != 0 {
			r.setLocked(table, path, c, m&^modeStandard)
		}
	}
	if table != tableData || r.mu.recursive == 0 {
		return
	}
	for p := path; p != "/"; {
		p, _ = znode.Parent(p)
		for c, m := range t[p] {
			if m&modeRecursive != 0 {
				fired[c] = struct{}{}
			}
		}
	}
}

// trigger fires the watches a change sets off, as ZooKeeper's DataTree
// does: NodeCreated and NodeDataChanged in the data table,
// NodeChildrenChanged in the child table, NodeDeleted in the data table
// and then in the child table for connections not already notified. A
// connection without READ on acl gets nothing (its standard watch is still
// used up).
func (r *registry) trigger(zxid int64, typ jute.EventType, path string, acl []jute.ACL) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fired := map[*conn]struct{}{}
	switch typ {
	case jute.EventNodeCreated, jute.EventNodeDataChanged:
		r.collectLocked(tableData, path, fired)
	case jute.EventNodeChildrenChanged:
		r.collectLocked(tableChild, path, fired)
	case jute.EventNodeDeleted:
		r.collectLocked(tableData, path, fired)
		r.collectLocked(tableChild, path, fired)
	}
	r.mu.recent.push(recentTrigger{zxid: zxid, typ: typ, path: path, acl: acl})
	// Queue while holding mu so two triggers cannot interleave their events
	// on one connection out of zxid order.
	for c := range fired {
		if c.shared != nil {
			// A proxy's shared watches: one Event on its upstream
			// connection, ahead of every reply that reflects the change.
			c.shared.event(zxid, typ, path, acl)
			continue
		}
		if znode.CheckACL(acl, jute.PermRead, c.authIDs()) != nil {
			continue
		}
		if c.held.on {
			if len(c.held.notes) >= maxHeld {
				c.srv.routines.start(c.close) // a read that never ends: its client reconnects
				continue
			}
			c.held.notes = append(c.held.notes, note{zxid, typ, path})
			continue
		}
		c.notify(zxid, typ, path)
	}
}

// reset forgets the recent triggers: the state was replaced from a
// snapshot at zxid (the cell's clients are closed and reconnect).
func (r *registry) reset(zxid int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.recent = recentTriggers{floor: zxid, last: zxid}
}

// contains reports whether c holds a watch of the given ZooKeeper watcher
// type on path (DataTree.containsWatcher).
func (r *registry) contains(path string, wtype int32, c *conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	data, child := r.getLocked(tableData, path, c), r.getLocked(tableChild, path, c)
	switch wtype {
	case jute.WatcherTypeChildren:
		return child&modeStandard != 0
	case jute.WatcherTypeData:
		return data&modeStandard != 0
	case watcherTypePersistent:
		return data&modePersistent != 0
	case watcherTypePersistentRecursive:
		return data&modeRecursive != 0
	case jute.WatcherTypeAny:
		return child != 0 || data != 0
	}
	return false
}

// ZooKeeper 3.9's WatcherType values beyond jute's Children, Data and Any.
const (
	watcherTypePersistent          int32 = 4
	watcherTypePersistentRecursive int32 = 5
)

// remove drops c's watches of the given type on path and reports whether
// any was removed (DataTree.removeWatch).
func (r *registry) remove(path string, wtype int32, c *conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear := func(table watchTable, m watchMode) bool {
		old := r.getLocked(table, path, c)
		if old&m == 0 {
			return false
		}
		r.setLocked(table, path, c, old&^m)
		return true
	}
	switch wtype {
	case jute.WatcherTypeChildren:
		return clear(tableChild, modeStandard)
	case jute.WatcherTypeData:
		return clear(tableData, modeStandard)
	case watcherTypePersistent:
		a := clear(tableChild, modePersistent)
		b := clear(tableData, modePersistent)
		return a || b
	case watcherTypePersistentRecursive:
		return clear(tableData, modeRecursive)
	case jute.WatcherTypeAny:
		all := modeStandard | modePersistent | modeRecursive
		a := clear(tableChild, all)
		b := clear(tableData, all)
		return a || b
	}
	return false
}

// removeConn drops every watch of a closed connection.
func (r *registry) removeConn(c *conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range c.watchKeys.keys() {
		r.setLocked(k.table, k.path, c, 0)
	}
	c.watchKeys = keySet{}
}

// count returns the number of watches, watched paths and watching
// connections in the data table, as ZooKeeper's wchs reports.
func (r *registry) count() (watches, paths, conns int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[*conn]struct{}{}
	for _, set := range r.mu.tables[tableData] {
		watches += len(set)
		for c := range set {
			seen[c] = struct{}{}
		}
	}
	return watches, len(r.mu.tables[tableData]), len(seen)
}
