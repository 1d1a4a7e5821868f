package conformance

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Persistent and recursive watches (addWatch, op 106), checkWatches (17),
// removeWatches (18) and setWatches2 (105), on raw sockets: go-zookeeper
// v1.0.4 has no API for them (zookeeper-facts.md §1.3, §2.2, §2.4, §2.5).
//
// Where ZooKeeper 3.8.0 and 3.9 differ, the tests accept exactly the two
// documented behaviours; zkraft follows 3.9.

// step runs fn (writes through other clients), then collects w's
// notifications with a round trip and requires exactly want.
func step(t *testing.T, w *rawConn, what string, fn func(), want ...watcherEvent) {
	t.Helper()
	fn()
	wantEvents(t, what, rawBarrier(w), want...)
}

func adminSet(t *testing.T, p string, data string) func() {
	return func() {
		t.Helper()
		if _, err := admin.Set(p, []byte(data), -1); err != nil {
			t.Fatalf("set %s: %v", p, err)
		}
	}
}

func adminCreate(t *testing.T, p string) func() {
	return func() { t.Helper(); mustCreate(t, admin, p, nil, 0) }
}

func adminDelete(t *testing.T, p string) func() {
	return func() {
		t.Helper()
		if err := admin.Delete(p, -1); err != nil {
			t.Fatalf("delete %s: %v", p, err)
		}
	}
}

func TestAddWatchPersistent(t *testing.T) {
	base := uniquePath(t)
	w := rawSession(t, 10000)
	p := base + "/p"

	// addWatch answers err 0 with a 4-byte ErrorResponse{0} body, also for a
	// node that does not exist yet.
	w.addWatch(p, addWatchPersistent)

	// A persistent watch fires on every change of the node and of its
	// children list, and stays.
	step(t, w, "create", adminCreate(t, p), ev(eventNodeCreated, p))
	step(t, w, "setData", adminSet(t, p, "1"), ev(eventNodeDataChanged, p))
	step(t, w, "setData again", adminSet(t, p, "2"), ev(eventNodeDataChanged, p))
	step(t, w, "child create", adminCreate(t, p+"/c"), ev(eventNodeChildrenChanged, p))
	// Not recursive: the child's own changes and grandchildren are not seen.
	step(t, w, "child setData", adminSet(t, p+"/c", "x"))
	step(t, w, "grandchild create", adminCreate(t, p+"/c/g"))
	step(t, w, "grandchild delete", adminDelete(t, p+"/c/g"))
	step(t, w, "child delete", adminDelete(t, p+"/c"), ev(eventNodeChildrenChanged, p))
	step(t, w, "sibling create", adminCreate(t, base+"/p2"))
	// The node's deletion is ONE NodeDeleted (the watch sits in both the data
	// and the child table), and the watch survives it.
	step(t, w, "delete", adminDelete(t, p), ev(eventNodeDeleted, p))
	step(t, w, "create again", adminCreate(t, p), ev(eventNodeCreated, p))
	step(t, w, "setData after re-create", adminSet(t, p, "3"), ev(eventNodeDataChanged, p))
	// setACL fires nothing.
	step(t, w, "setACL", func() {
		if _, err := admin.SetACL(p, zk.WorldACL(zk.PermAll), -1); err != nil {
			t.Fatal(err)
		}
	})

	// The notifications carry zxid -1 (3.8) or the txn's zxid (3.9).
	rep := w.callOK(opSetData, setDataReq(p, []byte("own"), -1))
	if len(w.Events) == 0 || w.Events[len(w.Events)-1] != ev(eventNodeDataChanged, p) {
		t.Fatalf("own setData: notifications %s, want NodeDataChanged %s before the reply", fmtEvents(w.Events), p)
	}
	checkNotificationZxid(t, w.EventZxids[len(w.EventZxids)-1], rep.Zxid)
}

