package conformance

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Sessions: handshake, timeout negotiation, passwords, close, expiry and
// re-attach (zookeeper-facts.md §2.1, §3.4).

// expiredResponse is the ConnectResponse ZooKeeper sends when a re-attach is
// refused (bad password, unknown or closed session): timeOut 0, sessionId 0,
// 16 zero bytes, and the readOnly byte echoed.
func checkExpiredResponse(t *testing.T, resp connectResponse) {
	t.Helper()
	if resp.ProtocolVersion != 0 || resp.TimeOut != 0 || resp.SessionID != 0 ||
		!bytes.Equal(resp.Passwd, make([]byte, 16)) || !resp.HasReadOnly || resp.ReadOnly {
		t.Fatalf("ConnectResponse = %+v, want the expired response {0 0 0 [16 zero bytes] readOnly=false}", resp)
	}
}

// javaRandomBytes is java.util.Random(seed).nextBytes(byte[n]).
func javaRandomBytes(seed int64, n int) []byte {
	const mult, mask = 0x5DEECE66D, (1 << 48) - 1
	s := (uint64(seed) ^ mult) & mask
	out := make([]byte, n)
	for i := 0; i < n; {
		s = (s*mult + 0xB) & mask
		rnd := int32(s >> 16) // next(32)
		for k := min(n-i, 4); k > 0; k-- {
			out[i] = byte(rnd)
			rnd >>= 8
			i++
		}
	}
	return out
}

func TestSessionHandshake(t *testing.T) {
	t.Run("NewSession", func(t *testing.T) {
		c := dialRaw(t)
		resp, err := c.handshake(newSessionRequest(10000))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeSessionByID(t, resp.SessionID, resp.Passwd) })
		if resp.ProtocolVersion != 0 {
			t.Errorf("protocolVersion = %d, want 0", resp.ProtocolVersion)
		}
		if resp.TimeOut != 10000 {
			t.Errorf("timeOut = %d, want 10000 (within bounds, unchanged)", resp.TimeOut)
		}
		if resp.SessionID == 0 {
			t.Errorf("sessionId = 0, want non-zero")
		}
		if len(resp.Passwd) != 16 || bytes.Equal(resp.Passwd, make([]byte, 16)) {
			t.Errorf("passwd = % x, want 16 non-zero bytes", resp.Passwd)
		}
		// A 45-byte request (with the readOnly byte) gets a 37-byte response
		// ending in readOnly=false.
		if resp.Len != 37 || !resp.HasReadOnly || resp.ReadOnly {
			t.Errorf("response is %d bytes (readOnly present %v value %v), want 37 bytes ending in readOnly=false",
				resp.Len, resp.HasReadOnly, resp.ReadOnly)
		}
		// The session works.
		rep := c.call(opExists, pathWatchReq("/", false))
		if rep.Err != errOK || len(rep.Body) != 68 {
			t.Errorf("exists / = %v, want OK with a 68-byte Stat", rep)
		}
	})

	t.Run("OldClientWithoutReadOnly", func(t *testing.T) {
		// A 44-byte request without the trailing readOnly byte: the server
		// treats the client as old and omits the byte from its response.
		c := dialRaw(t)
		req := newSessionRequest(10000)
		req.WithReadOnly = false
		if n := len(req.encode()); n != 44 {
			t.Fatalf("test bug: request is %d bytes, want 44", n)
		}
		resp, err := c.handshake(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeSessionByID(t, resp.SessionID, resp.Passwd) })
		if resp.Len != 36 || resp.HasReadOnly || resp.SessionID == 0 || resp.TimeOut != 10000 {
			t.Fatalf("response = %+v, want a 36-byte response (no readOnly byte) with a session", resp)
		}
	})

	for _, tc := range []struct {
		name      string
		requested int32
		want      func() int32
	}{
		{"TimeoutClampedToMin", 1000, minSessionTimeout},
		{"TimeoutClampedToMax", 100000, maxSessionTimeout},
		{"TimeoutAtMin", 2 * tickMs, minSessionTimeout},
		{"TimeoutAtMax", 20 * tickMs, maxSessionTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t)
			resp, err := c.handshake(newSessionRequest(tc.requested))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeSessionByID(t, resp.SessionID, resp.Passwd) })
			if resp.TimeOut != tc.want() || resp.SessionID == 0 {
				t.Fatalf("requested %d ms: negotiated timeOut = %d (session %#x), want %d (tickTime %d)",
					tc.requested, resp.TimeOut, resp.SessionID, tc.want(), tickMs)
			}
		})
	}

	t.Run("PasswordDerivation", func(t *testing.T) {
		// ZooKeeper derives the password from the session id:
		// new java.util.Random(sessionId ^ 0xB3415C00).nextBytes(byte[16]).
		// Clients of a migrated ZooKeeper keep their id and password, so the
		// derivation is part of the contract.
		for i := 0; i < 3; i++ {
			c := rawSession(t, 10000)
			want := javaRandomBytes(c.SessionID^0xB3415C00, 16)
			if !bytes.Equal(c.Passwd, want) {
				t.Fatalf("session %#x: passwd = % x, want % x", c.SessionID, c.Passwd, want)
			}
		}
	})

	t.Run("DistinctSessionIDs", func(t *testing.T) {
		seen := map[int64]bool{}
		for i := 0; i < 5; i++ {
			c := rawSession(t, 10000)
			if seen[c.SessionID] {
				t.Fatalf("session id %#x handed out twice", c.SessionID)
			}
			seen[c.SessionID] = true
		}
	})
}

