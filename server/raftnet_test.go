package server

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	dbconfig "github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	"github.com/lni/dragonboat/v4/raftpb"
)

// mixedTransports gives member 1 Dragonboat's transport and the others
// zkraft's: every pair with member 1 crosses the two implementations in
// both directions.
func mixedTransports(c *Config) {
	if c.ReplicaID == 1 {
		c.RaftTransport = RaftTransportDragonboat
	} else {
		c.RaftTransport = RaftTransportZkraft
	}
}

func (tc *testCluster) server(id uint64) *Server {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.servers[id]
}

// checkTransports asserts that member 1 runs Dragonboat's transport and
// the others zkraft's, and that zkraft's received message batches.
func checkTransports(t *testing.T, tc *testCluster) {
	t.Helper()
	for id := uint64(1); id <= 3; id++ {
		s := tc.server(id)
		if s == nil {
			continue
		}
		switch {
		case id == 1 && s.raftNet != nil:
			t.Fatalf("member 1 runs zkraft's transport, want Dragonboat's")
		case id != 1 && s.raftNet == nil:
			t.Fatalf("member %d runs Dragonboat's transport, want zkraft's", id)
		case id != 1 && s.raftNet.batchesIn.Load() == 0:
			t.Fatalf("member %d's transport received no message batch", id)
		}
	}
}

// TestRaftTransportMixedEnsemble: a member with Dragonboat's transport
// and two with zkraft's form one ensemble; writes through each member are
// read back through each other one.
func TestRaftTransportMixedEnsemble(t *testing.T) {
	tc := newTestClusterWith(t, 3, 0, mixedTransports)
	conns := map[uint64]*zk.Conn{}
	for id := uint64(1); id <= 3; id++ {
		conns[id], _ = tc.connect(id)
	}
	for id := uint64(1); id <= 3; id++ {
		createRetrying(t, conns[id], "/from-"+string(rune('0'+id)), "v")
	}
	for id := uint64(1); id <= 3; id++ {
		c := conns[id]
		retryConnLoss(t, "sync", func() error { _, err := c.Sync("/"); return err })
		var kids []string
		retryConnLoss(t, "children", func() (err error) { kids, _, err = c.Children("/"); return err })
		if len(kids) != 4 { // /zookeeper and the three
			t.Fatalf("member %d sees %v", id, kids)
		}
	}
	checkTransports(t, tc)
}

// TestRaftTransportMixedSnapshotCatchUp: a follower catches up by a
// snapshot streamed from a leader with the other transport (member 1 has
// Dragonboat's: when it leads, member 2 lags; otherwise member 1 lags).
func TestRaftTransportMixedSnapshotCatchUp(t *testing.T) {
	tc := newTestClusterWith(t, 3, 50, mixedTransports)
	lag := catchUpFromSnapshot(t, tc)
	if s := tc.server(lag); lag != 1 && s.raftNet.chunksIn.Load() == 0 {
		t.Fatalf("member %d installed a snapshot but its transport received no chunk", lag)
	}
	checkTransports(t, tc)
}

// TestRaftTransportZkraftSnapshotCatchUp: the same with zkraft's
// transport on every member.
func TestRaftTransportZkraftSnapshotCatchUp(t *testing.T) {
	tc := newTestClusterWith(t, 3, 50, func(c *Config) { c.RaftTransport = RaftTransportZkraft })
	lag := catchUpFromSnapshot(t, tc)
	if n := tc.server(lag).raftNet.chunksIn.Load(); n == 0 {
		t.Fatalf("member %d installed a snapshot but its transport received no chunk", lag)
	}
}

// TestQuorumTLSMixedTransports: under sslQuorum both transports use
// mutual TLS and leave the payload CRC out, and still talk to each other.
func TestQuorumTLSMixedTransports(t *testing.T) {
	pki := newTestPKI(t)
	tc := newTestClusterWith(t, 3, 0, func(c *Config) {
		mixedTransports(c)
		c.TLS = TLSConfig{Quorum: true, QuorumCertFile: pki.memberPEM, QuorumCAFile: pki.caFile}
	})
	c1, _ := tc.connect(1)
	createRetrying(t, c1, "/q", "tls")
	for _, id := range []uint64{2, 3} {
		c, _ := tc.connect(id)
		retryConnLoss(t, "sync", func() error { _, err := c.Sync("/q"); return err })
		if data, _, err := c.Get("/q"); err != nil || string(data) != "tls" {
			t.Fatalf("member %d: %q %v", id, data, err)
		}
	}
	checkTransports(t, tc)
}

// startRaftNet starts a zkraft transport on a free port whose handlers
// count what they get.
func startRaftNet(t *testing.T) (addr string, f *raftNetFactory, batches *atomic.Int64) {
	t.Helper()
	addr = freeAddr(t)
	f = newRaftNetFactory()
	batches = &atomic.Int64{}
	tr := f.Create(dbconfig.NodeHostConfig{RaftAddress: addr},
		func(raftpb.MessageBatch) { batches.Add(1) },
		func(raftpb.Chunk) bool { return true })
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	})
	return addr, f, batches
}

// frameOf is a message batch's frame as Dragonboat writes it, built from
// the format's description rather than from raftnet.go's encoder.
func frameOf(t *testing.T, b raftpb.MessageBatch) []byte {
	t.Helper()
	p, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	h := make([]byte, 18)
	binary.BigEndian.PutUint16(h, 100)
	binary.BigEndian.PutUint64(h[2:], uint64(len(p)))
	binary.BigEndian.PutUint32(h[14:], crc32.ChecksumIEEE(p))
	binary.BigEndian.PutUint32(h[10:], crc32.ChecksumIEEE(h))
	return append(append([]byte{0xAE, 0x7D}, h...), p...)
}

