package raftsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// applier applies the commands of one Update over its batch.
type applier struct {
	index  uint64                   // Raft index of the entry being applied
	sess   map[int64]*cachedSession // the state machine's session cache
	kv     storeKV
	opts   znode.Options
	zxid   int64
	digest uint64    // the store's digest (digest.go), kept by kv
	stats  TreeStats // the tree's figures (stats.go), kept by kv
	// digests are the digests after each entry of this Update, recent
	// those of earlier Updates (for KindCheckDigest).
	digests []indexDigest
	recent  *recentDigests
	events  []Event
	// sealed: the namespace is sealed (KindSeal): writes and new
	// sessions are refused.
	sealed bool
	// ov and trig are reused by every request of the Update: the
	// overlay's maps (emptied by Reset) and the triggers' slice, which
	// were made again for each write.
	ov   *znode.Overlay
	trig []znode.Trigger
}

// apply applies one command. A ZooKeeper failure is a Reply with an error
// code; an error return means the store failed or the command is corrupt,
// and stops the replica.
func (a *applier) apply(c *Command) (*Reply, error) {
	switch c.Kind {
	case KindRequest:
		return a.request(c)
	case KindCreateSession:
		return a.createSession(c)
	case KindCloseSession:
		if owner, err := a.owner(c.Session); err != nil {
			return nil, err
		} else if owner != 0 && c.Owner != 0 && owner != c.Owner {
			return &Reply{Err: jute.ErrSessionMoved, Zxid: a.zxid}, nil
		}
		return a.closeSession(c.Session, c.Time)
	case KindExpireSessions:
		last := &Reply{Zxid: a.zxid}
		for i, id := range c.Sessions {
			if len(c.Seen) == len(c.Sessions) {
				touched, err := a.touched(id)
				if err != nil {
					return nil, err
				}
				if touched > uint64(c.Seen[i]) {
					// Kept alive after the leader looked (e.g. the leader
					// was paused while another took keep-alives): live.
					continue
				}
			}
			r, err := a.closeSession(id, c.Time)
			if err != nil {
				return nil, err
			}
			last = r
		}
		return last, nil
	case KindAttach:
		return a.attach(c)
	case KindSessions:
		return a.sessions(c)
	case KindSetConfig:
		return a.setConfig(c)
	case KindCheckDigest:
		return a.checkDigestCommand(c)
	case KindCheckImport:
		have, err := getValue(a.kv.r, keyImport)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(have, c.Body) {
			return nil, fmt.Errorf("%w: have %x, the ensemble's is %x", ErrImportMismatch, have, c.Body)
		}
		if err := a.kv.w.Set(keyImportChecked, []byte{1}, nil); err != nil {
			return nil, err
		}
		return &Reply{Zxid: a.zxid}, nil
	case KindSeal:
		if !a.sealed {
			if err := a.kv.w.Set(keySealed, []byte{1}, nil); err != nil {
				return nil, err
			}
			a.sealed = true
		}
		return &Reply{Zxid: a.zxid}, nil
	case KindUnseal:
		if a.sealed {
			if err := a.kv.w.Delete(keySealed, nil); err != nil {
				return nil, err
			}
			a.sealed = false
		}
		return &Reply{Zxid: a.zxid}, nil
	case KindKeepAlive:
		live := make([]int64, 0, len(c.Sessions))
		for _, id := range c.Sessions {
			ok, err := a.sessionExists(id)
			if err != nil {
				return nil, err
			}
			if ok {
				live = append(live, id)
				if err := a.touch(id); err != nil {
					return nil, err
				}
			}
		}
		if len(live) > 0 {
			a.events = append(a.events, Event{Kind: EventKeepAlive, Zxid: a.zxid, Sessions: live, Index: a.index})
		}
		return &Reply{Zxid: a.zxid}, nil
	}
	return nil, ErrBadCommand
}

func (a *applier) sessionExists(id int64) (bool, error) {
	_, ok := a.sess[id]
	return ok, nil
}

// next consumes a zxid.
func (a *applier) next() int64 {
	a.zxid++
	return a.zxid
}

func (a *applier) triggers(zxid int64, ts []znode.Trigger) {
	for _, t := range ts {
		a.events = append(a.events, Event{Kind: EventWatch, Zxid: zxid, Type: t.Type, Path: t.Path, ACL: t.ACL})
	}
}

