package proxy

import (
	"slices"
	"sync"
	"time"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/proxy/wire"
)

// Shared watches (protocol version 2, docs/proxy.md). Identical watches of
// any number of sessions on one upstream connection are one watch on the
// member: the connection's, held there in persistent or recursive mode
// (a one-shot watch is kept persistent upstream, and used up per session
// here). The member sends one Event per change that fires any of them,
// ahead of every reply that reflects the change on any channel, and the
// upstream reader fans it out to the sessions watching, before it reads
// the next frame.
//
// Every watch-setting read goes up as DataShared, so that each session's
// watch is registered as of the state its own read saw (Watching names
// the watches and that zxid, before the reply): a session is told of a
// change only when its zxid is above that state's (a session whose read
// already reflected the change is not told of it, and keeps its one-shot
// watch for the next change), and no change between two sessions' reads
// is missed. Watches re-set with setWatches after a reconnect are shared
// too (the member fires what changed since the client's zxid on the
// channel, before its reply, and registers the rest as shared).
//
// Per session, events are queued in the client's outbox in the order the
// member sent them, but an event is held while the session has requests
// forwarded and not answered: it goes out just before the first reply of
// a zxid at or above its own, or once nothing is outstanding. So a
// session sees an event before any reply that reflects its change (which
// the member's ordering gives), and never after a later reply older than
// it (the order a member's own connection gives).

// upKey names one shared watch on the member: table, path and the one
// mode it is held in there (wire.WatchPersistent or wire.WatchRecursive).
type upKey struct {
	table int32
	path  string
	mode  int32
}

// upEntry is one shared watch: the sessions it fans out to.
type upEntry struct {
	subs map[*client]*sub
	// inflight: DataShared reads naming the watch sent and not answered;
	// gen: the newest generation sent for it; registered: the member
	// registered it (a Watching named it) since the last Unwatch.
	inflight   int
	gen        int64
	registered bool
}

// sub is one session's watches on an upKey: a bit set of modes
// (wire.WatchStandard, WatchPersistent, WatchRecursive), each with the
// zxid of the state it is set on or last fired at.
type sub struct {
	has int32
	at  [3]int64
	// exist: the one-shot watch of a data key was set by exists on a
	// znode that did not exist (ZooKeeper's client keeps it as an exist
	// watch, which setWatches re-sets with other rules than a data watch).
	exist bool
}

func modeIndex(m int32) int {
	switch m {
	case wire.WatchStandard:
		return 0
	case wire.WatchPersistent:
		return 1
	}
	return 2
}

// upMode is the mode a watch is held in upstream.
func upMode(m int32) int32 {
	if m == wire.WatchRecursive {
		return wire.WatchRecursive
	}
	return wire.WatchPersistent
}

// sharedWatches is one version 2 upstream connection's shared watches.
type sharedWatches struct {
	u *upConn
	// mu guards the fields below and every client's subs, swDropped and
	// evSeq. Lock order: after upConn.mu, before client.fl and client.out.
	mu        sync.Mutex
	gen       int64
	seq       int64 // events fanned out, for deduplication per session
	keys      map[upKey]*upEntry
	recursive int // entries of mode recursive, to skip walking parents when 0
}

func newSharedWatches(u *upConn) *sharedWatches {
	return &sharedWatches{u: u, keys: map[upKey]*upEntry{}}
}

