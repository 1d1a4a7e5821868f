package session_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/session"
	"github.com/zkraft/zkraft/internal/clienttest"
)

// Killing the leader of a 3-member ensemble (SIGKILL) puts a session
// connected to it in jeopardy, then safe on the same session on another
// member, and never lost, with a 10 s session timeout; a session on a
// follower is never lost either. Its ephemeral node survives.
func TestLeaderKillIsJeopardyThenSafe(t *testing.T) {
	for _, kind := range []clienttest.Kind{clienttest.Zkraft, clienttest.ZooKeeper} {
		t.Run(string(kind), func(t *testing.T) {
			const timeout = 10 * time.Second
			e := clienttest.Ensemble(t, kind, 3)
			leader := e.Leader()
			if leader == nil {
				t.Fatal("no leader")
			}
			// go-zookeeper picks a member at random: open sessions until
			// one is on the leader and one on a follower.
			var onLeader, onFollower *session.Session
			var recL, recF *recorder
			for i := 0; i < 30 && (onLeader == nil || onFollower == nil); i++ {
				rec := newRecorder()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				s, err := session.Open(ctx, session.Config{Servers: e.Addrs(), SessionTimeout: timeout, OnEvent: rec.on})
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case s.Conn().Server() == leader.Addr() && onLeader == nil:
					onLeader, recL = s, rec
				case s.Conn().Server() != leader.Addr() && onFollower == nil:
					onFollower, recF = s, rec
				default:
					s.Close()
					continue
				}
				t.Cleanup(func() { s.Close() })
			}
			if onLeader == nil || onFollower == nil {
				t.Fatal("no session landed on the leader and one on a follower")
			}
			if got := onLeader.Timeout(); got != timeout {
				t.Fatalf("negotiated timeout %v", got)
			}
			ids := []int64{onLeader.SessionID(), onFollower.SessionID()}
			for i, s := range []*session.Session{onLeader, onFollower} {
				if _, err := s.Conn().Create(fmt.Sprintf("/eph-%d", i), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
					t.Fatal(err)
				}
			}
			killed := time.Now()
			leader.Kill()
			j := recL.wait(t, 2, timeout)
			safe := recL.wait(t, 3, 3*timeout)
			if j.State != session.Jeopardy || safe.State != session.Safe || safe.SessionID != ids[0] {
				t.Fatalf("session on the leader: %v (%+v)", states(recL.all()), recL.all())
			}
			t.Logf("jeopardy %v after the kill, safe %v after it, on %s",
				j.At.Sub(killed).Round(time.Millisecond), safe.At.Sub(killed).Round(time.Millisecond), onLeader.Conn().Server())
			// Watch for a false lost for two session timeouts.
			time.Sleep(2 * timeout)
			for i, rec := range []*recorder{recL, recF} {
				for _, ev := range rec.all() {
					if ev.State == session.Lost {
						t.Fatalf("session %d: lost after the leader kill: %v (%+v)", i, states(rec.all()), ev)
					}
				}
			}
			for i, s := range []*session.Session{onLeader, onFollower} {
				if s.State() != session.Safe || s.SessionID() != ids[i] || s.Context().Err() != nil {
					t.Fatalf("session %d: state %v id 0x%x (was 0x%x)", i, s.State(), s.SessionID(), ids[i])
				}
				ok, st, err := s.Conn().Exists(fmt.Sprintf("/eph-%d", i))
				if err != nil || !ok || st.EphemeralOwner != ids[i] {
					t.Fatalf("session %d's ephemeral after the kill: %v %+v %v", i, ok, st, err)
				}
			}
			t.Logf("follower's session: %v", states(recF.all()))
		})
	}
}
