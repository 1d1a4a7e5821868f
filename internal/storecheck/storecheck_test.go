package storecheck

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/record"
	"github.com/lni/dragonboat/v4"
	dbconfig "github.com/lni/dragonboat/v4/config"

	"github.com/zkraft/zkraft/internal/freeport"
)

// TestFlagFileDragonboat checks FlagFile against the flag files Dragonboat
// itself writes (so a change of their format fails here, not in a member's
// start): intact ones pass, damaged ones are a *Damage, a missing one is
// not damaged.
func TestFlagFileDragonboat(t *testing.T) {
	dir := t.TempDir()
	nhc := dbconfig.NodeHostConfig{
		NodeHostDir:    filepath.Join(dir, "raft"),
		WALDir:         filepath.Join(dir, "raft-wal"),
		RTTMillisecond: 10,
		RaftAddress:    freeport.Addr(t),
		Expert:         dbconfig.GetDefaultExpertConfig(),
	}
	nhc.Expert.LogDB = dbconfig.GetTinyMemLogDBConfig()
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		t.Fatal(err)
	}
	nh.Close()
	for _, f := range []string{"raft/dragonboat.ds", "raft/NODEHOST.ID", "raft-wal/dragonboat.ds"} {
		path := filepath.Join(dir, f)
		if err := FlagFile(path); err != nil {
			t.Fatalf("%s as Dragonboat wrote it: %v", f, err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			b    []byte
		}{
			{"empty", nil},
			{"4 bytes", b[:4]},
			{"last byte cut", b[:len(b)-1]},
			{"a byte flipped", flip(b, len(b)/2)},
			{"the checksum flipped", flip(b, 0)},
		} {
			if err := os.WriteFile(path, c.b, 0o644); err != nil {
				t.Fatal(err)
			}
			err := FlagFile(path)
			var d *Damage
			if !errors.As(err, &d) || d.File != path || !errors.Is(err, ErrDamaged) {
				t.Errorf("%s %s: %v, want a *Damage naming it", f, c.name, err)
			}
		}
	}
	if err := FlagFile(filepath.Join(dir, "raft", "missing")); err != nil {
		t.Errorf("missing flag file: %v", err)
	}
}

func flip(b []byte, i int) []byte {
	out := append([]byte{}, b...)
	out[i] ^= 0xff
	return out
}