func TestSessionCloseRemovesEphemeral(t *testing.T) {
	base := uniquePath(t)
	owner, _ := connect(t)
	watcher, _ := connect(t)
	eph := mustCreate(t, owner, base+"/e", []byte("eph"), zk.FlagEphemeral)
	st := mustStat(t, watcher, eph)
	if st.EphemeralOwner != owner.SessionID() {
		t.Fatalf("ephemeralOwner = %#x, want the creator's session %#x", st.EphemeralOwner, owner.SessionID())
	}
	_, _, dataW, err := watcher.GetW(eph)
	if err != nil {
		t.Fatal(err)
	}
	_, _, childW, err := watcher.ChildrenW(base)
	if err != nil {
		t.Fatal(err)
	}

	owner.Close()

	wantEvent(t, dataW, zk.EventNodeDeleted, eph)
	wantEvent(t, childW, zk.EventNodeChildrenChanged, base)
	mustNotExist(t, watcher, eph)
	pst := mustStat(t, watcher, base)
	if pst.NumChildren != 0 || pst.Pzxid <= st.Czxid || pst.Cversion != 2 {
		t.Fatalf("parent after session close: numChildren %d pzxid %#x cversion %d; want 0, > %#x, 2",
			pst.NumChildren, pst.Pzxid, pst.Cversion, st.Czxid)
	}
}

// cutDialer is a go-zookeeper Dialer whose connections the test can cut, and
// which can be told to refuse new dials (so that the client cannot re-attach).
type cutDialer struct {
	mu     sync.Mutex
	conns  []net.Conn
	refuse bool
}

func (d *cutDialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.refuse {
		return nil, errors.New("dial refused by the test")
	}
	nc, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		d.conns = append(d.conns, nc)
	}
	return nc, err
}

// cut closes every connection dialled so far; refuse decides whether later
// dials fail.
func (d *cutDialer) cut(refuse bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refuse = refuse
	for _, nc := range d.conns {
		nc.Close()
	}
	d.conns = nil
}

func (d *cutDialer) allow() {
	d.mu.Lock()
	d.refuse = false
	d.mu.Unlock()
}

// stateRecorder collects a client's session states through the event
// callback, which (unlike go-zookeeper's small event channel) never drops one.
type stateRecorder chan zk.State

func newStateRecorder() stateRecorder { return make(stateRecorder, 1000) }

func (s stateRecorder) callback(ev zk.Event) {
	if ev.Type == zk.EventSession {
		select {
		case s <- ev.State:
		default:
		}
	}
}

// wait waits (bounded) for the given state.
func (s stateRecorder) wait(t *testing.T, want zk.State, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case st := <-s:
			if st == want {
				return
			}
		case <-timeout:
			t.Fatalf("no %v session event within %v", want, d)
		}
	}
}

