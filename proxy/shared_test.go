package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/proxy"
)

// Shared watches (protocol version 2): tests with real go-zookeeper
// sessions, and with raw Jute sessions where go-zookeeper has no call
// (addWatch, removeWatches) or hides what is checked (every notification
// a session receives, in order).

// rawSession is a ZooKeeper session spoken frame by frame: every frame
// after the handshake comes out of frames in the order received.
type rawSession struct {
	t      *testing.T
	nc     net.Conn
	id     int64
	xid    int32
	frames chan rawFrame
}

type rawFrame struct {
	hdr  jute.ReplyHeader
	body []byte // after the header
}

func rawConnect(t *testing.T, addr string) *rawSession {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	body, err := jute.ReadFrame(br, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	resp := new(jute.ConnectResponse)
	if err := jute.Unmarshal(body, resp); err != nil || resp.SessionID == 0 {
		t.Fatalf("connect: %+v %v", resp, err)
	}
	nc.SetDeadline(time.Time{})
	s := &rawSession{t: t, nc: nc, id: resp.SessionID, frames: make(chan rawFrame, 1024)}
	go func() {
		defer close(s.frames)
		for {
			body, err := jute.ReadFrame(br, nil, 1<<20)
			if err != nil {
				return
			}
			r := jute.NewReader(body)
			var f rawFrame
			f.hdr.Decode(r)
			f.body = r.Rest()
			s.frames <- f
		}
	}()
	return s
}

var openACL = []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}

// inOrder is a go-zookeeper host provider that tries its servers in the
// order it was made with (go-zookeeper shuffles the connect string). Next
// says retryStart, as go-zookeeper's DNSHostProvider does, only when it
// comes back to the server of the last connection: every server was tried
// since. (It used to say so on every second server, the move from the
// first proxy to the second included, and then go-zookeeper fails the
// requests queued meanwhile with "zk: could not connect to a server" and
// sleeps a second before it dials.)
type inOrder struct {
	servers    []string
	curr, last int
	started    bool
}

func (h *inOrder) Init([]string) error { return nil }
func (h *inOrder) Len() int            { return len(h.servers) }
func (h *inOrder) Connected()          { h.last = h.curr }
func (h *inOrder) Next() (string, bool) {
	if !h.started {
		h.started, h.curr, h.last = true, 0, -1
	} else {
		h.curr = (h.curr + 1) % len(h.servers)
	}
	return h.servers[h.curr], h.curr == h.last
}

// wireOrder records, per connection a go-zookeeper client dials through
// it, the opcodes the client writes (go-zookeeper writes each request
// with one Write; the first is the handshake, which has no opcode), and
// closes setWatches once a setWatches is written on a connection after
// the first.
type wireOrder struct {
	mu        sync.Mutex
	conns     [][]int32
	setW      chan struct{}
	setWatchd bool
}

func newWireOrder() *wireOrder { return &wireOrder{setW: make(chan struct{})} }

func (w *wireOrder) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.conns = append(w.conns, nil)
	n := len(w.conns) - 1
	w.mu.Unlock()
	return &wireConn{Conn: nc, w: w, n: n}, nil
}

// String: the opcodes of each connection but pings (11).
func (w *wireOrder) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for i, ops := range w.conns {
		fmt.Fprintf(&b, " conn %d:", i)
		for _, op := range ops {
			if op != int32(jute.OpPing) {
				fmt.Fprintf(&b, " %d", op)
			}
		}
	}
	return b.String()
}

type wireConn struct {
	net.Conn
	w       *wireOrder
	n       int
	written int
}

func (c *wireConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written++
	if err != nil || c.written == 1 || len(b) < 12 {
		return n, err
	}
	op := int32(b[8])<<24 | int32(b[9])<<16 | int32(b[10])<<8 | int32(b[11])
	c.w.mu.Lock()
	c.w.conns[c.n] = append(c.w.conns[c.n], op)
	if c.n > 0 && jute.OpCode(op) == jute.OpSetWatches && !c.w.setWatchd {
		c.w.setWatchd = true
		close(c.w.setW)
	}
	c.w.mu.Unlock()
	return n, err
}

