package server

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/raftsm"
)

// diskSM is an on-disk state machine with the required methods only.
type diskSM struct{}

func (diskSM) Open(<-chan struct{}) (uint64, error)                 { return 0, nil }
func (diskSM) Update(e []sm.Entry) ([]sm.Entry, error)              { return e, nil }
func (diskSM) Lookup(any) (any, error)                              { return nil, nil }
func (diskSM) Sync() error                                          { return nil }
func (diskSM) PrepareSnapshot() (any, error)                        { return nil, nil }
func (diskSM) SaveSnapshot(any, io.Writer, <-chan struct{}) error   { return nil }
func (diskSM) RecoverFromSnapshot(io.Reader, <-chan struct{}) error { return nil }
func (diskSM) Close() error                                         { return nil }

type hashSM struct{ diskSM }

func (hashSM) GetHash() (uint64, error) { return 7, nil }

type extSM struct{ diskSM }

func (extSM) NALookup(b []byte) ([]byte, error) { return b, nil }

type bothSM struct{ diskSM }

func (bothSM) GetHash() (uint64, error)          { return 7, nil }
func (bothSM) NALookup(b []byte) ([]byte, error) { return b, nil }

// TestGatedSMForwards: the gate's wrapper offers Dragonboat's optional
// interfaces exactly when the state machine it wraps does (Dragonboat
// looks for them on the value the factory returns), and the state machine
// raftsm makes is wrapped with the interfaces it has.
func TestGatedSMForwards(t *testing.T) {
	g := newOpenGate()
	for _, c := range []struct {
		name      string
		inner     sm.IOnDiskStateMachine
		hash, ext bool
	}{
		{"plain", diskSM{}, false, false},
		{"hash", hashSM{}, true, false},
		{"extended", extSM{}, false, true},
		{"both", bothSM{}, true, true},
		{"raftsm", raftsm.New(raftsm.Config{Dir: t.TempDir()}, 1, 1), false, false},
	} {
		inner := c.inner
		_, hash := inner.(sm.IHash)
		_, ext := inner.(sm.IExtended)
		w := g.wrap(inner)
		_, wHash := w.(sm.IHash)
		_, wExt := w.(sm.IExtended)
		if wHash != hash || wExt != ext {
			t.Errorf("%s: wrapped IHash %v IExtended %v, the state machine %v %v", c.name, wHash, wExt, hash, ext)
		}
		if c.name != "raftsm" && (hash != c.hash || ext != c.ext) {
			t.Fatalf("%s: the fake has IHash %v IExtended %v", c.name, hash, ext)
		}
		if h, ok := w.(sm.IHash); ok {
			if v, _ := h.GetHash(); v != 7 {
				t.Errorf("%s: GetHash %d", c.name, v)
			}
		}
	}
}

