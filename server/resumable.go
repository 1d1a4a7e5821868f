package server

import (
	"strings"
	"sync"
	"time"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/znode"
)

// Resumable watches (zkraft's watchFrom extension): a client asks for every
// change under a path after zxid Z. The server registers a live watcher and
// opens the retained history at the same point under the state machine's
// read lock, so that the replay (zxid <= the registration point) and the
// live events (zxid above it) neither overlap nor leave a gap. Live events
// that arrive during the replay are held back and sent after it.
//
// INVARIANT: on one watch, event frames go out in strictly increasing zxid
// order, each transaction's events in one frame.

const (
	// maxResumablePerConn bounds the resumable watches of one connection.
	maxResumablePerConn = 64
	// maxHeldBack bounds live events buffered during a replay; a watcher
	// that falls that far behind is closed (its client resumes).
	maxHeldBack = 16 << 20
	// replayOutbox is the outbox size above which a replay waits.
	replayOutbox = 4 << 20
)

type resumable struct {
	c       *conn
	id      int64
	path    string
	subtree bool
	auth    []jute.ID

	mu struct {
		sync.Mutex
		replaying bool
		held      [][]byte
		heldBytes int
	}
}

func (r *resumable) matches(typ jute.EventType, path string) bool {
	if !r.subtree {
		return path == r.path
	}
	if typ == jute.EventNodeChildrenChanged {
		return false
	}
	return path == r.path || r.path == "/" || strings.HasPrefix(path, r.path+"/")
}

func (r *resumable) readable(acl []jute.ACL) bool {
	return acl == nil || znode.CheckACL(acl, jute.PermRead, r.auth) == nil
}

func (r *resumable) frame(zxid int64, evs []jute.ResumableEvent) []byte {
	return jute.AppendFrame(nil,
		&jute.ReplyHeader{Xid: jute.XidResumableEvents, Zxid: zxid},
		&jute.ResumableEvents{WatchID: r.id, Zxid: zxid, Events: evs})
}

// deliver sends a live frame, or holds it back during the replay.
func (r *resumable) deliver(frame []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.replaying {
		r.mu.held = append(r.mu.held, frame)
		r.mu.heldBytes += len(frame)
		if r.mu.heldBytes > maxHeldBack {
			r.c.log().Warn("resumable watch fell behind during replay: closing", "watch", r.id)
			r.mu.held = nil
			r.c.srv.routines.start(r.c.close)
		}
		return
	}
	r.c.enqueue(frame)
}

// resumables is a cell's table of resumable watches.
type resumables struct {
	mu struct {
		sync.Mutex
		byConn map[*conn]map[int64]*resumable
		nextID int64
	}
}

func newResumables() *resumables {
	r := &resumables{}
	r.mu.byConn = map[*conn]map[int64]*resumable{}
	return r
}

func (t *resumables) add(r *resumable) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.mu.byConn[r.c]
	if len(m) >= maxResumablePerConn {
		return false
	}
	if m == nil {
		m = map[int64]*resumable{}
		t.mu.byConn[r.c] = m
	}
	t.mu.nextID++
	r.id = t.mu.nextID
	m[r.id] = r
	return true
}

func (t *resumables) remove(c *conn, id int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.mu.byConn[c]
	if _, ok := m[id]; !ok {
		return false
	}
	delete(m, id)
	if len(m) == 0 {
		delete(t.mu.byConn, c)
	}
	return true
}

func (t *resumables) removeConn(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.mu.byConn, c)
}

// applied delivers the live events of one Update: one frame per watch and
// transaction. It runs under the state machine's write lock.
func (t *resumables) applied(events []raftsm.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.mu.byConn) == 0 {
		return
	}
	for start := 0; start < len(events); {
		if events[start].Kind != raftsm.EventWatch {
			start++
			continue
		}
		end := start
		for end < len(events) && events[end].Kind == raftsm.EventWatch && events[end].Zxid == events[start].Zxid {
			end++
		}
		group := events[start:end]
		for _, m := range t.mu.byConn {
			for _, r := range m {
				var evs []jute.ResumableEvent
				for i := range group {
					ev := &group[i]
					if r.matches(ev.Type, ev.Path) && r.readable(ev.ACL) {
						evs = append(evs, jute.ResumableEvent{Type: ev.Type, Path: ev.Path})
					}
				}
				if len(evs) > 0 {
					r.deliver(r.frame(group[0].Zxid, evs))
				}
			}
		}
		start = end
	}
}

