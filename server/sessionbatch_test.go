package server

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/proxy/wire"
	"github.com/zkraft/zkraft/session"
)

// channelConnect opens channel ch on u with a ConnectRequest.
func (u *upstreamFrames) channelConnect(ch int64, req *jute.ConnectRequest) {
	u.t.Helper()
	u.write(wire.AppendRecord(nil, wire.KindOpen, ch, &wire.Open{ClientAddr: "127.0.0.1:9", Connect: jute.Marshal(req)}))
}

// handshakes reads frames until each of chans has had its
// ConnectResponse (and, when it is a refusal, its Close), and returns
// them; frames of other channels (the Close of a session's old channel
// once it moved) are skipped.
func (u *upstreamFrames) handshakes(chans map[int64]bool) map[int64]*jute.ConnectResponse {
	u.t.Helper()
	got := map[int64]*jute.ConnectResponse{}
	closed := map[int64]bool{}
	done := func() bool {
		for ch := range chans {
			r := got[ch]
			if r == nil || (r.SessionID == 0 && !closed[ch]) {
				return false
			}
		}
		return true
	}
	u.nc.SetDeadline(time.Now().Add(60 * time.Second))
	for !done() {
		k, ch, p := u.read()
		if !chans[ch] {
			continue
		}
		switch k {
		case wire.KindData:
			if got[ch] == nil {
				r := new(jute.ConnectResponse)
				if err := jute.Unmarshal(p, r); err != nil {
					u.t.Fatalf("channel %d: ConnectResponse: %v", ch, err)
				}
				got[ch] = r
			}
		case wire.KindClose:
			if got[ch] == nil {
				u.t.Fatalf("channel %d closed before its ConnectResponse", ch)
			}
			closed[ch] = true
		}
	}
	return got
}

