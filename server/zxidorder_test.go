package server

import (
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/bench"
	"github.com/zkraft/zkraft/jute"
)

// TestMemberZxidFollowsNotifications: while a change's watches are being
// triggered (its notification not yet queued), a reply that carries the
// member's zxid (whoAmI, as a ping) still shows the zxid before the
// change; the watcher then gets the event. Were the zxid published first,
// a client could see zxid Z, lose its connection before Z's notification,
// and reconnect with setWatches from Z: the change would never be told.
func TestMemberZxidFollowsNotifications(t *testing.T) {
	s := startStandalone(t, nil)
	w := connectZK(t, s.Addr().String())
	if _, err := w.Create("/x", []byte("v0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	var log frameLog
	raw := rawSession(t, s.Addr().String(), &log)
	var resp jute.GetDataResponse
	if err := raw.Do(jute.OpGetData, &jute.GetDataRequest{Path: "/x", Watch: true}, &resp, 10*time.Second); err != nil {
		t.Fatal(err)
	}

	entered := make(chan int64, 1)
	release := make(chan struct{})
	var once sync.Once
	hook := func(zxid int64, path string) {
		if path != "/x" {
			return
		}
		once.Do(func() {
			entered <- zxid
			<-release
		})
	}
	s.triggerHook.Store(&hook)
	defer once.Do(func() {}) // a late trigger does not wait
	setDone := make(chan error, 1)
	go func() {
		_, err := w.Set("/x", []byte("v1"), -1)
		setDone <- err
	}()
	var changeZxid int64
	select {
	case changeZxid = <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the change's watches were not triggered within 10 s")
	}
	seen := make(chan int64, 1)
	if err := raw.Send(jute.OpWhoAmI, nil, func(rep *bench.Reply) { seen <- rep.Zxid }); err != nil {
		close(release)
		t.Fatal(err)
	}
	var got int64
	select {
	case got = <-seen:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("whoAmI was not answered within 10 s while a change's watches were being triggered")
	}
	close(release)
	if got >= changeZxid {
		t.Errorf("a reply carried zxid %#x while the notification of the change at %#x was not queued yet", got, changeZxid)
	}
	if err := <-setDone; err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		f, _ := log.snapshot()
		for _, e := range f {
			if e == "event NodeDataChanged /x" {
				return true
			}
		}
		return false
	})
}