func TestAddWatchPersistentRecursive(t *testing.T) {
	base := uniquePath(t)
	w := rawSession(t, 10000)
	r := mustCreate(t, admin, base+"/r", nil, 0)
	w.addWatch(r, addWatchPersistentRecursive)

	// Every change in the subtree is reported with the changed node's own
	// path; NodeChildrenChanged is never sent to a recursive watch.
	step(t, w, "child create", adminCreate(t, r+"/a"), ev(eventNodeCreated, r+"/a"))
	step(t, w, "child setData", adminSet(t, r+"/a", "x"), ev(eventNodeDataChanged, r+"/a"))
	step(t, w, "grandchild create", adminCreate(t, r+"/a/b"), ev(eventNodeCreated, r+"/a/b"))
	step(t, w, "grandchild setData", adminSet(t, r+"/a/b", "y"), ev(eventNodeDataChanged, r+"/a/b"))
	step(t, w, "root setData", adminSet(t, r, "z"), ev(eventNodeDataChanged, r))
	step(t, w, "grandchild delete", adminDelete(t, r+"/a/b"), ev(eventNodeDeleted, r+"/a/b"))
	step(t, w, "child delete", adminDelete(t, r+"/a"), ev(eventNodeDeleted, r+"/a"))
	// Outside the subtree: a sibling whose name extends "r", and the parent.
	step(t, w, "sibling with a longer name", adminCreate(t, base+"/rr"))
	step(t, w, "sibling's child", adminCreate(t, base+"/rr/x"))
	step(t, w, "parent setData", adminSet(t, base, "p"))
	// The watched node itself: deleted, re-created, the watch stays.
	step(t, w, "root delete", adminDelete(t, r), ev(eventNodeDeleted, r))
	step(t, w, "root create", adminCreate(t, r), ev(eventNodeCreated, r))
	step(t, w, "child create after re-create", adminCreate(t, r+"/again"), ev(eventNodeCreated, r+"/again"))

	// An ephemeral in the subtree deleted by its session's close.
	owner := rawSession(t, 10000)
	owner.callOK(opCreate, createReq(r+"/eph", nil, flagEphemeral))
	wantEvents(t, "ephemeral create", rawBarrier(w), ev(eventNodeCreated, r+"/eph"))
	owner.callOK(opCloseSession, nil)
	wantEvents(t, "ephemeral deleted at session close", rawBarrier(w), ev(eventNodeDeleted, r+"/eph"))
}

func TestAddWatchBadMode(t *testing.T) {
	// Only modes 0 and 1 exist; another mode cannot be decoded:
	// MARSHALLINGERROR, header only, and the connection stays usable.
	base := uniquePath(t)
	w := rawSession(t, 10000)
	for _, mode := range []int32{2, -1} {
		rep := w.call(opAddWatch, addWatchReq(base, mode))
		if rep.Err != errMarshallingError || rep.Len != 16 {
			t.Fatalf("addWatch mode %d: %v, want MARSHALLINGERROR, header only", mode, rep)
		}
	}
	step(t, w, "setData after bad addWatch", adminSet(t, base, "x"))
	w.addWatch(base, addWatchPersistent)
	step(t, w, "setData", adminSet(t, base, "y"), ev(eventNodeDataChanged, base))
}

func TestWatchOverlappingModesFireOnce(t *testing.T) {
	// One connection holding several watches that match one change gets one
	// notification for it.
	base := uniquePath(t)
	n := mustCreate(t, admin, base+"/n", nil, 0)

	// PERSISTENT on the node and PERSISTENT_RECURSIVE on its parent.
	w := rawSession(t, 10000)
	w.addWatch(n, addWatchPersistent)
	w.addWatch(base, addWatchPersistentRecursive)
	step(t, w, "setData", adminSet(t, n, "1"), ev(eventNodeDataChanged, n))
	step(t, w, "delete", adminDelete(t, n), ev(eventNodeDeleted, n))
	step(t, w, "create", adminCreate(t, n), ev(eventNodeCreated, n))

	// A one-shot watch (exists and getData) on the node under a recursive
	// watch: one notification, the one-shot is used up, the recursive stays.
	// (On another node: ZooKeeper 3.8.0's checkWatches would also match w's
	// watch on n.)
	m := mustCreate(t, admin, base+"/m", nil, 0)
	w2 := rawSession(t, 10000)
	w2.addWatch(base, addWatchPersistentRecursive)
	w2.callOK(opExists, pathWatchReq(m, true))
	w2.callOK(opGetData, pathWatchReq(m, true))
	step(t, w2, "setData with one-shot and recursive", adminSet(t, m, "2"), ev(eventNodeDataChanged, m))
	step(t, w2, "setData with recursive only", adminSet(t, m, "3"), ev(eventNodeDataChanged, m))
	if rep := w2.call(opCheckWatches, watchTypeReq(m, watcherData)); rep.Err != errNoWatcher {
		t.Fatalf("checkWatches Data after the one-shot fired: %v, want NOWATCHER", rep)
	}
}

