package server

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/proxy/wire"
)

// upstreamFrames is a raw version 2 upstream connection, spoken frame by
// frame as a proxy would.
type upstreamFrames struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialUpstreamV2(t *testing.T, s *Server) *upstreamFrames {
	t.Helper()
	nc, err := net.Dial("tcp", s.ProxyAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	u := &upstreamFrames{t: t, nc: nc, br: bufio.NewReader(nc)}
	u.write(wire.AppendRecord(nil, wire.KindHello, 0, &wire.Hello{Magic: wire.Magic, Version: 2, Name: "test"}))
	k, _, p := u.read()
	if v, _, err := wire.CheckReply(k, p); err != nil || v != 2 {
		t.Fatalf("hello: version %d, %v", v, err)
	}
	return u
}

func (u *upstreamFrames) write(b []byte) {
	u.t.Helper()
	if _, err := u.nc.Write(b); err != nil {
		u.t.Fatal(err)
	}
}

func (u *upstreamFrames) read() (wire.Kind, int64, []byte) {
	u.t.Helper()
	k, ch, p, err := wire.ReadFrame(u.br, 1<<20)
	if err != nil {
		u.t.Fatal(err)
	}
	return k, ch, p
}

// open opens channel ch with a new session.
func (u *upstreamFrames) open(ch int64) {
	u.t.Helper()
	u.write(wire.AppendRecord(nil, wire.KindOpen, ch, &wire.Open{ClientAddr: "127.0.0.1:9",
		Connect: jute.Marshal(&jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)})}))
	if k, got, _ := u.read(); k != wire.KindData || got != ch {
		u.t.Fatalf("open: %v on channel %d", k, got)
	}
}

func sharedGetData(ch int64, xid int32, gen int64, path string) []byte {
	req := jute.AppendFrame(nil, &jute.RequestHeader{Xid: xid, Type: jute.OpGetData}, &jute.GetDataRequest{Path: path, Watch: true})[4:]
	return wire.AppendRecord(nil, wire.KindDataShared, ch, &wire.DataShared{Gen: gen, Request: req})
}