// TestProxiedHandshakesBatched: the handshakes of one burst of proxied
// channels (new sessions, sessions moving onto new channels, an expired
// session, a wrong password) held while they queue are proposed as one
// KindSessions entry, and each gets the answer its own handshake gets:
// the new sessions an id each, the moving ones their session (ephemeral
// kept, their old channel closed), the expired session and the wrong
// password ZooKeeper's "expired" answer (session id 0, then the channel's
// close), the live session whose password was wrong left as it was.
func TestProxiedHandshakesBatched(t *testing.T) {
	s := startStandalone(t, func(c *Config) { c.ProxyAddr = "127.0.0.1:0" })
	u := dialUpstreamV2(t, s)
	direct := connectZK(t, s.Addr().String())

	const moving, fresh = 20, 20
	// Sessions to move, each with an ephemeral; one to expire; one to
	// be asked for with a wrong password.
	var ids []int64
	next := int64(1)
	for i := 0; i < moving+2; i++ {
		ch := next
		next++
		u.channelConnect(ch, &jute.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})
		r := u.handshakes(map[int64]bool{ch: true})[ch]
		if r.SessionID == 0 {
			t.Fatalf("channel %d: no session", ch)
		}
		ids = append(ids, r.SessionID)
		if i < moving {
			req := jute.AppendFrame(nil, &jute.RequestHeader{Xid: 1, Type: jute.OpCreate},
				&jute.CreateRequest{Path: fmt.Sprintf("/e%d", i), ACL: openACLs(), Flags: jute.FlagEphemeral})[4:]
			u.write(wire.AppendFrame(nil, wire.KindData, ch, req))
		}
	}
	expired, wrong := ids[moving], ids[moving+1]
	for i := 0; i < moving; i++ {
		waitExists(t, direct, fmt.Sprintf("/e%d", i))
	}
	if _, err := direct.Sync("/"); err != nil {
		t.Fatal(err)
	}
	// The session to expire is closed by its client.
	u.write(wire.AppendFrame(nil, wire.KindData, int64(moving+1), jute.AppendFrame(nil, &jute.RequestHeader{Xid: 2, Type: jute.OpCloseSession})[4:]))
	waitNoSession(t, s, expired)

	b := s.cell.sessions
	batches0, ops0 := b.batches.Load(), b.ops.Load()
	b.hold = make(chan struct{})
	burst := map[int64]bool{}
	kind := map[int64]string{}
	for i := 0; i < fresh; i++ {
		u.channelConnect(next, &jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)})
		burst[next], kind[next] = true, "fresh"
		next++
	}
	moved := map[int64]int64{}
	for i := 0; i < moving; i++ {
		u.channelConnect(next, &jute.ConnectRequest{TimeOut: 30000, SessionID: ids[i], Passwd: session.Password(ids[i]), LastZxidSeen: s.cell.zxid.Load()})
		burst[next], kind[next], moved[next] = true, "moving", ids[i]
		next++
	}
	u.channelConnect(next, &jute.ConnectRequest{TimeOut: 30000, SessionID: expired, Passwd: session.Password(expired)})
	burst[next], kind[next] = true, "expired"
	next++
	bad := session.Password(wrong)
	bad[0] ^= 0xff
	u.channelConnect(next, &jute.ConnectRequest{TimeOut: 30000, SessionID: wrong, Passwd: bad})
	burst[next], kind[next] = true, "wrong password"
	next++
	// Every op of the burst but the wrong password's (checked without
	// the log, as a single handshake's) queues behind the held proposers.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b.mu.Lock()
		n := len(b.mu.queue)
		b.mu.Unlock()
		if n == fresh+moving+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d handshakes queued", n, fresh+moving+1)
		}
	}
	close(b.hold)
	got := u.handshakes(burst)

	seen := map[int64]bool{}
	negotiated := session.NegotiateTimeout(10000, int32(s.cfg.MinSessionTimeout/time.Millisecond), int32(s.cfg.MaxSessionTimeout/time.Millisecond))
	for ch, r := range got {
		switch kind[ch] {
		case "fresh":
			if r.SessionID == 0 || seen[r.SessionID] || r.TimeOut != negotiated || !bytes.Equal(r.Passwd, session.Password(r.SessionID)) {
				t.Errorf("new session on channel %d: %+v", ch, r)
			}
			seen[r.SessionID] = true
		case "moving":
			if r.SessionID != moved[ch] || !bytes.Equal(r.Passwd, session.Password(r.SessionID)) {
				t.Errorf("session %#x moving to channel %d: %+v", moved[ch], ch, r)
			}
		default: // expired, wrong password: ZooKeeper's answer
			if r.SessionID != 0 || r.TimeOut != 0 {
				t.Errorf("%s on channel %d: %+v", kind[ch], ch, r)
			}
		}
	}
	if d := b.batches.Load() - batches0; d != 1 || b.ops.Load()-ops0 != fresh+moving+1 {
		t.Errorf("the burst took %d proposals for %d handshakes, want 1 for %d", d, b.ops.Load()-ops0, fresh+moving+1)
	}
	// The moved sessions kept their ephemerals; the wrong password left
	// its session alive (a later handshake with the right one takes it).
	for i := 0; i < moving; i++ {
		if _, st, err := direct.Get(fmt.Sprintf("/e%d", i)); err != nil || st.EphemeralOwner != ids[i] {
			t.Errorf("/e%d after its session moved: %+v %v", i, st, err)
		}
	}
	u.channelConnect(next, &jute.ConnectRequest{TimeOut: 30000, SessionID: wrong, Passwd: session.Password(wrong)})
	if r := u.handshakes(map[int64]bool{next: true})[next]; r.SessionID != wrong {
		t.Errorf("session %#x after a wrong password: %+v", wrong, r)
	}
	// A direct client's handshake is its own proposal, as before.
	before := b.ops.Load()
	connectZK(t, s.Addr().String())
	if b.ops.Load() != before {
		t.Errorf("a direct client's handshake went through the batcher")
	}
}

func waitNoSession(t *testing.T, s *Server, id int64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s.cell.mu.Lock()
		_, ok := s.cell.mu.owners[id]
		s.cell.mu.Unlock()
		if !ok {
			return
		}
	}
	t.Fatalf("session %#x still open", id)
}

func openACLs() []jute.ACL {
	return []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}
}

