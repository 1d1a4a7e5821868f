package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4"
	dbconfig "github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/plugin/tan"
	sm "github.com/lni/dragonboat/v4/statemachine"
)

// TestCheckDataDirTan: checkDataDir reads the tan files of both of the
// data directory's places and refuses a damaged one with the one-line
// message that names it.
func TestCheckDataDirTan(t *testing.T) {
	dir := t.TempDir()
	nhc := dbconfig.NodeHostConfig{
		NodeHostDir:    filepath.Join(dir, "raft"),
		WALDir:         filepath.Join(dir, "raft-wal"),
		RTTMillisecond: 5,
		RaftAddress:    freeAddr(t),
		Expert:         dbconfig.GetDefaultExpertConfig(),
	}
	nhc.Expert.LogDBFactory = tan.Factory
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		t.Fatal(err)
	}
	rc := dbconfig.Config{ShardID: 1, ReplicaID: 1, ElectionRTT: 10, HeartbeatRTT: 1}
	if err := nh.StartOnDiskReplica(map[uint64]string{1: nhc.RaftAddress}, false, func(uint64, uint64) sm.IOnDiskStateMachine { return diskSM{} }, rc); err != nil {
		nh.Close()
		t.Fatal(err)
	}
	cmd := []byte(strings.Repeat("z", 1024))
	for i, deadline := 0, time.Now().Add(20*time.Second); i < 100; {
		if time.Now().After(deadline) {
			nh.Close()
			t.Fatalf("proposed %d of 100 in 20 s", i)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := nh.SyncPropose(ctx, nh.GetNoOPSession(1), cmd)
		cancel()
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		i++
	}
	nh.Close()

	state := filepath.Join(dir, "state", "none")
	stores := tanStores(nhc)
	if len(stores) != 1 {
		t.Fatalf("tan stores %v, want the one Dragonboat wrote", stores)
	}
	if _, err := checkDataDir(nhc, state, testLogger(t, 1)); err != nil {
		t.Fatalf("intact: %v", err)
	}
	// The same directory under the WAL directory (where a member on tan
	// keeps it when dataLogDir is set) is found and checked too.
	rel, _ := filepath.Rel(nhc.NodeHostDir, stores[0])
	moved := filepath.Join(nhc.WALDir, rel)
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(stores[0], moved); err != nil {
		t.Fatal(err)
	}
	if got := tanStores(nhc); len(got) != 1 || got[0] != moved {
		t.Fatalf("tan stores %v, want %s", got, moved)
	}
	logs, _ := filepath.Glob(filepath.Join(moved, "node-1-1", "*.log"))
	sort.Strings(logs)
	var log string
	for _, l := range logs {
		if st, err := os.Stat(l); err == nil && st.Size() > 64*1024 {
			log = l
		}
	}
	if log == "" {
		t.Fatalf("no log of more than 64 KiB in %v", logs)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(log, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = checkDataDir(nhc, state, testLogger(t, 1))
	if !errors.Is(err, ErrDamagedData) || !strings.Contains(err.Error(), log) || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "docs/operations.md") {
		t.Fatalf("a byte flipped in %s: %v, want one line matching ErrDamagedData naming it, with the advice", log, err)
	}
	t.Log(err)
}
