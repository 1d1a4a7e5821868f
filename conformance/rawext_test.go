package conformance

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Raw-socket helpers for the newer ops: addWatch, checkWatches,
// removeWatches, setWatches2, createTTL, createContainer, auth, multiRead,
// getEphemerals, getAllChildrenNumber and whoAmI (zookeeper-facts.md §2.2).

// createReqACL is createReq with an explicit ACL list.
func createReqACL(path string, data []byte, acl []zk.ACL, flags int32) []byte {
	return new(jw).str(path).buf(data).acl(acl).i32(flags).bytes()
}

// createTTLReq encodes CreateTTLRequest{path, data, acl, flags, ttl}.
func createTTLReq(path string, data []byte, flags int32, ttl int64) []byte {
	return new(jw).str(path).buf(data).acl(openACL).i32(flags).i64(ttl).bytes()
}

// addWatchReq encodes AddWatchRequest{path, mode}.
func addWatchReq(path string, mode int32) []byte { return new(jw).str(path).i32(mode).bytes() }

// watchTypeReq encodes CheckWatchesRequest / RemoveWatchesRequest{path, type}.
func watchTypeReq(path string, typ int32) []byte { return new(jw).str(path).i32(typ).bytes() }

// strVec writes a vector<ustring>.
func (w *jw) strVec(v []string) *jw {
	w.i32(int32(len(v)))
	for _, s := range v {
		w.str(s)
	}
	return w
}

// setWatches2Req encodes SetWatches2{relativeZxid, dataWatches, existWatches,
// childWatches, persistentWatches, persistentRecursiveWatches}.
func setWatches2Req(rel int64, data, exist, child, persistent, recursive []string) []byte {
	return new(jw).i64(rel).strVec(data).strVec(exist).strVec(child).strVec(persistent).strVec(recursive).bytes()
}

// authReq encodes AuthPacket{type 0, scheme, auth}.
func authReq(scheme string, auth []byte) []byte {
	return new(jw).i32(0).str(scheme).buf(auth).bytes()
}

// addWatch sends addWatch and requires ZooKeeper's answer: err 0 and a
// 4-byte ErrorResponse body holding 0.
func (c *rawConn) addWatch(path string, mode int32) {
	c.t.Helper()
	rep := c.call(opAddWatch, addWatchReq(path, mode))
	if rep.Err != errOK || rep.Len != 20 || string(rep.Body) != "\x00\x00\x00\x00" {
		c.t.Fatalf("addWatch %s mode %d: %v body % x, want OK with the 4-byte ErrorResponse{0}", path, mode, rep, rep.Body)
	}
}

// auth sends an auth packet with xid -4 and returns the reply. The reply is
// read directly: auth is answered outside the request pipeline.
func (c *rawConn) auth(scheme string, auth []byte) reply {
	c.t.Helper()
	if err := c.sendXid(xidAuth, opAuth, authReq(scheme, auth)); err != nil {
		c.t.Fatalf("send auth: %v", err)
	}
	return c.await(xidAuth)
}

// authOK is auth that requires ZooKeeper's success reply {-4, zxid 0, err 0},
// header only.
func (c *rawConn) authOK(scheme string, auth []byte) {
	c.t.Helper()
	rep := c.auth(scheme, auth)
	if rep.Err != errOK || rep.Zxid != 0 || rep.Len != 16 {
		c.t.Fatalf("auth %s: %v, want {xid -4, zxid 0, err 0}, header only", scheme, rep)
	}
}

// create2ACL sends create2 with an explicit ACL.
func (c *rawConn) create2ACL(path string, data []byte, acl []zk.ACL, flags int32) (reply, string, zk.Stat) {
	c.t.Helper()
	return c.decodeCreate2(c.call(opCreate2, createReqACL(path, data, acl, flags)))
}

// createTTL sends createTTL (op 21) and decodes Create2Response.
func (c *rawConn) createTTL(path string, data []byte, flags int32, ttl int64) (reply, string, zk.Stat) {
	c.t.Helper()
	return c.decodeCreate2(c.call(opCreateTTL, createTTLReq(path, data, flags, ttl)))
}

// createContainer sends createContainer (op 19) and decodes Create2Response.
func (c *rawConn) createContainer(path string, data []byte) (reply, string, zk.Stat) {
	c.t.Helper()
	return c.decodeCreate2(c.call(opCreateContainer, createReq(path, data, flagContainer)))
}

