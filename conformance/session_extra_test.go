package conformance

import (
	"bytes"
	"testing"
	"time"
)

// More sessions: expiry timing on a silent raw connection, and what a
// re-attach does to the old connection's watches (zookeeper-facts.md §2.1,
// §3.4).

func TestSessionExpiryTiming(t *testing.T) {
	t.Parallel() // slow: waits for the session timeout
	base := uniquePath(t)
	timeout := minSessionTimeout()
	tick := time.Duration(tickMs) * time.Millisecond

	w := rawSession(t, maxSessionTimeout()) // outlives the wait without pings
	owner := rawSession(t, timeout)
	if owner.TimeOut != timeout {
		t.Fatalf("negotiated timeout %d, want %d", owner.TimeOut, timeout)
	}
	eph := base + "/e"
	owner.callOK(opCreate, createReq(eph, nil, flagEphemeral))
	// The server last heard from the owner at most now; from here on the
	// owner sends nothing, not even pings.
	lastHeard := time.Now()
	w.callOK(opExists, pathWatchReq(eph, true))

	// ZooKeeper expires a session between its timeout and its timeout plus
	// one tick after the last packet (expiry times are rounded up to the
	// tick), then deletes its ephemerals.
	bound := time.Duration(timeout)*time.Millisecond + tick + 2*time.Second
	var evs []watcherEvent
	for len(evs) == 0 && time.Since(lastHeard) < bound {
		evs = w.drainEvents(100 * time.Millisecond)
	}
	elapsed := time.Since(lastHeard)
	wantEvents(t, "ephemeral of the expired session", evs, ev(eventNodeDeleted, eph))
	if min := time.Duration(timeout)*time.Millisecond - 200*time.Millisecond; elapsed < min {
		t.Fatalf("session expired %v after its last packet; its timeout is %d ms", elapsed, timeout)
	}
	t.Logf("session expired %v after its last packet (timeout %d ms, tick %v)", elapsed.Round(10*time.Millisecond), timeout, tick)

	// The server closes the expired session's connection without a word.
	owner.expectClosedSilently(rawIOTimeout)
	// And a re-attach is told the session expired.
	c := dialRaw(t)
	resp, err := c.handshake(connectRequest{TimeOut: timeout, SessionID: owner.SessionID, Passwd: owner.Passwd, WithReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	checkExpiredResponse(t, resp)
}

func TestSessionReattachDropsConnectionWatches(t *testing.T) {
	// Watches belong to a connection: when a second connection re-attaches
	// to the session, the first is closed and its watches are gone; the new
	// connection has none until it sends setWatches.
	base := uniquePath(t)
	n := mustCreate(t, admin, base+"/n", nil, 0)
	c1 := rawSession(t, 10000)
	c1.callOK(opGetData, pathWatchReq(n, true))
	c1.addWatch(base, addWatchPersistentRecursive)

	c2 := dialRaw(t)
	resp, err := c2.handshake(connectRequest{TimeOut: 10000, SessionID: c1.SessionID, Passwd: c1.Passwd, WithReadOnly: true})
	if err != nil || resp.SessionID != c1.SessionID || !bytes.Equal(resp.Passwd, c1.Passwd) {
		t.Fatalf("re-attach: %+v, %v", resp, err)
	}
	frames, err := c1.readUntilClosed(rawIOTimeout)
	if err != nil {
		t.Fatalf("old connection of a re-attached session: %v", err)
	}
	if len(frames) != 0 {
		t.Fatalf("old connection got %d frame(s) before it was closed, first % x", len(frames), frames[0])
	}
	step(t, c2, "changes after the re-attach", func() {
		adminSet(t, n, "x")()
		adminCreate(t, base+"/new")()
	})
	if rep := c2.call(opCheckWatches, watchTypeReq(n, watcherAny)); rep.Err != errNoWatcher {
		t.Fatalf("checkWatches on the new connection: %v, want NOWATCHER", rep)
	}
	// setWatches2 on the new connection brings them back.
	if err := c2.sendXid(xidSetWatches, opSetWatches2, setWatches2Req(c2.callOK(opSync, pathReq("/")).Zxid,
		[]string{n}, nil, nil, nil, []string{base})); err != nil {
		t.Fatal(err)
	}
	if rep := c2.await(xidSetWatches); rep.Err != errOK {
		t.Fatalf("setWatches2: %v", rep)
	}
	step(t, c2, "changes after setWatches2", func() {
		adminSet(t, n, "y")()
		adminCreate(t, base+"/newer")()
	}, ev(eventNodeDataChanged, n), ev(eventNodeCreated, base+"/newer"))
}
