package conformance

import (
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// The suite runs against one server reached over TCP:
//
//   - CONFORMANCE_ADDR=host:port: an already running server (a real Apache
//     ZooKeeper 3.8 in scripts/zk-differential.sh, or a zkraft started by hand);
//   - otherwise an in-process zkraft from startEmbedded (embedded_test.go).
//
// Tests make no assumption about an empty tree or a zero zxid: each works in
// its own subtree (uniquePath) and removes it at the end, so the suite can run
// again and again against one long-running server. Tests that assert exact
// zxid steps (a failed write consumes one zxid, a multi exactly one) are not
// parallel, and every session a test opens is closed before the test ends, so
// nothing else writes while they run, as long as no other client writes to
// the server during the run.
//
// CONFORMANCE_TICK_MS (default 2000) is the server's tickTime; the session
// timeout bounds are 2 and 20 ticks.
//
// CONFORMANCE_ZKLOG=1 sends go-zookeeper's log to stderr.

var (
	// serverAddr is the host:port of the server under test.
	serverAddr string
	// tickMs is the server's tickTime in milliseconds.
	tickMs int32 = 2000
	// runID distinguishes the paths of this run from any earlier run's.
	runID string
	// admin is a long-lived client for setup and cleanup.
	admin *zk.Conn
)

func minSessionTimeout() int32 { return 2 * tickMs }
func maxSessionTimeout() int32 { return 20 * tickMs }

// defaultSessionTimeout is what test clients ask for unless a test needs a
// specific value.
const defaultSessionTimeout = 10 * time.Second

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if v := os.Getenv("CONFORMANCE_TICK_MS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "conformance: bad CONFORMANCE_TICK_MS %q\n", v)
			return 2
		}
		tickMs = int32(n)
	}
	runID = strconv.FormatInt(time.Now().UnixNano()%(1<<40), 36)

	serverAddr = os.Getenv("CONFORMANCE_ADDR")
	if serverAddr == "" {
		dir, err := os.MkdirTemp("", "zkraft-conformance-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
			return 2
		}
		defer os.RemoveAll(dir)
		addr, stop, err := startEmbedded(dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "conformance: cannot start the embedded server: %v\n"+
				"(set CONFORMANCE_ADDR=host:port to run the suite against a running server)\n", err)
			return 1
		}
		defer stop()
		serverAddr = addr
	}

	if err := waitForServer(serverAddr, 30*time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: server %s is not answering: %v\n", serverAddr, err)
		return 1
	}
	conn, err := dialSession(clientOpts{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance: admin client: %v\n", err)
		return 1
	}
	admin = conn
	defer admin.Close()
	return m.Run()
}

// waitForServer retries a TCP connect until it succeeds or d passes.
func waitForServer(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			nc.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// zkLogger is go-zookeeper's logger: silent unless CONFORMANCE_ZKLOG is set.
// (go-zookeeper logs from its own goroutines, possibly after a test has
// finished, so it must not log through testing.T.)
type zkLogger struct{}

func (zkLogger) Printf(format string, args ...any) {
	if os.Getenv("CONFORMANCE_ZKLOG") != "" {
		log.Printf("go-zk: "+format, args...)
	}
}

// clientOpts are the go-zookeeper options the tests vary.
type clientOpts struct {
	timeout  time.Duration    // requested session timeout; 0 = defaultSessionTimeout
	dialer   zk.Dialer        // nil = net.DialTimeout
	callback zk.EventCallback // nil = none
}

// dialSession connects a go-zookeeper client and waits until it has a session.
func dialSession(o clientOpts) (*zk.Conn, error) {
	conn, _, err := dialSessionEvents(o)
	return conn, err
}

// dialSessionEvents is dialSession that also returns the client's event
// channel, already past the StateHasSession event.
func dialSessionEvents(o clientOpts) (*zk.Conn, <-chan zk.Event, error) {
	if o.timeout == 0 {
		o.timeout = defaultSessionTimeout
	}
	if o.dialer == nil {
		o.dialer = net.DialTimeout
	}
	conn, events, err := zk.Connect([]string{serverAddr}, o.timeout,
		zk.WithLogger(zkLogger{}), zk.WithDialer(o.dialer), zk.WithEventCallback(o.callback))
	if err != nil {
		return nil, nil, err
	}
	deadline := time.After(15 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				conn.Close()
				return nil, nil, errors.New("event channel closed before a session was established")
			}
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				return conn, events, nil
			}
		case <-deadline:
			conn.Close()
			return nil, nil, fmt.Errorf("no session after 15s (state %v)", conn.State())
		}
	}
}

// connect returns a go-zookeeper client with an established session, closed
// at the end of the test, and its event channel.
func connect(t testing.TB) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	return connectWith(t, clientOpts{})
}

// perTestTimeout bounds how long a test's go-zookeeper clients live: the
// library waits for a reply without a deadline, so a server that keeps the
// connection alive but never answers would otherwise hang the test. When it
// passes, the clients are closed and their pending calls fail.
const perTestTimeout = 60 * time.Second

// connectWith is connect with options.
func connectWith(t testing.TB, o clientOpts) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	conn, events, err := dialSessionEvents(o)
	if err != nil {
		t.Fatalf("connect %s: %v", serverAddr, err)
	}
	name := t.Name()
	watchdog := time.AfterFunc(perTestTimeout, func() {
		fmt.Fprintf(os.Stderr, "conformance: %s still running after %v; closing its client\n", name, perTestTimeout)
		conn.Close()
	})
	t.Cleanup(func() {
		watchdog.Stop()
		conn.Close()
	})
	return conn, events
}

