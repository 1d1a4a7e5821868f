// Package clienttest is the harness of the client tree's tests: it runs
// each test against a real in-process zkraft and a real Apache ZooKeeper
// 3.8 (Each), starts ensembles of either as processes that can be killed
// and restarted (Ensemble), and ends a session from outside the client
// that holds it, as Curator's KillSession does (Creds, KillSession).
//
// Only tests import it. It may import the server and the other harnesses
// under internal/; the client packages themselves never do.
package clienttest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkraft/zkraft/internal/launch"
	"github.com/zkraft/zkraft/internal/testserver"
	"github.com/zkraft/zkraft/internal/zktest"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/server"
)

// Kind names a server implementation.
type Kind string

const (
	Zkraft    Kind = "zkraft"
	ZooKeeper Kind = "zookeeper"
)

// Target is a running server a test talks to.
type Target struct {
	Kind  Kind
	Addrs []string
}

// Addr is the first member's address.
func (tg *Target) Addr() string { return tg.Addrs[0] }

// FourLetter sends a four-letter word to the first member.
func (tg *Target) FourLetter(word string) (string, error) {
	return launch.FourLetter(tg.Addr(), word, 3*time.Second)
}

// StartZkraft starts a standalone in-process zkraft with every
// four-letter word enabled; tweak adjusts its configuration further.
func StartZkraft(t testing.TB, tweak ...func(*server.Config)) *Target {
	t.Helper()
	addr := testserver.Start(t, append([]func(*server.Config){func(c *server.Config) { c.FourLetterWords = []string{"*"} }}, tweak...)...)
	return &Target{Kind: Zkraft, Addrs: []string{addr}}
}

// StartZooKeeper starts a standalone Apache ZooKeeper 3.8.
func StartZooKeeper(t testing.TB) *Target {
	t.Helper()
	s := zktest.Start(t, zktest.Config{DataDir: t.TempDir()})
	return &Target{Kind: ZooKeeper, Addrs: []string{s.Addr}}
}

// Each runs f as a subtest against a standalone zkraft and then against a
// standalone Apache ZooKeeper 3.8, each started once for all of f's own
// subtests.
func Each(t *testing.T, f func(t *testing.T, tg *Target)) {
	t.Helper()
	t.Run(string(Zkraft), func(t *testing.T) { f(t, StartZkraft(t)) })
	t.Run(string(ZooKeeper), func(t *testing.T) { f(t, StartZooKeeper(t)) })
}

// Ensemble starts n members of kind as processes (zkraft built from this
// repository) and waits until they serve. Members can be killed
// (SIGKILL) and started again on their directories; all are stopped when
// the test ends.
func Ensemble(t testing.TB, kind Kind, n int) *launch.Ensemble {
	t.Helper()
	if kind == ZooKeeper {
		zktest.Require(t)
	}
	dir := t.TempDir()
	cfg := launch.Config{System: launch.System(kind), Members: n, Dir: filepath.Join(dir, "members"), Heap: "256m", LogLevel: "info"}
	if kind == Zkraft {
		cfg.ZkraftBin = filepath.Join(dir, "zkraft")
		if err := launch.BuildZkraft(cfg.ZkraftBin); err != nil {
			t.Fatal(err)
		}
	}
	e, err := launch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.StartWait(context.Background(), 90*time.Second, 3); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	// Registered after Stop, so run before it: what each member said, for
	// a test that failed.
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range e.Members {
				t.Logf("member %d (%s) log, last lines:\n%s", m.ID, m.Addr(), m.LogTail(150))
			}
		}
	})
	return e
}

// WaitServing waits until m serves sessions again after a start.
func WaitServing(t testing.TB, e *launch.Ensemble, limit time.Duration) {
	t.Helper()
	if err := e.Wait(context.Background(), limit); err != nil {
		t.Fatal(err)
	}
}

// Creds records the session id and password of the latest session a
// client was granted on the connections it dials: put Dial in the
// client's configuration.
type Creds struct {
	mu     sync.Mutex
	id     int64
	passwd []byte
}

// Dial is a zk.Dialer.
func (c *Creds) Dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &credConn{Conn: nc, c: c}, nil
}

// Session returns the latest session id and password seen.
func (c *Creds) Session() (int64, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id, append([]byte(nil), c.passwd...)
}

// credConn reads the first frame, the ConnectResponse, on its way to the
// client.
type credConn struct {
	net.Conn
	c    *Creds
	buf  []byte
	done bool
}

func (cc *credConn) Read(p []byte) (int, error) {
	n, err := cc.Conn.Read(p)
	if !cc.done && n > 0 {
		cc.buf = append(cc.buf, p[:n]...)
		if len(cc.buf) >= 4 {
			l := int(binary.BigEndian.Uint32(cc.buf))
			if len(cc.buf) >= 4+l {
				cc.done = true
				var r jute.ConnectResponse
				if jute.Unmarshal(cc.buf[4:4+l], &r) == nil && r.SessionID != 0 {
					cc.c.mu.Lock()
					cc.c.id, cc.c.passwd = r.SessionID, r.Passwd
					cc.c.mu.Unlock()
				}
				cc.buf = nil
			}
		}
	}
	return n, err
}

// KillSession ends session id from a connection of its own (the
// session's password proves the right to), as a server would expire it:
// its ephemeral nodes go and its own client learns that it expired when
// it next reaches a server.
func KillSession(addr string, id int64, passwd []byte) error {
	nc, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: 10000, SessionID: id, Passwd: passwd})); err != nil {
		return err
	}
	body, err := jute.ReadFrame(nc, nil, maxFrame)
	if err != nil {
		return err
	}
	var cr jute.ConnectResponse
	if err := jute.Unmarshal(body, &cr); err != nil {
		return err
	}
	if cr.SessionID != id {
		return fmt.Errorf("clienttest: the server did not resume session 0x%x (got 0x%x): already gone?", id, cr.SessionID)
	}
	if _, err := nc.Write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: 1, Type: jute.OpCloseSession})); err != nil {
		return err
	}
	for {
		body, err := jute.ReadFrame(nc, nil, maxFrame)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil // closed after the reply, or instead of it
			}
			return err
		}
		var h jute.ReplyHeader
		if err := jute.Unmarshal(body, &h); err != nil {
			return err
		}
		if h.Xid == 1 {
			if h.Err != jute.ErrOK {
				return fmt.Errorf("clienttest: closeSession: %v", h.Err)
			}
			return nil
		}
	}
}

// Watchers returns, from wchp, the paths watched on tg and how many
// sessions watch each.
func Watchers(t testing.TB, tg *Target) map[string]int {
	t.Helper()
	out, err := tg.FourLetter("wchp")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	cur := ""
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "/"):
			cur = strings.TrimSpace(line)
			m[cur] += 0
		case strings.HasPrefix(strings.TrimSpace(line), "0x") && cur != "":
			m[cur]++
		}
	}
	return m
}

// maxFrame bounds a frame read from the server.
const maxFrame = 16 << 20