// sharedKeys returns the upstream watches a request would set, and
// whether it sets any (then it goes up as DataShared).
func sharedKeys(op jute.OpCode, body []byte) []upKey {
	data := func(p string) upKey { return upKey{wire.WatchTableData, p, wire.WatchPersistent} }
	child := func(p string) upKey { return upKey{wire.WatchTableChild, p, wire.WatchPersistent} }
	rec := func(p string) upKey { return upKey{wire.WatchTableData, p, wire.WatchRecursive} }
	switch op {
	case jute.OpExists, jute.OpGetData:
		r := new(jute.ExistsRequest) // getData's record is the same: path, watch
		if jute.Unmarshal(body, r) != nil || !r.Watch {
			return nil
		}
		return []upKey{data(r.Path)}
	case jute.OpGetChildren, jute.OpGetChildren2:
		r := new(jute.GetChildrenRequest)
		if jute.Unmarshal(body, r) != nil || !r.Watch {
			return nil
		}
		return []upKey{child(r.Path)}
	case jute.OpAddWatch:
		r := new(jute.AddWatchRequest)
		if jute.Unmarshal(body, r) != nil {
			return nil
		}
		switch r.Mode {
		case jute.AddWatchModePersistent:
			return []upKey{data(r.Path), child(r.Path)}
		case jute.AddWatchModePersistentRecursive:
			return []upKey{rec(r.Path)}
		}
	case jute.OpSetWatches, jute.OpSetWatches2:
		r := new(jute.SetWatches2)
		var err error
		if op == jute.OpSetWatches {
			r1 := new(jute.SetWatches)
			err = jute.Unmarshal(body, r1)
			r.DataWatches, r.ExistWatches, r.ChildWatches = r1.DataWatches, r1.ExistWatches, r1.ChildWatches
		} else {
			err = jute.Unmarshal(body, r)
		}
		if err != nil {
			return nil
		}
		var keys []upKey
		for _, p := range r.DataWatches {
			keys = append(keys, data(p))
		}
		for _, p := range r.ExistWatches {
			keys = append(keys, data(p))
		}
		for _, p := range r.ChildWatches {
			keys = append(keys, child(p))
		}
		for _, p := range r.PersistentWatches {
			keys = append(keys, data(p), child(p))
		}
		for _, p := range r.PersistentRecursiveWatches {
			keys = append(keys, rec(p))
		}
		return keys
	}
	return nil
}

// sendShared counts a DataShared read naming keys as in flight and
// returns its generation.
func (sw *sharedWatches) sendShared(keys []upKey) int64 {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.gen++
	for _, k := range keys {
		e := sw.entryLocked(k)
		e.inflight++
		e.gen = sw.gen
	}
	return sw.gen
}

func (sw *sharedWatches) entryLocked(k upKey) *upEntry {
	e := sw.keys[k]
	if e == nil {
		e = &upEntry{subs: map[*client]*sub{}}
		sw.keys[k] = e
		if k.mode == wire.WatchRecursive {
			sw.recursive++
		}
	}
	return e
}

// readDone: a DataShared read naming keys was answered (or its client
// went away).
func (sw *sharedWatches) readDone(keys []upKey) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for _, k := range keys {
		if e := sw.keys[k]; e != nil {
			e.inflight--
			sw.tidyLocked(k, e)
		}
	}
}

// tidyLocked drops an entry nobody wants any more, telling the member to
// drop its watch when it registered one.
func (sw *sharedWatches) tidyLocked(k upKey, e *upEntry) {
	if len(e.subs) > 0 || e.inflight > 0 {
		return
	}
	delete(sw.keys, k)
	if k.mode == wire.WatchRecursive {
		sw.recursive--
	}
	if e.registered {
		sw.u.send(false, wire.AppendRecord(nil, wire.KindUnwatch, 0, &wire.Unwatch{Gen: e.gen, Watch: wire.Watch{Table: k.table, Mode: k.mode, Path: k.path}}))
	}
}

// watching records the watches a DataShared read of c registered as of
// zxid at (the member's Watching frame, ahead of the read's reply).
func (sw *sharedWatches) watching(c *client, w *wire.Watching) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if c.swDropped {
		return
	}
	for _, x := range w.Watches {
		k := upKey{x.Table, x.Path, upMode(x.Mode)}
		e := sw.entryLocked(k)
		e.registered = true
		s := e.subs[c]
		if s == nil {
			s = &sub{}
			e.subs[c] = s
			if c.subs == nil {
				c.subs = map[upKey]struct{}{}
			}
			c.subs[k] = struct{}{}
		}
		i := modeIndex(x.Mode)
		if s.has&x.Mode == 0 || w.Zxid < s.at[i] {
			// A watch already held keeps the older state it was set on.
			s.at[i] = w.Zxid
		}
		s.has |= x.Mode
	}
}

