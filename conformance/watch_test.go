package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// One-shot watches: which ops set them, which changes fire them, how often,
// and in what order relative to replies (zookeeper-facts.md §2.5).

// rawBarrier makes a round trip on c so that every notification the server
// queued for c before now lands in c.Events, and returns the new events.
func rawBarrier(c *rawConn) []watcherEvent {
	c.t.Helper()
	n := len(c.Events)
	c.callOK(opExists, pathWatchReq("/", false))
	return c.Events[n:]
}

// checkNotificationZxid accepts the notification header zxid of ZooKeeper 3.8
// (always -1) and of 3.9 (the zxid of the txn that fired the watch). zkraft
// follows 3.9.
func checkNotificationZxid(t *testing.T, got, txnZxid int64) {
	t.Helper()
	if got != -1 && got != txnZxid {
		t.Errorf("notification header zxid %#x, want -1 (3.8) or the txn zxid %#x (3.9)", got, txnZxid)
	}
}

func TestWatchExistsOnMissingNodeFiresCreated(t *testing.T) {
	base := uniquePath(t)
	c, _ := connect(t)
	n := base + "/n"
	ok, _, ch, err := c.ExistsW(n)
	if err != nil || ok {
		t.Fatalf("existsW missing = %v, %v", ok, err)
	}
	mustCreate(t, admin, n, nil, 0)
	wantEvent(t, ch, zk.EventNodeCreated, n)

	// On the wire: exists on a missing node answers NONODE and still sets a
	// watch; the notification carries type NodeCreated, state SyncConnected.
	rc := rawSession(t, 10000)
	m := base + "/m"
	if rep := rc.call(opExists, pathWatchReq(m, true)); rep.Err != errNoNode {
		t.Fatalf("exists watch on missing: %v", rep)
	}
	mustCreate(t, admin, m, nil, 0)
	evs := rawBarrier(rc)
	if len(evs) != 1 || evs[0] != (watcherEvent{eventNodeCreated, stateSyncConnected, m}) {
		t.Fatalf("notifications = %+v, want one {NodeCreated SyncConnected %s}", evs, m)
	}
}

func TestWatchExistsOnExistingNode(t *testing.T) {
	base := uniquePath(t)
	c, _ := connect(t)
	n := mustCreate(t, c, base+"/n", nil, 0)
	_, _, ch, err := c.ExistsW(n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Set(n, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, ch, zk.EventNodeDataChanged, n)
	_, _, ch, err = c.ExistsW(n)
	if err != nil {
		t.Fatal(err)
	}
	// A child create is not a change of the node's data.
	mustCreate(t, admin, n+"/child", nil, 0)
	noEvent(t, c, ch, "exists watch on child create")
	if err := admin.Delete(n+"/child", -1); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(n, -1); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, ch, zk.EventNodeDeleted, n)
}

func TestWatchDataIsOneShot(t *testing.T) {
	base := uniquePath(t)
	c, rec := connectRecorded(t)
	n := mustCreate(t, admin, base+"/n", []byte("v0"), 0)
	_, _, ch, err := c.GetW(n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Set(n, []byte("v1"), -1); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, ch, zk.EventNodeDataChanged, n)
	// The watch is used up: a second change sends nothing.
	if _, err := admin.Set(n, []byte("v2"), -1); err != nil {
		t.Fatal(err)
	}
	barrier(t, c)
	if evs := rec.forPath(n); len(evs) != 1 || evs[0].Type != zk.EventNodeDataChanged {
		t.Fatalf("events for %s = %+v, want exactly one NodeDataChanged", n, evs)
	}
}