func TestRemoveWatches(t *testing.T) {
	base := uniquePath(t)
	w := rawSession(t, 10000)
	n := mustCreate(t, admin, base+"/n", nil, 0)
	m := mustCreate(t, admin, base+"/m", nil, 0)
	k := mustCreate(t, admin, base+"/k", nil, 0)
	x := base + "/x" // missing

	// wantCode sends checkWatches or removeWatches and requires the code;
	// the reply is always header only.
	wantCode := func(op int32, path string, typ int32, code int32) {
		t.Helper()
		rep := w.call(op, watchTypeReq(path, typ))
		if rep.Err != code || rep.Len != 16 {
			name := map[int32]string{opCheckWatches: "checkWatches", opRemoveWatches: "removeWatches"}[op]
			t.Fatalf("%s %s type %d: %v, want %s, header only", name, path, typ, rep, errName(code))
		}
	}

	// A data watch (getData).
	w.callOK(opGetData, pathWatchReq(n, true))
	wantCode(opCheckWatches, n, watcherData, errOK)
	wantCode(opCheckWatches, n, watcherAny, errOK)
	wantCode(opCheckWatches, n, watcherChildren, errNoWatcher)
	wantCode(opRemoveWatches, n, watcherChildren, errNoWatcher)
	wantCode(opRemoveWatches, n, watcherData, errOK)
	// The server sends nothing when it removes a watch (the client library
	// makes up DataWatchRemoved/ChildWatchRemoved itself).
	if evs := w.drainEvents(300 * time.Millisecond); len(evs) != 0 {
		t.Fatalf("frames after removeWatches: %s, want none", fmtEvents(evs))
	}
	wantCode(opCheckWatches, n, watcherData, errNoWatcher)
	wantCode(opRemoveWatches, n, watcherData, errNoWatcher)
	step(t, w, "setData after the data watch was removed", adminSet(t, n, "x"))

	// A child watch (getChildren), removed as Any.
	w.callOK(opGetChildren, pathWatchReq(m, true))
	wantCode(opCheckWatches, m, watcherChildren, errOK)
	wantCode(opCheckWatches, m, watcherData, errNoWatcher)
	wantCode(opRemoveWatches, m, watcherData, errNoWatcher)
	wantCode(opRemoveWatches, m, watcherAny, errOK)
	wantCode(opCheckWatches, m, watcherAny, errNoWatcher)
	step(t, w, "child create after the child watch was removed", adminCreate(t, m+"/c"))

	// Data and child watches on one node: Children removes only the child
	// watch, Any the rest.
	w.callOK(opGetData, pathWatchReq(k, true))
	w.callOK(opGetChildren, pathWatchReq(k, true))
	wantCode(opRemoveWatches, k, watcherChildren, errOK)
	wantCode(opCheckWatches, k, watcherChildren, errNoWatcher)
	wantCode(opCheckWatches, k, watcherData, errOK)
	step(t, w, "child create after the child watch was removed", adminCreate(t, k+"/c"))
	wantCode(opRemoveWatches, k, watcherAny, errOK)
	wantCode(opRemoveWatches, k, watcherAny, errNoWatcher)
	step(t, w, "setData after all watches were removed", adminSet(t, k, "x"))

	// An exists watch on a missing node is a data watch.
	if rep := w.call(opExists, pathWatchReq(x, true)); rep.Err != errNoNode {
		t.Fatalf("exists %s: %v", x, rep)
	}
	wantCode(opCheckWatches, x, watcherData, errOK)
	wantCode(opRemoveWatches, x, watcherData, errOK)
	step(t, w, "create after the exists watch was removed", adminCreate(t, x))

	// Paths nobody watches, missing or not, and the root.
	for _, p := range []string{n, base + "/never", "/"} {
		for _, typ := range []int32{watcherChildren, watcherData, watcherAny} {
			wantCode(opCheckWatches, p, typ, errNoWatcher)
			wantCode(opRemoveWatches, p, typ, errNoWatcher)
		}
	}

	// A watcher type that does not exist cannot be decoded.
	for _, typ := range []int32{0, 9} {
		wantCode(opCheckWatches, n, typ, errMarshallingError)
		wantCode(opRemoveWatches, n, typ, errMarshallingError)
	}

	// Another connection's watch cannot be removed (NOWATCHER) and keeps
	// firing.
	other := rawSession(t, 10000)
	other.callOK(opGetData, pathWatchReq(n, true))
	wantCode(opRemoveWatches, n, watcherData, errNoWatcher)
	wantCode(opRemoveWatches, n, watcherAny, errNoWatcher)
	// checkWatches for a path only another connection watches: ZooKeeper
	// 3.8.0 answers OK (its WatchManager.containsWatcher matches any watcher
	// on the path), 3.9 NOWATCHER. zkraft follows 3.9.
	for _, typ := range []int32{watcherData, watcherAny} {
		if rep := w.call(opCheckWatches, watchTypeReq(n, typ)); (rep.Err != errOK && rep.Err != errNoWatcher) || rep.Len != 16 {
			t.Fatalf("checkWatches type %d on another connection's watch: %v, want OK (3.8) or NOWATCHER (3.9)", typ, rep)
		}
	}
	step(t, other, "setData with the other connection's watch", adminSet(t, n, "y"), ev(eventNodeDataChanged, n))
	wantEvents(t, "our connection", rawBarrier(w))
}

