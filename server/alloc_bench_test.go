package server

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/jute"
)

// BenchmarkRequestAllocs measures what a request costs a standalone member
// (Raft and Pebble, over loopback TCP) in heap objects and bytes: 32
// sessions, one request in flight each, through a hand-written client
// that sends a prepared frame and reads the reply into one reused buffer,
// so that nearly every allocation -benchmem counts is the server's (the
// client's are a few per connection, made before the timer). ns/op on this
// shared machine says little; allocs/op and B/op are what it is for
// (docs/performance.md, "Allocations and the collector").
//
//	go test ./server -run XXX -bench RequestAllocs -benchmem -benchtime 20000x
func BenchmarkRequestAllocs(b *testing.B) {
	value := make([]byte, 1024)
	acl := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}
	for _, wl := range []string{"setData", "getData", "multi4"} {
		b.Run(wl, func(b *testing.B) {
			s := benchStandalone(b)
			const conns = 32
			pool := make(chan *benchClient, conns)
			for i := range conns {
				c := dialBench(b, s.Addr().String())
				var frame []byte
				own := func(k int) string { return fmt.Sprintf("/b%02d-%d", i, k) }
				for k := range 4 {
					c.call(b, jute.AppendFrame(nil, &jute.RequestHeader{Xid: 1, Type: jute.OpCreate},
						&jute.CreateRequest{Path: own(k), Data: value, ACL: acl}))
				}
				switch wl {
				case "setData":
					frame = jute.AppendFrame(nil, &jute.RequestHeader{Xid: 2, Type: jute.OpSetData},
						&jute.SetDataRequest{Path: own(0), Data: value, Version: -1})
				case "getData":
					frame = jute.AppendFrame(nil, &jute.RequestHeader{Xid: 2, Type: jute.OpGetData},
						&jute.GetDataRequest{Path: own(0)})
				case "multi4":
					ops := make([]jute.MultiOp, 4)
					for k := range ops {
						ops[k] = jute.MultiOp{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: own(k), Data: value, Version: -1}}
					}
					frame = jute.AppendFrame(nil, &jute.RequestHeader{Xid: 2, Type: jute.OpMulti}, &jute.MultiRequest{Ops: ops})
				}
				c.frame = frame
				pool <- c
			}
			b.SetParallelism((conns + 1) / 2) // with GOMAXPROCS 2: 32 goroutines, one connection each
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c := <-pool
				for pb.Next() {
					if err := c.roundTrip(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
		})
	}
}

// benchStandalone is startStandalone for a benchmark.
func benchStandalone(b *testing.B) *Server {
	b.Helper()
	s, err := New(Config{ClientAddr: "127.0.0.1:0", RaftAddr: freeport.Addr(b), DataDir: b.TempDir(),
		TickTime: 200 * time.Millisecond, FourLetterWords: []string{"*"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchClient is one session over a plain socket: a prepared request frame
// and a reply buffer.
type benchClient struct {
	nc    net.Conn
	frame []byte
	buf   []byte
}

func dialBench(b *testing.B, addr string) *benchClient {
	b.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	c := &benchClient{nc: nc, buf: make([]byte, 64<<10)}
	if _, err := nc.Write(jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})); err != nil {
		b.Fatal(err)
	}
	if _, err := c.read(); err != nil {
		b.Fatal(err)
	}
	return c
}

// call sends frame and fails b unless the reply is OK.
func (c *benchClient) call(b *testing.B, frame []byte) {
	b.Helper()
	c.frame = frame
	if err := c.roundTrip(); err != nil {
		b.Fatal(err)
	}
}

// roundTrip sends c.frame and reads its reply, which must be OK.
func (c *benchClient) roundTrip() error {
	if _, err := c.nc.Write(c.frame); err != nil {
		return err
	}
	body, err := c.read()
	if err != nil {
		return err
	}
	if len(body) < 16 {
		return io.ErrUnexpectedEOF
	}
	if code := jute.ErrCode(int32(binary.BigEndian.Uint32(body[12:16]))); code != jute.ErrOK {
		return code
	}
	return nil
}

// read reads one frame's body into c.buf.
func (c *benchClient) read() ([]byte, error) {
	if _, err := io.ReadFull(c.nc, c.buf[:4]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(c.buf[:4]))
	if n > len(c.buf) {
		return nil, fmt.Errorf("reply of %d bytes", n)
	}
	_, err := io.ReadFull(c.nc, c.buf[:n])
	return c.buf[:n], err
}
