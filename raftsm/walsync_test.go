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