func TestRemoveWatchesPersistent(t *testing.T) {
	base := uniquePath(t)
	w := rawSession(t, 10000)

	// Any removes a persistent or recursive watch entirely, in 3.8 and 3.9.
	p1 := mustCreate(t, admin, base+"/p1", nil, 0)
	w.addWatch(p1, addWatchPersistent)
	if rep := w.call(opRemoveWatches, watchTypeReq(p1, watcherAny)); rep.Err != errOK || rep.Len != 16 {
		t.Fatalf("removeWatches Any on a persistent watch: %v, want OK", rep)
	}
	if evs := w.drainEvents(300 * time.Millisecond); len(evs) != 0 {
		t.Fatalf("frames after removeWatches: %s, want none", fmtEvents(evs))
	}
	if rep := w.call(opCheckWatches, watchTypeReq(p1, watcherAny)); rep.Err != errNoWatcher {
		t.Fatalf("checkWatches Any after removal: %v, want NOWATCHER", rep)
	}
	step(t, w, "changes after removal", func() {
		adminSet(t, p1, "x")()
		adminCreate(t, p1+"/c")()
	})

	r1 := mustCreate(t, admin, base+"/r1", nil, 0)
	w.addWatch(r1, addWatchPersistentRecursive)
	if rep := w.call(opRemoveWatches, watchTypeReq(r1, watcherAny)); rep.Err != errOK {
		t.Fatalf("removeWatches Any on a recursive watch: %v, want OK", rep)
	}
	step(t, w, "changes after removal", func() {
		adminSet(t, r1, "x")()
		adminCreate(t, r1+"/c")()
	})

	// Watcher types Persistent (4) and PersistentRecursive (5) are new in
	// 3.9. ZooKeeper 3.8.0 cannot decode them: MARSHALLINGERROR and the watch
	// stays. 3.9 removes the watch of that mode. zkraft follows 3.9.
	for _, tc := range []struct {
		name string
		mode int32 // addWatch mode
		typ  int32 // watcher type that names it
		fire func(p string) (func(), watcherEvent)
	}{
		{"Persistent", addWatchPersistent, watcherPersistent,
			func(p string) (func(), watcherEvent) { return adminSet(t, p, "x"), ev(eventNodeDataChanged, p) }},
		{"PersistentRecursive", addWatchPersistentRecursive, watcherPersistentRecursive,
			func(p string) (func(), watcherEvent) { return adminCreate(t, p+"/c"), ev(eventNodeCreated, p+"/c") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCreate(t, admin, base+"/"+tc.name, nil, 0)
			w.addWatch(p, tc.mode)
			chk := w.call(opCheckWatches, watchTypeReq(p, tc.typ))
			rem := w.call(opRemoveWatches, watchTypeReq(p, tc.typ))
			fire, fired := tc.fire(p)
			switch {
			case chk.Err == errMarshallingError && rem.Err == errMarshallingError && chk.Len == 16 && rem.Len == 16:
				step(t, w, "3.8: the watch is still there", fire, fired)
			case chk.Err == errOK && rem.Err == errOK && chk.Len == 16 && rem.Len == 16:
				step(t, w, "3.9: the watch was removed", fire)
				if rep := w.call(opCheckWatches, watchTypeReq(p, tc.typ)); rep.Err != errNoWatcher {
					t.Fatalf("checkWatches type %d after removal: %v, want NOWATCHER", tc.typ, rep)
				}
			default:
				t.Fatalf("checkWatches/removeWatches type %d on a %s watch: %v / %v; want MARSHALLINGERROR for both (3.8) or OK for both (3.9)",
					tc.typ, tc.name, chk, rem)
			}
		})
	}

	// Watcher type Data on a node that has only a persistent watch:
	// 3.8.0 treats the persistent watch's data half as a data watch (check
	// OK, remove OK, after which only child changes are reported); 3.9's Data
	// means one-shot data watches only (NOWATCHER, the persistent watch stays
	// whole). zkraft follows 3.9.
	p2 := mustCreate(t, admin, base+"/p2", nil, 0)
	w.addWatch(p2, addWatchPersistent)
	chk := w.call(opCheckWatches, watchTypeReq(p2, watcherData))
	rem := w.call(opRemoveWatches, watchTypeReq(p2, watcherData))
	switch {
	case chk.Err == errOK && rem.Err == errOK:
		step(t, w, "3.8: setData after the data half was removed", adminSet(t, p2, "x"))
	case chk.Err == errNoWatcher && rem.Err == errNoWatcher:
		step(t, w, "3.9: setData on the untouched persistent watch", adminSet(t, p2, "x"), ev(eventNodeDataChanged, p2))
	default:
		t.Fatalf("checkWatches/removeWatches Data on a persistent watch: %v / %v; want OK for both (3.8) or NOWATCHER for both (3.9)", chk, rem)
	}
	step(t, w, "child create: the persistent watch's child half", adminCreate(t, p2+"/c"), ev(eventNodeChildrenChanged, p2))
	if rep := w.call(opCheckWatches, watchTypeReq(p2, watcherAny)); rep.Err != errOK {
		t.Fatalf("checkWatches Any on the persistent watch: %v, want OK", rep)
	}
}