func waitExists(t *testing.T, c *zk.Conn, path string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok, _, err := c.Exists(path); err == nil && ok {
			return
		}
	}
	t.Fatalf("%s not created", path)
}

// TestSingleHandshakes: with Config.SingleHandshakes a proxied channel's
// handshake is its own proposal, as a direct client's (a rolling upgrade
// from a version without KindSessions).
func TestSingleHandshakes(t *testing.T) {
	s := startStandalone(t, func(c *Config) { c.ProxyAddr = "127.0.0.1:0"; c.SingleHandshakes = true })
	u := dialUpstreamV2(t, s)
	chans := map[int64]bool{}
	for ch := int64(1); ch <= 3; ch++ {
		u.channelConnect(ch, &jute.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})
		chans[ch] = true
	}
	for ch, r := range u.handshakes(chans) {
		if r.SessionID == 0 {
			t.Errorf("channel %d: no session", ch)
		}
	}
	if n := s.cell.sessions.ops.Load(); n != 0 {
		t.Errorf("%d handshakes went through the batcher", n)
	}
}

// TestAbandonedHandshakeNotProposed: a session's reconnect queued in the
// batcher behind a later one whose channel closes before the batch is
// proposed (its client gave up on it) is dropped, never proposed: the
// session stays with the channel that holds it, which can still write.
// Proposed, the abandoned attach would have moved the session to a
// channel nobody reads (the live one's writes then SESSIONMOVED).
func TestAbandonedHandshakeNotProposed(t *testing.T) {
	s := startStandalone(t, func(c *Config) { c.ProxyAddr = "127.0.0.1:0" })
	u := dialUpstreamV2(t, s)
	u.channelConnect(1, &jute.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})
	id := u.handshakes(map[int64]bool{1: true})[1].SessionID
	if id == 0 {
		t.Fatal("no session")
	}
	b := s.cell.sessions
	ops0, dropped0 := b.ops.Load(), b.dropped.Load()
	b.hold = make(chan struct{})
	reconnect := &jute.ConnectRequest{TimeOut: 30000, SessionID: id, Passwd: session.Password(id), LastZxidSeen: s.cell.zxid.Load()}
	u.channelConnect(2, reconnect) // the connection its client keeps
	waitQueued(t, b, 1)
	u.channelConnect(3, reconnect) // an attempt its client abandons
	waitQueued(t, b, 2)
	u.write(wire.AppendFrame(nil, wire.KindClose, 3))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b.mu.Lock()
		gone := isClosed(b.mu.queue[1].gone)
		b.mu.Unlock()
		if gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned channel's connection did not end")
		}
	}
	close(b.hold)
	if r := u.handshakes(map[int64]bool{2: true})[2]; r.SessionID != id {
		t.Fatalf("session %#x on channel 2: %+v", id, r)
	}
	if got := b.ops.Load() - ops0; got != 1 {
		t.Errorf("%d attaches proposed, want 1 (the abandoned one dropped)", got)
	}
	if got := b.dropped.Load() - dropped0; got != 1 {
		t.Errorf("%d handshakes dropped, want 1", got)
	}
	// The session is channel 2's: its write succeeds.
	u.write(wire.AppendFrame(nil, wire.KindData, 2, jute.AppendFrame(nil, &jute.RequestHeader{Xid: 7, Type: jute.OpCreate},
		&jute.CreateRequest{Path: "/kept", ACL: openACLs(), Flags: jute.FlagEphemeral})[4:]))
	u.nc.SetDeadline(time.Now().Add(30 * time.Second))
	for {
		k, ch, p := u.read()
		if k != wire.KindData || ch != 2 {
			continue
		}
		h := new(jute.ReplyHeader)
		if err := jute.Unmarshal(p, h); err != nil {
			t.Fatal(err)
		}
		if h.Xid != 7 {
			continue
		}
		if h.Err != jute.ErrOK {
			t.Fatalf("create on the kept channel: %v", h.Err)
		}
		break
	}
}

func waitQueued(t *testing.T, b *sessionBatcher, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b.mu.Lock()
		got := len(b.mu.queue)
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d handshakes queued", got, n)
		}
	}
}
