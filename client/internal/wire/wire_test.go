package wire_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/internal/wire"
	"github.com/zkraft/zkraft/internal/clienttest"
	"github.com/zkraft/zkraft/internal/tcpproxy"
	"github.com/zkraft/zkraft/jute"
)

// next waits for the next event of a kind.
func next(t *testing.T, c *wire.Conn, kind wire.EventKind, path string) wire.Event {
	t.Helper()
	deadline := time.After(15 * time.Second)
	var pending []wire.Event
	for {
		pending = append(pending, c.Drain()...)
		for _, e := range pending {
			if e.Kind == kind && (kind != wire.Notify || e.Path == path) {
				return e
			}
		}
		select {
		case <-c.Wake():
		case <-deadline:
			t.Fatalf("no event %v %s; got %+v", kind, path, pending)
		}
	}
}

// A persistent recursive watch notifies, survives a reconnection
// (Reconnected) and a new session after expiry (NewSession); replies
// carry their zxid.
func TestPersistentWatchAcrossReconnectAndExpiry(t *testing.T) {
	clienttest.Each(t, func(t *testing.T, tg *clienttest.Target) {
		p := tcpproxy.New(t, tg.Addr())
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, err := wire.Dial(ctx, wire.Config{Servers: []string{p.Addr()}, Timeout: 4 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.AddWatch(ctx, "/w", jute.AddWatchModePersistentRecursive); err != nil {
			t.Fatal(err)
		}
		w, _, err := zk.Connect([]string{tg.Addr()}, 10*time.Second, zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		create := func(path string) int64 {
			if _, err := w.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			_, st, _ := w.Exists(path)
			return st.Czxid
		}
		z := create("/w")
		e := next(t, c, wire.Notify, "/w")
		if e.Type != jute.EventNodeCreated {
			t.Fatalf("event %+v", e)
		}
		if tg.Kind == clienttest.Zkraft && e.Zxid != z {
			t.Fatalf("zkraft's notification zxid %x, the create's %x", e.Zxid, z)
		}
		var resp jute.GetDataResponse
		rz, err := c.Do(ctx, jute.OpGetData, &jute.GetDataRequest{Path: "/w"}, &resp)
		if err != nil || rz < z || resp.Stat.Czxid != z {
			t.Fatalf("getData: reply zxid %x, stat %+v, %v", rz, resp.Stat, err)
		}
		if _, err := c.Do(ctx, jute.OpGetData, &jute.GetDataRequest{Path: "/nope"}, &resp); !errors.Is(err, jute.ErrNoNode) {
			t.Fatalf("getData of a missing node: %v", err)
		}

		sid := c.SessionID()
		p.Cut()
		next(t, c, wire.Reconnected, "")
		// A request answered after the event is ordered after the watch
		// was restored: changes from here on are notified.
		if _, err := c.Do(ctx, jute.OpExists, &jute.ExistsRequest{Path: "/w"}, nil); err != nil {
			t.Fatal(err)
		}
		if c.SessionID() != sid {
			t.Fatal("a new session after a cut")
		}
		create("/w/after-cut")
		next(t, c, wire.Notify, "/w/after-cut")

		// Let the session expire: hold every byte for twice its timeout,
		// then heal; the server tells the client it expired.
		p.Block()
		time.Sleep(4*time.Second + 4*time.Second)
		p.Cut()
		p.Unblock()
		next(t, c, wire.NewSession, "")
		if _, err := c.Do(ctx, jute.OpExists, &jute.ExistsRequest{Path: "/w"}, nil); err != nil {
			t.Fatal(err)
		}
		if c.SessionID() == sid || c.SessionID() == 0 {
			t.Fatalf("session 0x%x after expiry of 0x%x", c.SessionID(), sid)
		}
		create("/w/after-expiry")
		next(t, c, wire.Notify, "/w/after-expiry")
	})
}
