package server

import (
	"strings"

	"github.com/zkraft/zkraft/auth"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/znode"
)

// authenticate handles an auth packet (the Java client sends xid -4; the
// reply echoes whatever xid came): it returns the connection's
// new ids, the reply, and whether to close the connection afterwards (on
// AUTHFAILED, as ZooKeeper does). A digest matching superDigest also makes
// the connection the super user.
func authenticate(xid int32, ids []jute.ID, body []byte, superDigest string) ([]jute.ID, []byte, bool) {
	pkt := new(jute.AuthPacket)
	if jute.Unmarshal(body, pkt) != nil {
		return ids, nil, true // ZooKeeper drops the connection without a reply
	}
	var add []jute.ID
	switch pkt.Scheme {
	case "digest":
		add = auth.Digest(string(pkt.Auth), superDigest)
	case "ip":
		// IPAuthenticationProvider adds the connection's own address,
		// which every connection already carries.
	default:
		return ids, replyFrame(xid, 0, jute.ErrAuthFailed, nil), true
	}
	return auth.Merge(ids, add), replyFrame(xid, 0, jute.ErrOK, nil), false
}

// readOp builds the execution of a read request from the op table. A body
// that does not decode is answered with MARSHALLINGERROR, as ZooKeeper
// does; an op ZooKeeper knows and zkraft does not take from a client is
// answered with UNIMPLEMENTED (zxid -1), and so is an op code ZooKeeper does
// not know, after which the connection is closed.
//
// watching says the read may set watches: its connection's notifications
// are held while it runs, and its watches registered as of the state it
// read once its reply is queued (registry.finishRead).
func (c *conn) readOp(hdr *jute.RequestHeader, body []byte) (exec func() (*result, error), closeAfter, watching bool) {
	e, known := opTable[hdr.Type]
	if e.kind != opRead {
		return func() (*result, error) {
			return &result{zxid: -1, err: jute.ErrUnimplemented}, nil
		}, !known, false
	}
	req, _ := jute.NewRequest(hdr.Type)
	if jute.Unmarshal(body, req) != nil {
		return func() (*result, error) {
			return &result{zxid: c.cell.zxid.Load(), err: jute.ErrMarshallingError}, nil
		}, false, false
	}
	q := &readReq{
		op:   hdr.Type,
		auth: c.authIDs(),
		// A standalone member reads locally once caught up: that is
		// linearizable there (cell.localReads) and saves a round through
		// the Raft step worker, which may be waiting on an fsync.
		lin: c.srv.cfg.ReadMode == ReadLinearizable && !c.cell.localReads.Load(),
	}
	p := e.read.plan(c, q, req)
	return p.exec, false, p.watching
}

// readReq is what a read handler is given besides its request: the
// connection's state as the request was read.
type readReq struct {
	op   jute.OpCode
	auth []jute.ID // the connection's ids
	lin  bool      // ask for a ReadIndex first (Config.ReadMode)
}

// readPlan is a read ready to run in order on the connection's processor.
type readPlan struct {
	exec func() (*result, error)
	// watching: the read may set watches (readOp).
	watching bool
}

// snapshotRead runs fn on a consistent snapshot of the state, linearizable
// (after a ReadIndex) when lin is set. It stamps the result with the zxid
// the snapshot saw: the reply's zxid, and the state its watches are set
// on (result.at).
func (c *conn) snapshotRead(q *readReq, lin bool, fn func(v raftsm.View, r znode.Reader) *result) func() (*result, error) {
	// A linearizable read asks for its ReadIndex as it arrives, so that
	// the reads queued on a connection share Dragonboat's batched rounds
	// instead of taking one round trip each; it is still run in order,
	// after the connection's earlier requests.
	var ticket readTicket
	if lin {
		ticket = c.cell.rep.startRead()
	}
	return func() (*result, error) {
		return readValue(c.cell.rep, ticket, readQuery{linearizable: lin}, func(v raftsm.View) (*result, error) {
			if h := c.srv.readHook.Load(); h != nil {
				(*h)(q.op)
			}
			res := fn(v, znode.Reader{KV: v.Tree(), Auth: q.auth})
			res.zxid, res.at = v.Zxid(), v.Zxid()
			return res, nil
		})
	}
}