func TestSessionExpiryRemovesEphemeral(t *testing.T) {
	t.Parallel() // slow: waits for the session timeout
	base := uniquePath(t)
	d := &cutDialer{}
	timeout := time.Duration(minSessionTimeout()) * time.Millisecond
	states := newStateRecorder()
	owner, _ := connectWith(t, clientOpts{timeout: timeout, dialer: d.dial, callback: states.callback})
	watcher, _ := connect(t)
	sid := owner.SessionID()
	eph := mustCreate(t, owner, base+"/e", nil, zk.FlagEphemeral)
	_, _, existsW, err := watcher.ExistsW(eph)
	if err != nil {
		t.Fatal(err)
	}

	d.cut(true) // the owner loses its connection and cannot come back
	cutAt := time.Now()

	// The session outlives its connection for about its timeout.
	time.Sleep(timeout / 4)
	if st := mustStat(t, watcher, eph); st.EphemeralOwner != sid {
		t.Fatalf("ephemeralOwner = %#x, want %#x", st.EphemeralOwner, sid)
	}
	noEvent(t, watcher, existsW, "right after the connection was cut")

	// Then it expires and its ephemeral goes: within the timeout plus the
	// expiry granularity (one tick), with slack for a loaded machine.
	bound := timeout + 2*time.Duration(tickMs)*time.Millisecond + 5*time.Second
	ev := waitEvent(t, existsW, bound)
	elapsed := time.Since(cutAt)
	if ev.Type != zk.EventNodeDeleted || ev.Path != eph {
		t.Fatalf("event = %+v, want NodeDeleted %s", ev, eph)
	}
	// The last ping was at most a third of the timeout before the cut.
	if elapsed < timeout/2 {
		t.Fatalf("session expired %v after its connection was cut; timeout is %v", elapsed, timeout)
	}
	t.Logf("session %#x expired %v after the cut (timeout %v)", sid, elapsed.Round(time.Millisecond), timeout)
	mustNotExist(t, watcher, eph)

	// When the owner can reach the server again it is told its session expired.
	d.allow()
	states.wait(t, zk.StateExpired, 15*time.Second)
}

func TestSessionReattachAfterConnectionLoss(t *testing.T) {
	base := uniquePath(t)
	d := &cutDialer{}
	states := newStateRecorder()
	owner, _ := connectWith(t, clientOpts{dialer: d.dial, callback: states.callback})
	watcher, _ := connect(t)
	sid := owner.SessionID()
	eph := mustCreate(t, owner, base+"/e", []byte("v0"), zk.FlagEphemeral)
	_, _, existsW, err := watcher.ExistsW(eph)
	if err != nil {
		t.Fatal(err)
	}

	d.cut(false) // connection lost; the client reconnects at once
	states.wait(t, zk.StateDisconnected, 10*time.Second)
	states.wait(t, zk.StateHasSession, 15*time.Second)

	if got := owner.SessionID(); got != sid {
		t.Fatalf("after reconnecting, session id = %#x, want the same session %#x", got, sid)
	}
	st := mustStat(t, watcher, eph)
	if st.EphemeralOwner != sid {
		t.Fatalf("ephemeral owner = %#x, want %#x", st.EphemeralOwner, sid)
	}
	noEvent(t, watcher, existsW, "ephemeral of a re-attached session")
	// The re-attached session can write.
	if _, err := owner.Set(eph, []byte("v1"), 0); err != nil {
		t.Fatalf("set after re-attach: %v", err)
	}
	wantEvent(t, existsW, zk.EventNodeDataChanged, eph)
}

