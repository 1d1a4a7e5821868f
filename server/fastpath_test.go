package server

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/jute"
)

// orderClient is a raw session that records every frame it receives, in
// order: a reply's xid and zxid, or a notification's zxid.
type orderClient struct {
	nc     net.Conn
	frames chan orderFrame
}

type orderFrame struct {
	xid  int32
	zxid int64
	err  jute.ErrCode
	note bool
}

// dialOrder opens a session with a small receive buffer (rcvBuf bytes; 0:
// the default) so that the server's writes meet a full socket and hand
// over to its flusher; slow makes the reader pause now and then.
func dialOrder(t *testing.T, addr string, rcvBuf int, slow bool) *orderClient {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if rcvBuf > 0 {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvBuf)
			})
			return serr
		}
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := nc.Write(jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)})); err != nil {
		t.Fatal(err)
	}
	read := func() ([]byte, error) {
		var l [4]byte
		if _, err := io.ReadFull(nc, l[:]); err != nil {
			return nil, err
		}
		b := make([]byte, binary.BigEndian.Uint32(l[:]))
		_, err := io.ReadFull(nc, b)
		return b, err
	}
	body, err := read()
	if err != nil {
		t.Fatal(err)
	}
	if resp := new(jute.ConnectResponse); jute.Unmarshal(body, resp) != nil || resp.SessionID == 0 {
		t.Fatalf("connect: %+v", resp)
	}
	oc := &orderClient{nc: nc, frames: make(chan orderFrame, 1<<16)}
	go func() {
		defer close(oc.frames)
		for n := 0; ; n++ {
			if slow && n%64 == 63 {
				time.Sleep(2 * time.Millisecond) // let the server's socket fill
			}
			b, err := read()
			if err != nil {
				return
			}
			r := jute.NewReader(b)
			h := new(jute.ReplyHeader)
			h.Decode(r)
			if r.Err() != nil {
				return
			}
			oc.frames <- orderFrame{xid: h.Xid, zxid: h.Zxid, err: h.Err, note: h.Xid == jute.XidNotification}
		}
	}()
	return oc
}

func (oc *orderClient) send(t *testing.T, xid int32, op jute.OpCode, req jute.Record) {
	t.Helper()
	if _, err := oc.nc.Write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: xid, Type: op}, req)); err != nil {
		t.Fatal(err)
	}
}

// TestFastPathKeepsOrder: a session with a persistent watch on a znode
// another session keeps changing sends reads and writes of its own, one at
// a time (answered by the reader goroutine, written at once) and in bursts
// (queued for the processor), over a socket that fills up (the flusher
// takes over). Whichever path answers, replies come in request order and
// every change's notification comes before any reply whose zxid covers
// the change, notifications in zxid order.
func TestFastPathKeepsOrder(t *testing.T) {
	s := startStandalone(t, nil)
	addr := s.Addr().String()
	w := connectZK(t, addr)
	for _, p := range []string{"/n", "/own"} {
		if _, err := w.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		rcvBuf int
		slow   bool
	}{{"default socket", 0, false}, {"full socket", 4096, true}} {
		t.Run(tc.name, func(t *testing.T) {
			fastPathOrder(t, addr, w, tc.rcvBuf, tc.slow)
		})
	}
}