// failed is the result of a read that failed with err.
func failed(err error) *result { return &result{err: jute.CodeOf(err)} }

// memberRead answers from the member's own state (its watch registry, its
// connection), with no snapshot: the reply carries the last zxid applied.
func (c *conn) memberRead(fn func(res *result)) func() (*result, error) {
	return func() (*result, error) {
		res := &result{zxid: c.cell.zxid.Load()}
		fn(res)
		return res, nil
	}
}

func (c *conn) existsOp(q *readReq, req *jute.ExistsRequest) readPlan {
	return readPlan{watching: req.Watch, exec: c.snapshotRead(q, q.lin, func(v raftsm.View, r znode.Reader) *result {
		n, err := r.Exists(req.Path)
		res := &result{}
		if err != nil {
			res = failed(err)
		} else {
			res.resp = &jute.ExistsResponse{Stat: n.Stat()}
		}
		if req.Watch && (err == nil || jute.CodeOf(err) == jute.ErrNoNode) {
			// exists leaves a watch even on a missing node.
			res.watch(tableData, req.Path, modeStandard)
		}
		return res
	})}
}

func (c *conn) getDataOp(q *readReq, req *jute.GetDataRequest) readPlan {
	return readPlan{watching: req.Watch, exec: c.snapshotRead(q, q.lin, func(v raftsm.View, r znode.Reader) *result {
		n, err := r.GetData(req.Path)
		if err != nil {
			return failed(err)
		}
		res := &result{resp: &jute.GetDataResponse{Data: n.Data, Stat: n.Stat()}}
		if req.Watch {
			res.watch(tableData, req.Path, modeStandard)
		}
		return res
	})}
}

func (c *conn) getChildrenOp(q *readReq, req *jute.GetChildrenRequest) readPlan {
	return c.children(q, req.Path, req.Watch, false)
}

func (c *conn) getChildren2Op(q *readReq, req *jute.GetChildren2Request) readPlan {
	return c.children(q, req.Path, req.Watch, true)
}

// children answers getChildren, and getChildren2 (withStat) which adds
// the parent's Stat.
func (c *conn) children(q *readReq, path string, watch, withStat bool) readPlan {
	return readPlan{watching: watch, exec: c.snapshotRead(q, q.lin, func(v raftsm.View, r znode.Reader) *result {
		n, names, err := r.GetChildren(path)
		if err != nil {
			return failed(err)
		}
		res := &result{resp: &jute.GetChildrenResponse{Children: names}}
		if withStat {
			res.resp = &jute.GetChildren2Response{Children: names, Stat: n.Stat()}
		}
		if watch {
			res.watch(tableChild, path, modeStandard)
		}
		return res
	})}
}

func (c *conn) getACLOp(q *readReq, req *jute.GetACLRequest) readPlan {
	return readPlan{exec: c.snapshotRead(q, q.lin, func(v raftsm.View, r znode.Reader) *result {
		n, acl, err := r.GetACL(req.Path)
		if err != nil {
			return failed(err)
		}
		return &result{resp: &jute.GetACLResponse{ACL: acl, Stat: n.Stat()}}
	})}
}

// syncOp always catches this member up with the leader, whatever the read
// mode.
func (c *conn) syncOp(q *readReq, req *jute.SyncRequest) readPlan {
	return readPlan{exec: c.snapshotRead(q, true, func(v raftsm.View, r znode.Reader) *result {
		return &result{resp: &jute.SyncResponse{Path: req.Path}}
	})}
}

func (c *conn) getAllChildrenNumberOp(q *readReq, req *jute.GetAllChildrenNumberRequest) readPlan {
	return readPlan{exec: c.snapshotRead(q, q.lin, func(v raftsm.View, r znode.Reader) *result {
		n, err := r.CountDescendants(req.Path)
		if err != nil {
			return failed(err)
		}
		return &result{resp: &jute.GetAllChildrenNumberResponse{TotalNumber: n}}
	})}
}

