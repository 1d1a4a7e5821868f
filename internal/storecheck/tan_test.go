package storecheck

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
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

	"github.com/zkraft/zkraft/internal/freeport"
)

// countSM is the smallest state machine that lets Dragonboat write a Raft
// log: what is under test is tan's files, not the state machine.
type countSM struct{ n uint64 }

func (s *countSM) Update(e sm.Entry) (sm.Result, error) {
	s.n++
	return sm.Result{Value: s.n}, nil
}
func (s *countSM) Lookup(interface{}) (interface{}, error) { return s.n, nil }
func (s *countSM) SaveSnapshot(w io.Writer, _ sm.ISnapshotFileCollection, _ <-chan struct{}) error {
	return binary.Write(w, binary.LittleEndian, s.n)
}
func (s *countSM) RecoverFromSnapshot(r io.Reader, _ []sm.SnapshotFile, _ <-chan struct{}) error {
	return binary.Read(r, binary.LittleEndian, &s.n)
}
func (s *countSM) Close() error { return nil }

// tanHost starts a NodeHost on dir with tan as its log store and shard 1
// on it, proposes n entries of 1 KiB (about 32 per 32 KiB block), and
// calls before (if not nil) while the NodeHost still runs.
func tanHost(t testing.TB, dir, addr string, restart bool, n int, before func()) {
	tanHostSize(t, dir, addr, restart, n, 1024, before)
}

// tanHostSize is tanHost with entries of size bytes.
func tanHostSize(t testing.TB, dir, addr string, restart bool, n, size int, before func()) {
	t.Helper()
	nhc := dbconfig.NodeHostConfig{
		NodeHostDir:    dir,
		RTTMillisecond: 5,
		RaftAddress:    addr,
		Expert:         dbconfig.GetDefaultExpertConfig(),
	}
	nhc.Expert.LogDBFactory = tan.Factory
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	members := map[uint64]string{1: nhc.RaftAddress}
	if restart {
		members = nil
	}
	rc := dbconfig.Config{ShardID: 1, ReplicaID: 1, ElectionRTT: 10, HeartbeatRTT: 1, CheckQuorum: true}
	if err := nh.StartReplica(members, false, func(uint64, uint64) sm.IStateMachine { return &countSM{} }, rc); err != nil {
		t.Fatal(err)
	}
	cmd := []byte(strings.Repeat("x", size))
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < n; {
		if time.Now().After(deadline) {
			t.Fatalf("proposed %d of %d entries in 60 s", i, n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := nh.SyncPropose(ctx, nh.GetNoOPSession(1), cmd)
		cancel()
		if err != nil {
			time.Sleep(20 * time.Millisecond) // no leader yet
			continue
		}
		i++
	}
	if before != nil {
		before()
	}
}

// tanFixture is a tandb directory written by Dragonboat: crash is its
// image taken while the NodeHost ran (the newest log holds records and has
// no index, as after a kill), closed the same directory after the
// NodeHost closed. The first run's log (closed, so with its index) is
// older than the second's.
type tanFixture struct{ crash, closed string }

func newTanFixture(t *testing.T) tanFixture {
	t.Helper()
	root := t.TempDir()
	nhDir := filepath.Join(root, "raft")
	addr := freeport.Addr(t)
	tanHost(t, nhDir, addr, false, 150, nil)
	crash := filepath.Join(root, "crash")
	tanHost(t, nhDir, addr, true, 150, func() { copyDir(t, nhDir, crash) })
	return tanFixture{crash: tandbOf(t, crash), closed: tandbOf(t, nhDir)}
}

func tandbOf(t testing.TB, nhDir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(nhDir, "*", "*", "tandb"))
	if len(m) != 1 {
		t.Fatalf("tandb under %s: %v", nhDir, m)
	}
	return m[0]
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// tanLogs is the log files of the replica's database, oldest first.
func tanLogs(t *testing.T, tandb string) []string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(tandb, "node-1-1", "*.log"))
	sort.Strings(logs)
	var out []string
	for _, l := range logs {
		if st, err := os.Stat(l); err == nil && st.Size() > 0 {
			out = append(out, l)
		}
	}
	if len(out) < 2 {
		t.Fatalf("want two logs with records in %s, have %v", tandb, out)
	}
	return out
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// damaged copies the tandb directory, changes one file in the copy and
// returns the copy and that file's path in it.
func damaged(t *testing.T, tandb, file string, f func([]byte) []byte) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tandb")
	copyDir(t, tandb, dir)
	rel, err := filepath.Rel(tandb, file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, rel)
	rewrite(t, path, f)
	return dir, path
}