func TestWatchChildren(t *testing.T) {
	base := uniquePath(t)
	c, rec := connectRecorded(t)
	p := mustCreate(t, admin, base+"/p", nil, 0)

	_, _, ch, err := c.ChildrenW(p)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, admin, p+"/a", nil, 0)
	wantEvent(t, ch, zk.EventNodeChildrenChanged, p)

	// Not fired by the node's own data, a child's data, or a grandchild.
	_, _, ch, err = c.ChildrenW(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Set(p, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Set(p+"/a", []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, admin, p+"/a/grandchild", nil, 0)
	noEvent(t, c, ch, "child watch on data changes and grandchild create")

	// Fired by a child delete (ephemeral or not).
	if err := admin.Delete(p+"/a/grandchild", -1); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(p+"/a", -1); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, ch, zk.EventNodeChildrenChanged, p)
	barrier(t, c)
	if evs := rec.forPath(p); len(evs) != 2 {
		t.Fatalf("events for %s = %+v, want 2 NodeChildrenChanged", p, evs)
	}

	// Children of the root: the event path is "/".
	rc := rawSession(t, 10000)
	rc.callOK(opGetChildren, pathWatchReq("/", true))
	uniquePath(t) // creates a new child of the root
	evs := rawBarrier(rc)
	if len(evs) != 1 || evs[0] != (watcherEvent{eventNodeChildrenChanged, stateSyncConnected, "/"}) {
		t.Fatalf("root child watch: %+v, want one NodeChildrenChanged for \"/\"", evs)
	}
}

func TestWatchDeleteFiresDataAndChildWatches(t *testing.T) {
	base := uniquePath(t)
	c, _ := connect(t)
	n := mustCreate(t, admin, base+"/n", nil, 0)
	_, _, dataW, err := c.GetW(n)
	if err != nil {
		t.Fatal(err)
	}
	_, _, childW, err := c.ChildrenW(n)
	if err != nil {
		t.Fatal(err)
	}
	_, _, existsW, err := c.ExistsW(n)
	if err != nil {
		t.Fatal(err)
	}
	_, _, parentW, err := c.ChildrenW(base)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(n, -1); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, dataW, zk.EventNodeDeleted, n)
	wantEvent(t, childW, zk.EventNodeDeleted, n)
	wantEvent(t, existsW, zk.EventNodeDeleted, n)
	wantEvent(t, parentW, zk.EventNodeChildrenChanged, base)

	// On the wire, one connection holding data, exist and child watches on
	// the node gets ONE NodeDeleted, then the parent's NodeChildrenChanged.
	rc := rawSession(t, 10000)
	m := base + "/m"
	mustCreate(t, admin, m, nil, 0)
	rc.callOK(opGetData, pathWatchReq(m, true))
	rc.callOK(opGetChildren, pathWatchReq(m, true))
	rc.callOK(opExists, pathWatchReq(m, true))
	rc.callOK(opGetChildren2, pathWatchReq(base, true))
	if err := admin.Delete(m, -1); err != nil {
		t.Fatal(err)
	}
	evs := rawBarrier(rc)
	want := []watcherEvent{
		{eventNodeDeleted, stateSyncConnected, m},
		{eventNodeChildrenChanged, stateSyncConnected, base},
	}
	if fmt.Sprint(evs) != fmt.Sprint(want) {
		t.Fatalf("notifications = %+v, want %+v", evs, want)
	}
}

