package proxy_test

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// mntrFigure is one of mntr's figures (zk_NAME) as a number.
func mntrFigure(t *testing.T, addr, name string) int64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^zk_` + name + `\t(\d+)$`).FindStringSubmatch(fourLetter(t, addr, "mntr"))
	if m == nil {
		t.Fatalf("mntr has no zk_%s", name)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// TestManySessionsMoveInBatches: n go-zookeeper sessions, each with an
// ephemeral and a data watch, on one proxy whose death sends them all at
// once to another: the member takes their reattaches in batches (each
// one a KindSessions entry), and every session keeps its id (none
// expires), its ephemeral and its watch, which fires on the next change.
func TestManySessionsMoveInBatches(t *testing.T) {
	const n = 120
	m := startMember(t, nil)
	pa, pb := startProxy(t, m), startProxy(t, m)
	direct, _ := connect(t, 10*time.Second, m.cfg.ClientAddr)
	if _, err := direct.Create("/watched", []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	type sess struct {
		c      *zk.Conn
		ev     <-chan zk.Event
		id     int64
		events chan zk.Event
	}
	ss := make([]*sess, n)
	var wg sync.WaitGroup
	for i := range ss {
		c, ev, err := zk.Connect([]string{pa.Addr().String(), pb.Addr().String()}, 10*time.Second, zk.WithLogger(quiet{}),
			zk.WithHostProvider(&inOrder{servers: []string{pa.Addr().String(), pb.Addr().String()}}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		ss[i] = &sess{c: c, ev: ev}
		wg.Add(1)
		go func(s *sess, i int) {
			defer wg.Done()
			waitState(t, ev, zk.StateHasSession)
			s.id = c.SessionID()
			if _, err := c.Create(fmt.Sprintf("/e%d", i), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
				t.Error(err)
			}
			_, _, w, err := c.GetW("/watched")
			if err != nil {
				t.Error(err)
				return
			}
			s.events = make(chan zk.Event, 4)
			go func() {
				for e := range w {
					s.events <- e
				}
			}()
		}(ss[i], i)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if pa.Clients() != n {
		t.Fatalf("%d clients on the first proxy, want %d", pa.Clients(), n)
	}
	ops0, batches0 := mntrFigure(t, m.cfg.ClientAddr, "zkraft_session_batch_ops_total"), mntrFigure(t, m.cfg.ClientAddr, "zkraft_session_batches_total")
	pa.Close()
	for _, s := range ss {
		waitState(t, s.ev, zk.StateHasSession) // fails on an expiry
	}
	ops, batches := mntrFigure(t, m.cfg.ClientAddr, "zkraft_session_batch_ops_total")-ops0, mntrFigure(t, m.cfg.ClientAddr, "zkraft_session_batches_total")-batches0
	t.Logf("%d sessions moved: %d reattaches in %d proposals (the largest batch so far %d)", n, ops, batches, mntrFigure(t, m.cfg.ClientAddr, "zkraft_session_batch_largest"))
	if ops < n || pb.Clients() != n {
		t.Fatalf("%d reattaches through the batcher, %d clients on the second proxy, want %d", ops, pb.Clients(), n)
	}
	for i, s := range ss {
		if s.c.SessionID() != s.id {
			t.Errorf("session %d: %#x after the move, was %#x", i, s.c.SessionID(), s.id)
		}
		if _, st, err := direct.Exists(fmt.Sprintf("/e%d", i)); err != nil || st == nil || st.EphemeralOwner != s.id {
			t.Errorf("/e%d after the move: %+v %v", i, st, err)
		}
	}
	if _, err := direct.Set("/watched", []byte("1"), -1); err != nil {
		t.Fatal(err)
	}
	for i, s := range ss {
		select {
		case e := <-s.events:
			if e.Type != zk.EventNodeDataChanged || e.Path != "/watched" {
				t.Errorf("session %d: %+v", i, e)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("session %d: its watch did not fire", i)
		}
	}
}