func TestSetWatches2(t *testing.T) {
	base := uniquePath(t)
	setup := rawSession(t, 10000)
	mk := func(name string) string {
		p := base + "/" + name
		setup.callOK(opCreate, createReq(p, nil, 0))
		return p
	}
	d1, d2, e1, c1, c2, p1, r1 := mk("d1"), mk("d2"), mk("e1"), mk("c1"), mk("c2"), mk("p1"), mk("r1")
	d3, e2, c3 := base+"/d3", base+"/e2", base+"/c3" // missing
	// The client "last saw" this zxid; what happens after it is caught up.
	rel := setup.callOK(opSetData, setDataReq(base, []byte("rel"), -1)).Zxid
	setup.callOK(opSetData, setDataReq(d2, []byte("changed"), -1))
	setup.callOK(opCreate, createReq(c2+"/new", nil, 0))
	setup.callOK(opSetData, setDataReq(p1, []byte("changed"), -1))
	setup.callOK(opCreate, createReq(r1+"/new", nil, 0))

	w := rawSession(t, 10000)
	body := setWatches2Req(rel,
		[]string{d1, d2, d3}, // data watches
		[]string{e1, e2},     // exist watches
		[]string{c1, c2, c3}, // child watches
		[]string{p1},         // persistent
		[]string{r1})         // persistent recursive
	if err := w.sendXid(xidSetWatches, opSetWatches2, body); err != nil {
		t.Fatal(err)
	}
	rep := w.await(xidSetWatches)
	if rep.Err != errOK || rep.Len != 16 {
		t.Fatalf("setWatches2 reply %v, want {xid -8, err 0}, header only", rep)
	}
	// The catch-up notifications come before the reply, in list order:
	// data (NodeDataChanged if mzxid > rel, NodeDeleted if gone), exist
	// (NodeCreated if present), child (NodeChildrenChanged if pzxid > rel,
	// NodeDeleted if gone). Persistent watches are re-added without
	// catch-up.
	wantEvents(t, "setWatches2 catch-up", w.Events,
		ev(eventNodeDataChanged, d2),
		ev(eventNodeDeleted, d3),
		ev(eventNodeCreated, e1),
		ev(eventNodeChildrenChanged, c2),
		ev(eventNodeDeleted, c3))

	// What was not caught up is now watched, as by the original requests.
	step(t, w, "changes after setWatches2", func() {
		adminSet(t, d1, "x")()        // data watch
		adminCreate(t, e2)()          // exist watch
		adminCreate(t, c1+"/x")()     // child watch
		adminSet(t, p1, "1")()        // persistent
		adminSet(t, p1, "2")()        // persistent, again
		adminCreate(t, r1+"/x")()     // recursive
		adminSet(t, r1+"/new", "y")() // recursive
		adminSet(t, d2, "again")()    // caught up: not re-registered
		adminCreate(t, c2+"/y")()     // caught up: not re-registered
		adminSet(t, e1, "x")()        // caught up: not re-registered
	},
		ev(eventNodeDataChanged, d1),
		ev(eventNodeCreated, e2),
		ev(eventNodeChildrenChanged, c1),
		ev(eventNodeDataChanged, p1),
		ev(eventNodeDataChanged, p1),
		ev(eventNodeCreated, r1+"/x"),
		ev(eventNodeDataChanged, r1+"/new"))
	// The one-shot watches were used up; the persistent ones stay.
	step(t, w, "second round", func() {
		adminSet(t, d1, "y")()
		adminCreate(t, c1+"/z")()
		adminSet(t, p1, "3")()
		adminDelete(t, r1+"/x")()
	},
		ev(eventNodeDataChanged, p1),
		ev(eventNodeDeleted, r1+"/x"))
}

