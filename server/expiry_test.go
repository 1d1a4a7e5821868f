package server

import (
	"testing"
	"time"

	"github.com/zkraft/zkraft/raftsm"
)

// TestSessionExpiresAfterRestart: a session whose client is gone still
// expires after the member restarts (the restarted leader's view of
// keep-alives starts at its applied index), and one kept alive survives.
func TestSessionExpiresAfterRestart(t *testing.T) {
	start := restartable(t)
	s := start()
	const gone, kept = int64(0x0100000000000077), int64(0x0100000000000078)
	for _, id := range []int64{gone, kept} {
		rep, err := proposeWait(s.cell.rep, &raftsm.Command{Kind: raftsm.KindCreateSession, Session: id, Timeout: 1000, Time: time.Now().UnixMilli()}, nil)
		if err != nil || rep.Err != 0 {
			t.Fatalf("create session: %v %v", rep, err)
		}
	}
	// Keep-alives before the restart, so both have a stored keep-alive.
	s.cell.alive.Record(gone)
	s.cell.alive.Record(kept)
	time.Sleep(400 * time.Millisecond)
	s.Close()
	s = start()
	defer s.Close()
	exists := func(id int64) bool {
		ok, err := readValue(s.cell.rep, nil, localRead, func(v raftsm.View) (bool, error) {
			_, ok, err := v.Session(id)
			return ok, err
		})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	deadline := time.Now().Add(10 * time.Second)
	for exists(gone) {
		s.cell.alive.Record(kept)
		if time.Now().After(deadline) {
			t.Fatal("the abandoned session never expired after the restart")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !exists(kept) {
		t.Fatal("the kept-alive session expired")
	}
}

// restartable returns a function that starts a standalone member on the
// same data dir and Raft address each time, for tests that restart it.
func restartable(t *testing.T) func() *Server {
	dir := t.TempDir()
	raft := freeAddr(t)
	return func() *Server {
		t.Helper()
		s, err := New(Config{ClientAddr: "127.0.0.1:0", RaftAddr: raft, DataDir: dir, TickTime: 250 * time.Millisecond,
			Logger: testLogger(t, 1)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}
