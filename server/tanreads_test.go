package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	dbconfig "github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// openTanForTest opens tan through zkraft's factory in a new directory
// and writes n updates of one entry each to replica 1 of shard 1, as a
// leader's step worker writes them (entries 1..n, the commit index
// following).
func openTanForTest(tb testing.TB, n uint64) raftio.ILogDB {
	tb.Helper()
	dir := tb.TempDir()
	nhc := dbconfig.NodeHostConfig{
		NodeHostDir: filepath.Join(dir, "raft"),
		WALDir:      filepath.Join(dir, "raft-wal"),
		Expert:      dbconfig.GetDefaultExpertConfig(),
	}
	if err := nhc.Prepare(); err != nil { // Dragonboat's file system
		tb.Fatal(err)
	}
	if err := os.MkdirAll(nhc.NodeHostDir, 0o755); err != nil {
		tb.Fatal(err)
	}
	db, err := tanFactory{}.Create(nhc, nil, []string{nhc.NodeHostDir}, []string{nhc.WALDir})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	cmd := make([]byte, 100)
	for i := uint64(1); i <= n; i++ {
		u := pb.Update{ShardID: 1, ReplicaID: 1,
			State:         pb.State{Term: 2, Vote: 1, Commit: i - 1},
			EntriesToSave: []pb.Entry{{Index: i, Term: 2, Cmd: cmd}}}
		if err := db.SaveRaftState([]pb.Update{u}, 1); err != nil {
			tb.Fatal(err)
		}
	}
	return db
}

func checkRun(t *testing.T, ents []pb.Entry, low uint64, n int) {
	t.Helper()
	if len(ents) != n {
		t.Fatalf("%d entries from %d, want %d", len(ents), low, n)
	}
	for i, e := range ents {
		if e.Index != low+uint64(i) {
			t.Fatalf("entry %d has index %d, want %d", i, e.Index, low+uint64(i))
		}
	}
}

// TestTanReadsBounded: a read of a long range under a byte limit (a
// leader's Replicate to a follower that lags) returns tanReadEntries+1
// entries and a size over the limit, which Dragonboat's LogReader takes
// as the limit reached and trims by the last entry; a range within the
// bound, a read without a limit (maxSize 0) and a read tan itself cuts at
// maxSize are tan's own answers.
func TestTanReadsBounded(t *testing.T) {
	const n = 1000
	db := openTanForTest(t, n)
	const maxSize = 64 << 20

	ents, size, err := db.IterateEntries(nil, 0, 1, 1, 1, n+1, maxSize)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, ents, 1, tanReadEntries+1)
	if size <= maxSize {
		t.Fatalf("bounded read: size %d, want over maxSize %d so that the LogReader stops there", size, maxSize)
	}

	ents, size, err = db.IterateEntries(nil, 0, 1, 1, 500, 500+tanReadEntries+1, maxSize)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, ents, 500, tanReadEntries+1)
	if size > maxSize {
		t.Fatalf("read within the bound: size %d over maxSize", size)
	}

	ents, _, err = db.IterateEntries(nil, 0, 1, 1, 1, n+1, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, ents, 1, n)

	ents, size, err = db.IterateEntries(nil, 0, 1, 1, 10, n+1, 300)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) >= tanReadEntries || size <= 300 {
		t.Fatalf("read cut by tan at 300 bytes: %d entries, size %d", len(ents), size)
	}
	checkRun(t, ents, 10, len(ents))

	// Entries past the end: tan's answer (the range it has).
	ents, _, err = db.IterateEntries(nil, 0, 1, 1, n-5, n+1, maxSize)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, ents, n-5, 6)
}

// BenchmarkTanCatchUpRead: the read a leader makes for each Replicate to a
// follower 3,000 one-entry updates behind (faulttest's gap after a
// pause), through tan alone and through zkraft's bounded reads.
func BenchmarkTanCatchUpRead(b *testing.B) {
	const n = 3000
	db := openTanForTest(b, n)
	raw := db.(tanLogDB).ILogDB
	for _, c := range []struct {
		name string
		db   raftio.ILogDB
	}{{"tan", raw}, {"bounded", db}} {
		b.Run(c.name, func(b *testing.B) {
			got := 0
			start := time.Now()
			for i := 0; i < b.N; i++ {
				ents, _, err := c.db.IterateEntries(nil, 0, 1, 1, 1, n+1, 64<<20)
				if err != nil {
					b.Fatal(err)
				}
				got = len(ents)
			}
			b.ReportMetric(float64(got), "entries/read")
			b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/read")
		})
	}
}
