package proxy

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/zkraft/zkraft/proxy/wire"
)

// TestHelloFallsBackToVersion1: against a member that speaks only version
// 1 (a listener answering hellos as a version 1 member's wire.Accept
// does), a version 2 proxy is refused, says hello again in version 1 and
// gets a connection without shared watches.
func TestHelloFallsBackToVersion1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	hellos := make(chan int32, 4)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				nc.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(nc)
				_, _, payload, err := wire.ReadFrame(br, wire.Overhead)
				if err != nil {
					return
				}
				rep, refused := wire.Accept(payload, 1, 1)
				if rep == nil {
					return
				}
				hellos <- rep.Version
				nc.Write(wire.AppendRecord(nil, wire.KindHelloReply, 0, rep))
				if refused == nil {
					io.Copy(io.Discard, br) // serve nothing, keep the connection
				}
			}()
		}
	}()
	p := &Proxy{cfg: Config{Name: "fallback", UpstreamVersion: wire.Version, KeepAliveInterval: time.Second}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	u, err := dialUpstream(p, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if u.version != 1 || u.sw != nil {
		t.Fatalf("connection of version %d (shared watches %v), want version 1 without", u.version, u.sw != nil)
	}
	if a, b := <-hellos, <-hellos; a != 1 || b != 1 {
		t.Fatalf("the member answered versions %d and %d", a, b)
	}
	u.close()
	p.wg.Wait() // the connection's writer
}