func (a *applier) request(c *Command) (*Reply, error) {
	if a.sealed {
		// A sealed namespace takes no write (KindSeal): NOTREADONLY, as a
		// read-only ZooKeeper answers, with no txn and no zxid.
		return &Reply{Err: jute.ErrNotReadOnly, Zxid: a.zxid}, nil
	}
	zxid := a.next() // a failed write consumes a zxid too, as ZooKeeper's error txn does
	if c.Op == jute.OpError {
		// A request the member refused before the log (one it could not
		// decode, or a reconfig it cannot run): ZooKeeper logs an error
		// txn. The code travels as an ErrorResponse body; none means
		// MARSHALLINGERROR.
		code := jute.ErrMarshallingError
		var er jute.ErrorResponse
		if len(c.Body) > 0 && jute.Unmarshal(c.Body, &er) == nil && er.Err != jute.ErrOK {
			code = er.Err
		}
		return &Reply{Err: code, Zxid: zxid}, nil
	}
	if c.Session != 0 {
		ok, err := a.sessionExists(c.Session)
		if err != nil {
			return nil, err
		}
		if !ok {
			return &Reply{Err: jute.ErrSessionExpired, Zxid: zxid}, nil
		}
		owner, err := a.owner(c.Session)
		if err != nil {
			return nil, err
		}
		if owner != 0 && c.Owner != 0 && owner != c.Owner {
			// The session re-attached elsewhere since this was sent.
			return &Reply{Err: jute.ErrSessionMoved, Zxid: zxid}, nil
		}
	}
	// A single op's writes wait in an overlay, dropped if it fails after
	// its first write. A multi needs none of its own: Txn.Multi keeps its
	// ops' writes in an overlay it commits only when every op succeeded
	// (a second one under it only doubled each read's lookups and
	// copied the writes once more, in the same order).
	// &a.kv, not a.kv: a storeKV boxed in an interface was a heap copy
	// of it per request.
	// A multi gets the overlay to keep its ops' writes in instead.
	kv := znode.KV(&a.kv)
	if a.ov == nil {
		a.ov = znode.NewOverlay(kv)
	}
	var ov *znode.Overlay
	tx := &znode.Txn{Zxid: zxid, Time: c.Time, Session: c.Session, Auth: c.Auth, Options: a.opts, Triggers: a.trig[:0]}
	if c.Op == jute.OpMulti {
		tx.Overlay = a.ov
	} else {
		a.ov.Reset(kv)
		ov = a.ov
		kv = ov
	}
	tx.KV = kv
	var resp jute.Record
	var err error
	if c.Op == jute.OpMulti {
		req := new(jute.MultiRequest)
		if uerr := jute.UnmarshalShared(c.Body, req); uerr != nil {
			return nil, errors.Join(ErrBadCommand, uerr)
		}
		resp, err = tx.Multi(req.Ops)
	} else {
		req, ok := jute.NewRequest(c.Op)
		if !ok || !(znode.IsWrite(c.Op) || c.Op == jute.OpDeleteContainer && c.Session == 0) {
			return nil, ErrBadCommand
		}
		if uerr := jute.UnmarshalShared(c.Body, req); uerr != nil {
			return nil, errors.Join(ErrBadCommand, uerr)
		}
		resp, err = tx.Apply(c.Op, req)
	}
	if err != nil {
		var code jute.ErrCode
		if errors.As(err, &code) {
			return &Reply{Err: code, Zxid: zxid}, nil
		}
		return nil, err
	}
	if ov != nil {
		if err := ov.Commit(); err != nil {
			return nil, err
		}
	}
	a.triggers(zxid, tx.Triggers)
	a.trig = tx.Triggers[:0]
	return &Reply{Zxid: zxid, resp: resp}, nil
}

func (a *applier) createSession(c *Command) (*Reply, error) {
	ok, err := a.sessionExists(c.Session)
	if err != nil {
		return nil, err
	}
	if ok || c.Session == 0 {
		// The proposer picks another id and tries again.
		return &Reply{Err: jute.ErrNodeExists, Zxid: a.zxid}, nil
	}
	if a.sealed {
		return &Reply{Err: jute.ErrNotReadOnly, Zxid: a.zxid}, nil
	}
	zxid := a.next()
	if err := a.kv.set(sessionKey(c.Session), timeoutValue(c.Timeout), nil); err != nil {
		return nil, err
	}
	a.sess[c.Session] = &cachedSession{timeout: c.Timeout}
	if err := a.setOwner(c.Session, c.Owner); err != nil {
		return nil, err
	}
	if err := a.touch(c.Session); err != nil {
		return nil, err
	}
	a.events = append(a.events, Event{Kind: EventSessionCreated, Zxid: zxid, Session: c.Session, Timeout: c.Timeout, Index: a.index})
	return &Reply{Zxid: zxid}, nil
}

// closeSession deletes a session and its ephemerals in one transaction.
func (a *applier) closeSession(id int64, time int64) (*Reply, error) {
	ok, err := a.sessionExists(id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &Reply{Err: jute.ErrSessionExpired, Zxid: a.zxid}, nil
	}
	zxid := a.next()
	tx := &znode.Txn{KV: a.kv, Zxid: zxid, Time: time, Session: id, Options: a.opts}
	if err := tx.CloseSession(id); err != nil {
		return nil, err
	}
	cs := a.sess[id]
	if err := a.kv.del(sessionKey(id), timeoutValue(cs.timeout)); err != nil {
		return nil, err
	}
	if err := a.kv.del(ownerKey(id), ownerValue(cs.owner)); err != nil {
		return nil, err
	}
	if err := a.kv.del(touchKey(id), indexValue(cs.touch)); err != nil {
		return nil, err
	}
	delete(a.sess, id)
	a.triggers(zxid, tx.Triggers)
	a.events = append(a.events, Event{Kind: EventSessionClosed, Zxid: zxid, Session: id})
	return &Reply{Zxid: zxid}, nil
}