// rawEvent is a notification and the zxid its header carried.
type rawEvent struct {
	jute.WatcherEvent
	zxid int64
}

// call sends a request and returns its reply and the notifications that
// came before it.
func (s *rawSession) call(op jute.OpCode, req jute.Record) (rawFrame, []rawEvent) {
	s.t.Helper()
	f, events, err := s.try(op, req)
	if err != nil {
		s.t.Fatal(err)
	}
	return f, events
}

// try is call for any goroutine: it returns what went wrong.
func (s *rawSession) try(op jute.OpCode, req jute.Record) (rawFrame, []rawEvent, error) {
	s.xid++
	xid := s.xid
	if op == jute.OpAuth {
		xid = jute.XidAuth
	}
	if _, err := s.nc.Write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: xid, Type: op}, req)); err != nil {
		return rawFrame{}, nil, err
	}
	var events []rawEvent
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return f, events, fmt.Errorf("session %#x: connection closed waiting for the reply of %v", s.id, op)
			}
			if f.hdr.Xid == jute.XidNotification {
				e := rawEvent{zxid: f.hdr.Zxid}
				if err := jute.Unmarshal(f.body, &e.WatcherEvent); err != nil {
					return f, events, err
				}
				events = append(events, e)
				continue
			}
			if f.hdr.Xid != xid {
				return f, events, fmt.Errorf("session %#x: reply xid %d, want %d", s.id, f.hdr.Xid, xid)
			}
			return f, events, nil
		case <-time.After(30 * time.Second):
			return rawFrame{}, events, fmt.Errorf("session %#x: no reply to %v within 30s", s.id, op)
		}
	}
}

// sync returns the notifications received before a read of path that
// reflects every change acknowledged so far (a linearizable read through
// the member): a notification that is owed must come before it.
func (s *rawSession) sync(path string) []rawEvent {
	s.t.Helper()
	_, events := s.call(jute.OpExists, &jute.ExistsRequest{Path: path})
	return events
}

// nextEvent waits (at most 30 s) for the next frame, which must be a
// notification.
func (s *rawSession) nextEvent() (rawEvent, error) {
	select {
	case f, ok := <-s.frames:
		if !ok {
			return rawEvent{}, fmt.Errorf("session %#x: closed", s.id)
		}
		if f.hdr.Xid != jute.XidNotification {
			return rawEvent{}, fmt.Errorf("session %#x: a reply (xid %d) where a notification was due", s.id, f.hdr.Xid)
		}
		e := rawEvent{zxid: f.hdr.Zxid}
		return e, jute.Unmarshal(f.body, &e.WatcherEvent)
	case <-time.After(30 * time.Second):
		return rawEvent{}, fmt.Errorf("session %#x: no notification within 30s", s.id)
	}
}

func eventsString(es []rawEvent) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%v %s; ", e.Type, e.Path)
	}
	return b.String()
}

var wchsRE = regexp.MustCompile(`(\d+) connections watching (\d+) paths\nTotal watches:(\d+)`)

// wchs is the member's data-table watch count: connections, paths,
// watches.
func wchs(t *testing.T, addr string) (conns, paths, watches int) {
	t.Helper()
	out := fourLetter(t, addr, "wchs")
	m := wchsRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("wchs: %q", out)
	}
	conns, _ = strconv.Atoi(m[1])
	paths, _ = strconv.Atoi(m[2])
	watches, _ = strconv.Atoi(m[3])
	return conns, paths, watches
}

// waitWatches waits (at most 20 s) until the member holds want watches in
// its data table: the proxy drops an upstream watch asynchronously.
func waitWatches(t *testing.T, addr string, want int) {
	t.Helper()
	var got int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, _, got = wchs(t, addr); got == want {
			return
		}
	}
	t.Fatalf("the member holds %d watches, want %d", got, want)
}