func TestCheckTan(t *testing.T) {
	fx := newTanFixture(t)
	for _, dir := range []string{fx.crash, fx.closed} {
		r, err := CheckTan(dir)
		if err != nil {
			t.Fatalf("%s as Dragonboat wrote it: %v", dir, err)
		}
		if len(r.Torn) != 0 || r.Logs < 2 {
			t.Fatalf("%s as Dragonboat wrote it: torn %v, %d logs read", dir, r.Torn, r.Logs)
		}
	}
	if _, err := CheckTan(filepath.Join(t.TempDir(), "none")); err != nil {
		t.Fatalf("no tandb: %v", err)
	}
	crashLogs, closedLogs := tanLogs(t, fx.crash), tanLogs(t, fx.closed)
	newest, older := crashLogs[len(crashLogs)-1], closedLogs[0]
	if _, err := os.Stat(strings.TrimSuffix(newest, ".log") + ".index"); err == nil {
		t.Fatalf("the crash image's newest log %s has an index", newest)
	}
	if size(t, newest) < 3*tanBlockSize {
		t.Fatalf("the newest log is %d bytes, want several blocks", size(t, newest))
	}
	starts := tanRecordEnds(t, newest)
	mid := int64(2 * tanBlockSize) // a block boundary inside the file

	for _, c := range []struct {
		name string
		dir  string
		file string
		f    func([]byte) []byte
	}{
		{"a byte flipped in the middle of the newest log", fx.crash, newest, func(b []byte) []byte { return flip(b, len(b)/2) }},
		{"16 bytes zeroed at a block boundary of the newest log", fx.crash, newest, func(b []byte) []byte { return zero(b, mid, 16) }},
		{"a record's header zeroed in the middle of the newest log", fx.crash, newest, func(b []byte) []byte { return zero(b, starts[len(starts)/2], 7) }},
		{"the older log cut at a record boundary", fx.closed, older, func(b []byte) []byte { e := tanRecordEnds(t, older); return b[:e[len(e)/2]] }},
		{"the older log cut in the middle of a record", fx.closed, older, func(b []byte) []byte { return b[:len(b)/2+3] }},
		{"a byte flipped in the older log", fx.closed, older, func(b []byte) []byte { return flip(b, len(b)/3) }},
		{"the older log's index flipped", fx.closed, strings.TrimSuffix(older, ".log") + ".index", func(b []byte) []byte { return flip(b, len(b)-2) }},
		{"the older log's index cut", fx.closed, strings.TrimSuffix(older, ".log") + ".index", func(b []byte) []byte { return b[:len(b)-3] }},
		{"CURRENT flipped", fx.closed, filepath.Join(fx.closed, "node-1-1", "CURRENT"), func(b []byte) []byte { return flip(b, len(b)-3) }},
		{"CURRENT empty", fx.closed, filepath.Join(fx.closed, "node-1-1", "CURRENT"), func([]byte) []byte { return nil }},
		{"the bootstrap record flipped", fx.closed, filepath.Join(fx.closed, "bootstrap", "BOOTSTRAP-1-1"), func(b []byte) []byte { return flip(b, len(b)-1) }},
	} {
		dir, path := damaged(t, c.dir, c.file, c.f)
		_, err := CheckTan(dir)
		wantDamage(t, c.name, err, path)
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("%s: %v does not match ErrDamaged", c.name, err)
		}
		t.Logf("%s: %v", c.name, err)
	}

	// The MANIFEST: cut (it loses the record that adds the newest log),
	// emptied, garbled.
	manifest := tanManifest(t, fx.crash)
	ends := tanRecordEnds(t, manifest)
	for _, c := range []struct {
		name string
		f    func([]byte) []byte
	}{
		{"the MANIFEST cut at its last record boundary", func(b []byte) []byte { return b[:ends[len(ends)-2]] }},
		{"the MANIFEST empty", func([]byte) []byte { return nil }},
		{"the MANIFEST flipped", func(b []byte) []byte { return flip(b, 10) }},
		{"the MANIFEST's first record zeroed", func(b []byte) []byte { return zero(b, 0, 7) }},
	} {
		dir, path := damaged(t, fx.crash, manifest, c.f)
		_, err := CheckTan(dir)
		wantDamage(t, c.name, err, path)
		t.Logf("%s: %v", c.name, err)
	}

	// A missing log the MANIFEST lists.
	dir, path := damaged(t, fx.closed, older, func(b []byte) []byte { return b })
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, err := CheckTan(dir)
	wantDamage(t, "a listed log removed", err, path)

	// Torn tails of the newest log, as a crash leaves them: accepted,
	// and tan then opens the database.
	last := starts[len(starts)-2] // the start of the last record
	var big, bigEnd int64         // the last record of more than 1 KiB
	for i := len(starts) - 2; i >= 0 && bigEnd == 0; i-- {
		if starts[i+1]-starts[i] > 1024 {
			big, bigEnd = starts[i], starts[i+1]
		}
	}
	for _, c := range []struct {
		name string
		f    func([]byte) []byte
	}{
		{"cut inside its last record", func(b []byte) []byte { return b[:last+(int64(len(b))-last)/2] }},
		{"cut inside its last record of entries", func(b []byte) []byte { return b[:big+(bigEnd-big)/2] }},
		{"cut inside its last record's header", func(b []byte) []byte { return b[:last+3] }},
		{"zero from its last record to the end", func(b []byte) []byte { return zero(b, last, int64(len(b))-last) }},
		{"zeroes appended", func(b []byte) []byte { return append(b, make([]byte, 5000)...) }},
	} {
		dir, path := damaged(t, fx.crash, newest, c.f)
		r, err := CheckTan(dir)
		if err != nil {
			t.Fatalf("torn tail %s: %v", c.name, err)
		}
		if len(r.Torn) != 1 || r.Torn[0].File != path {
			t.Fatalf("torn tail %s: report %+v, want the tail of %s", c.name, r.Torn, path)
		}
		t.Logf("torn tail %s: accepted: %v", c.name, r.Torn[0])
	}
}