// TestDamagedDataDirInProcess: New refuses a damaged data directory with
// an error that matches ErrDamagedData and names the file, and starts
// again once the file is whole: a Dragonboat flag file, and the flag file
// of a snapshot left unfinished (which Dragonboat reads at start-up).
func TestDamagedDataDirInProcess(t *testing.T) {
	dir := t.TempDir()
	raftAddr := freeAddr(t)
	start := func() (*Server, error) {
		return New(Config{ClientAddr: "127.0.0.1:0", RaftAddr: raftAddr, DataDir: dir, Logger: testLogger(t, 1)})
	}
	s, err := start()
	if err != nil {
		t.Fatal(err)
	}
	c := connectZK(t, s.Addr().String())
	if _, err := c.Create("/kept", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Close()

	refused := func(what, file string) {
		t.Helper()
		s, err := start()
		if err == nil {
			s.Close()
			t.Fatalf("%s: the member started", what)
		}
		if !errors.Is(err, ErrDamagedData) || !strings.Contains(err.Error(), file) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: %v, want one line matching ErrDamagedData that names %s", what, err, file)
		}
	}
	id := filepath.Join(dir, "raft", "NODEHOST.ID")
	whole, err := os.ReadFile(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(id, whole[:len(whole)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	refused("NODEHOST.ID cut in half", id)
	if err := os.WriteFile(id, whole, 0o644); err != nil {
		t.Fatal(err)
	}

	snaps, _ := filepath.Glob(filepath.Join(dir, "raft", "*", "*", "snapshot-part-*", "snapshot-1-1"))
	if len(snaps) != 1 {
		t.Fatalf("snapshot directories %v", snaps)
	}
	orphan := filepath.Join(snaps[0], "snapshot-00000000000000FF")
	if err := os.MkdirAll(orphan, 0o755); err != nil {
		t.Fatal(err)
	}
	msg := filepath.Join(orphan, "dragonboat.snapshot.message")
	if err := os.WriteFile(msg, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused("an unfinished snapshot's flag file", msg)
	// One being written when the member stopped is removed by Dragonboat
	// without being read: not refused.
	generating := orphan + "-1.generating"
	if err := os.Rename(orphan, generating); err != nil {
		t.Fatal(err)
	}

	s, err = start()
	if err != nil {
		t.Fatalf("whole again: %v", err)
	}
	defer s.Close()
	c = connectZK(t, s.Addr().String())
	defer c.Close()
	if data, _, err := c.Get("/kept"); err != nil || string(data) != "x" {
		t.Fatalf("/kept after the restarts: %q, %v", data, err)
	}
}

// TestDataDirs: the layout type names the places New, NodeHostConfig and
// ReplicaConfig use.
func TestDataDirs(t *testing.T) {
	d := DataDirs{Data: "/d"}
	if d.Raft() != "/d/raft" || d.RaftWAL() != "/d/raft-wal" || d.State() != "/d/state" ||
		d.StateStore(1, 2) != raftsm.StoreDir("/d/state", 1, 2) {
		t.Errorf("%+v: %s %s %s %s", d, d.Raft(), d.RaftWAL(), d.State(), d.StateStore(1, 2))
	}
	cfg := Config{DataDir: "/d", LogDir: "/l", RaftAddr: "127.0.0.1:1", ShardID: 1, ReplicaID: 2}
	if nhc, err := NodeHostConfig(cfg); err != nil || nhc.Expert.LogDBFactory != nil {
		t.Errorf("a new directory with no flag: log store factory %#v (%v), want Dragonboat's Pebble store (nil)", nhc.Expert.LogDBFactory, err)
	}
	cfg.RaftLogStore = LogStoreTan
	d = DataDirsOf(cfg)
	if d.RaftWAL() != "/l/raft-wal" || d.Raft() != "/d/raft" {
		t.Errorf("with a log dir: %s %s", d.Raft(), d.RaftWAL())
	}
	nhc, err := NodeHostConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, smCfg := ReplicaConfig(cfg, nil)
	if nhc.NodeHostDir != d.Raft() || nhc.WALDir != d.RaftWAL() || smCfg.Dir != d.State() {
		t.Errorf("NodeHostConfig %s %s, ReplicaConfig %s; want %s %s %s", nhc.NodeHostDir, nhc.WALDir, smCfg.Dir, d.Raft(), d.RaftWAL(), d.State())
	}
	// A new directory with --raft-log-store=tan: tan, under the WAL
	// directory with a log dir, under the NodeHost directory without; the
	// Pebble store when asked.
	if f, ok := nhc.Expert.LogDBFactory.(tanFactory); !ok || !f.inWAL || tanRoot(nhc) != d.RaftWAL() {
		t.Errorf("with a log dir: log store factory %#v, tan under %s; want tan under %s", nhc.Expert.LogDBFactory, tanRoot(nhc), d.RaftWAL())
	}
	cfg.LogDir = ""
	if nhc, err = NodeHostConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if f, ok := nhc.Expert.LogDBFactory.(tanFactory); !ok || f.inWAL || tanRoot(nhc) != "/d/raft" {
		t.Errorf("without a log dir: log store factory %#v, tan under %s; want tan under /d/raft", nhc.Expert.LogDBFactory, tanRoot(nhc))
	}
	cfg.RaftLogStore = LogStorePebble
	if nhc, err = NodeHostConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if nhc.Expert.LogDBFactory != nil {
		t.Errorf("--raft-log-store=pebble: log store factory %#v, want Dragonboat's default (nil)", nhc.Expert.LogDBFactory)
	}
}
