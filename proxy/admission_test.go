package proxy_test

import (
	"bufio"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/proxy"
)

// TestHandshakeFloodBesideEstablished: 20 established go-zookeeper
// sessions (timeout 10 s) use one proxy while 600 raw handshakes and 40
// more go-zookeeper clients arrive at it at once, with at most 8
// handshakes in flight to the member. The established sessions keep
// their sessions and connections (no Disconnected, no Expired) and every
// request of theirs is answered; every raw handshake is answered with a
// session or refused with its connection closed, none left hanging
// until its client gives up; every go-zookeeper client of the flood gets
// its session (retrying, as it does, when refused); the flood did queue,
// and no handshake slot is left taken.
func TestHandshakeFloodBesideEstablished(t *testing.T) {
	const (
		established = 20
		raw         = 600
		zkFlood     = 40
		timeout     = 10 * time.Second
	)
	m := startMember(t, nil)
	p := startProxyWith(t, proxy.Config{HandshakesInFlight: 8}, m)
	addr := p.Addr().String()

	type est struct {
		c        *zk.Conn
		id       int64
		lost     atomic.Int64 // Disconnected or Expired events
		requests atomic.Int64
		failed   atomic.Int64
	}
	ests := make([]*est, established)
	for i := range ests {
		c, ev := connect(t, timeout, addr)
		e := &est{c: c, id: c.SessionID()}
		ests[i] = e
		go func() {
			for x := range ev {
				if x.State == zk.StateDisconnected || x.State == zk.StateExpired {
					e.lost.Add(1)
				}
			}
		}()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, e := range ests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if _, _, err := e.c.Exists("/"); err != nil {
					e.failed.Add(1)
				} else {
					e.requests.Add(1)
				}
			}
		}()
	}

	// The flood: raw handshakes, each a new session with a 3 s timeout
	// (a 1 s budget in the queue), all at once.
	var answered, refused, stalled atomic.Int64
	var flood sync.WaitGroup
	start := make(chan struct{})
	for range raw {
		flood.Add(1)
		go func() {
			defer flood.Done()
			<-start
			switch rawHandshake(addr, 30*time.Second) {
			case nil:
				answered.Add(1)
			case errRefused:
				refused.Add(1)
			default:
				stalled.Add(1)
			}
		}()
	}
	zkDone := make(chan error, zkFlood)
	for range zkFlood {
		go func() {
			<-start
			c, ev, err := zk.Connect([]string{addr}, timeout, zk.WithLogger(quiet{}))
			if err != nil {
				zkDone <- err
				return
			}
			defer c.Close()
			deadline := time.After(60 * time.Second)
			for {
				select {
				case x := <-ev:
					if x.State == zk.StateHasSession {
						zkDone <- nil
						return
					}
				case <-deadline:
					zkDone <- errors.New("no session within 60 s")
					return
				}
			}
		}()
	}
	close(start)
	flood.Wait()
	for range zkFlood {
		if err := <-zkDone; err != nil {
			t.Errorf("a go-zookeeper client of the flood: %v", err)
		}
	}
	close(stop)
	wg.Wait()

	if n := stalled.Load(); n > 0 {
		t.Errorf("%d of %d flood handshakes neither answered nor refused before their client gave up", n, raw)
	}
	if answered.Load() == 0 {
		t.Errorf("no flood handshake was answered (%d refused)", refused.Load())
	}
	for i, e := range ests {
		if e.lost.Load() > 0 || e.c.SessionID() != e.id {
			t.Errorf("established session %d (%#x): %d disconnects or expiries, id now %#x", i, e.id, e.lost.Load(), e.c.SessionID())
		}
		if e.failed.Load() > 0 || e.requests.Load() == 0 {
			t.Errorf("established session %d: %d requests answered, %d failed", i, e.requests.Load(), e.failed.Load())
		}
	}
	_, queued, refusedP, gone := proxy.HandshakeFigures(p)
	if queued == 0 {
		t.Errorf("no handshake queued: the flood never filled the %d slots", 8)
	}
	// Every slot comes back once the answers are in.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		inFlight, _, _, _ := proxy.HandshakeFigures(p)
		if inFlight == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d handshake slots still taken after the flood", inFlight)
		}
	}
	t.Logf("flood: %d answered, %d refused by the client's count; the proxy queued %d, refused %d, %d clients gone while queued; established: %d requests answered, 0 lost",
		answered.Load(), refused.Load(), queued, refusedP, gone, func() (n int64) {
			for _, e := range ests {
				n += e.requests.Load()
			}
			return n
		}())
}

// errRefused: the connection was closed before the handshake's answer.
var errRefused = errors.New("refused: closed without an answer")

// rawHandshake asks addr for a new session (timeout 3 s) and waits at
// most d: nil when answered with a session, errRefused when closed
// without an answer, anything else when it timed out or failed.
func rawHandshake(addr string, d time.Duration) error {
	nc, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(d))
	if _, err := nc.Write(jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: 3000, Passwd: make([]byte, 16)})); err != nil {
		return err
	}
	body, err := jute.ReadFrame(bufio.NewReader(nc), nil, 1<<20)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return err
	case err != nil:
		return errRefused // EOF or reset: closed by the proxy
	}
	resp := new(jute.ConnectResponse)
	if err := jute.Unmarshal(body, resp); err != nil {
		return err
	}
	if resp.SessionID == 0 {
		return errors.New("answered without a session")
	}
	return nil
}

// TestHandshakesRefusedWhenMemberCannotAnswer: a proxy whose member has
// lost its quorum (the other two members stopped) cannot have handshakes
// answered; with 2 in flight, the 30 handshakes that arrive at once
// (timeout 3 s: a 1 s budget each in the queue) are all refused with
// their connection closed, none left hanging until its client gives up,
// and the proxy counts the refusals of the queue.
func TestHandshakesRefusedWhenMemberCannotAnswer(t *testing.T) {
	ms := startEnsemble(t)
	p := startProxyWith(t, proxy.Config{HandshakesInFlight: 2}, ms[0])
	if c, _ := connect(t, 10*time.Second, p.Addr().String()); c.SessionID() == 0 {
		t.Fatal("no session through the proxy")
	}
	ms[1].srv.Close()
	ms[2].srv.Close()
	const n = 30
	var refused, other atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch err := rawHandshake(p.Addr().String(), 30*time.Second); err {
			case errRefused:
				refused.Add(1)
			default:
				t.Logf("handshake: %v", err)
				other.Add(1)
			}
		}()
	}
	wg.Wait()
	if other.Load() > 0 {
		t.Errorf("%d of %d handshakes to a member without quorum were not refused (answered, or left hanging)", other.Load(), n)
	}
	_, queued, refusedP, _ := proxy.HandshakeFigures(p)
	if refusedP == 0 {
		t.Errorf("the proxy refused no queued handshake (%d queued); every one was forwarded", queued)
	}
	t.Logf("%d refused; the proxy queued %d and refused %d of them", refused.Load(), queued, refusedP)
}