// TestSharedReadCatchesUp: a DataShared read held inside its snapshot
// while a write is applied registers the connection's shared watch as of
// the state it read: the member sends the Watching frame (at that state),
// then the Event of the write it missed, then the read's reply, on the
// upstream connection in that order; the watch then stays (persistent
// upstream) for the next change, and Unwatch drops it unless a later
// generation registered it again.
func TestSharedReadCatchesUp(t *testing.T) {
	s := startStandalone(t, func(c *Config) { c.ProxyAddr = "127.0.0.1:0" })
	w := connectZK(t, s.Addr().String())
	if _, err := w.Create("/x", []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	u := dialUpstreamV2(t, s)
	u.open(1)
	entered, release := holdReads(s, jute.OpGetData)
	u.write(sharedGetData(1, 1, 1, "/x"))
	<-entered
	st, err := w.Set("/x", []byte("1"), -1)
	if err != nil {
		t.Fatal(err)
	}
	release()

	k, ch, p := u.read()
	mark := new(wire.Watching)
	if k != wire.KindWatching || ch != 1 || jute.Unmarshal(p, mark) != nil || mark.Xid != 1 || mark.Zxid >= st.Mzxid ||
		len(mark.Watches) != 1 || mark.Watches[0] != (wire.Watch{Table: wire.WatchTableData, Mode: wire.WatchStandard, Path: "/x"}) {
		t.Fatalf("first frame: %v on %d, %+v; want watching at a zxid below %#x", k, ch, mark, st.Mzxid)
	}
	k, _, p = u.read()
	ev := new(wire.Event)
	if k != wire.KindEvent || jute.Unmarshal(p, ev) != nil || ev.Zxid != st.Mzxid || jute.EventType(ev.Type) != jute.EventNodeDataChanged || ev.Path != "/x" {
		t.Fatalf("second frame: %v %+v; want the event of zxid %#x", k, ev, st.Mzxid)
	}
	k, ch, p = u.read()
	var h jute.ReplyHeader
	if k != wire.KindData || ch != 1 || jute.Unmarshal(p, &h) != nil || h.Xid != 1 || h.Zxid != mark.Zxid {
		t.Fatalf("third frame: %v on %d, %+v; want the read's reply at %#x", k, ch, h, mark.Zxid)
	}
	if _, _, n := s.cell.watches.count(); n != 1 {
		t.Fatalf("the member holds %d data watches, want the connection's one", n)
	}

	// The next change fires it again: it is persistent upstream.
	st, err = w.Set("/x", []byte("2"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if k, _, p := u.read(); k != wire.KindEvent || jute.Unmarshal(p, ev) != nil || ev.Zxid != st.Mzxid {
		t.Fatalf("after the second change: %v %+v", k, ev)
	}

	// A later generation registered it again: an Unwatch of an older one
	// leaves it; one of that generation drops it.
	u.write(sharedGetData(1, 2, 5, "/x"))
	if k, _, _ := u.read(); k != wire.KindWatching {
		t.Fatalf("second read: %v, want watching", k)
	}
	if k, _, _ := u.read(); k != wire.KindData {
		t.Fatalf("second read: %v, want its reply", k)
	}
	unwatch := func(gen int64) {
		u.write(wire.AppendRecord(nil, wire.KindUnwatch, 0, &wire.Unwatch{Gen: gen, Watch: wire.Watch{Table: wire.WatchTableData, Mode: wire.WatchPersistent, Path: "/x"}}))
		// A keep-alive's Progress answer: the Unwatch before it was applied.
		u.write(wire.AppendRecord(nil, wire.KindKeepAlive, 0, &wire.KeepAlive{}))
		if k, _, _ := u.read(); k != wire.KindProgress {
			t.Fatalf("keep-alive answered %v", k)
		}
	}
	unwatch(3)
	if _, _, n := s.cell.watches.count(); n != 1 {
		t.Fatalf("after a stale unwatch the member holds %d watches, want 1", n)
	}
	unwatch(5)
	if _, _, n := s.cell.watches.count(); n != 0 {
		t.Fatalf("after the unwatch the member holds %d watches, want 0", n)
	}
	if _, err := w.Set("/x", []byte("3"), -1); err != nil {
		t.Fatal(err)
	}
	// Nothing fires now: the next frame is the answer to a keep-alive.
	u.write(wire.AppendRecord(nil, wire.KindKeepAlive, 0, &wire.KeepAlive{}))
	if k, _, _ := u.read(); k != wire.KindProgress {
		t.Fatalf("a dropped shared watch fired: %v", k)
	}
}

// TestSharedOpFromASocket: the op code a DataShared read becomes inside
// the member is an unknown op from a client socket (UNIMPLEMENTED, then
// the connection closes), as it is from a version 1 channel.
func TestSharedOpFromASocket(t *testing.T) {
	s := startStandalone(t, nil)
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	nc.Write(jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)}))
	br := bufio.NewReader(nc)
	if _, err := jute.ReadFrame(br, nil, 1<<20); err != nil {
		t.Fatal(err)
	}
	body := sharedGetData(1, 1, 1, "/")[4+wire.HeaderLen+8:] // the request inside
	op := int32(opShared)
	nc.Write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: 1, Type: jute.OpCode(op)}, rawRecord(append(make([]byte, 8), body...))))
	reply, err := jute.ReadFrame(br, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var h jute.ReplyHeader
	if jute.Unmarshal(reply, &h) != nil || h.Err != jute.ErrUnimplemented {
		t.Fatalf("reply %+v, want UNIMPLEMENTED", h)
	}
	if _, err := jute.ReadFrame(br, nil, 1<<20); err == nil {
		t.Fatal("the connection stayed open")
	}
}

// TestIdleChannelsPark: idle channels of a proxy cost the member no
// goroutine: after n sessions are opened over one upstream connection
// the member runs about as many goroutines as before; a request on a
// parked channel is answered (its reader starts again) and a parked
// channel that the proxy closes is finished (its conn leaves the table).
func TestIdleChannelsPark(t *testing.T) {
	const n = 100
	s := startStandalone(t, func(c *Config) { c.ProxyAddr = "127.0.0.1:0" })
	u := dialUpstreamV2(t, s)
	base := s.routines.count()
	for ch := int64(1); ch <= n; ch++ {
		u.open(ch)
	}
	settled := func(want func(int64) bool) int64 {
		var g int64
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if g = s.routines.count(); want(g) {
				break
			}
		}
		return g
	}
	// A processor lingers a second after the handshake's last request.
	if g := settled(func(g int64) bool { return g < base+n/4 }); g >= base+n/4 {
		t.Fatalf("%d goroutines for %d idle channels (%d before): readers do not park", g, n, base)
	}
	conns := s.connCount()
	req := jute.AppendFrame(nil, &jute.RequestHeader{Xid: 1, Type: jute.OpExists}, &jute.ExistsRequest{Path: "/"})[4:]
	u.write(wire.AppendFrame(nil, wire.KindData, 7, req))
	k, ch, p := u.read()
	var h jute.ReplyHeader
	if k != wire.KindData || ch != 7 || jute.Unmarshal(p, &h) != nil || h.Xid != 1 || h.Err != jute.ErrOK {
		t.Fatalf("a parked channel's request: %v on %d, %+v", k, ch, h)
	}
	u.write(wire.AppendFrame(nil, wire.KindClose, 9))
	for deadline := time.Now().Add(20 * time.Second); s.connCount() != conns-1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a parked channel closed by the proxy: %d conns, want %d", s.connCount(), conns-1)
		}
	}
}