func (a *applier) owner(id int64) (uint64, error) {
	if cs := a.sess[id]; cs != nil {
		return cs.owner, nil
	}
	return 0, nil
}

func (a *applier) setOwner(id int64, owner uint64) error {
	var old uint64
	if cs := a.sess[id]; cs != nil {
		old, cs.owner = cs.owner, owner
	}
	if owner == 0 {
		return a.kv.del(ownerKey(id), ownerValue(old))
	}
	return a.kv.set(ownerKey(id), ownerValue(owner), ownerValue(old))
}

// The values of a session's keys, from its cachedSession: a zero owner or
// keep-alive index is no key at all (a stored owner or index is never 0).
func timeoutValue(t int32) []byte {
	var v [4]byte
	binary.BigEndian.PutUint32(v[:], uint32(t))
	return v[:]
}

func ownerValue(owner uint64) []byte {
	if owner == 0 {
		return nil
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], owner)
	return v[:]
}

func indexValue(i uint64) []byte { return ownerValue(i) }

// attach records the connection that now holds a session. It consumes no
// zxid: like a keep-alive it changes no part of the tree.
func (a *applier) attach(c *Command) (*Reply, error) {
	ok, err := a.sessionExists(c.Session)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &Reply{Err: jute.ErrSessionExpired, Zxid: a.zxid}, nil
	}
	if err := a.setOwner(c.Session, c.Owner); err != nil {
		return nil, err
	}
	if err := a.touch(c.Session); err != nil {
		return nil, err
	}
	a.events = append(a.events, Event{Kind: EventSessionAttached, Zxid: a.zxid, Session: c.Session, Owner: c.Owner, Index: a.index})
	return &Reply{Zxid: a.zxid}, nil
}

// setConfig writes the ensemble's configuration into /zookeeper/config as a
// transaction of its own, as ZooKeeper's reconfig does.
func (a *applier) setConfig(c *Command) (*Reply, error) {
	zxid := a.next()
	n, err := a.kv.Get(znode.ConfigPath)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, fmt.Errorf("raftsm: %s missing", znode.ConfigPath)
	}
	u := n.Clone()
	u.Data = append([]byte{}, c.Body...)
	u.Version++
	u.Mzxid = zxid
	u.Mtime = c.Time
	if err := a.kv.Put(znode.ConfigPath, u); err != nil {
		return nil, err
	}
	a.triggers(zxid, []znode.Trigger{{Type: jute.EventNodeDataChanged, Path: znode.ConfigPath, ACL: u.ACL}})
	return &Reply{Zxid: zxid}, nil
}

// touch records that a session was kept alive by the entry being applied.
func (a *applier) touch(id int64) error {
	var old uint64
	if cs := a.sess[id]; cs != nil {
		old, cs.touch = cs.touch, a.index
	}
	return a.kv.set(touchKey(id), indexValue(a.index), indexValue(old))
}

// touched is the index of a session's last keep-alive (0 if unknown, e.g.
// an imported session never kept alive since).
func (a *applier) touched(id int64) (uint64, error) {
	if cs := a.sess[id]; cs != nil {
		return cs.touch, nil
	}
	return 0, nil
}

// cachedSession is the in-memory copy of a session's owner and last
// keep-alive index. The state machine keeps every session here, loaded at
// Open and after a snapshot and changed with the store, so that a write
// does not read Pebble to check its session.
type cachedSession struct {
	timeout int32
	owner   uint64
	touch   uint64
}

// loadSessions reads every session, its owner and its last keep-alive.
func loadSessions(r reader) (map[int64]*cachedSession, error) {
	out := map[int64]*cachedSession{}
	scan := func(space byte, fn func(id int64, v []byte)) error {
		lo := []byte{space}
		it := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
		for it.First(); it.Valid(); it.Next() {
			if k := it.Key(); len(k) == 9 {
				fn(int64(binary.BigEndian.Uint64(k[1:])), it.Value())
			}
		}
		if err := it.Error(); err != nil {
			it.Close()
			return err
		}
		return it.Close()
	}
	if err := scan(spaceSession, func(id int64, v []byte) {
		cs := &cachedSession{}
		if len(v) == 4 {
			cs.timeout = int32(binary.BigEndian.Uint32(v))
		}
		out[id] = cs
	}); err != nil {
		return nil, err
	}
	if err := scan(spaceOwner, func(id int64, v []byte) {
		if cs := out[id]; cs != nil && len(v) == 8 {
			cs.owner = binary.BigEndian.Uint64(v)
		}
	}); err != nil {
		return nil, err
	}
	if err := scan(spaceTouch, func(id int64, v []byte) {
		if cs := out[id]; cs != nil && len(v) == 8 {
			cs.touch = binary.BigEndian.Uint64(v)
		}
	}); err != nil {
		return nil, err
	}
	return out, nil
}