// TestCheckTanTornTailOpens checks that a torn tail CheckTan accepts is
// one tan opens: Dragonboat starts the replica on it and proposes more.
func TestCheckTanTornTailOpens(t *testing.T) {
	root := t.TempDir()
	nhDir := filepath.Join(root, "raft")
	addr := freeport.Addr(t)
	crash := filepath.Join(root, "crash")
	tanHost(t, nhDir, addr, false, 100, func() { copyDir(t, nhDir, crash) })
	logs := tanLogs0(t, tandbOf(t, crash))
	newest := logs[len(logs)-1]
	ends := tanRecordEnds(t, newest)
	last := ends[len(ends)-2]
	rewrite(t, newest, func(b []byte) []byte { return b[:last+(int64(len(b))-last)/2] })
	r, err := CheckTan(tandbOf(t, crash))
	if err != nil || len(r.Torn) != 1 {
		t.Fatalf("torn tail: %v, report %+v", err, r)
	}
	tanHost(t, crash, addr, true, 10, nil)
	if _, err := CheckTan(tandbOf(t, crash)); err != nil {
		t.Fatalf("after tan opened the torn tail and wrote more: %v", err)
	}
}

func tanLogs0(t *testing.T, tandb string) []string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(tandb, "node-1-1", "*.log"))
	sort.Strings(logs)
	if len(logs) == 0 {
		t.Fatalf("no log in %s", tandb)
	}
	return logs
}

func tanManifest(t *testing.T, tandb string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(tandb, "node-1-1", "MANIFEST-*"))
	sort.Strings(m)
	if len(m) == 0 {
		t.Fatalf("no MANIFEST in %s", tandb)
	}
	return m[len(m)-1]
}

// tanRecordEnds is 0 and the end of every record of a record file.
func tanRecordEnds(t *testing.T, path string) []int64 {
	t.Helper()
	ends := []int64{0}
	tail, err := tanRecords(path, func(end int64, _ []byte) error { ends = append(ends, end); return nil })
	if err != nil || tail != nil {
		t.Fatalf("%s: %v %v", path, err, tail)
	}
	return ends
}

func zero(b []byte, at, n int64) []byte {
	out := append([]byte{}, b...)
	for i := at; i < at+n && i < int64(len(out)); i++ {
		out[i] = 0
	}
	return out
}

// BenchmarkCheckTan is what the check costs at start-up: a tandb
// directory with one replica's log of about 48 MiB (768 entries of
// 64 KiB), read whole per iteration (from the page cache after the
// first). Run it with -benchtime=5x: each call of the function writes the
// directory first.
func BenchmarkCheckTan(b *testing.B) {
	nhDir := filepath.Join(b.TempDir(), "raft")
	tanHostSize(b, nhDir, freeport.Addr(b), false, 768, 64*1024, nil)
	dir := tandbOf(b, nhDir)
	var total int64
	logs, _ := filepath.Glob(filepath.Join(dir, "node-1-1", "*"))
	for _, l := range logs {
		if st, err := os.Stat(l); err == nil {
			total += st.Size()
		}
	}
	b.SetBytes(total)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := CheckTan(dir); err != nil {
			b.Fatal(err)
		}
	}
}
