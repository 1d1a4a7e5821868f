package proxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/proxy"
	"github.com/zkraft/zkraft/proxy/wire"
	"github.com/zkraft/zkraft/server"
)

// The tests run real go-zookeeper clients through a real proxy in front of
// a real standalone zkraft (Dragonboat and Pebble in a temporary
// directory). ZKRAFT_TEST_LOG=1 shows the member's and the proxies' logs.

func logger() *slog.Logger {
	var out io.Writer = io.Discard
	if os.Getenv("ZKRAFT_TEST_LOG") != "" {
		out = os.Stderr
	}
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type member struct {
	srv *server.Server
	cfg server.Config
}

// startMember starts a standalone member with a proxy port; cfg, when
// given, is reused (a restart on the same data directory and ports).
func startMember(t *testing.T, cfg *server.Config) *member {
	t.Helper()
	if cfg == nil {
		cfg = &server.Config{
			ClientAddr:      freeport.Addr(t),
			ProxyAddr:       freeport.Addr(t),
			RaftAddr:        freeport.Addr(t),
			DataDir:         t.TempDir(),
			TickTime:        500 * time.Millisecond,
			FourLetterWords: []string{"*"},
			Admin:           server.AdminConfig{Enabled: false},
			Logger:          logger(),
		}
	}
	srv, err := server.New(*cfg)
	for try := 0; err != nil && strings.Contains(err.Error(), "address already in use") && try < 20; try++ {
		// A restart on the same ports: another process may hold one for
		// a moment.
		time.Sleep(250 * time.Millisecond)
		srv, err = server.New(*cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	m := &member{srv: srv, cfg: *cfg}
	t.Cleanup(func() { m.srv.Close() })
	return m
}

func startProxy(t *testing.T, members ...*member) *proxy.Proxy {
	t.Helper()
	return startProxyWith(t, proxy.Config{}, members...)
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// connect opens a go-zookeeper session on addrs and waits until it has one.
func connect(t *testing.T, timeout time.Duration, addrs ...string) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	c, ev, err := zk.Connect(addrs, timeout, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	waitState(t, ev, zk.StateHasSession)
	return c, ev
}

func waitState(t *testing.T, ev <-chan zk.Event, want zk.State) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-ev:
			if e.Type == zk.EventSession && e.State == want {
				return
			}
			if e.State == zk.StateExpired {
				t.Fatalf("session expired waiting for %v", want)
			}
		case <-deadline:
			t.Fatalf("no %v within 30s", want)
		}
	}
}

// TestSessionThroughProxy: a session opened through a proxy is a session
// of the cell: its ephemeral's owner is its id as a direct client sees
// it, its watch fires, and closing it removes the ephemeral.
func TestSessionThroughProxy(t *testing.T) {
	m := startMember(t, nil)
	p := startProxy(t, m)
	direct, _ := connect(t, 4*time.Second, m.cfg.ClientAddr)
	c, _ := connect(t, 4*time.Second, p.Addr().String())

	if _, err := c.Create("/eph", []byte("x"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, st, err := direct.Exists("/eph")
	if err != nil || st.EphemeralOwner != c.SessionID() {
		t.Fatalf("direct exists /eph: owner %#x, err %v; want the proxied session %#x", st.EphemeralOwner, err, c.SessionID())
	}
	data, _, wch, err := c.GetW("/eph")
	if err != nil || string(data) != "x" {
		t.Fatalf("getW: %q %v", data, err)
	}
	if _, err := direct.Set("/eph", []byte("y"), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-wch:
		if e.Type != zk.EventNodeDataChanged || e.Path != "/eph" {
			t.Fatalf("event %+v, want dataChanged /eph", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event through the proxy")
	}
	c.Close()
	if ok, _, err := direct.Exists("/eph"); err != nil || ok {
		t.Fatalf("after the proxied session closed: exists %v, %v", ok, err)
	}
}

// TestClientMovesToAnotherProxy: a client whose proxy dies reconnects to
// another with its session id and password and keeps its session and
// ephemeral.
func TestClientMovesToAnotherProxy(t *testing.T) {
	m := startMember(t, nil)
	pa, pb := startProxy(t, m), startProxy(t, m)
	direct, _ := connect(t, 4*time.Second, m.cfg.ClientAddr)
	c, ev := connect(t, 4*time.Second, pa.Addr().String(), pb.Addr().String())
	id := c.SessionID()
	if _, err := c.Create("/moving", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	from, to := pa, pb
	if pb.Clients() == 1 {
		from, to = pb, pa
	}
	if from.Clients() != 1 || to.Clients() != 0 {
		t.Fatalf("clients on the proxies: %d and %d, want 1 and 0", from.Clients(), to.Clients())
	}
	from.Close()
	waitState(t, ev, zk.StateDisconnected)
	waitState(t, ev, zk.StateHasSession)
	if c.SessionID() != id || to.Clients() != 1 {
		t.Fatalf("after the move: session %#x (was %#x), %d clients on the other proxy", c.SessionID(), id, to.Clients())
	}
	_, st, err := direct.Exists("/moving")
	if err != nil || st == nil || st.EphemeralOwner != id {
		t.Fatalf("the ephemeral after the move: %+v %v", st, err)
	}
	if _, err := c.Set("/moving", []byte("still mine"), -1); err != nil {
		t.Fatalf("a write after the move: %v", err)
	}
}

// TestMemberRestart: the proxy reconnects upstream when its member comes
// back, and its client resumes its session (Disconnected, then
// SyncConnected) with its ephemeral.
func TestMemberRestart(t *testing.T) {
	m := startMember(t, nil)
	p := startProxy(t, m)
	c, ev := connect(t, 8*time.Second, p.Addr().String())
	id := c.SessionID()
	if _, err := c.Create("/kept", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	m.srv.Close()
	m2 := startMember(t, &m.cfg)
	// Kept by the proxy and reattached once the member is back, or (a
	// restart slower than the session timeout) closed, and reconnected.
	retryGet(t, c, "/kept")
	t.Logf("the client's states across its member's restart: %v", drainStates(ev))
	if c.SessionID() != id {
		t.Fatalf("session %#x after the restart, was %#x", c.SessionID(), id)
	}
	direct, _ := connect(t, 4*time.Second, m2.cfg.ClientAddr)
	if _, st, err := direct.Exists("/kept"); err != nil || st == nil || st.EphemeralOwner != id {
		t.Fatalf("the ephemeral after the member's restart: %+v %v", st, err)
	}
}

// TestWatchFanOut: n sessions through one proxy watch one path; one write
// gives each exactly one event, and each sees it before the reply of a
// read that reflects the change (go-zookeeper hands an event to its
// channel before it reads the next frame).
func TestWatchFanOut(t *testing.T) {
	const n = 30
	m := startMember(t, nil)
	p := startProxy(t, m)
	direct, _ := connect(t, 4*time.Second, m.cfg.ClientAddr)
	if _, err := direct.Create("/fan", []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	clients := make([]*zk.Conn, n)
	watches := make([]<-chan zk.Event, n)
	for i := range clients {
		clients[i], _ = connect(t, 4*time.Second, p.Addr().String())
		var err error
		if _, _, watches[i], err = clients[i].GetW("/fan"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := direct.Set("/fan", []byte("1"), -1); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, _, err := c.Get("/fan")
			if err != nil || string(data) != "1" {
				errs <- fmt.Errorf("session %d: get %q %v", i, data, err)
				return
			}
			select {
			case e := <-watches[i]:
				if e.Type != zk.EventNodeDataChanged || e.Path != "/fan" {
					errs <- fmt.Errorf("session %d: event %+v", i, e)
				}
			default:
				errs <- fmt.Errorf("session %d: the reply showing the change came before its event", i)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// One-shot: a second change fires nothing more (go-zookeeper closes a
	// watch's channel after its one event; a second event for the path
	// would go to no channel, so check the member's watch count instead).
	out := fourLetter(t, m.cfg.ClientAddr, "wchs")
	if !strings.Contains(out, "0 connections watching 0 paths") {
		t.Errorf("wchs after every watch fired: %q", out)
	}
}

// fourLetter sends a four-letter word and returns the answer.
func fourLetter(t *testing.T, addr, word string) string {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write([]byte(word)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(nc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var receivedRE = regexp.MustCompile(`Received: (\d+)`)

func received(t *testing.T, addr string) int {
	t.Helper()
	out := fourLetter(t, addr, "srvr")
	m := receivedRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("srvr without Received: %q", out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestKeepAlivesAbsorbed: n idle sessions through a proxy send the member
// nothing (the proxy answers their pings and sends one batch per
// interval) and none expires; the same sessions connected directly send
// the member every ping. The figures are printed, not asserted beyond
// that difference.
func TestKeepAlivesAbsorbed(t *testing.T) {
	const n = 40
	const timeout = 4 * time.Second
	idle := 2 * timeout
	m := startMember(t, nil)
	p := startProxy(t, m)

	measure := func(addr string) (int, []*zk.Conn) {
		conns := make([]*zk.Conn, n)
		for i := range conns {
			conns[i], _ = connect(t, timeout, addr)
			if _, err := conns[i].Create(fmt.Sprintf("/ka-%x", conns[i].SessionID()), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
		}
		before := received(t, m.cfg.ClientAddr)
		time.Sleep(idle)
		return received(t, m.cfg.ClientAddr) - before - 1, conns // less srvr itself
	}
	viaProxy, proxied := measure(p.Addr().String())
	direct, direct1 := measure(m.cfg.ClientAddr)
	t.Logf("%d idle sessions for %v: the member received %d packets through the proxy, %d directly", n, idle, viaProxy, direct)

	check, _ := connect(t, timeout, m.cfg.ClientAddr)
	for _, c := range append(proxied, direct1...) {
		if ok, _, err := check.Exists(fmt.Sprintf("/ka-%x", c.SessionID())); err != nil || !ok {
			t.Errorf("session %#x lost its ephemeral (expired?): %v %v", c.SessionID(), ok, err)
		}
	}
	if direct < n {
		t.Errorf("direct sessions sent %d packets in %v, fewer than one ping each: the test measures nothing", direct, idle)
	}
	if viaProxy >= n {
		t.Errorf("the member received %d packets from %d idle sessions through the proxy: pings are not absorbed", viaProxy, n)
	}
}

// TestHelloRefused: a member refuses a proxy of another protocol version
// with a message naming both, and closes a connection whose first frame
// is not a hello without answering.
func TestHelloRefused(t *testing.T) {
	m := startMember(t, nil)
	nc, err := net.Dial("tcp", m.cfg.ProxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	nc.Write(wire.AppendRecord(nil, wire.KindHello, 0, &wire.Hello{Magic: wire.Magic, Version: wire.Version + 1, Name: "future"}))
	br := bufio.NewReader(nc)
	kind, _, payload, err := wire.ReadFrame(br, 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := wire.CheckReply(kind, payload); !errors.Is(err, wire.ErrRefused) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", wire.Version+1)) {
		t.Fatalf("a version-%d hello: %v", wire.Version+1, err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the refusal: %v, want EOF", err)
	}

	for name, first := range map[string][]byte{
		"a client's connect": jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: 4000, Passwd: make([]byte, 16)}),
		"open before hello":  wire.AppendRecord(nil, wire.KindOpen, 1, &wire.Open{ClientAddr: "1.2.3.4:5", Word: "ruok"}),
		"a huge frame":       {0x7f, 0xff, 0xff, 0xff},
	} {
		nc, err := net.Dial("tcp", m.cfg.ProxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		nc.Write(first)
		if b, err := io.ReadAll(nc); err != nil || len(b) != 0 {
			t.Errorf("%s: answered %q, %v; want a close", name, b, err)
		}
		nc.Close()
	}
	// The member still serves.
	if out := fourLetter(t, m.cfg.ClientAddr, "ruok"); out != "imok" {
		t.Fatalf("ruok after the bad hellos: %q", out)
	}
}

// TestUpstreamHostile: after a good hello, frames a proxy must not send
// close the upstream connection (never the member), and data for a
// channel that is not open is dropped.
func TestUpstreamHostile(t *testing.T) {
	m := startMember(t, nil)
	hello := wire.AppendRecord(nil, wire.KindHello, 0, &wire.Hello{Magic: wire.Magic, Version: wire.Version, Name: "hostile"})
	connectBody := jute.Marshal(&jute.ConnectRequest{TimeOut: 4000, Passwd: make([]byte, 16)})
	open := wire.AppendRecord(nil, wire.KindOpen, 1, &wire.Open{ClientAddr: "127.0.0.1:9", Connect: connectBody})
	for name, after := range map[string][]byte{
		"unknown kind":        wire.AppendFrame(nil, wire.Kind(99), 0),
		"a second hello":      hello,
		"open on channel 0":   wire.AppendRecord(nil, wire.KindOpen, 0, &wire.Open{ClientAddr: "x:1", Word: "ruok"}),
		"open twice":          append(append([]byte(nil), open...), open...),
		"short keep-alive":    wire.AppendFrame(nil, wire.KindKeepAlive, 0, []byte{0, 0, 1, 0}),
		"undecodable open":    wire.AppendFrame(nil, wire.KindOpen, 5, []byte{1, 2, 3}),
		"frame beyond bound":  {0x7f, 0xff, 0xff, 0xff},
		"shared on version 1": wire.AppendRecord(nil, wire.KindUnwatch, 0, &wire.Unwatch{Gen: 1, Watch: wire.Watch{Path: "/", Mode: wire.WatchPersistent}}),
		"undecodable unwatch": wire.AppendFrame(nil, wire.KindUnwatch, 0, []byte{1}),
	} {
		nc, err := net.Dial("tcp", m.cfg.ProxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		if strings.HasSuffix(name, "on version 1") {
			nc.Write(wire.AppendRecord(nil, wire.KindHello, 0, &wire.Hello{Magic: wire.Magic, Version: 1, Name: "hostile"}))
		} else {
			nc.Write(hello)
		}
		br := bufio.NewReader(nc)
		if k, _, p, err := wire.ReadFrame(br, 1<<10); err != nil {
			t.Fatalf("%s: hello: %v", name, err)
		} else if _, _, err := wire.CheckReply(k, p); err != nil {
			t.Fatalf("%s: hello: %v", name, err)
		}
		// Data for no channel is dropped, and a keep-alive is answered.
		nc.Write(wire.AppendFrame(nil, wire.KindData, 42, []byte("nobody")))
		nc.Write(wire.AppendRecord(nil, wire.KindKeepAlive, 0, &wire.KeepAlive{Sessions: []int64{12345}}))
		if k, _, _, err := wire.ReadFrame(br, 1<<10); err != nil || k != wire.KindProgress {
			t.Fatalf("%s: keep-alive answered %v, %v; want progress", name, k, err)
		}
		nc.Write(after)
		// The connection ends (after "open twice", once the first open's
		// ConnectResponse came).
		var err2 error
		for err2 == nil {
			_, _, _, err2 = wire.ReadFrame(br, 1<<20)
		}
		if errors.Is(err2, os.ErrDeadlineExceeded) {
			t.Errorf("%s: the member kept the connection", name)
		}
		nc.Close()
	}
	if out := fourLetter(t, m.cfg.ClientAddr, "ruok"); out != "imok" {
		t.Fatalf("ruok after the hostile proxies: %q", out)
	}
	// And a proxy still works.
	p := startProxy(t, m)
	c, _ := connect(t, 4*time.Second, p.Addr().String())
	if _, err := c.Create("/after-hostile", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
}
