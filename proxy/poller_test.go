package proxy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/proxy"
)

// nextFrame waits (at most 30 s) for s's next frame.
func (s *rawSession) nextFrame() rawFrame {
	s.t.Helper()
	select {
	case f, ok := <-s.frames:
		if !ok {
			s.t.Fatalf("session %#x: connection closed", s.id)
		}
		return f
	case <-time.After(30 * time.Second):
		s.t.Fatalf("session %#x: no frame within 30s", s.id)
	}
	return rawFrame{}
}

// pingAnswer waits for s's next frame and fails unless it answers a ping
// without error; it returns the frame.
func (s *rawSession) pingAnswer(what string) rawFrame {
	s.t.Helper()
	f := s.nextFrame()
	if f.hdr.Xid != jute.XidPing || f.hdr.Err != jute.ErrOK {
		s.t.Fatalf("%s: got xid %d err %v, want a ping's answer", what, f.hdr.Xid, f.hdr.Err)
	}
	return f
}

// TestPingsInPlace: a parked client's lone ping is answered by the
// proxy's poller (no reader started), with the connection's zxid, and
// whatever is not one whole ping (a ping cut in two, two pings at once, a
// request and a ping together) is still answered, in order, by a reader;
// the session goes on working after each, and a client that goes away
// while parked is closed.
func TestPingsInPlace(t *testing.T) {
	m := startMember(t, nil)
	p := startProxy(t, m)
	s := rawConnect(t, p.Addr().String())
	created, _ := s.call(jute.OpCreate, &jute.CreateRequest{Path: "/inplace", Data: []byte("x"), ACL: openACL})
	if created.hdr.Err != jute.ErrOK {
		t.Fatalf("create: %v", created.hdr.Err)
	}
	ping := jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing})
	pingAnswer := func(what string) {
		t.Helper()
		f := s.pingAnswer(what)
		if f.hdr.Zxid < created.hdr.Zxid {
			t.Fatalf("%s: ping answered with zxid %#x, below the create's %#x the session saw", what, f.hdr.Zxid, created.hdr.Zxid)
		}
	}

	// One ping at a time, each answered before the next: once the client
	// is parked, the poller answers every one itself.
	const n = 20
	before := proxy.PingsInPlace(p)
	for i := range n {
		if _, err := s.nc.Write(ping); err != nil {
			t.Fatal(err)
		}
		pingAnswer(fmt.Sprintf("lone ping %d", i))
	}
	if got := proxy.PingsInPlace(p) - before; got < n-2 {
		t.Errorf("the poller answered %d of %d lone pings itself, want at least %d (the first may find a reader still running)", got, n, n-2)
	}

	// A ping cut in two: the poller hands the half to a reader, which
	// answers once the rest comes.
	if _, err := s.nc.Write(ping[:5]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the poller see the half alone (either way it must be answered)
	if _, err := s.nc.Write(ping[5:]); err != nil {
		t.Fatal(err)
	}
	pingAnswer("a ping cut in two")

	// Two pings in one write: two answers.
	if _, err := s.nc.Write(append(append([]byte(nil), ping...), ping...)); err != nil {
		t.Fatal(err)
	}
	pingAnswer("the first of two pings")
	pingAnswer("the second of two pings")

	// A request and a ping in one write: the request is forwarded and
	// answered, the ping answered.
	s.xid++
	get := jute.AppendFrame(nil, &jute.RequestHeader{Xid: s.xid, Type: jute.OpGetData}, &jute.GetDataRequest{Path: "/inplace"})
	if _, err := s.nc.Write(append(get, ping...)); err != nil {
		t.Fatal(err)
	}
	var sawGet, sawPing bool
	for !sawGet || !sawPing {
		f := s.nextFrame()
		switch f.hdr.Xid {
		case s.xid:
			if f.hdr.Err != jute.ErrOK || f.hdr.Zxid < created.hdr.Zxid {
				t.Fatalf("getData with a ping behind it: err %v zxid %#x", f.hdr.Err, f.hdr.Zxid)
			}
			sawGet = true
		case jute.XidPing:
			sawPing = true
		default:
			t.Fatalf("unexpected frame xid %d", f.hdr.Xid)
		}
	}

	// The session still works after all of it.
	set, _ := s.call(jute.OpSetData, &jute.SetDataRequest{Path: "/inplace", Data: []byte("y"), Version: -1})
	if set.hdr.Err != jute.ErrOK {
		t.Fatalf("setData after the pings: %v", set.hdr.Err)
	}
	created = set
	if _, err := s.nc.Write(ping); err != nil {
		t.Fatal(err)
	}
	pingAnswer("a ping after the setData")

	// A parked client that goes away is closed (the poller sees its end
	// and hands it to a reader, which finishes it).
	if p.Clients() != 1 {
		t.Fatalf("the proxy holds %d clients, want 1", p.Clients())
	}
	s.nc.Close()
	for deadline := time.Now().Add(30 * time.Second); p.Clients() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a parked client closed by its peer is still held after 30s (%d clients)", p.Clients())
		}
	}
}

// TestPingsDuringFanOut: while a large fan-out runs the poller leaves
// parked clients' pings unread (poller.fanWait), but a fan-out that does
// not end does not starve them: every ping is answered, in place, while
// the fan-out is marked running, and after it ends.
func TestPingsDuringFanOut(t *testing.T) {
	m := startMember(t, nil)
	p := startProxy(t, m)
	s := rawConnect(t, p.Addr().String())
	ping := jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing})
	pingAnswer := func(what string) { t.Helper(); s.pingAnswer(what) }
	// Parked first: a ping answered, so that the next reach the poller.
	if _, err := s.nc.Write(ping); err != nil {
		t.Fatal(err)
	}
	pingAnswer("the first ping")

	end := proxy.FanOutRunning(p)
	before := proxy.PingsInPlace(p)
	const n = 3
	for i := range n {
		if _, err := s.nc.Write(ping); err != nil {
			t.Fatal(err)
		}
		pingAnswer(fmt.Sprintf("ping %d during a fan-out that does not end", i))
	}
	if got := proxy.PingsInPlace(p) - before; got == 0 {
		t.Errorf("no ping answered in place by the poller during the fan-out: they went to readers, so this test no longer tests the poller's wait")
	}
	end()
	if _, err := s.nc.Write(ping); err != nil {
		t.Fatal(err)
	}
	pingAnswer("a ping after the fan-out")
}
