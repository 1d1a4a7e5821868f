package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/proxy"
)

// fanSession is a minimal raw session for many-session tests: a blocking
// socket read only by call, so that an idle session costs the test no
// goroutine and its notifications wait in the socket until it reads.
type fanSession struct {
	nc  net.Conn
	br  *bufio.Reader
	id  int64
	xid int32
}

func fanConnect(addr string) (*fanSession, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := nc.Write(jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})); err != nil {
		nc.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(nc, 512)
	body, err := jute.ReadFrame(br, nil, 1<<20)
	if err != nil {
		nc.Close()
		return nil, err
	}
	resp := new(jute.ConnectResponse)
	if err := jute.Unmarshal(body, resp); err != nil || resp.SessionID == 0 {
		nc.Close()
		return nil, fmt.Errorf("connect: %+v %v", resp, err)
	}
	nc.SetDeadline(time.Time{})
	return &fanSession{nc: nc, br: br, id: resp.SessionID}, nil
}

// call sends a request and reads frames until its reply: the reply's
// header and the notifications that came before it, in order.
func (s *fanSession) call(op jute.OpCode, req jute.Record) (jute.ReplyHeader, []rawEvent, error) {
	s.xid++
	s.nc.SetDeadline(time.Now().Add(30 * time.Second))
	defer s.nc.SetDeadline(time.Time{})
	if _, err := s.nc.Write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: s.xid, Type: op}, req)); err != nil {
		return jute.ReplyHeader{}, nil, err
	}
	var events []rawEvent
	for {
		body, err := jute.ReadFrame(s.br, nil, 1<<20)
		if err != nil {
			return jute.ReplyHeader{}, events, fmt.Errorf("session %#x waiting for the reply of %v: %w", s.id, op, err)
		}
		r := jute.NewReader(body)
		var h jute.ReplyHeader
		h.Decode(r)
		switch h.Xid {
		case jute.XidNotification:
			e := rawEvent{zxid: h.Zxid}
			if err := jute.Unmarshal(r.Rest(), &e.WatcherEvent); err != nil {
				return h, events, err
			}
			events = append(events, e)
		case jute.XidPing:
		case s.xid:
			return h, events, nil
		default:
			return h, events, fmt.Errorf("session %#x: reply xid %d, want %d", s.id, h.Xid, s.xid)
		}
	}
}

// TestSharedWatchManySessions: 1,600 sessions through one proxy share one
// watch on /many (half a one-shot data watch, half a persistent one), so
// that its fan-out is split over several goroutines (FanOutWorkers 3, at
// least 512 sessions each) and most sessions are parked; 40 of them keep
// requests in flight throughout, so their notifications are held behind
// replies. Two writes: every one-shot session is told of the first write
// exactly once and of the second not at all, every persistent one of both
// exactly once each, in order, and each before the reply to a read that
// follows the writes. A session skipped, or told twice, fails the test.
func TestSharedWatchManySessions(t *testing.T) {
	const (
		n    = 1600
		busy = 40 // the first busy sessions keep reading while the writes come
	)
	m := startMember(t, nil)
	p := startProxyWith(t, proxy.Config{FanOutWorkers: 3}, m)
	addr := p.Addr().String()
	w := rawConnect(t, m.cfg.ClientAddr)
	w.call(jute.OpCreate, &jute.CreateRequest{Path: "/many", Data: []byte("0"), ACL: openACL})

	ss := make([]*fanSession, n)
	var next atomic.Int64
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				s, err := fanConnect(addr)
				if err != nil {
					errs <- err
					return
				}
				ss[i] = s
				t.Cleanup(func() { s.nc.Close() })
				var h jute.ReplyHeader
				var ev []rawEvent
				if i%2 == 0 {
					h, ev, err = s.call(jute.OpGetData, &jute.GetDataRequest{Path: "/many", Watch: true})
				} else {
					h, ev, err = s.call(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/many", Mode: jute.AddWatchModePersistent})
				}
				if err == nil && (h.Err != jute.ErrOK || len(ev) != 0) {
					err = fmt.Errorf("session %d's watch: %v, events %s", i, h.Err, eventsString(ev))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if _, _, got := wchs(t, m.cfg.ClientAddr); got != 1 {
		t.Fatalf("the member holds %d data watches for %d sessions through one proxy, want 1", got, n)
	}

	// The busy sessions read in a loop until the writes are done; what
	// they are told comes among their replies.
	got := make([][]rawEvent, n)
	stop := make(chan struct{})
	var busyWG sync.WaitGroup
	for i := range busy {
		busyWG.Add(1)
		go func() {
			defer busyWG.Done()
			for {
				_, ev, err := ss[i].call(jute.OpExists, &jute.ExistsRequest{Path: "/many"})
				got[i] = append(got[i], ev...)
				if err != nil {
					errs <- err
					return
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	var zxids []int64
	for v := range 2 {
		f, _ := w.call(jute.OpSetData, &jute.SetDataRequest{Path: "/many", Data: []byte{byte('1' + v)}, Version: -1})
		if f.hdr.Err != jute.ErrOK {
			t.Fatalf("setData: %v", f.hdr.Err)
		}
		zxids = append(zxids, f.hdr.Zxid)
	}
	close(stop)
	busyWG.Wait()

	// Every session reads once more: what it is owed must come before
	// that read's reply.
	next.Store(0)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				_, ev, err := ss[i].call(jute.OpExists, &jute.ExistsRequest{Path: "/many"})
				if err != nil {
					errs <- err
					return
				}
				got[i] = append(got[i], ev...)
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	bad := 0
	for i, ev := range got {
		want := zxids[:1]
		if i%2 == 1 {
			want = zxids
		}
		ok := len(ev) == len(want)
		for j := 0; ok && j < len(ev); j++ {
			ok = ev[j].Type == jute.EventNodeDataChanged && ev[j].Path == "/many" && ev[j].zxid == want[j]
		}
		if !ok {
			if bad++; bad <= 10 {
				t.Errorf("session %d (persistent %v, busy %v): told %s(zxids %v), want NodeDataChanged /many at zxids %v", i, i%2 == 1, i < busy, eventsString(ev), zxidsOf(ev), want)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d sessions were not told exactly what their watch owed them", bad, n)
	}
}

func zxidsOf(es []rawEvent) []int64 {
	var z []int64
	for _, e := range es {
		z = append(z, e.zxid)
	}
	return z
}