// watchFromOp answers watchFrom (op 1000).
func (c *conn) watchFromOp(q *readReq, req *jute.WatchFromRequest) readPlan {
	auth := q.auth
	return readPlan{exec: func() (*result, error) {
		if (req.Mode != jute.WatchModeNode && req.Mode != jute.WatchModeSubtree) || znode.ValidatePath(req.Path) != nil {
			return &result{zxid: c.cell.zxid.Load(), err: jute.ErrBadArguments}, nil
		}
		r := &resumable{c: c, path: req.Path, subtree: req.Mode == jute.WatchModeSubtree, auth: auth}
		r.mu.replaying = true
		type opened struct {
			res  *result
			hist *raftsm.History
		}
		// Under the state machine's lock: the live watcher and the history
		// iterator must start at the same zxid.
		o, err := readValue(c.cell.rep, nil, readQuery{linearizable: c.srv.cfg.ReadMode == ReadLinearizable, locked: true}, func(v raftsm.View) (opened, error) {
			floor, err := v.HistoryFloor()
			if err != nil {
				return opened{}, err
			}
			switch {
			case req.FromZxid > v.Zxid():
				return opened{res: &result{zxid: v.Zxid(), err: jute.ErrBadArguments}}, nil
			case req.FromZxid < floor:
				return opened{res: &result{zxid: v.Zxid(), err: jute.ErrHistoryCompacted,
					errBody: &jute.CompactedResponse{OldestZxid: floor}}}, nil
			}
			if !c.cell.resumables.add(r) {
				return opened{res: &result{zxid: v.Zxid(), err: jute.ErrThrottledOp}}, nil
			}
			hist, err := v.HistoryAfter(req.FromZxid)
			if err != nil {
				c.cell.resumables.remove(c, r.id)
				return opened{}, err
			}
			return opened{
				res:  &result{zxid: v.Zxid(), resp: &jute.WatchFromResponse{WatchID: r.id, Zxid: v.Zxid()}},
				hist: hist,
			}, nil
		})
		if err != nil {
			return nil, err
		}
		if o.hist != nil {
			c.bg.Add(1)
			o.res.after = func() {
				if !c.srv.routines.start(func() {
					defer c.bg.Done()
					c.replay(r, o.hist)
				}) {
					o.hist.Close() // the server is stopping
					c.bg.Done()
				}
			}
		}
		return o.res, nil
	}}
}

// replay sends the retained changes, then whatever arrived meanwhile, and
// switches the watch to live delivery.
func (c *conn) replay(r *resumable, hist *raftsm.History) {
	defer hist.Close()
	var evs []jute.ResumableEvent
	var zxid int64 = -1
	flush := func() bool {
		if len(evs) == 0 {
			return true
		}
		ok := c.enqueueWait(r.frame(zxid, evs))
		evs = nil
		return ok
	}
	for {
		e, ok := hist.Next()
		if !ok {
			break
		}
		if e.Zxid != zxid {
			if !flush() {
				return
			}
			zxid = e.Zxid
		}
		if r.matches(e.Type, e.Path) && r.readable(e.ACL) {
			evs = append(evs, jute.ResumableEvent{Type: e.Type, Path: e.Path})
		}
	}
	if err := hist.Err(); err != nil {
		c.log().Warn("resumable replay", "watch", r.id, "err", err)
		c.close()
		return
	}
	if !flush() {
		return
	}
	r.mu.Lock()
	for _, f := range r.mu.held {
		c.enqueue(f)
	}
	r.mu.held, r.mu.heldBytes, r.mu.replaying = nil, 0, false
	r.mu.Unlock()
}

// enqueueWait queues a frame once the outbox has room; false if the
// connection closed.
func (c *conn) enqueueWait(frame []byte) bool {
	for {
		c.out.Lock()
		closed, size := c.out.closed, c.out.bytes
		c.out.Unlock()
		if closed {
			return false
		}
		if size < replayOutbox {
			c.enqueue(frame)
			return true
		}
		select {
		case <-c.done:
			return false
		case <-time.After(time.Millisecond):
		}
	}
}

// unwatchFromOp answers unwatchFrom (op 1001).
func (c *conn) unwatchFromOp(q *readReq, req *jute.UnwatchFromRequest) readPlan {
	return readPlan{exec: c.memberRead(func(res *result) {
		if !c.cell.resumables.remove(c, req.WatchID) {
			res.err = jute.ErrNoWatcher
		}
	})}
}
