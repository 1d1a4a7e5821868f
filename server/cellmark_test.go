package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/fleet"
	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/internal/testlog"
	"github.com/zkraft/zkraft/raftsm"
)

// TestCellReplicaRefusesLogBelowItsMark: a cell replica whose Raft log
// ends below the index its store had applied (its applied mark: the store
// keeps no WAL, so the log was the only copy of what was applied since the
// last flush) is not started, and the error names the loss; the default
// cell serves meanwhile. With the mark back at the truth the cell serves
// its data again. The log's loss is stood in for by a mark above the log's
// end (raftsm/mark.go's layout): damaging Pebble's files to the same
// effect is TestDamagedDataFiles' work for the default cell.
func TestCellReplicaRefusesLogBelowItsMark(t *testing.T) {
	dir := t.TempDir()
	cfg := standaloneConfig(t, dir, "")
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	waitMap(t, s, "the default cell", func(m *fleet.Map) bool { _, ok := m.Cell(fleet.DefaultCell); return ok })
	port := uint16(freeport.Port(t))
	rep, err := s.fleet.propose(context.Background(), &fleet.CreateCell{Name: "alpha", Placement: fleet.Placement{Voters: []uint64{1}}, ClientPort: port})
	if err != nil || !rep.OK() {
		t.Fatalf("create: %v %v", rep, err)
	}
	shard := rep.ShardID
	waitServed(t, s, "alpha")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ca := connectZK(t, addr)
	if _, err := ca.Create("/kept", []byte("k"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	ca.Close()
	s.Close()

	store := DataDirsOf(cfg).StateStore(shard, 1)
	truth, ok, err := raftsm.ReadAppliedMark(store)
	if err != nil || !ok {
		t.Fatalf("alpha's store has no applied mark: %v %v", ok, err)
	}
	writeMark(t, store, truth+1000)

	var logs testlog.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if s, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "cells: replica not started") {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal of alpha's replica logged:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if line := lineWith(logs.String(), "cells: replica not started"); !strings.Contains(line, "applied mark") || !strings.Contains(line, fmt.Sprintf("applied index %d", truth+1000)) {
		t.Errorf("the refusal does not name the loss: %s", line)
	}
	if s.fleet.hostedCell("alpha") != nil {
		t.Error("alpha is hosted on a Raft log below its applied mark")
	}
	cd := connectZK(t, s.Addr().String())
	if _, _, err := cd.Exists("/"); err != nil {
		t.Errorf("the default cell does not serve beside the refused cell: %v", err)
	}
	cd.Close()
	s.Close()

	writeMark(t, store, truth)
	if s, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	waitServed(t, s, "alpha")
	ca = connectZK(t, addr)
	defer ca.Close()
	if data, _, err := ca.Get("/kept"); err != nil || string(data) != "k" {
		t.Fatalf("alpha with its mark back: %q %v", data, err)
	}
}

// writeMark writes store's applied mark as raftsm/mark.go lays it out.
func writeMark(t *testing.T, store string, index uint64) {
	t.Helper()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], index)
	binary.BigEndian.PutUint32(b[8:12], crc32.Checksum(b[:8], crc32.MakeTable(crc32.Castagnoli)))
	copy(b[12:], "zkam")
	if err := os.WriteFile(raftsm.MarkPath(store), b[:], 0o644); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := raftsm.ReadAppliedMark(store); err != nil || !ok || got != index {
		t.Fatalf("the mark written reads back as %d %v %v", got, ok, err)
	}
}

// lineWith is the last line of logs that contains s.
func lineWith(logs, s string) string {
	lines := strings.Split(logs, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], s) {
			return lines[i]
		}
	}
	return ""
}