func TestSessionReattachRaw(t *testing.T) {
	base := uniquePath(t)
	c1 := rawSession(t, 10000)
	eph := base + "/e"
	c1.callOK(opCreate, createReq(eph, nil, flagEphemeral))

	c2 := dialRaw(t)
	resp, err := c2.handshake(connectRequest{TimeOut: 10000, SessionID: c1.SessionID, Passwd: c1.Passwd, WithReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.SessionID != c1.SessionID || !bytes.Equal(resp.Passwd, c1.Passwd) || resp.TimeOut != 10000 {
		t.Fatalf("re-attach response = %+v, want session %#x, the same password and timeOut 10000", resp, c1.SessionID)
	}
	// The session's old connection is closed by the server.
	if _, err := c1.readUntilClosed(rawIOTimeout); err != nil {
		t.Fatalf("old connection of a re-attached session: %v", err)
	}
	_, _, st := c2.getData(eph, false)
	if st.EphemeralOwner != c1.SessionID {
		t.Fatalf("ephemeral owner = %#x, want %#x", st.EphemeralOwner, c1.SessionID)
	}
}

func TestSessionReattachRefused(t *testing.T) {
	t.Run("WrongPassword", func(t *testing.T) {
		base := uniquePath(t)
		c1 := rawSession(t, 10000)
		c1.callOK(opCreate, createReq(base+"/e", nil, flagEphemeral))
		bad := bytes.Clone(c1.Passwd)
		bad[0] ^= 0xff
		c2 := dialRaw(t)
		resp, err := c2.handshake(connectRequest{TimeOut: 10000, SessionID: c1.SessionID, Passwd: bad, WithReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		checkExpiredResponse(t, resp)
		c2.expectClosedSilently(rawIOTimeout)
		// ZooKeeper 3.8 closes the session's current connection
		// (CLIENT_RECONNECT) before it checks the password, so even a refused
		// re-attach costs the owner its connection...
		if _, err := c1.readUntilClosed(rawIOTimeout); err != nil {
			t.Fatalf("session's connection after a re-attach with a wrong password: %v", err)
		}
		// ...but not its session: the right password still re-attaches, and
		// the ephemeral is still there.
		c3 := dialRaw(t)
		resp, err = c3.handshake(connectRequest{TimeOut: 10000, SessionID: c1.SessionID, Passwd: c1.Passwd, WithReadOnly: true})
		if err != nil || resp.SessionID != c1.SessionID {
			t.Fatalf("re-attach with the right password after a refused one: %+v, %v", resp, err)
		}
		if _, _, st := c3.getData(base+"/e", false); st.EphemeralOwner != c1.SessionID {
			t.Fatalf("ephemeral owner = %#x, want %#x", st.EphemeralOwner, c1.SessionID)
		}
	})

	t.Run("ClosedSession", func(t *testing.T) {
		c1 := dialRaw(t)
		if _, err := c1.handshake(newSessionRequest(10000)); err != nil {
			t.Fatal(err)
		}
		rep := c1.call(opCloseSession, nil)
		if rep.Err != errOK || len(rep.Body) != 0 {
			t.Fatalf("closeSession reply = %v, want OK, header only", rep)
		}
		c1.expectClosedSilently(rawIOTimeout)

		c2 := dialRaw(t)
		resp, err := c2.handshake(connectRequest{TimeOut: 10000, SessionID: c1.SessionID, Passwd: c1.Passwd, WithReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		checkExpiredResponse(t, resp)
		c2.expectClosedSilently(rawIOTimeout)
	})

	t.Run("UnknownSession", func(t *testing.T) {
		const id = 0x7e57_0000_0000_0001 // never handed out: top byte is not a server id
		c := dialRaw(t)
		resp, err := c.handshake(connectRequest{TimeOut: 10000, SessionID: id,
			Passwd: javaRandomBytes(id^0xB3415C00, 16), WithReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		checkExpiredResponse(t, resp)
		c.expectClosedSilently(rawIOTimeout)
	})
}

func TestSessionCloseSessionRaw(t *testing.T) {
	base := uniquePath(t)
	c := dialRaw(t)
	if _, err := c.handshake(newSessionRequest(10000)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeSessionByID(t, c.SessionID, c.Passwd) })
	c.callOK(opCreate, createReq(base+"/e", nil, flagEphemeral))
	rep := c.call(opCloseSession, nil)
	if rep.Err != errOK || len(rep.Body) != 0 {
		t.Fatalf("closeSession reply = %v, want OK with no body", rep)
	}
	c.expectClosedSilently(rawIOTimeout)
	mustNotExist(t, admin, base+"/e")
}

func TestSessionLastZxidAheadRefused(t *testing.T) {
	base := uniquePath(t)
	c := rawSession(t, 10000)
	zxid := c.callOK(opCreate, createReq(base+"/n", nil, 0)).Zxid

	// A client that has seen the server's latest zxid is accepted...
	ok := dialRaw(t)
	req := newSessionRequest(10000)
	req.LastZxidSeen = zxid
	resp, err := ok.handshake(req)
	if err != nil || resp.SessionID == 0 {
		t.Fatalf("connect with lastZxidSeen = last zxid %#x: %+v, %v; want a session", zxid, resp, err)
	}
	closeSessionByID(t, resp.SessionID, resp.Passwd)

	// ...one that claims to have seen far more is refused: the connection is
	// closed without a ConnectResponse ("client must try another server").
	far := dialRaw(t)
	req.LastZxidSeen = zxid + 1<<32
	if err := far.writeFrame(req.encode()); err != nil {
		t.Fatal(err)
	}
	far.expectClosedSilently(rawIOTimeout)
}