var pathCounter atomic.Int64

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// uniquePath creates a fresh persistent node for the test to work under,
// /conf-<TestName>-<run>-<n>, and deletes its whole subtree when the test
// ends.
func uniquePath(t testing.TB) string {
	t.Helper()
	p := fmt.Sprintf("/conf-%s-%s-%d", unsafeChars.ReplaceAllString(t.Name(), "_"), runID, pathCounter.Add(1))
	if _, err := admin.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create test root %s: %v", p, err)
	}
	t.Cleanup(func() {
		if err := deleteTree(admin, p); err != nil {
			t.Errorf("cleanup %s: %v", p, err)
		}
	})
	return p
}

// deleteTree deletes p and everything under it. Missing nodes are fine.
func deleteTree(c *zk.Conn, p string) error {
	children, _, err := c.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ch := range children {
		if err := deleteTree(c, p+"/"+ch); err != nil {
			return err
		}
	}
	err = c.Delete(p, -1)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if errors.Is(err, zk.ErrNotEmpty) { // a child appeared meanwhile (e.g. a late ephemeral)
		return deleteTree(c, p)
	}
	return err
}

// mustCreate creates a node with the open ACL and returns its actual path.
func mustCreate(t testing.TB, c *zk.Conn, path string, data []byte, flags int32) string {
	t.Helper()
	p, err := c.Create(path, data, flags, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatalf("create %s (flags %d): %v", path, flags, err)
	}
	return p
}

// mustStat returns the Stat of an existing node.
func mustStat(t testing.TB, c *zk.Conn, path string) zk.Stat {
	t.Helper()
	ok, st, err := c.Exists(path)
	if err != nil {
		t.Fatalf("exists %s: %v", path, err)
	}
	if !ok {
		t.Fatalf("exists %s: node does not exist", path)
	}
	return *st
}

// mustNotExist fails unless path is absent.
func mustNotExist(t testing.TB, c *zk.Conn, path string) {
	t.Helper()
	ok, _, err := c.Exists(path)
	if err != nil {
		t.Fatalf("exists %s: %v", path, err)
	}
	if ok {
		t.Fatalf("%s exists, want it gone", path)
	}
}

// waitEvent waits (bounded) for one event on a watch channel.
func waitEvent(t testing.TB, ch <-chan zk.Event, d time.Duration) zk.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("watch channel closed without an event")
		}
		return ev
	case <-time.After(d):
		t.Fatalf("no watch event within %v", d)
	}
	return zk.Event{}
}

// wantEvent waits for a watch event and checks its type and path.
func wantEvent(t testing.TB, ch <-chan zk.Event, typ zk.EventType, path string) {
	t.Helper()
	ev := waitEvent(t, ch, 10*time.Second)
	if ev.Type != typ || ev.Path != path || ev.Err != nil {
		t.Fatalf("watch event = {type %v path %q err %v}, want {type %v path %q}", ev.Type, ev.Path, ev.Err, typ, path)
	}
}

// eventRecorder keeps every node event a go-zookeeper client receives from
// the server, including those no watch channel is waiting for (the client
// library drops a second notification for a one-shot watch it already fired,
// but the callback still sees it).
type eventRecorder struct {
	mu     sync.Mutex
	events []zk.Event
	notify chan struct{}
}

func newEventRecorder() *eventRecorder { return &eventRecorder{notify: make(chan struct{}, 1)} }

func (r *eventRecorder) callback(ev zk.Event) {
	if ev.Type == zk.EventSession || ev.Type == zk.EventNotWatching {
		return
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// forPath returns the recorded events for path, in order.
func (r *eventRecorder) forPath(path string) []zk.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []zk.Event
	for _, ev := range r.events {
		if ev.Path == path {
			out = append(out, ev)
		}
	}
	return out
}

// connectRecorded is connect with an eventRecorder attached.
func connectRecorded(t testing.TB) (*zk.Conn, *eventRecorder) {
	t.Helper()
	rec := newEventRecorder()
	conn, _ := connectWith(t, clientOpts{callback: rec.callback})
	return conn, rec
}

// barrier makes sure every notification the server queued for conn before
// now has been delivered: ZooKeeper sends a connection's notifications before
// any later reply on it, so after a round trip they have all arrived. The
// short sleep only lets go-zookeeper's receive loop hand them over.
func barrier(t testing.TB, conn *zk.Conn) {
	t.Helper()
	if _, err := conn.Sync("/"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
}

// noEvent fails if a watch channel has an event after a barrier.
func noEvent(t testing.TB, conn *zk.Conn, ch <-chan zk.Event, what string) {
	t.Helper()
	barrier(t, conn)
	select {
	case ev := <-ch:
		t.Fatalf("%s: unexpected watch event {type %v path %q}", what, ev.Type, ev.Path)
	default:
	}
}

// checkServerHealthy opens a fresh client and checks that it works and that
// the node at sentinel still holds want.
func checkServerHealthy(t testing.TB, sentinel string, want []byte) {
	t.Helper()
	conn, err := dialSession(clientOpts{})
	if err != nil {
		t.Fatalf("after bad input, a new client cannot connect: %v", err)
	}
	defer conn.Close()
	got, st, err := conn.Get(sentinel)
	if err != nil {
		t.Fatalf("after bad input, get %s: %v", sentinel, err)
	}
	if string(got) != string(want) || st.Version != 0 {
		t.Fatalf("after bad input, %s = %q version %d, want %q version 0", sentinel, got, st.Version, want)
	}
	p, err := conn.Create(sentinel+"/probe", []byte("x"), 0, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatalf("after bad input, create: %v", err)
	}
	if err := conn.Delete(p, 0); err != nil {
		t.Fatalf("after bad input, delete: %v", err)
	}
}