// waitClosed waits until the peer closes c (a read ends with EOF or a
// reset rather than a timeout).
func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	_, err := c.Read(b[:])
	if err == nil || isNetTimeout(err) {
		t.Fatalf("the transport kept a connection that sent a bad frame (read: %v)", err)
	}
}

// TestRaftNetFrames: frames written as Dragonboat writes them, several
// in one write and one split across writes, reach the handler; a frame
// with a bad payload or header CRC ends the connection unhandled; a
// poison is acknowledged.
func TestRaftNetFrames(t *testing.T) {
	addr, f, batches := startRaftNet(t)
	batch := raftpb.MessageBatch{
		BinVer:        raftio.TransportBinVersion,
		SourceAddress: "127.0.0.1:1",
		Requests: []raftpb.Message{{Type: raftpb.Replicate, ShardID: 1, From: 1, To: 2,
			Entries: []raftpb.Entry{{Index: 7, Term: 2, Cmd: make([]byte, 200<<10)}}}},
	}
	small := frameOf(t, raftpb.MessageBatch{BinVer: raftio.TransportBinVersion, SourceAddress: "127.0.0.1:1"})
	big := frameOf(t, batch) // larger than the receiver's buffer

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stream := append(append(append([]byte{}, small...), big...), small...)
	if _, err := c.Write(stream[:7]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the first part arrive alone
	if _, err := c.Write(stream[7:]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for batches.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 batches handled", batches.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f.batchesIn.Load() != 3 {
		t.Fatalf("batchesIn %d, want 3", f.batchesIn.Load())
	}

	for name, corrupt := range map[string]func([]byte){
		"payload crc": func(b []byte) { b[len(b)-1] ^= 1 },
		"header crc":  func(b []byte) { b[3] ^= 1 },
		"magic":       func(b []byte) { b[0] = 0x42 },
	} {
		bad := append([]byte{}, small...)
		corrupt(bad)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		before := batches.Load()
		if _, err := c.Write(bad); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, c)
		c.Close()
		if batches.Load() != before {
			t.Fatalf("%s: a corrupt frame was handled", name)
		}
	}

	// A snapshot connection's end: poison, acknowledged with a poison.
	p, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Write([]byte{0, 0}); err != nil {
		t.Fatal(err)
	}
	_ = p.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ack [2]byte
	if _, err := io.ReadFull(p, ack[:]); err != nil || ack != [2]byte{} {
		t.Fatalf("poison ack %v, %v", ack, err)
	}
}

// TestRaftNetSendsDragonboatFrames: what GetConnection and
// GetSnapshotConnection send decodes by the format's description, and a
// snapshot connection's Close waits for the poison's acknowledgement.
func TestRaftNetSendsDragonboatFrames(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type frame struct {
		method  uint16
		payload []byte
	}
	got := make(chan frame, 4)
	go func() {
		defer close(got) // a frame that does not decode ends the stream
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for {
			var head [20]byte
			if _, err := io.ReadFull(c, head[:2]); err != nil {
				return
			}
			if head[0] == 0 && head[1] == 0 {
				_, _ = c.Write([]byte{0, 0})
				return
			}
			if _, err := io.ReadFull(c, head[2:]); err != nil {
				return
			}
			h := head[2:]
			size := binary.BigEndian.Uint64(h[2:])
			p := make([]byte, size)
			if _, err := io.ReadFull(c, p); err != nil {
				return
			}
			hc := binary.BigEndian.Uint32(h[10:])
			binary.BigEndian.PutUint32(h[10:], 0)
			if head[0] != 0xAE || head[1] != 0x7D || crc32.ChecksumIEEE(h) != hc ||
				crc32.ChecksumIEEE(p) != binary.BigEndian.Uint32(h[14:]) {
				return
			}
			got <- frame{binary.BigEndian.Uint16(h), p}
		}
	}()
	tr := newRaftNetFactory().Create(dbconfig.NodeHostConfig{RaftAddress: freeAddr(t)}, nil, nil).(*raftNet)
	sc, err := tr.GetSnapshotConnection(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	chunk := raftpb.Chunk{ShardID: 3, ReplicaID: 2, ChunkId: 1, ChunkCount: 2, Data: make([]byte, 3<<20)}
	if err := sc.SendChunk(chunk); err != nil {
		t.Fatal(err)
	}
	sc.Close()
	f, ok := <-got
	if !ok || f.method != 200 {
		t.Fatalf("frame %v %v", ok, f.method)
	}
	var back raftpb.Chunk
	if err := back.Unmarshal(f.payload); err != nil || back.ShardID != 3 || len(back.Data) != 3<<20 {
		t.Fatalf("chunk back: %v shard %d data %d", err, back.ShardID, len(back.Data))
	}
	if _, ok := <-got; ok {
		t.Fatal("a frame after the poison")
	}
}

// TestRaftNetValidate: Dragonboat's address rules, remembered.
func TestRaftNetValidate(t *testing.T) {
	f := newRaftNetFactory()
	for _, tc := range []struct {
		addr string
		ok   bool
	}{{"127.0.0.1:2888", true}, {"zk1.example.com:2888", true}, {"127.0.0.1", false}, {"a:b:c", false}, {"host:0", false}, {"127.0.0.1:2888", true}} {
		if got := f.Validate(tc.addr); got != tc.ok {
			t.Errorf("Validate(%q) = %v, want %v", tc.addr, got, tc.ok)
		}
	}
	if n := f.nvalid.Load(); n != 2 {
		t.Errorf("%d addresses remembered, want 2", n)
	}
}