// getEphemeralsOp lists the session's ephemerals under a prefix of their
// paths (not only of whole names, as ZooKeeper).
func (c *conn) getEphemeralsOp(q *readReq, req *jute.GetEphemeralsRequest) readPlan {
	id := c.sessionID
	return readPlan{exec: c.snapshotRead(q, q.lin, func(v raftsm.View, r znode.Reader) *result {
		paths, err := v.Tree().Ephemerals(id)
		if err != nil {
			return failed(err)
		}
		out := []string{}
		for _, p := range paths {
			if req.PrefixPath == "" || req.PrefixPath == "/" || strings.HasPrefix(p, req.PrefixPath) {
				out = append(out, p)
			}
		}
		return &result{resp: &jute.GetEphemeralsResponse{Ephemerals: out}}
	})}
}

// whoAmIOp lists the connection's ids, a digest user without its
// password hash.
func (c *conn) whoAmIOp(q *readReq, _ *jute.Empty) readPlan {
	return readPlan{exec: c.memberRead(func(res *result) {
		infos := make([]jute.ClientInfo, 0, len(q.auth))
		for _, id := range q.auth {
			user := id.ID
			if id.Scheme == "digest" {
				user, _, _ = strings.Cut(user, ":")
			}
			infos = append(infos, jute.ClientInfo{AuthScheme: id.Scheme, User: user})
		}
		res.resp = &jute.WhoAmIResponse{ClientInfo: infos}
	})}
}

// multiReadOp answers getData and getChildren ops from one snapshot, one
// result each.
func (c *conn) multiReadOp(q *readReq, req *jute.MultiRequest) readPlan {
	for _, op := range req.Ops {
		if op.Type != jute.OpGetData && op.Type != jute.OpGetChildren {
			// ZooKeeper answers MARSHALLINGERROR with an empty
			// MultiResponse body, consuming no zxid.
			return readPlan{exec: c.memberRead(func(res *result) {
				res.err, res.errBody = jute.ErrMarshallingError, &jute.MultiResponse{}
			})}
		}
	}
	return readPlan{exec: c.snapshotRead(q, q.lin, func(v raftsm.View, r znode.Reader) *result {
		resp := &jute.MultiResponse{Results: make([]jute.MultiResult, 0, len(req.Ops))}
		for _, op := range req.Ops {
			var res jute.MultiResult
			switch sub := op.Req.(type) {
			case *jute.GetDataRequest:
				if n, err := r.GetData(sub.Path); err != nil {
					res = jute.MultiResult{Type: jute.OpError, Err: jute.CodeOf(err)}
				} else {
					res = jute.MultiResult{Type: jute.OpGetData, Resp: &jute.GetDataResponse{Data: n.Data, Stat: n.Stat()}}
				}
			case *jute.GetChildrenRequest:
				if _, names, err := r.GetChildren(sub.Path); err != nil {
					res = jute.MultiResult{Type: jute.OpError, Err: jute.CodeOf(err)}
				} else {
					res = jute.MultiResult{Type: jute.OpGetChildren, Resp: &jute.GetChildrenResponse{Children: names}}
				}
			}
			resp.Results = append(resp.Results, res)
		}
		return &result{resp: resp}
	})}
}

// setWatchesOp is setWatches2 without persistent watches (ZooKeeper 3.5's
// record).
func (c *conn) setWatchesOp(q *readReq, req *jute.SetWatches) readPlan {
	return c.setWatches2Op(q, &jute.SetWatches2{RelativeZxid: req.RelativeZxid, DataWatches: req.DataWatches,
		ExistWatches: req.ExistWatches, ChildWatches: req.ChildWatches})
}

