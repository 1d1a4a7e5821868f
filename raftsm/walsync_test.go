package raftsm

import (
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
)

// TestStoreWALIsWrittenBackAsItGrows: the store's WAL is written back as
// batches arrive, so no sync on the apply path (the WAL's close when a full
// memtable is rotated, Sync before a Raft snapshot) has more than about a
// megabyte of the WAL to write. Before, a memtable's worth of dirty pages
// (32 MiB) waited for that sync, and every write in flight waited 50-140 ms
// for it (docs/performance.md, "Write tail").
//
// The store's options open a store on a file system that counts, per WAL
// file, the bytes written since the file's last sync; its files do not
// expose a descriptor, so Pebble's background write-back reaches them as
// Sync calls (it would use sync_file_range on a real file).
func TestStoreWALIsWrittenBackAsItGrows(t *testing.T) {
	fs := &unsyncedFS{FS: vfs.Default}
	o := pebbleOptions(nil)
	o.FS = fs
	db, err := pebble.Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// 8 MiB of batches the size of a busy Update's (64 setData of 1 KiB),
	// committed as Update commits them: without a sync.
	value := make([]byte, 1024)
	key := make([]byte, 16)
	for i := range 128 {
		b := db.NewBatch()
		for j := range 64 {
			copy(key, []byte{byte(i), byte(i >> 8), byte(j)})
			if err := b.Set(key, value, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	// A sync, as Sync before a snapshot does: what it finds unsynced is
	// what it has to write.
	if err := db.LogData(nil, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	written, most := fs.figures()
	if written < 8<<20 {
		t.Fatalf("the WAL got %d bytes, want at least the 8 MiB written", written)
	}
	if most > 2<<20 {
		t.Fatalf("a sync of the store's WAL found %d bytes unsynced (of %d written); want at most 2 MiB", most, written)
	}
	t.Logf("WAL: %d bytes written, at most %d unsynced at a sync", written, most)
}

// unsyncedFS wraps a file system and, for WAL files (*.log), counts the
// bytes written since each file's last Sync.
type unsyncedFS struct {
	vfs.FS
	mu      sync.Mutex
	written int64
	most    int64 // the most bytes any Sync found unsynced
}

func (fs *unsyncedFS) figures() (written, most int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.written, fs.most
}

func (fs *unsyncedFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &unsyncedFile{File: f, fs: fs}, nil
}

func (fs *unsyncedFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	return fs.wrap(name, f, err)
}

func (fs *unsyncedFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname)
	return fs.wrap(newname, f, err)
}

// unsyncedFile is a WAL file without its descriptor (only vfs.File's
// methods), which counts.
type unsyncedFile struct {
	vfs.File
	fs       *unsyncedFS
	unsynced int64
}

func (f *unsyncedFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.fs.mu.Lock()
	f.unsynced += int64(n)
	f.fs.written += int64(n)
	f.fs.mu.Unlock()
	return n, err
}

func (f *unsyncedFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.most = max(f.fs.most, f.unsynced)
	f.unsynced = 0
	f.fs.mu.Unlock()
	return f.File.Sync()
}

func (f *unsyncedFile) Close() error {
	// Pebble syncs a WAL before it closes it; a close with bytes still
	// unsynced counts as a sync that found them.
	f.fs.mu.Lock()
	f.fs.most = max(f.fs.most, f.unsynced)
	f.fs.mu.Unlock()
	return f.File.Close()
}

// TestLiveStoreWritesNoWAL: a replica's own store (liveOptions) writes no
// WAL bytes, however much it is given; Flush makes it durable.
func TestLiveStoreWritesNoWAL(t *testing.T) {
	fs := &unsyncedFS{FS: vfs.Default}
	o := liveOptions(nil)
	o.FS = fs
	dir := t.TempDir()
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 1024)
	key := make([]byte, 16)
	for i := range 64 {
		b := db.NewBatch()
		for j := range 64 {
			copy(key, []byte{byte(i), byte(i >> 8), byte(j)})
			if err := b.Set(key, value, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if written, _ := fs.figures(); written != 0 {
		t.Fatalf("the live store wrote %d bytes to a WAL, want 0", written)
	}
	// What the flush wrote is there for a store killed now.
	killed := t.TempDir()
	copyStore(t, dir, killed)
	db.Close()
	k, err := pebble.Open(killed, liveOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	copy(key, []byte{63, 0, 63})
	if v, closer, err := k.Get(key); err != nil || len(v) != len(value) {
		t.Fatalf("after the flush and a kill, the last key: %d bytes, %v", len(v), err)
	} else {
		closer.Close()
	}
}

// TestStoreWrittenWithWALOpensWhole: a store an earlier zkraft wrote with
// its WAL (commits without sync, then killed) opens without one with
// everything its WAL held, and keeps it once closed.
func TestStoreWrittenWithWALOpensWhole(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, pebbleOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := db.Set([]byte{'k', byte(i)}, []byte{byte(i)}, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.LogData(nil, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	killed := t.TempDir()
	copyStore(t, dir, killed) // the WAL holds all of it; no table does
	db.Close()
	for round := range 2 {
		k, err := pebble.Open(killed, liveOptions(nil))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			v, closer, err := k.Get([]byte{'k', byte(i)})
			if err != nil || len(v) != 1 || v[0] != byte(i) {
				t.Fatalf("open %d without a WAL: key %d: %x, %v", round, i, v, err)
			}
			closer.Close()
		}
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