// event fans out one Event: to every session whose watch it fires and
// whose watch was set on an older state, once per session (one-shot
// watches are then used up); a session the member names as denied is
// told nothing, its one-shot watch used up all the same.
func (sw *sharedWatches) event(e *wire.Event) {
	read := time.Now()
	typ := jute.EventType(e.Type)
	var targets []*client
	sw.mu.Lock()
	sw.seq++
	fire := func(k upKey, modes int32) {
		en := sw.keys[k]
		if en == nil {
			return
		}
		emptied := 0
		for c, s := range en.subs {
			for _, m := range [...]int32{wire.WatchStandard, wire.WatchPersistent, wire.WatchRecursive} {
				i := modeIndex(m)
				if s.has&m&modes == 0 || e.Zxid <= s.at[i] {
					continue
				}
				s.at[i] = e.Zxid
				if m == wire.WatchStandard {
					s.has &^= m
				}
				if c.evSeq != sw.seq && !denied(e.Denied, c.ch.Load()) {
					c.evSeq = sw.seq
					targets = append(targets, c)
				}
			}
			if s.has == 0 {
				emptied++
				delete(c.subs, k)
			}
		}
		// INVARIANT: every sub in en.subs holds a watch (has != 0) outside
		// this loop. A one-shot watch held by all (the common case) empties
		// the list at once: one clear, not a delete per session.
		switch {
		case emptied == len(en.subs):
			clear(en.subs)
		case emptied > 0:
			for c, s := range en.subs {
				if s.has == 0 {
					delete(en.subs, c)
				}
			}
		}
		sw.tidyLocked(k, en)
	}
	all := wire.WatchStandard | wire.WatchPersistent
	switch typ {
	case jute.EventNodeCreated, jute.EventNodeDataChanged:
		fire(upKey{wire.WatchTableData, e.Path, wire.WatchPersistent}, all)
	case jute.EventNodeChildrenChanged:
		fire(upKey{wire.WatchTableChild, e.Path, wire.WatchPersistent}, all)
	case jute.EventNodeDeleted:
		fire(upKey{wire.WatchTableData, e.Path, wire.WatchPersistent}, all)
		fire(upKey{wire.WatchTableChild, e.Path, wire.WatchPersistent}, all)
	}
	if typ != jute.EventNodeChildrenChanged && sw.recursive > 0 {
		for p := e.Path; ; p = parent(p) {
			fire(upKey{wire.WatchTableData, p, wire.WatchRecursive}, wire.WatchRecursive)
			if p == "/" {
				break
			}
		}
	}
	sw.mu.Unlock()
	if len(targets) == 0 {
		return
	}
	// Encoded once: every session is given the same bytes (fanout.go).
	frame := jute.AppendFrame(nil,
		&jute.ReplyHeader{Xid: jute.XidNotification, Zxid: e.Zxid},
		&jute.WatcherEvent{Type: typ, State: jute.StateSyncConnected, Path: e.Path})
	sw.u.p.fanOut(targets, e.Zxid, frame, read)
}

func denied(chans []int64, ch int64) bool {
	_, found := slices.BinarySearch(chans, ch)
	return found
}

// parent is path's parent ("/" for "/" and for a path without a slash).
func parent(p string) string {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}

// watcherOp applies a removeWatches (remove) or checkWatches of c to its
// shared watches, with the member's rules (registry.remove and contains):
// whether c holds (held) such a watch.
func (sw *sharedWatches) watcherOp(c *client, path string, typ int32, remove bool) bool {
	const (
		typeChildren   = 1
		typeData       = 2
		typeAny        = 3
		typePersistent = 4
		typeRecursive  = 5
	)
	data := upKey{wire.WatchTableData, path, wire.WatchPersistent}
	child := upKey{wire.WatchTableChild, path, wire.WatchPersistent}
	rec := upKey{wire.WatchTableData, path, wire.WatchRecursive}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	found := false
	clear := func(k upKey, modes int32) {
		e := sw.keys[k]
		if e == nil {
			return
		}
		s := e.subs[c]
		if s == nil || s.has&modes == 0 {
			return
		}
		found = true
		if !remove {
			return
		}
		s.has &^= modes
		if s.has == 0 {
			delete(e.subs, c)
			delete(c.subs, k)
		}
		sw.tidyLocked(k, e)
	}
	switch typ {
	case typeChildren:
		clear(child, wire.WatchStandard)
	case typeData:
		clear(data, wire.WatchStandard)
	case typePersistent:
		if remove {
			clear(child, wire.WatchPersistent)
		}
		clear(data, wire.WatchPersistent)
	case typeRecursive:
		clear(rec, wire.WatchRecursive)
	case typeAny:
		all := wire.WatchStandard | wire.WatchPersistent | wire.WatchRecursive
		clear(child, all)
		clear(data, all)
		clear(rec, all)
	}
	return found
}