func TestWatchNotDeliveredWithoutRead(t *testing.T) {
	// A watcher without READ on the node a change is about. ZooKeeper 3.8.0
	// delivers the notification anyway; 3.9 (and 3.8.4+, CVE-2024-23944 /
	// ZOOKEEPER-4799) checks READ on that node's ACL before delivering it.
	// zkraft follows 3.9. The events of a readable node are delivered by both.
	// The nodes are world-writable but not readable, and ephemerals of
	// writer, so that they go with its session.
	base := uniquePath(t)
	writer := rawSession(t, 10000)
	writeOnly := zk.WorldACL(zk.PermWrite)

	w := rawSession(t, 10000)
	w.addWatch(base, addWatchPersistentRecursive)
	s2 := base + "/s2"
	if rep := w.call(opExists, pathWatchReq(s2, true)); rep.Err != errNoNode {
		t.Fatalf("exists %s: %v", s2, rep)
	}

	secret := base + "/secret"
	if rep, _, _ := writer.create2ACL(secret, []byte("s"), writeOnly, flagEphemeral); rep.Err != errOK {
		t.Fatalf("create %s: %v", secret, rep)
	}
	writer.callOK(opSetData, setDataReq(secret, []byte("t"), -1))
	if rep, _, _ := writer.create2ACL(s2, nil, writeOnly, flagEphemeral); rep.Err != errOK {
		t.Fatalf("create %s: %v", s2, rep)
	}
	writer.callOK(opCreate, createReq(base+"/open", nil, flagEphemeral))
	got := rawBarrier(w)
	v38 := []watcherEvent{
		ev(eventNodeCreated, secret), ev(eventNodeDataChanged, secret),
		ev(eventNodeCreated, s2), ev(eventNodeCreated, base+"/open"),
	}
	v39 := []watcherEvent{ev(eventNodeCreated, base+"/open")}
	switch fmtEvents(got) {
	case fmtEvents(v38):
		t.Logf("ZooKeeper 3.8.0 behaviour")
	case fmtEvents(v39):
		t.Logf("ZooKeeper 3.9 behaviour")
	default:
		t.Fatalf("notifications %s; want %s (3.8.0) or %s (3.9)", fmtEvents(got), fmtEvents(v38), fmtEvents(v39))
	}
}