// TestSharedWatchIsOneUpstream: n sessions through one proxy set a data
// watch on one znode, an exists watch on a missing one and a child watch
// on their parent: the member holds one watch per path for all of them
// (a version 1 proxy: one per session). One write fires each session's
// watch once, before any reply reflecting it; once every one-shot watch
// has fired the proxy drops the upstream ones.
func TestSharedWatchIsOneUpstream(t *testing.T) {
	const n = 40
	m := startMember(t, nil)
	direct, _ := connect(t, 4*time.Second, m.cfg.ClientAddr)
	if _, err := direct.Create("/sw", []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		version int32
		want    int // watches the member holds (data table: /sw/data and /sw/absent)
	}{{2, 2}, {1, 2 * n}} {
		t.Run(fmt.Sprintf("version%d", tc.version), func(t *testing.T) {
			p := startProxyWith(t, proxy.Config{UpstreamVersion: tc.version}, m)
			data := fmt.Sprintf("/sw/data%d", tc.version)
			absent := fmt.Sprintf("/sw/absent%d", tc.version)
			if _, err := direct.Create(data, []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			type watched struct {
				c                 *zk.Conn
				data, exist, kids <-chan zk.Event
			}
			ws := make([]watched, n)
			for i := range ws {
				var err error
				ws[i].c, _ = connect(t, 4*time.Second, p.Addr().String())
				if _, _, ws[i].data, err = ws[i].c.GetW(data); err != nil {
					t.Fatal(err)
				}
				if _, _, ws[i].exist, err = ws[i].c.ExistsW(absent); err != nil {
					t.Fatal(err)
				}
				if _, _, ws[i].kids, err = ws[i].c.ChildrenW("/sw"); err != nil {
					t.Fatal(err)
				}
			}
			if conns, paths, watches := wchs(t, m.cfg.ClientAddr); watches != tc.want || paths != 2 {
				t.Fatalf("the member holds %d watches on %d paths for %d connections, want %d on 2", watches, paths, conns, tc.want)
			}
			if _, err := direct.Set(data, []byte("1"), -1); err != nil {
				t.Fatal(err)
			}
			if _, err := direct.Create(absent, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 3*n)
			for i, w := range ws {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Replies that reflect both changes: each event must be
					// in its channel already (go-zookeeper hands events to
					// their channels before it reads the next frame).
					got, _, err := w.c.Get(data)
					if err != nil || string(got) != "1" {
						errs <- fmt.Errorf("session %d: get %q %v", i, got, err)
						return
					}
					if ok, _, err := w.c.Exists(absent); err != nil || !ok {
						errs <- fmt.Errorf("session %d: exists %v %v", i, ok, err)
						return
					}
					for name, ch := range map[string]<-chan zk.Event{"data": w.data, "exists": w.exist, "child": w.kids} {
						select {
						case e := <-ch:
							if e.Type == zk.EventNotWatching {
								errs <- fmt.Errorf("session %d: %s watch: %+v", i, name, e)
							}
						default:
							errs <- fmt.Errorf("session %d: a reply showing the change came before its %s event", i, name)
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			waitWatches(t, m.cfg.ClientAddr, 0)
		})
	}
}

// TestSharedWatchOncePerSession: with raw sessions, every notification
// is seen. Two sessions set a one-shot data watch; a change notifies each
// once; a third session that reads after the change (a watch set on the
// new state) is not notified of it, and is of the next change, which
// notifies neither of the first two (their watches were used up).
func TestSharedWatchOncePerSession(t *testing.T) {
	m := startMember(t, nil)
	p := startProxy(t, m)
	w := rawConnect(t, m.cfg.ClientAddr)
	w.call(jute.OpCreate, &jute.CreateRequest{Path: "/once", Data: []byte("0"), ACL: openACL})
	a, b, c := rawConnect(t, p.Addr().String()), rawConnect(t, p.Addr().String()), rawConnect(t, p.Addr().String())
	for _, s := range []*rawSession{a, b} {
		if f, ev := s.call(jute.OpGetData, &jute.GetDataRequest{Path: "/once", Watch: true}); f.hdr.Err != jute.ErrOK || len(ev) != 0 {
			t.Fatalf("getData: %v %s", f.hdr.Err, eventsString(ev))
		}
	}
	w.call(jute.OpSetData, &jute.SetDataRequest{Path: "/once", Data: []byte("1"), Version: -1})
	for name, s := range map[string]*rawSession{"a": a, "b": b} {
		if ev := s.sync("/once"); len(ev) != 1 || ev[0].Type != jute.EventNodeDataChanged || ev[0].Path != "/once" {
			t.Fatalf("session %s after the first change: %s, want one NodeDataChanged /once", name, eventsString(ev))
		}
	}
	if f, ev := c.call(jute.OpGetData, &jute.GetDataRequest{Path: "/once", Watch: true}); f.hdr.Err != jute.ErrOK || len(ev) != 0 {
		t.Fatalf("c's getData after the change: %v, events %s", f.hdr.Err, eventsString(ev))
	}
	if ev := c.sync("/once"); len(ev) != 0 {
		t.Fatalf("c, whose read saw the change, was notified of it: %s", eventsString(ev))
	}
	w.call(jute.OpSetData, &jute.SetDataRequest{Path: "/once", Data: []byte("2"), Version: -1})
	if ev := c.sync("/once"); len(ev) != 1 || ev[0].Type != jute.EventNodeDataChanged {
		t.Fatalf("c after the second change: %s, want one NodeDataChanged", eventsString(ev))
	}
	for name, s := range map[string]*rawSession{"a": a, "b": b} {
		if ev := s.sync("/once"); len(ev) != 0 {
			t.Fatalf("session %s's used-up watch fired again: %s", name, eventsString(ev))
		}
	}
	waitWatches(t, m.cfg.ClientAddr, 0)
}

// TestSharedWatchKinds: a persistent, a persistent-recursive and a
// one-shot watch on one path, each from several sessions through one
// proxy, see exactly the events a direct session with the same watch
// sees, in order, for a sequence of changes on the path and below it;
// the member holds one watch entry for the path.
func TestSharedWatchKinds(t *testing.T) {
	const per = 3
	m := startMember(t, nil)
	p := startProxy(t, m)
	w := rawConnect(t, m.cfg.ClientAddr)
	w.call(jute.OpCreate, &jute.CreateRequest{Path: "/k", Data: []byte("0"), ACL: openACL})
	type kind struct {
		name string
		set  func(s *rawSession)
	}
	kinds := []kind{
		{"persistent", func(s *rawSession) {
			s.call(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/k", Mode: jute.AddWatchModePersistent})
		}},
		{"recursive", func(s *rawSession) {
			s.call(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/k", Mode: jute.AddWatchModePersistentRecursive})
		}},
		{"one-shot", func(s *rawSession) { s.call(jute.OpGetData, &jute.GetDataRequest{Path: "/k", Watch: true}) }},
		{"child", func(s *rawSession) { s.call(jute.OpGetChildren, &jute.GetChildrenRequest{Path: "/k", Watch: true}) }},
	}
	sessions := map[string][]*rawSession{}
	for _, k := range kinds {
		d := rawConnect(t, m.cfg.ClientAddr) // the reference: a direct session
		k.set(d)
		sessions[k.name] = append(sessions[k.name], d)
		for range per {
			s := rawConnect(t, p.Addr().String())
			k.set(s)
			sessions[k.name] = append(sessions[k.name], s)
		}
	}
	direct := len(kinds) // one direct session per kind holds its own entries
	if _, paths, watches := wchs(t, m.cfg.ClientAddr); watches != direct-1+1 || paths != 1 {
		// Data table: three direct sessions (persistent, recursive,
		// one-shot) and the proxy's one entry on /k.
		t.Fatalf("the member holds %d data watches on %d paths, want %d on 1", watches, paths, direct)
	}
	w.call(jute.OpSetData, &jute.SetDataRequest{Path: "/k", Data: []byte("1"), Version: -1})
	w.call(jute.OpCreate, &jute.CreateRequest{Path: "/k/c", ACL: openACL})
	w.call(jute.OpSetData, &jute.SetDataRequest{Path: "/k/c", Data: []byte("x"), Version: -1})
	w.call(jute.OpDelete, &jute.DeleteRequest{Path: "/k/c", Version: -1})
	w.call(jute.OpSetData, &jute.SetDataRequest{Path: "/k", Data: []byte("2"), Version: -1})
	for _, k := range kinds {
		ss := sessions[k.name]
		want := eventsString(ss[0].sync("/k"))
		if want == "" {
			t.Fatalf("%s: the direct session saw no event", k.name)
		}
		for i, s := range ss[1:] {
			if got := eventsString(s.sync("/k")); got != want {
				t.Errorf("%s, proxied session %d: %s; the direct session: %s", k.name, i, got, want)
			}
		}
		t.Logf("%s: %s", k.name, want)
	}
}

// TestSharedWatchRemove: removeWatches and checkWatches through a proxy
// answer as the member would for the session's own watches, a removed
// watch does not fire, and the upstream watch goes once no session holds
// it; a closed session's watches go with it.
func TestSharedWatchRemove(t *testing.T) {
	m := startMember(t, nil)
	p := startProxy(t, m)
	w := rawConnect(t, m.cfg.ClientAddr)
	w.call(jute.OpCreate, &jute.CreateRequest{Path: "/rm", Data: []byte("0"), ACL: openACL})
	a, b := rawConnect(t, p.Addr().String()), rawConnect(t, p.Addr().String())
	for _, s := range []*rawSession{a, b} {
		s.call(jute.OpGetData, &jute.GetDataRequest{Path: "/rm", Watch: true})
	}
	code := func(s *rawSession, op jute.OpCode, typ int32) jute.ErrCode {
		f, _ := s.call(op, &jute.RemoveWatchesRequest{Path: "/rm", Type: typ})
		return f.hdr.Err
	}
	if got := code(a, jute.OpCheckWatches, jute.WatcherTypeChildren); got != jute.ErrNoWatcher {
		t.Errorf("checkWatches children on a data watch: %v, want NOWATCHER", got)
	}
	if got := code(a, jute.OpCheckWatches, jute.WatcherTypeData); got != jute.ErrOK {
		t.Errorf("checkWatches data: %v, want OK", got)
	}
	if got := code(a, jute.OpRemoveWatches, jute.WatcherTypeData); got != jute.ErrOK {
		t.Errorf("removeWatches data: %v, want OK", got)
	}
	if got := code(a, jute.OpRemoveWatches, jute.WatcherTypeData); got != jute.ErrNoWatcher {
		t.Errorf("removeWatches data again: %v, want NOWATCHER", got)
	}
	w.call(jute.OpSetData, &jute.SetDataRequest{Path: "/rm", Data: []byte("1"), Version: -1})
	if ev := a.sync("/rm"); len(ev) != 0 {
		t.Errorf("a removed watch fired: %s", eventsString(ev))
	}
	if ev := b.sync("/rm"); len(ev) != 1 {
		t.Errorf("b's watch: %s, want one event", eventsString(ev))
	}
	waitWatches(t, m.cfg.ClientAddr, 0)

	// A watch and its session's close.
	a.call(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/rm", Mode: jute.AddWatchModePersistentRecursive})
	waitWatches(t, m.cfg.ClientAddr, 1)
	a.call(jute.OpCloseSession, nil)
	waitWatches(t, m.cfg.ClientAddr, 0)
}

// TestSharedWatchACL: a session that may not read a znode is not told of
// its changes through a shared watch, as a member tells a direct one
// nothing; a session with READ on it is.
func TestSharedWatchACL(t *testing.T) {
	m := startMember(t, nil)
	p := startProxy(t, m)
	owner := rawConnect(t, p.Addr().String())
	if f, _ := owner.call(jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte("u:pw")}); f.hdr.Err != jute.ErrOK {
		t.Fatalf("auth: %v", f.hdr.Err)
	}
	acl := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "auth", ID: ""}}}
	if f, _ := owner.call(jute.OpCreate, &jute.CreateRequest{Path: "/acl", Data: []byte("0"), ACL: acl}); f.hdr.Err != jute.ErrOK {
		t.Fatalf("create: %v", f.hdr.Err)
	}
	other := rawConnect(t, p.Addr().String())
	otherDirect := rawConnect(t, m.cfg.ClientAddr)
	for _, s := range []*rawSession{owner, other, otherDirect} {
		s.call(jute.OpExists, &jute.ExistsRequest{Path: "/acl", Watch: true}) // exists checks no ACL
	}
	_, ev := owner.call(jute.OpSetData, &jute.SetDataRequest{Path: "/acl", Data: []byte("1"), Version: -1})
	if ev = append(ev, owner.sync("/acl")...); len(ev) != 1 {
		t.Errorf("the owner: %s, want one event", eventsString(ev))
	}
	direct := eventsString(otherDirect.sync("/acl"))
	if got := eventsString(other.sync("/acl")); got != direct {
		t.Errorf("a session without READ through the proxy: %q; directly: %q", got, direct)
	}
}

// TestSharedWatchMovesToAnotherProxy: sessions watching one znode move
// to another proxy when theirs dies; their setWatches (go-zookeeper's, on
// reconnect) become the new proxy's one shared watch, and a change made
// while they moved fires each session's watch once, before the reply of
// a read sent after the setWatches.
//
// The read waits until the session's setWatches is written on the new
// connection (wireOrder). Without that wait the test failed now and then
// on a loaded machine (issue 15; 2026-12-03: 2 of 8 runs on main with
// load average 16-25), and the failures were the test's, not the proxy's:
// go-zookeeper v1.0.4 queues setWatches from its own goroutine, started
// after the handshake, while the user's Get, called during the move, is
// already in the send queue; so the new connection carried getData
// before setWatches (recorded: "conn 1: 4 101"), and a server answers
// the getData, showing the change, before the setWatches fires the event:
// ZooKeeper answers one connection's requests in order and orders an
// event before later replies, not before earlier requests (argued from
// ZooKeeper's guarantees; not yet run against a 3.8 server). "zk:
// could not connect to a server" was the old inOrder saying retryStart
// on the move, which fails the queued Get; "zk: connection closed" a Get
// written on the dead connection before go-zookeeper saw it close (a
// connection loss a ZooKeeper client gets too).
func TestSharedWatchMovesToAnotherProxy(t *testing.T) {
	const n = 10
	m := startMember(t, nil)
	pa, pb := startProxy(t, m), startProxy(t, m)
	direct, _ := connect(t, 4*time.Second, m.cfg.ClientAddr)
	if _, err := direct.Create("/mv", []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	waitUpstream(t, pa)
	waitUpstream(t, pb)
	conns := make([]*zk.Conn, n)
	evs := make([]<-chan zk.Event, n)
	watches := make([]<-chan zk.Event, n)
	wires := make([]*wireOrder, n)
	for i := range conns {
		// Through pa first, then pb.
		wires[i] = newWireOrder()
		c, ev, err := zk.Connect([]string{pa.Addr().String(), pb.Addr().String()}, 8*time.Second, zk.WithLogger(quiet{}), zk.WithHostProvider(&inOrder{servers: []string{pa.Addr().String(), pb.Addr().String()}}), zk.WithDialer(wires[i].dial))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		waitState(t, ev, zk.StateHasSession)
		conns[i], evs[i] = c, ev
		if _, _, watches[i], err = c.GetW("/mv"); err != nil {
			t.Fatal(err)
		}
	}
	if pa.Clients() != n {
		t.Fatalf("%d clients on the first proxy, want %d", pa.Clients(), n)
	}
	waitWatches(t, m.cfg.ClientAddr, 1)
	pa.Close()
	if _, err := direct.Set("/mv", []byte("1"), -1); err != nil {
		t.Fatal(err)
	}
	for i, c := range conns {
		// The read goes after the session's setWatches on the new
		// connection (see above): wait until go-zookeeper has written it.
		select {
		case <-wires[i].setW:
		case <-time.After(60 * time.Second):
			t.Fatalf("session %d wrote no setWatches on a new connection in 60s; written:%s", i, wires[i])
		}
		if got, _, err := c.Get("/mv"); err != nil || string(got) != "1" {
			t.Fatalf("session %d after the move: %q %v; written:%s", i, got, err, wires[i])
		}
		select {
		case e := <-watches[i]:
			if e.Type != zk.EventNodeDataChanged {
				t.Errorf("session %d: %+v", i, e)
			}
		default:
			t.Errorf("session %d: no event before the reply showing the change; written:%s", i, wires[i])
		}
	}
	if pb.Clients() != n {
		t.Errorf("%d clients on the other proxy, want %d", pb.Clients(), n)
	}
	// Watch again: one shared watch on pb for all of them.
	for i, c := range conns {
		if _, _, _, err := c.GetW("/mv"); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	waitWatches(t, m.cfg.ClientAddr, 1)
}

// waitUpstream waits (at most 20 s) until p has an upstream connection.
func waitUpstream(t *testing.T, p *proxy.Proxy) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); p.Upstream() == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the proxy has no upstream connection after 20s")
		}
	}
}

// TestSharedWatchUnderChurn: while a writer changes one znode in a loop,
// one-shot sessions through a proxy set a watch on it again and again
// (each read racing the writes, and the member's catch-up of each
// registration racing its live events) and persistent ones watch it
// throughout. Each one-shot watch fires exactly once, with the first
// change after the state its read saw, before the session's next reply;
// each persistent watch sees every change exactly once, in order.
func TestSharedWatchUnderChurn(t *testing.T) {
	const (
		writes     = 150
		oneShots   = 8
		persistent = 3
	)
	m := startMember(t, nil)
	p := startProxy(t, m)
	w := rawConnect(t, m.cfg.ClientAddr)
	w.call(jute.OpCreate, &jute.CreateRequest{Path: "/churn", Data: []byte("0"), ACL: openACL})
	pers := make([]*rawSession, persistent)
	for i := range pers {
		pers[i] = rawConnect(t, p.Addr().String())
		pers[i].call(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/churn", Mode: jute.AddWatchModePersistent})
	}
	type fired struct{ read, event int64 }
	var (
		mu      sync.Mutex
		written []int64
		records = make([][]fired, oneShots)
		done    = make(chan struct{})
		wg      sync.WaitGroup
		errs    = make(chan error, oneShots)
	)
	write := func() {
		f, _ := w.call(jute.OpSetData, &jute.SetDataRequest{Path: "/churn", Data: []byte("x"), Version: -1})
		if f.hdr.Err != jute.ErrOK {
			t.Fatalf("setData: %v", f.hdr.Err)
		}
		mu.Lock()
		written = append(written, f.hdr.Zxid)
		mu.Unlock()
	}
	for i := range oneShots {
		s := rawConnect(t, p.Addr().String())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				f, early, err := s.try(jute.OpGetData, &jute.GetDataRequest{Path: "/churn", Watch: true})
				if err == nil && len(early) > 0 {
					err = fmt.Errorf("one-shot %d: notified before its read's reply: %s", i, eventsString(early))
				}
				if err != nil {
					errs <- err
					return
				}
				e, err := s.nextEvent()
				if err != nil {
					errs <- err
					return
				}
				records[i] = append(records[i], fired{f.hdr.Zxid, e.zxid})
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	for range writes {
		write()
	}
	close(done)
	exited := make(chan struct{})
	go func() { wg.Wait(); close(exited) }()
	// Each one-shot session's last watch fires with one of these.
	for stop := false; !stop; {
		write()
		select {
		case <-exited:
			stop = true
		case <-time.After(20 * time.Millisecond):
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	firstAfter := func(z int64) int64 {
		for _, x := range written {
			if x > z {
				return x
			}
		}
		return -1
	}
	n := 0
	for i, rs := range records {
		for _, r := range rs {
			if want := firstAfter(r.read); r.event != want {
				t.Errorf("one-shot %d: a watch set on zxid %#x fired with %#x, want the first change after it, %#x", i, r.read, r.event, want)
			}
		}
		n += len(rs)
	}
	for i, s := range pers {
		got := s.sync("/churn")
		var zx []int64
		for _, e := range got {
			zx = append(zx, e.zxid)
		}
		if fmt.Sprint(zx) != fmt.Sprint(written) {
			t.Errorf("persistent %d: %d events, want the %d changes in order", i, len(zx), len(written))
		}
	}
	t.Logf("%d writes, %d one-shot watches set and fired, %d persistent watchers", len(written), n, persistent)
}
