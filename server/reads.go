package server

import (
	"slices"
	"strings"

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
		// DigestAuthenticationProvider: the user is everything before the
		// first ':' (all of it when there is none).
		digest := znode.DigestID(string(pkt.Auth))
		add = []jute.ID{{Scheme: "digest", ID: digest}}
		if superDigest != "" && digest == superDigest {
			add = append(add, jute.ID{Scheme: "super", ID: ""})
		}
	case "ip":
		// IPAuthenticationProvider adds the connection's own address,
		// which every connection already carries.
	default:
		return ids, replyFrame(xid, 0, jute.ErrAuthFailed, nil), true
	}
	out := append([]jute.ID(nil), ids...)
	for _, id := range add {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, replyFrame(xid, 0, jute.ErrOK, nil), false
}

// readOp builds the execution of a read request. A body that does not
// decode is answered with MARSHALLINGERROR, as ZooKeeper does; an op code
// ZooKeeper does not know is answered with UNIMPLEMENTED (zxid -1) and the
// connection is closed.
//
// watching says the read may set watches: its connection's notifications
// are held while it runs, and its watches registered as of the state it
// read once its reply is queued (registry.finishRead).
func (c *conn) readOp(hdr *jute.RequestHeader, body []byte) (exec func() (*result, error), closeAfter, watching bool) {
	exec, known := c.readOpExec(hdr, body)
	if exec == nil {
		return func() (*result, error) {
			return &result{zxid: c.srv.lastZxid(), err: jute.ErrMarshallingError}, nil
		}, false, false
	}
	return exec, !known, setsWatches(hdr.Type, body)
}

// setsWatches reports whether a read op with this body asks for watches.
func setsWatches(op jute.OpCode, body []byte) bool {
	switch op {
	case jute.OpSetWatches, jute.OpSetWatches2, jute.OpAddWatch:
		return true
	case jute.OpExists, jute.OpGetData, jute.OpGetChildren, jute.OpGetChildren2:
		// Each of their requests is a path, then the watch flag.
		r := jute.NewReader(body)
		_ = r.String()
		return r.Bool() && r.Err() == nil
	}
	return false
}