func fastPathOrder(t *testing.T, addr string, w *zk.Conn, rcvBuf int, slow bool) {
	oc := dialOrder(t, addr, rcvBuf, slow)
	oc.send(t, 1, jute.OpAddWatch, &jute.AddWatchRequest{Path: "/n", Mode: jute.AddWatchModePersistent})
	if f := <-oc.frames; f.xid != 1 || f.err != jute.ErrOK {
		t.Fatalf("addWatch: %+v", f)
	}

	// The other session's changes, with their zxids.
	const changes = 400
	value := make([]byte, 512)
	var (
		mu    sync.Mutex
		zxids []int64
	)
	writerDone := make(chan error, 1)
	go func() {
		for i := 0; i < changes; i++ {
			st, err := w.Set("/n", value, -1)
			if err != nil {
				writerDone <- err
				return
			}
			mu.Lock()
			zxids = append(zxids, st.Mzxid)
			mu.Unlock()
		}
		writerDone <- nil
	}()

	// Replies seen, each with the newest notification zxid before it.
	type seen struct {
		xid, want     int32
		zxid, notedTo int64
	}
	var (
		replies []seen
		notes   []int64
	)
	lastNote := int64(0)
	take := func(want int32) {
		for {
			f, ok := <-oc.frames
			if !ok {
				t.Fatalf("connection ended waiting for xid %d", want)
			}
			if f.note {
				if f.zxid <= lastNote {
					t.Fatalf("notification zxid %#x after %#x: not in zxid order", f.zxid, lastNote)
				}
				lastNote = f.zxid
				notes = append(notes, f.zxid)
				continue
			}
			if f.err != jute.ErrOK {
				t.Fatalf("xid %d: %v", f.xid, f.err)
			}
			replies = append(replies, seen{f.xid, want, f.zxid, lastNote})
			return
		}
	}
	xid := int32(1)
	next := func(i int) (jute.OpCode, jute.Record) {
		switch i % 4 {
		case 0:
			return jute.OpGetData, &jute.GetDataRequest{Path: "/n"}
		case 1:
			return jute.OpExists, &jute.ExistsRequest{Path: "/n"}
		case 2:
			return jute.OpSetData, &jute.SetDataRequest{Path: "/own", Data: []byte("x"), Version: -1}
		default:
			return jute.OpGetChildren2, &jute.GetChildren2Request{Path: "/"}
		}
	}
	writing := true
	for round := 0; writing || round < 8; round++ {
		select {
		case err := <-writerDone:
			if err != nil {
				t.Fatal(err)
			}
			writing = false
		default:
		}
		// 1: the reader's path. More, sent in one write: the reader answers
		// the reads it finds buffered and writes their replies at once, the
		// processor takes over at a write.
		burst := 1 + round%5
		first := xid + 1
		var frames []byte
		for k := 0; k < burst; k++ {
			xid++
			op, req := next(round + k)
			frames = jute.AppendFrame(frames, &jute.RequestHeader{Xid: xid, Type: op}, req)
		}
		if _, err := oc.nc.Write(frames); err != nil {
			t.Fatal(err)
		}
		for x := first; x <= xid; x++ {
			take(x)
		}
		if round > 100_000 {
			t.Fatal("the writer did not finish")
		}
	}
	// Every change is notified, once.
	for deadline := time.Now().Add(20 * time.Second); len(notes) < changes; {
		select {
		case f, ok := <-oc.frames:
			if !ok {
				t.Fatal("connection ended before every notification")
			}
			if !f.note {
				t.Fatalf("unexpected reply %+v", f)
			}
			notes = append(notes, f.zxid)
		case <-time.After(time.Until(deadline)):
			t.Fatalf("%d of %d notifications", len(notes), changes)
		}
	}
	if len(notes) != changes {
		t.Fatalf("%d notifications for %d changes", len(notes), changes)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, z := range zxids {
		if notes[i] != z {
			t.Fatalf("notification %d has zxid %#x, the change was %#x", i, notes[i], z)
		}
	}
	during := 0
	for _, r := range replies {
		if r.xid != r.want {
			t.Fatalf("reply xid %d where %d was due: not in request order", r.xid, r.want)
		}
		// Each change the reply reflects was notified before it.
		for _, z := range zxids {
			if z <= r.zxid && z > r.notedTo {
				t.Fatalf("reply xid %d at zxid %#x came before the notification of change %#x (notified up to %#x)",
					r.xid, r.zxid, z, r.notedTo)
			}
		}
		if r.zxid >= zxids[0] && r.zxid <= zxids[len(zxids)-1] {
			during++
		}
	}
	t.Logf("%d replies (%d while the changes were made), %d notifications", len(replies), during, len(notes))
}