func TestWatchNotSetOnMissingNode(t *testing.T) {
	// getData and getChildren on a missing node fail with NONODE and leave no
	// watch behind (unlike exists).
	base := uniquePath(t)
	rc := rawSession(t, 10000)
	n := base + "/n"
	for _, op := range []int32{opGetData, opGetChildren, opGetChildren2} {
		if rep := rc.call(op, pathWatchReq(n, true)); rep.Err != errNoNode || rep.Len != 16 {
			t.Fatalf("op %d with watch on missing: %v, want NONODE", op, rep)
		}
	}
	mustCreate(t, admin, n, nil, 0)
	mustCreate(t, admin, n+"/child", nil, 0)
	if _, err := admin.Set(n, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	if err := deleteTree(admin, n); err != nil {
		t.Fatal(err)
	}
	if evs := rawBarrier(rc); len(evs) != 0 {
		t.Fatalf("notifications after getData/getChildren on a missing node: %+v, want none", evs)
	}

	// The same through go-zookeeper.
	c, rec := connectRecorded(t)
	if _, _, _, err := c.GetW(n); err == nil {
		t.Fatal("getW on missing succeeded")
	}
	if _, _, _, err := c.ChildrenW(n); err == nil {
		t.Fatal("childrenW on missing succeeded")
	}
	mustCreate(t, admin, n, nil, 0)
	if err := admin.Delete(n, -1); err != nil {
		t.Fatal(err)
	}
	barrier(t, c)
	if evs := rec.forPath(n); len(evs) != 0 {
		t.Fatalf("events = %+v, want none", evs)
	}
}

func TestWatchSameNodeTwiceFiresOnce(t *testing.T) {
	// An exists watch and a getData watch on the same node from one
	// connection: one change, one notification.
	base := uniquePath(t)
	rc := rawSession(t, 10000)
	n := mustCreate(t, admin, base+"/n", nil, 0)
	rc.callOK(opExists, pathWatchReq(n, true))
	rc.callOK(opGetData, pathWatchReq(n, true))
	rc.callOK(opGetData, pathWatchReq(n, true)) // and the same watch twice
	if _, err := admin.Set(n, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	evs := rawBarrier(rc)
	if len(evs) != 1 || evs[0] != (watcherEvent{eventNodeDataChanged, stateSyncConnected, n}) {
		t.Fatalf("notifications = %+v, want exactly one NodeDataChanged", evs)
	}
	// Both were consumed.
	if _, err := admin.Set(n, []byte("y"), -1); err != nil {
		t.Fatal(err)
	}
	if evs := rawBarrier(rc); len(evs) != 0 {
		t.Fatalf("second change: %+v, want no notification", evs)
	}

	// Two connections watching the same node are both notified.
	c1, _ := connect(t)
	c2, _ := connect(t)
	_, _, w1, err := c1.GetW(n)
	if err != nil {
		t.Fatal(err)
	}
	_, _, w2, err := c2.ExistsW(n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Set(n, []byte("z"), -1); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, w1, zk.EventNodeDataChanged, n)
	wantEvent(t, w2, zk.EventNodeDataChanged, n)
}

func TestWatchNotificationPrecedesOwnReply(t *testing.T) {
	// Watches fire while the txn is applied, before the writer's reply is
	// queued: a client watching what it writes sees the notification first.
	base := uniquePath(t)
	rc := rawSession(t, 10000)

	expectOrder := func(what string, xid int32, want watcherEvent) {
		t.Helper()
		first, err := rc.readReply(rawIOTimeout)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		second, err := rc.readReply(rawIOTimeout)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if first.Xid != xidNotification || second.Xid != xid || second.Err != errOK {
			t.Fatalf("%s: frames %v then %v; want the notification (xid -1) and then the reply (xid %d)", what, first, second, xid)
		}
		ev, err := first.event()
		if err != nil || ev != want {
			t.Fatalf("%s: notification %+v (%v), want %+v", what, ev, err, want)
		}
		if first.Err != errOK {
			t.Errorf("%s: notification header err %d, want 0", what, first.Err)
		}
		checkNotificationZxid(t, first.Zxid, second.Zxid)
	}

	n := base + "/n"
	rc.call(opExists, pathWatchReq(n, true))
	xid, _ := rc.send(opCreate, createReq(n, nil, 0))
	expectOrder("create", xid, watcherEvent{eventNodeCreated, stateSyncConnected, n})

	rc.callOK(opGetData, pathWatchReq(n, true))
	xid, _ = rc.send(opSetData, setDataReq(n, []byte("x"), -1))
	expectOrder("setData", xid, watcherEvent{eventNodeDataChanged, stateSyncConnected, n})

	rc.callOK(opGetChildren, pathWatchReq(n, true))
	xid, _ = rc.send(opCreate, createReq(n+"/c", nil, 0))
	expectOrder("child create", xid, watcherEvent{eventNodeChildrenChanged, stateSyncConnected, n})

	rc.callOK(opExists, pathWatchReq(n+"/c", true))
	xid, _ = rc.send(opDelete, deleteReq(n+"/c", -1))
	// Only the exists watch on /c is armed (the child watch on n was used).
	expectOrder("delete", xid, watcherEvent{eventNodeDeleted, stateSyncConnected, n + "/c"})

	// closeSession: the session's own ephemeral is deleted and its watch
	// fires before the close reply; then the server closes the socket.
	rc.callOK(opCreate, createReq(n+"/e", nil, flagEphemeral))
	rc.callOK(opExists, pathWatchReq(n+"/e", true))
	xid, _ = rc.send(opCloseSession, nil)
	expectOrder("closeSession", xid, watcherEvent{eventNodeDeleted, stateSyncConnected, n + "/e"})
	rc.expectClosedSilently(rawIOTimeout)
}

func TestWatchReaderSeesNewValue(t *testing.T) {
	// A client notified of a change reads at least the changed value.
	base := uniquePath(t)
	writer, _ := connect(t)
	reader, _ := connect(t)
	n := mustCreate(t, writer, base+"/n", []byte("0"), 0)
	for i := 1; i <= 20; i++ {
		_, _, ch, err := reader.GetW(n)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprint(i)
		done := make(chan error, 1)
		go func() { _, err := writer.Set(n, []byte(want), -1); done <- err }()
		wantEvent(t, ch, zk.EventNodeDataChanged, n)
		data, st, err := reader.Get(n)
		if werr := <-done; werr != nil {
			t.Fatalf("set: %v", werr)
		}
		if err != nil || string(data) != want || st.Version != int32(i) {
			t.Fatalf("after notification %d: read %q version %d (%v), want %q version %d", i, data, st.Version, err, want, i)
		}
	}
}

func TestWatchSetACLFiresNothing(t *testing.T) {
	base := uniquePath(t)
	rc := rawSession(t, 10000)
	n := mustCreate(t, admin, base+"/n", nil, 0)
	rc.callOK(opGetData, pathWatchReq(n, true))
	rc.callOK(opExists, pathWatchReq(n, true))
	rc.callOK(opGetChildren, pathWatchReq(n, true))
	rc.callOK(opGetChildren, pathWatchReq(base, true))
	if _, err := admin.SetACL(n, zk.WorldACL(zk.PermAll), -1); err != nil {
		t.Fatal(err)
	}
	if evs := rawBarrier(rc); len(evs) != 0 {
		t.Fatalf("notifications after setACL: %+v, want none", evs)
	}
	// The watches are still armed.
	if _, err := admin.Set(n, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	evs := rawBarrier(rc)
	if len(evs) != 1 || evs[0] != (watcherEvent{eventNodeDataChanged, stateSyncConnected, n}) {
		t.Fatalf("notifications after setData: %+v, want one NodeDataChanged", evs)
	}
}

func TestWatchEphemeralDeletedOnSessionClose(t *testing.T) {
	base := uniquePath(t)
	owner := rawSession(t, 10000)
	e := base + "/e"
	owner.callOK(opCreate, createReq(e, nil, flagEphemeral))
	w := rawSession(t, 10000)
	w.callOK(opExists, pathWatchReq(e, true))
	w.callOK(opGetData, pathWatchReq(e, true))
	w.callOK(opGetChildren, pathWatchReq(base, true))
	closeZxid := owner.callOK(opCloseSession, nil).Zxid
	deadline := time.Now().Add(rawIOTimeout)
	var evs []watcherEvent
	for len(evs) < 2 && time.Now().Before(deadline) {
		evs = append(evs, rawBarrier(w)...)
	}
	want := []watcherEvent{
		{eventNodeDeleted, stateSyncConnected, e},
		{eventNodeChildrenChanged, stateSyncConnected, base},
	}
	if fmt.Sprint(evs) != fmt.Sprint(want) {
		t.Fatalf("notifications after the owner closed its session: %+v, want %+v", evs, want)
	}
	for _, z := range w.EventZxids {
		checkNotificationZxid(t, z, closeZxid)
	}
}