// setWatches2Op re-registers a reconnecting client's watches (setWatches);
// the reply carries zxid -1, as ZooKeeper's.
func (c *conn) setWatches2Op(q *readReq, req *jute.SetWatches2) readPlan {
	exec := c.snapshotRead(q, q.lin, func(v raftsm.View, r znode.Reader) *result {
		return setWatches(req, v.Tree())
	})
	return readPlan{watching: true, exec: func() (*result, error) {
		res, err := exec()
		if err != nil {
			return nil, err
		}
		res.zxid = -1
		return res, nil
	}}
}

func (c *conn) addWatchOp(q *readReq, req *jute.AddWatchRequest) readPlan {
	return readPlan{watching: true, exec: c.snapshotRead(q, q.lin, func(v raftsm.View, r znode.Reader) *result {
		// addWatch answers with a 4-byte ErrorResponse body.
		res := &result{resp: &jute.ErrorResponse{Err: jute.ErrOK}}
		switch req.Mode {
		case jute.AddWatchModePersistent:
			res.watch(tableData, req.Path, modePersistent)
			res.watch(tableChild, req.Path, modePersistent)
		case jute.AddWatchModePersistentRecursive:
			res.watch(tableData, req.Path, modeRecursive)
		default:
			return &result{err: jute.ErrMarshallingError}
		}
		return res
	})}
}

func (c *conn) checkWatchesOp(q *readReq, req *jute.CheckWatchesRequest) readPlan {
	return c.watcherOp(req.Path, req.Type, false)
}

func (c *conn) removeWatchesOp(q *readReq, req *jute.RemoveWatchesRequest) readPlan {
	return c.watcherOp(req.Path, req.Type, true)
}

// watcherOp answers checkWatches, or removeWatches (remove), from the
// member's watch registry: NOWATCHER when the connection has no such watch.
func (c *conn) watcherOp(path string, typ int32, remove bool) readPlan {
	return readPlan{exec: c.memberRead(func(res *result) {
		if typ < jute.WatcherTypeChildren || typ > watcherTypePersistentRecursive {
			res.err = jute.ErrMarshallingError
			return
		}
		var ok bool
		if remove {
			ok = c.cell.watches.remove(path, typ, c)
		} else {
			ok = c.cell.watches.contains(path, typ, c)
		}
		if !ok {
			res.err = jute.ErrNoWatcher
		}
	})}
}

// setWatches re-registers a reconnecting client's watches with ZooKeeper's
// catch-up rules (DataTree.setWatches): the events for changes the client
// missed, as of the view read, go before the reply; the other watches are
// registered as of the view (registry.finishRead).
func setWatches(sw *jute.SetWatches2, kv znode.ReadKV) *result {
	res := &result{}
	rel := sw.RelativeZxid
	get := func(p string) *znode.Node {
		n, err := kv.Get(p)
		if err != nil {
			return nil
		}
		return n
	}
	missed := func(typ jute.EventType, p string) { res.before = append(res.before, note{-1, typ, p}) }
	// A data or child watch fires NodeDeleted for a node that is gone, its
	// change event for a node changed after rel, or is registered.
	catchUp := func(paths []string, t watchTable, changed func(*znode.Node) bool, ev jute.EventType) {
		for _, p := range paths {
			switch n := get(p); {
			case n == nil:
				missed(jute.EventNodeDeleted, p)
			case changed(n):
				missed(ev, p)
			default:
				res.watch(t, p, modeStandard)
			}
		}
	}
	catchUp(sw.DataWatches, tableData, func(n *znode.Node) bool { return n.Mzxid > rel }, jute.EventNodeDataChanged)
	for _, p := range sw.ExistWatches {
		if get(p) != nil {
			missed(jute.EventNodeCreated, p)
		} else {
			res.watch(tableData, p, modeStandard)
		}
	}
	for _, p := range sw.PersistentWatches {
		res.watch(tableChild, p, modePersistent)
		res.watch(tableData, p, modePersistent)
	}
	for _, p := range sw.PersistentRecursiveWatches {
		res.watch(tableData, p, modeRecursive)
	}
	catchUp(sw.ChildWatches, tableChild, func(n *znode.Node) bool { return n.Pzxid > rel }, jute.EventNodeChildrenChanged)
	return res
}