// newStore writes a Pebble store with two flushed tables and some keys
// left in its WAL, and closes it.
func newStore(t *testing.T, walDir string) Store {
	t.Helper()
	s := Store{Dir: filepath.Join(t.TempDir(), "store"), WALDir: walDir}
	opts := &pebble.Options{}
	if walDir != "" {
		opts.WALDir = walDir
	}
	db, err := pebble.Open(s.Dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		for i := 0; i < 500; i += 50 {
			b := db.NewBatch()
			for j := i; j < i+50; j++ {
				k := fmt.Sprintf("key-%d-%04d", round, j)
				if err := b.Set([]byte(k), []byte(strings.Repeat(k, 8)), nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Commit(pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}
		if round < 2 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return s
}

// liveTable is one of the store's tables.
func liveTable(t *testing.T, s Store) string {
	t.Helper()
	tables := files(s.Dir, "", ".sst")
	if len(tables) == 0 {
		t.Fatal("the store has no table")
	}
	return tables[len(tables)-1]
}

func rewrite(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantDamage checks that err is a *Damage naming file.
func wantDamage(t *testing.T, what string, err error, file string) {
	t.Helper()
	var d *Damage
	if !errors.As(err, &d) {
		t.Fatalf("%s: %v, want a *Damage", what, err)
	}
	if d.File != file {
		t.Fatalf("%s: names %s (%v), want %s", what, d.File, err, file)
	}
	if strings.Contains(d.Error(), "\n") {
		t.Fatalf("%s: %q is more than one line", what, d.Error())
	}
}

func TestCheckIntactAndNew(t *testing.T) {
	s := newStore(t, "")
	var applied []byte
	r, err := Check(s, func(db *pebble.DB) error {
		v, closer, err := db.Get([]byte("key-2-0499"))
		if err == nil {
			applied = append(applied, v...)
			closer.Close()
		}
		return err
	})
	if err != nil || r.Torn != nil || len(r.Repaired) > 0 {
		t.Fatalf("intact store: %v, torn %v, repaired %v", err, r.Torn, r.Repaired)
	}
	if len(applied) == 0 {
		t.Fatal("inspect did not see the WAL's keys")
	}
	if r, err := Check(Store{Dir: filepath.Join(t.TempDir(), "never")}, nil); err != nil || r.Torn != nil {
		t.Fatalf("store never created: %v, %v", err, r.Torn)
	}
}

func TestCheckTables(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func([]byte) []byte
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"empty", func(b []byte) []byte { return nil }},
		{"a data block flipped", func(b []byte) []byte { return flip(b, 100) }},
	} {
		s := newStore(t, "")
		table := liveTable(t, s)
		rewrite(t, table, c.f)
		_, err := Check(s, nil)
		wantDamage(t, c.name, err, table)
	}
}

func TestCheckCurrent(t *testing.T) {
	s := newStore(t, "")
	current := filepath.Join(s.Dir, "CURRENT")
	rewrite(t, current, func(b []byte) []byte { return []byte("MANIFEST-9999") })
	_, err := Check(s, nil)
	wantDamage(t, "CURRENT without newline", err, current)
	rewrite(t, current, func(b []byte) []byte { return []byte("MANIFEST-999999\n") })
	_, err = Check(s, nil)
	wantDamage(t, "CURRENT naming a missing MANIFEST", err, current)
	if err := os.Remove(current); err != nil {
		t.Fatal(err)
	}
	_, err = Check(s, nil)
	wantDamage(t, "CURRENT missing", err, current)
}

func TestCheckManifest(t *testing.T) {
	s := newStore(t, "")
	manifest, d := checkCurrent(s)
	if d != nil {
		t.Fatal(d)
	}
	rewrite(t, manifest, func(b []byte) []byte { return nil })
	_, err := Check(s, nil)
	wantDamage(t, "empty MANIFEST", err, manifest)
}

// TestCheckManifestWithUnfinishedTable: a member killed while Pebble
// wrote a table (a flush or a compaction) leaves it cut short under a
// number no version lists; with the MANIFEST also damaged, Check names the
// MANIFEST, not that table (cmd/zkraft's TestDamagedDataFiles named the
// table on a seed killed mid-flush).
func TestCheckManifestWithUnfinishedTable(t *testing.T) {
	s := newStore(t, "")
	manifest, d := checkCurrent(s)
	if d != nil {
		t.Fatal(d)
	}
	b, err := os.ReadFile(liveTable(t, s))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "999999.sst"), b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cut := range []struct {
		name string
		f    func([]byte) []byte
	}{
		{"empty", func([]byte) []byte { return nil }},
		{"cut to half", func(b []byte) []byte { return b[:len(b)/2] }},
	} {
		orig, err := os.ReadFile(manifest)
		if err != nil {
			t.Fatal(err)
		}
		rewrite(t, manifest, cut.f)
		// Check when Pebble fails to open the store; Diagnose when it
		// opened an older version and the member found writes missing
		// (server's openFailure).
		if _, err := Check(s, nil); err != nil || cut.name == "empty" {
			wantDamage(t, cut.name+" MANIFEST beside an unfinished table: Check", err, manifest)
		}
		wantDamage(t, cut.name+" MANIFEST beside an unfinished table: Diagnose", Diagnose(s, errors.New("writes missing")), manifest)
		if err := os.WriteFile(manifest, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckManifestCutAtRecordBoundary: a MANIFEST cut at a record
// boundary reads as whole and describes an older version of the store.
// After a compaction, that version lists tables Pebble has deleted and
// not the one that replaced them; Check names the MANIFEST, not a table
// (the start of a member on such a MANIFEST once named a table, depending
// on where the cut fell among its records). A cut that leaves a version
// whose tables are all there opens (an older store; the member's
// comparison of its stores and LostWrites are what tell then).
func TestCheckManifestCutAtRecordBoundary(t *testing.T) {
	s := newStore(t, "")
	db, err := pebble.Open(s.Dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Keys across the whole range, so that the compaction rewrites every
	// table (tables with disjoint keys would only move down a level).
	for _, k := range []string{"key-0-0000", "key-1-0250", "key-2-0499"} {
		if err := db.Set([]byte(k), []byte("again"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Compact([]byte("key-"), []byte("key-9"), true); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	manifest, d := checkCurrent(s)
	if d != nil {
		t.Fatal(d)
	}
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	starts := recordStarts(t, manifest)
	namedManifest := 0
	for _, cut := range starts[1:] { // a cut at 0 is an empty MANIFEST (TestCheckManifest)
		c := Store{Dir: filepath.Join(t.TempDir(), "store")}
		if err := os.CopyFS(c.Dir, os.DirFS(s.Dir)); err != nil {
			t.Fatal(err)
		}
		cm := filepath.Join(c.Dir, filepath.Base(manifest))
		if err := os.WriteFile(cm, b[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Check(c, nil)
		if err == nil {
			continue
		}
		wantDamage(t, fmt.Sprintf("MANIFEST cut at %d of %d", cut, len(b)), err, cm)
		namedManifest++
	}
	if namedManifest == 0 {
		t.Fatalf("no cut among %v of the MANIFEST (%d bytes) left it listing a deleted table: the test covers nothing", starts, len(b))
	}
}

// TestCheckTableMissing: a table the MANIFEST lists that is not there is
// what Check names, when the store holds no table the MANIFEST does not
// list.
func TestCheckTableMissing(t *testing.T) {
	s := newStore(t, "")
	table := liveTable(t, s)
	if err := os.Remove(table); err != nil {
		t.Fatal(err)
	}
	_, err := Check(s, nil)
	wantDamage(t, "table missing", err, table)
}

// recordStarts returns the offset of each record of a WAL or MANIFEST.
func recordStarts(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rr := record.NewReader(f, 0)
	var out []int64
	for {
		off := rr.Offset()
		r, err := rr.Next()
		if err == io.EOF {
			return out
		}
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		if err != nil {
			t.Fatalf("%s: record at %d: %v", path, off, err)
		}
		out = append(out, off)
	}
}

// TestCheckOptionsRepair: an OPTIONS file Pebble cannot parse is moved
// aside and the store then opens.
func TestCheckOptionsRepair(t *testing.T) {
	s := newStore(t, "")
	opts := newestOptions(s.Dir)
	if opts == "" {
		t.Fatal("no OPTIONS file")
	}
	rewrite(t, opts, func(b []byte) []byte { return append(b[:len(b)/2:len(b)/2], "\x00garbage"...) })
	r, err := Check(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Repaired) != 1 || r.Repaired[0] != opts {
		t.Fatalf("repaired %v, want %s", r.Repaired, opts)
	}
	if _, err := os.Stat(opts + ".damaged"); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(s.Dir, &pebble.Options{})
	if err != nil {
		t.Fatalf("open after the repair: %v", err)
	}
	v, closer, err := db.Get([]byte("key-0-0000"))
	if err != nil || string(v) != strings.Repeat("key-0-0000", 8) {
		t.Fatalf("key after the repair: %q, %v", v, err)
	}
	closer.Close()
	db.Close()
}

// TestLostWrites: the torn record Check saw is what LostWrites names; with
// none, the newest WAL and the MANIFEST.
func TestLostWrites(t *testing.T) {
	walDir := filepath.Join(t.TempDir(), "wal")
	s := newStore(t, walDir)
	r, err := Check(s, nil)
	if err != nil || r.Torn != nil {
		t.Fatalf("intact store: %v, %v", err, r.Torn)
	}
	if len(r.WALs) == 0 || filepath.Dir(r.WALs[0]) != walDir {
		t.Fatalf("WALs %v, want some in %s", r.WALs, walDir)
	}
	d := LostWrites(r, "lost")
	if d.File != r.WALs[0] || !strings.Contains(d.Problem, r.Manifest) {
		t.Fatalf("no torn record: %v", d)
	}
	var wal string
	for _, w := range r.WALs {
		if fi, err := os.Stat(w); err == nil && fi.Size() > 64 {
			wal = w
		}
	}
	if wal == "" {
		t.Fatal("no WAL with records")
	}
	rewrite(t, wal, func(b []byte) []byte { return b[:len(b)-8] })
	r, err = Check(s, nil)
	if err != nil {
		t.Fatalf("a WAL cut short is Pebble's normal end of a crash: %v", err)
	}
	if r.Torn == nil || r.Torn.File != wal {
		t.Fatalf("torn %v, want %s", r.Torn, wal)
	}
	if d := LostWrites(r, "lost"); d.File != wal || !strings.HasPrefix(d.Problem, "lost; ") {
		t.Fatalf("LostWrites: %v", d)
	}
}

func TestIsCorruption(t *testing.T) {
	s := newStore(t, "")
	table := liveTable(t, s)
	rewrite(t, table, func(b []byte) []byte { return flip(b, 100) })
	err := s.Table(table)
	var d *Damage
	if !errors.As(err, &d) || !IsCorruption(d.Err) {
		t.Fatalf("%v: want Pebble's corruption error", err)
	}
	if IsCorruption(errors.New("other")) || IsCorruption(nil) {
		t.Fatal("IsCorruption of other errors")
	}
}