// dropClient removes a client that went away from every fan-out list.
func (sw *sharedWatches) dropClient(c *client) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	c.swDropped = true
	for k := range c.subs {
		if e := sw.keys[k]; e != nil {
			delete(e.subs, c)
			sw.tidyLocked(k, e)
		}
	}
	c.subs = nil
}

// counts is what the connection holds: shared watches registered on the
// member, and sessions' entries in their fan-out lists.
func (sw *sharedWatches) counts() (upstream, local int) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for _, e := range sw.keys {
		if e.registered {
			upstream++
		}
		local += len(e.subs)
	}
	return upstream, local
}

// existPaths are the exist watches a setWatches request re-sets.
func existPaths(op jute.OpCode, body []byte) []string {
	switch op {
	case jute.OpSetWatches:
		r := new(jute.SetWatches)
		if jute.Unmarshal(body, r) == nil {
			return r.ExistWatches
		}
	case jute.OpSetWatches2:
		r := new(jute.SetWatches2)
		if jute.Unmarshal(body, r) == nil {
			return r.ExistWatches
		}
	}
	return nil
}

// markExist records, from the reply (err) to c's watch-setting read f,
// whether c's one-shot data watches are exist watches: exists on a
// missing znode sets one, a read that found the znode a data watch, and
// setWatches re-sets the exist watches it names.
func (sw *sharedWatches) markExist(c *client, f *flight, err jute.ErrCode) {
	set := func(path string, exist bool) {
		if e := sw.keys[upKey{wire.WatchTableData, path, wire.WatchPersistent}]; e != nil {
			if s := e.subs[c]; s != nil && s.has&wire.WatchStandard != 0 {
				s.exist = exist
			}
		}
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	switch f.op {
	case jute.OpExists, jute.OpGetData:
		if len(f.keys) == 1 && (err == jute.ErrOK || err == jute.ErrNoNode) {
			set(f.keys[0].path, f.op == jute.OpExists && err == jute.ErrNoNode)
		}
	case jute.OpSetWatches, jute.OpSetWatches2:
		for _, p := range f.exist {
			set(p, true)
		}
	}
}

// takeClient removes c from every fan-out list of the connection, which
// ended, and returns its watches as the setWatches that re-sets them on
// the next connection from relativeZxid: one-shot data, exist and child
// watches, persistent and recursive ones, as a ZooKeeper client re-sets
// its own after a reconnect.
func (sw *sharedWatches) takeClient(c *client, relativeZxid int64) *jute.SetWatches2 {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	req := &jute.SetWatches2{RelativeZxid: relativeZxid}
	persistent := map[string]bool{}
	for k := range c.subs {
		e := sw.keys[k]
		if e == nil {
			continue
		}
		s := e.subs[c]
		delete(e.subs, c)
		if s == nil {
			continue
		}
		switch {
		case k.mode == wire.WatchRecursive:
			if s.has&wire.WatchRecursive != 0 {
				req.PersistentRecursiveWatches = append(req.PersistentRecursiveWatches, k.path)
			}
		case k.table == wire.WatchTableData:
			if s.has&wire.WatchStandard != 0 {
				if s.exist {
					req.ExistWatches = append(req.ExistWatches, k.path)
				} else {
					req.DataWatches = append(req.DataWatches, k.path)
				}
			}
			if s.has&wire.WatchPersistent != 0 {
				persistent[k.path] = true
			}
		default:
			if s.has&wire.WatchStandard != 0 {
				req.ChildWatches = append(req.ChildWatches, k.path)
			}
			if s.has&wire.WatchPersistent != 0 {
				persistent[k.path] = true
			}
		}
	}
	for p := range persistent {
		req.PersistentWatches = append(req.PersistentWatches, p)
	}
	// In a fixed order: the member's events for them come in it.
	slices.Sort(req.DataWatches)
	slices.Sort(req.ExistWatches)
	slices.Sort(req.ChildWatches)
	slices.Sort(req.PersistentWatches)
	slices.Sort(req.PersistentRecursiveWatches)
	c.subs = nil
	return req
}
