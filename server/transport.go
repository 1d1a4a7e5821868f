package server

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"os"
	"path/filepath"
	"strings"

	dbconfig "github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	"github.com/lni/dragonboat/v4/raftpb"
)

// A standalone ZooKeeper opens no quorum port, and neither does a
// standalone zkraft member unless it is given a Raft address: its NodeHost
// gets a transport that listens on nothing and reaches no one. The only
// voter of its shard sends Raft messages to no peer, so nothing is lost.
//
// Dragonboat still wants a NodeHost address, and records it in the
// NodeHost directory the first time (raft/dragonboat.ds): a later start
// with another address is refused ("not the owner of the data directory"),
// and the shard's membership records it as the replica's address. A
// standalone member without a Raft address therefore keeps the address its
// data directory recorded (so a directory written by an earlier zkraft, or
// with --raft-addr, starts unchanged), and a new directory records
// standaloneRaftAddr, the address an earlier zkraft listened on by default.

// standaloneRaftAddr is the nominal Raft address of a new standalone data
// directory. Nothing listens on it.
const standaloneRaftAddr = "127.0.0.1:2888"

// errNoRaftPeers is what the standalone transport answers a send with.
var errNoRaftPeers = errors.New("server: a standalone member has no Raft transport (start it with a Raft address to reach other members)")

// noNetTransportFactory makes noNetTransport; it accepts any host:port
// address (Dragonboat validates the NodeHost address and every target with
// it).
type noNetTransportFactory struct{}

var _ dbconfig.TransportFactory = noNetTransportFactory{}

func (noNetTransportFactory) Create(dbconfig.NodeHostConfig, raftio.MessageHandler, raftio.ChunkHandler) raftio.ITransport {
	return noNetTransport{}
}

func (noNetTransportFactory) Validate(addr string) bool { return dbconfig.IsValidAddress(addr) }

// isStandaloneTransport reports whether nhc has the standalone transport,
// which opens no Raft port.
func isStandaloneTransport(nhc dbconfig.NodeHostConfig) bool {
	_, ok := nhc.Expert.TransportFactory.(noNetTransportFactory)
	return ok
}

// noNetTransport listens on nothing and connects to no one.
type noNetTransport struct{}

var _ raftio.ITransport = noNetTransport{}

func (noNetTransport) Name() string { return "zkraft-standalone" }
func (noNetTransport) Start() error { return nil }
func (noNetTransport) Close() error { return nil }
func (noNetTransport) GetConnection(context.Context, string) (raftio.IConnection, error) {
	return nil, errNoRaftPeers
}
func (noNetTransport) GetSnapshotConnection(context.Context, string) (raftio.ISnapshotConnection, error) {
	return nil, errNoRaftPeers
}

// raftFlagFile is where Dragonboat records a NodeHost directory's owner.
const raftFlagFile = "dragonboat.ds"

// recordedRaftAddr reads the Raft address Dragonboat recorded in the
// NodeHost directory nhDir. ok is false for a new directory (or a flag
// file it cannot read, which Dragonboat then reports itself).
func recordedRaftAddr(nhDir string) (addr string, ok bool) {
	b, err := os.ReadFile(filepath.Join(nhDir, raftFlagFile))
	if err != nil || len(b) < 8 {
		return "", false
	}
	// The file is the last 8 bytes of the content's MD5, then the content.
	sum := md5.Sum(b[8:])
	if !bytes.Equal(b[:8], sum[8:]) {
		return "", false
	}
	var st raftpb.RaftDataStatus
	if err := st.Unmarshal(b[8:]); err != nil || st.Address == "" {
		return "", false
	}
	return strings.TrimSpace(st.Address), true
}

// sameRaftAddr compares addresses as Dragonboat does.
func sameRaftAddr(a, b string) bool {
	return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}
