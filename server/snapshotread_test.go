package server

import (
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/bench"
	"github.com/zkraft/zkraft/jute"
)

// holdReads makes the next client read of op wait inside its snapshot
// until release is called; entered is closed once it waits.
func holdReads(s *Server, op jute.OpCode) (entered <-chan struct{}, release func()) {
	in := make(chan struct{})
	out := make(chan struct{})
	var once sync.Once
	hook := func(o jute.OpCode) {
		if o != op {
			return
		}
		once.Do(func() {
			close(in)
			<-out
		})
	}
	s.readHook.Store(&hook)
	var rel sync.Once
	return in, func() { rel.Do(func() { close(out) }) }
}

// frameLog is what a raw session received, in order: replies by xid and
// notifications, each with its zxid.
type frameLog struct {
	mu     sync.Mutex
	frames []string
	zxids  []int64
}

func (l *frameLog) add(what string, zxid int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frames = append(l.frames, what)
	l.zxids = append(l.zxids, zxid)
}

func (l *frameLog) snapshot() ([]string, []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.frames...), append([]int64(nil), l.zxids...)
}

func rawSession(t *testing.T, addr string, log *frameLog) *bench.Conn {
	t.Helper()
	c, err := bench.Dial(addr, bench.ConnOptions{SessionTimeout: 10 * time.Second,
		OnWatch: func(ev *jute.WatcherEvent, _ int64) { log.add("event "+ev.Type.String()+" "+ev.Path, -1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(time.Second) })
	return c
}

// TestReadDoesNotHoldUpWrites: while a read is held inside its snapshot,
// writes are applied and acknowledged, and the read then answers the state
// of its snapshot.
func TestReadDoesNotHoldUpWrites(t *testing.T) {
	s := startStandalone(t, nil)
	w := connectZK(t, s.Addr().String())
	r := connectZK(t, s.Addr().String())
	if _, err := w.Create("/x", []byte("v0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	entered, release := holdReads(s, jute.OpGetData)
	defer release()
	type got struct {
		data []byte
		err  error
	}
	done := make(chan got, 1)
	go func() {
		d, _, err := r.Get("/x")
		done <- got{d, err}
	}()
	<-entered
	for _, v := range []string{"v1", "v2", "v3"} {
		if _, err := w.Set("/x", []byte(v), -1); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case g := <-done:
		t.Fatalf("the held read answered before it was released: %q %v", g.data, g.err)
	default:
	}
	release()
	g := <-done
	if g.err != nil || string(g.data) != "v0" {
		t.Fatalf("held read: %q %v, want the snapshot's v0", g.data, g.err)
	}
}

// TestWatchSetByReadCatchesUpChangesDuringTheRead: a getData watch set by a
// read on a snapshot fires for the first change after that snapshot, even
// when the change was applied while the read ran, and the notification
// comes after the read's reply (a client registers its watcher when the
// reply arrives).
func TestWatchSetByReadCatchesUpChangesDuringTheRead(t *testing.T) {
	s := startStandalone(t, nil)
	w := connectZK(t, s.Addr().String())
	if _, err := w.Create("/x", []byte("v0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	var log frameLog
	raw := rawSession(t, s.Addr().String(), &log)
	entered, release := holdReads(s, jute.OpGetData)
	defer release()
	replied := make(chan jute.ErrCode, 1)
	err := raw.Send(jute.OpGetData, &jute.GetDataRequest{Path: "/x", Watch: true}, func(rep *bench.Reply) {
		log.add("reply getData", rep.Zxid)
		replied <- rep.Err
	})
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	st1, err := w.Set("/x", []byte("v1"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Set("/x", []byte("v2"), -1); err != nil {
		t.Fatal(err)
	}
	release()
	if code := <-replied; code != jute.ErrOK {
		t.Fatal(code)
	}
	waitFor(t, func() bool { f, _ := log.snapshot(); return len(f) >= 2 })
	time.Sleep(100 * time.Millisecond) // a second notification would arrive now
	frames, zxids := log.snapshot()
	want := []string{"reply getData", "event NodeDataChanged /x"}
	if len(frames) != len(want) || frames[0] != want[0] || frames[1] != want[1] {
		t.Fatalf("frames %q, want %q", frames, want)
	}
	if zxids[0] >= st1.Mzxid {
		t.Fatalf("the reply's zxid %#x is not before the first change %#x", zxids[0], st1.Mzxid)
	}
}

// TestExistsWatchCatchesCreateAndDeleteDuringTheRead: an exists watch set on
// a missing node fires NodeCreated although the node was created and
// deleted again while the read ran, as ZooKeeper (whose watch was set
// before both) fires it.
func TestExistsWatchCatchesCreateAndDeleteDuringTheRead(t *testing.T) {
	s := startStandalone(t, nil)
	w := connectZK(t, s.Addr().String())
	r := connectZK(t, s.Addr().String())
	entered, release := holdReads(s, jute.OpExists)
	defer release()
	type got struct {
		ok  bool
		ch  <-chan zk.Event
		err error
	}
	done := make(chan got, 1)
	go func() {
		ok, _, ch, err := r.ExistsW("/gone")
		done <- got{ok, ch, err}
	}()
	<-entered
	if _, err := w.Create("/gone", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if err := w.Delete("/gone", -1); err != nil {
		t.Fatal(err)
	}
	release()
	g := <-done
	if g.err != nil || g.ok {
		t.Fatalf("exists: %v %v, want false (the snapshot's)", g.ok, g.err)
	}
	select {
	case ev := <-g.ch:
		if ev.Type != zk.EventNodeCreated || ev.Path != "/gone" {
			t.Fatalf("event %+v, want NodeCreated /gone", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event for the create made while exists ran")
	}
}

// TestHeldNotificationsKeepZxidOrder: notifications for a connection's
// older watches that fire while one of its reads runs go out around that
// read's reply in zxid order: those the reply reflects before it, the
// later ones after, merged with what the new watch catches up, once each.
func TestHeldNotificationsKeepZxidOrder(t *testing.T) {
	s := startStandalone(t, nil)
	w := connectZK(t, s.Addr().String())
	for _, p := range []string{"/a", "/b"} {
		if _, err := w.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	var log frameLog
	raw := rawSession(t, s.Addr().String(), &log)
	// An older watch on /a, then a read of /b (setting a watch) that is
	// held while /a then /b then /a change.
	if err := raw.Do(jute.OpGetData, &jute.GetDataRequest{Path: "/a", Watch: true}, nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := raw.Do(jute.OpExists, &jute.ExistsRequest{Path: "/b", Watch: true}, nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	entered, release := holdReads(s, jute.OpGetData)
	defer release()
	replied := make(chan struct{})
	raw.Send(jute.OpGetData, &jute.GetDataRequest{Path: "/b", Watch: true}, func(rep *bench.Reply) {
		log.add("reply getData /b", rep.Zxid)
		close(replied)
	})
	<-entered
	for _, p := range []string{"/a", "/b", "/a"} {
		if _, err := w.Set(p, []byte("x"), -1); err != nil {
			t.Fatal(err)
		}
	}
	release()
	<-replied
	waitFor(t, func() bool { f, _ := log.snapshot(); return len(f) >= 3 })
	time.Sleep(100 * time.Millisecond)
	frames, _ := log.snapshot()
	// The /a watch fired at the first change, after the snapshot: after
	// the reply. The exists watch on /b and the new getData watch on /b
	// fire together at the second change: one notification.
	want := []string{"reply getData /b", "event NodeDataChanged /a", "event NodeDataChanged /b"}
	if len(frames) != len(want) {
		t.Fatalf("frames %q, want %q", frames, want)
	}
	for i := range want {
		if frames[i] != want[i] {
			t.Fatalf("frames %q, want %q", frames, want)
		}
	}
}

// TestReadTooFarBehindClosesConnection: a read that overlaps more triggers
// than the registry remembers cannot know what its watch missed; its
// connection is closed after the reply, and the client's setWatches on
// reconnect fires the change.
func TestReadTooFarBehindClosesConnection(t *testing.T) {
	old := maxRecentTriggers
	maxRecentTriggers = 8
	defer func() { maxRecentTriggers = old }()
	s := startStandalone(t, nil)
	w := connectZK(t, s.Addr().String())
	r := connectZK(t, s.Addr().String())
	if _, err := w.Create("/x", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	entered, release := holdReads(s, jute.OpGetData)
	defer release()
	type got struct {
		ch  <-chan zk.Event
		err error
	}
	done := make(chan got, 1)
	go func() {
		_, _, ch, err := r.GetW("/x")
		done <- got{ch, err}
	}()
	<-entered
	for i := range 3 * maxRecentTriggers {
		if _, err := w.Create("/y"+string(rune('a'+i)), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Set("/x", []byte("changed"), -1); err != nil {
		t.Fatal(err)
	}
	release()
	g := <-done
	if g.err != nil {
		t.Fatal(g.err)
	}
	select {
	case ev := <-g.ch:
		if ev.Type != zk.EventNodeDataChanged || ev.Path != "/x" {
			t.Fatalf("event %+v, want NodeDataChanged /x", ev)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the change made while the read ran was never notified")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