func (c *conn) readOpExec(hdr *jute.RequestHeader, body []byte) (func() (*result, error), bool) {
	auth := c.authIDs()
	// A standalone member reads locally once caught up: that is
	// linearizable there (cell.localReads) and saves a round through the
	// Raft step worker, which may be waiting on an fsync.
	linearizable := c.srv.cfg.ReadMode == ReadLinearizable && !c.cell.localReads.Load()
	decode := func(rec jute.Record) error { return jute.Unmarshal(body, rec) }
	run := func(lin bool, fn func(v raftsm.View, r znode.Reader) *result) func() (*result, error) {
		// A linearizable read asks for its ReadIndex as it arrives, so that
		// the reads queued on a connection share Dragonboat's batched
		// rounds instead of taking one round trip each; it is still run in
		// order, after the connection's earlier requests.
		var ticket *readTicket
		if lin {
			ticket = c.cell.startRead()
		}
		return func() (*result, error) {
			out, err := c.cell.readWith(ticket, raftsm.ReadFunc(func(v raftsm.View) (any, error) {
				if h := c.srv.readHook.Load(); h != nil {
					(*h)(hdr.Type)
				}
				res := fn(v, znode.Reader{KV: v.Tree(), Auth: auth})
				res.zxid, res.at = v.Zxid(), v.Zxid()
				return res, nil
			}), lin)
			if err != nil {
				return nil, err
			}
			return out.(*result), nil
		}
	}
	fail := func(err error) *result { return &result{err: jute.CodeOf(err)} }

	switch hdr.Type {
	case jute.OpExists:
		req := new(jute.ExistsRequest)
		if err := decode(req); err != nil {
			return nil, true
		}
		return run(linearizable, func(v raftsm.View, r znode.Reader) *result {
			n, err := r.Exists(req.Path)
			res := &result{}
			if err != nil {
				res = fail(err)
			} else {
				res.resp = &jute.ExistsResponse{Stat: n.Stat()}
			}
			if req.Watch && (err == nil || jute.CodeOf(err) == jute.ErrNoNode) {
				// exists leaves a watch even on a missing node.
				res.watch(tableData, req.Path, modeStandard)
			}
			return res
		}), true
	case jute.OpGetData:
		req := new(jute.GetDataRequest)
		if err := decode(req); err != nil {
			return nil, true
		}
		return run(linearizable, func(v raftsm.View, r znode.Reader) *result {
			n, err := r.GetData(req.Path)
			if err != nil {
				return fail(err)
			}
			res := &result{resp: &jute.GetDataResponse{Data: n.Data, Stat: n.Stat()}}
			if req.Watch {
				res.watch(tableData, req.Path, modeStandard)
			}
			return res
		}), true
	case jute.OpGetChildren, jute.OpGetChildren2:
		req := new(jute.GetChildrenRequest)
		if err := decode(req); err != nil {
			return nil, true
		}
		two := hdr.Type == jute.OpGetChildren2
		return run(linearizable, func(v raftsm.View, r znode.Reader) *result {
			n, names, err := r.GetChildren(req.Path)
			if err != nil {
				return fail(err)
			}
			res := &result{resp: &jute.GetChildrenResponse{Children: names}}
			if two {
				res.resp = &jute.GetChildren2Response{Children: names, Stat: n.Stat()}
			}
			if req.Watch {
				res.watch(tableChild, req.Path, modeStandard)
			}
			return res
		}), true
	case jute.OpGetACL:
		req := new(jute.GetACLRequest)
		if err := decode(req); err != nil {
			return nil, true
		}
		return run(linearizable, func(v raftsm.View, r znode.Reader) *result {
			n, acl, err := r.GetACL(req.Path)
			if err != nil {
				return fail(err)
			}
			return &result{resp: &jute.GetACLResponse{ACL: acl, Stat: n.Stat()}}
		}), true
	case jute.OpSync:
		req := new(jute.SyncRequest)
		if err := decode(req); err != nil {
			return nil, true
		}
		// sync always catches this member up with the leader.
		return run(true, func(v raftsm.View, r znode.Reader) *result {
			return &result{resp: &jute.SyncResponse{Path: req.Path}}
		}), true
	case jute.OpGetAllChildrenNumber:
		req := new(jute.GetAllChildrenNumberRequest)
		if err := decode(req); err != nil {
			return nil, true
		}
		return run(linearizable, func(v raftsm.View, r znode.Reader) *result {
			n, err := r.CountDescendants(req.Path)
			if err != nil {
				return fail(err)
			}
			return &result{resp: &jute.GetAllChildrenNumberResponse{TotalNumber: n}}
		}), true
	case jute.OpGetEphemerals:
		req := new(jute.GetEphemeralsRequest)
		if err := decode(req); err != nil {
			return nil, true
		}
		id := c.sessionID
		return run(linearizable, func(v raftsm.View, r znode.Reader) *result {
			paths, err := v.Tree().Ephemerals(id)
			if err != nil {
				return fail(err)
			}
			out := []string{}
			for _, p := range paths {
				if req.PrefixPath == "" || req.PrefixPath == "/" || strings.HasPrefix(p, req.PrefixPath) {
					out = append(out, p)
				}
			}
			return &result{resp: &jute.GetEphemeralsResponse{Ephemerals: out}}
		}), true
	case jute.OpWhoAmI:
		return func() (*result, error) {
			infos := make([]jute.ClientInfo, 0, len(auth))
			for _, id := range auth {
				user := id.ID
				if id.Scheme == "digest" {
					user, _, _ = strings.Cut(user, ":")
				}
				infos = append(infos, jute.ClientInfo{AuthScheme: id.Scheme, User: user})
			}
			return &result{zxid: c.srv.lastZxid(), resp: &jute.WhoAmIResponse{ClientInfo: infos}}, nil
		}, true
	case jute.OpSetWatches, jute.OpSetWatches2:
		var sw jute.SetWatches2
		if hdr.Type == jute.OpSetWatches {
			req := new(jute.SetWatches)
			if err := decode(req); err != nil {
				return nil, true
			}
			sw = jute.SetWatches2{RelativeZxid: req.RelativeZxid, DataWatches: req.DataWatches,
				ExistWatches: req.ExistWatches, ChildWatches: req.ChildWatches}
		} else if err := decode(&sw); err != nil {
			return nil, true
		}
		exec := run(linearizable, func(v raftsm.View, r znode.Reader) *result {
			return setWatches(&sw, v.Tree())
		})
		return func() (*result, error) {
			res, err := exec()
			if err != nil {
				return nil, err
			}
			res.zxid = -1
			return res, nil
		}, true
	case jute.OpWatchFrom:
		return c.watchFromOp(body), true
	case jute.OpUnwatchFrom:
		return c.unwatchFromOp(body), true
	case jute.OpAddWatch:
		req := new(jute.AddWatchRequest)
		if err := decode(req); err != nil {
			return nil, true
		}
		return run(linearizable, func(v raftsm.View, r znode.Reader) *result {
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
		}), true
	case jute.OpCheckWatches, jute.OpRemoveWatches:
		// The two records are the same shape: path, watcher type.
		req := new(jute.CheckWatchesRequest)
		if err := decode(req); err != nil {
			return nil, true
		}
		remove := hdr.Type == jute.OpRemoveWatches
		return func() (*result, error) {
			res := &result{zxid: c.srv.lastZxid()}
			if req.Type < jute.WatcherTypeChildren || req.Type > watcherTypePersistentRecursive {
				res.err = jute.ErrMarshallingError
				return res, nil
			}
			var ok bool
			if remove {
				ok = c.cell.watches.remove(req.Path, req.Type, c)
			} else {
				ok = c.cell.watches.contains(req.Path, req.Type, c)
			}
			if !ok {
				res.err = jute.ErrNoWatcher
			}
			return res, nil
		}, true
	case jute.OpMultiRead:
		req := new(jute.MultiRequest)
		if err := decode(req); err != nil {
			return nil, true
		}
		for _, op := range req.Ops {
			if op.Type != jute.OpGetData && op.Type != jute.OpGetChildren {
				// ZooKeeper answers MARSHALLINGERROR with an empty
				// MultiResponse body, consuming no zxid.
				return func() (*result, error) {
					return &result{zxid: c.srv.lastZxid(), err: jute.ErrMarshallingError, errBody: &jute.MultiResponse{}}, nil
				}, true
			}
		}
		return run(linearizable, func(v raftsm.View, r znode.Reader) *result {
			resp := &jute.MultiResponse{Results: make([]jute.MultiResult, 0, len(req.Ops))}
			for _, op := range req.Ops {
				var res jute.MultiResult
				switch q := op.Req.(type) {
				case *jute.GetDataRequest:
					if n, err := r.GetData(q.Path); err != nil {
						res = jute.MultiResult{Type: jute.OpError, Err: jute.CodeOf(err)}
					} else {
						res = jute.MultiResult{Type: jute.OpGetData, Resp: &jute.GetDataResponse{Data: n.Data, Stat: n.Stat()}}
					}
				case *jute.GetChildrenRequest:
					if _, names, err := r.GetChildren(q.Path); err != nil {
						res = jute.MultiResult{Type: jute.OpError, Err: jute.CodeOf(err)}
					} else {
						res = jute.MultiResult{Type: jute.OpGetChildren, Resp: &jute.GetChildrenResponse{Children: names}}
					}
				}
				resp.Results = append(resp.Results, res)
			}
			return &result{resp: resp}
		}), true
	}
	// A ZooKeeper op zkraft does not serve yet, or an unknown op code.
	_, known := jute.NewRequest(hdr.Type)
	return func() (*result, error) {
		return &result{zxid: -1, err: jute.ErrUnimplemented}, nil
	}, known
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
	for _, p := range sw.DataWatches {
		switch n := get(p); {
		case n == nil:
			missed(jute.EventNodeDeleted, p)
		case n.Mzxid > rel:
			missed(jute.EventNodeDataChanged, p)
		default:
			res.watch(tableData, p, modeStandard)
		}
	}
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
	for _, p := range sw.ChildWatches {
		switch n := get(p); {
		case n == nil:
			missed(jute.EventNodeDeleted, p)
		case n.Pzxid > rel:
			missed(jute.EventNodeChildrenChanged, p)
		default:
			res.watch(tableChild, p, modeStandard)
		}
	}
	return res
}