func (c *rawConn) decodeCreate2(rep reply) (reply, string, zk.Stat) {
	c.t.Helper()
	if rep.Err != errOK {
		if rep.Len != 16 {
			c.t.Fatalf("create error reply %v has a body", rep)
		}
		return rep, "", zk.Stat{}
	}
	r := &jr{b: rep.Body}
	p, st := r.str(), r.stat()
	if err := r.end(); err != nil {
		c.t.Fatalf("decode Create2Response: %v", err)
	}
	return rep, p, st
}

// getACL sends getACL and decodes GetACLResponse.
func (c *rawConn) getACL(path string) (reply, []zk.ACL, zk.Stat) {
	c.t.Helper()
	rep := c.call(opGetACL, pathReq(path))
	if rep.Err != errOK {
		return rep, nil, zk.Stat{}
	}
	r := &jr{b: rep.Body}
	acl, st := r.acl(), r.stat()
	if err := r.end(); err != nil {
		c.t.Fatalf("decode GetACLResponse: %v", err)
	}
	return rep, acl, st
}

// strings sends a request answered by a vector<ustring> (getChildren,
// getEphemerals) and decodes it strictly.
func (c *rawConn) strings(op int32, body []byte) (reply, []string) {
	c.t.Helper()
	rep := c.call(op, body)
	if rep.Err != errOK {
		return rep, nil
	}
	r := &jr{b: rep.Body}
	v := r.strs()
	if err := r.end(); err != nil {
		c.t.Fatalf("decode op %d response % x: %v", op, rep.Body, err)
	}
	return rep, v
}

// clientInfo is one entry of WhoAmIResponse.
type clientInfo struct{ Scheme, User string }

// whoAmI sends whoAmI (op 107, no body) and decodes WhoAmIResponse.
func (c *rawConn) whoAmI() []clientInfo {
	c.t.Helper()
	rep := c.callOK(opWhoAmI, nil)
	r := &jr{b: rep.Body}
	n := r.i32()
	var out []clientInfo
	for i := int32(0); i < n && r.err == nil; i++ {
		out = append(out, clientInfo{r.str(), r.str()})
	}
	if err := r.end(); err != nil {
		c.t.Fatalf("decode WhoAmIResponse % x: %v", rep.Body, err)
	}
	return out
}

// drainEvents reads notifications that arrive within d (without sending
// anything) and appends them to c.Events; it fails on any other frame.
func (c *rawConn) drainEvents(d time.Duration) []watcherEvent {
	c.t.Helper()
	n := len(c.Events)
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return c.Events[n:]
		}
		rep, err := c.readReply(left)
		if err != nil {
			if isClosedErr(err) {
				c.t.Fatalf("connection closed while waiting for notifications: %v", err)
			}
			return c.Events[n:]
		}
		if rep.Xid == xidPing {
			continue
		}
		ev, err := rep.event()
		if err != nil {
			c.t.Fatalf("while waiting for notifications: %v", err)
		}
		c.Events = append(c.Events, ev)
		c.EventZxids = append(c.EventZxids, rep.Zxid)
	}
}

// wantEvents requires that the events are exactly want, in order.
func wantEvents(t testing.TB, what string, got []watcherEvent, want ...watcherEvent) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: notifications %s, want %s", what, fmtEvents(got), fmtEvents(want))
	}
}

var eventNames = map[int32]string{
	eventNodeCreated: "NodeCreated", eventNodeDeleted: "NodeDeleted", eventNodeDataChanged: "NodeDataChanged",
	eventNodeChildrenChanged: "NodeChildrenChanged", eventDataWatchRemoved: "DataWatchRemoved",
	eventChildWatchRemoved: "ChildWatchRemoved", 7: "PersistentWatchRemoved",
}

func fmtEvents(evs []watcherEvent) string {
	if len(evs) == 0 {
		return "[none]"
	}
	s := "["
	for i, ev := range evs {
		if i > 0 {
			s += ", "
		}
		name := eventNames[ev.Type]
		if name == "" {
			name = fmt.Sprintf("type(%d)", ev.Type)
		}
		if ev.State != stateSyncConnected {
			name += fmt.Sprintf("/state %d", ev.State)
		}
		s += name + " " + ev.Path
	}
	return s + "]"
}

// ev is a server notification as it appears on the wire (state SyncConnected).
func ev(typ int32, path string) watcherEvent { return watcherEvent{typ, stateSyncConnected, path} }

// waitGone polls until path no longer exists and returns how long it took;
// it fails the test after d.
func waitGone(t testing.TB, c *zk.Conn, path string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, _, err := c.Exists(path)
		if err != nil {
			t.Fatalf("exists %s: %v", path, err)
		}
		if !ok {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%s still exists after %v", path, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
