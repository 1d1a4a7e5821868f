package storecheck

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	crdberrors "github.com/cockroachdb/errors"
	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/record"
	"github.com/cockroachdb/pebble/sstable"
	"github.com/cockroachdb/pebble/vfs"
)

// Store is one Pebble store.
type Store struct {
	// Dir holds CURRENT, the MANIFEST, OPTIONS and the tables.
	Dir string
	// WALDir holds the WAL files when they are kept apart (Dragonboat's
	// Raft log store); "" means Dir.
	WALDir string
	// Options are those the store's owner opens it with; what matters
	// here is the comparer and the merger, whose names Pebble checks. nil
	// is Pebble's defaults.
	Options *pebble.Options
}

func (s Store) walDir() string {
	if s.WALDir == "" {
		return s.Dir
	}
	return s.WALDir
}

// Report is what Check found in a store, kept for LostWrites: Pebble's
// first open for writing replays the WAL into a table and deletes it, so
// the evidence must be taken before.
type Report struct {
	Store Store
	// Repaired lists the files Check moved aside.
	Repaired []string
	// WALs are the store's WAL files when it was checked, newest first.
	WALs []string
	// Manifest is the MANIFEST its CURRENT named.
	Manifest string
	// Torn is the first WAL or MANIFEST record that was damaged or cut
	// short: normal at the end of a WAL after a crash, and the likely
	// place of the loss if the store proves to have lost writes.
	Torn *Damage
}

// Check checks a store before it is opened for writing: Pebble opens it
// read-only (which replays the WAL into memory and changes nothing on disk)
// and every block of every table the store uses is read and its checksum
// verified. A store that was never created passes. An OPTIONS file that
// Pebble cannot use is moved aside (it holds no data; Pebble writes a new
// one when it next opens the store) and listed in the report. inspect, if
// not nil, runs on the read-only store.
//
// The error is a *Damage naming the file when the store is damaged, and
// another error when it cannot be checked (another process holds it, an
// I/O error, or inspect's error).
func Check(s Store, inspect func(*pebble.DB) error) (*Report, error) {
	r := &Report{Store: s, WALs: wals(s)}
	if _, err := os.Stat(filepath.Join(s.Dir, "CURRENT")); errors.Is(err, fs.ErrNotExist) {
		if f := dataFile(s); f != "" {
			return r, &Damage{File: filepath.Join(s.Dir, "CURRENT"), Problem: "missing, but the store holds data (" + filepath.Base(f) + ")"}
		}
		return r, nil // never created: Pebble creates it
	}
	r.Manifest, _ = checkCurrent(s)
	for _, w := range r.WALs {
		if r.Torn = checkRecords(w, walNum(w), "WAL"); r.Torn != nil {
			break
		}
	}
	if r.Torn == nil {
		r.Torn = checkRecords(r.Manifest, 0, "MANIFEST")
	}
	err := checkOpen(s, false, inspect)
	if err == nil || isDamage(err) || IsLocked(err) {
		return r, err
	}
	// Pebble reads the newest OPTIONS file before anything else and fails
	// the open if it cannot use it. If the store opens without it, that
	// file is what is damaged, and it holds nothing the store needs.
	if opts := newestOptions(s.Dir); opts != "" && checkOpen(s, true, nil) == nil {
		if err := os.Rename(opts, opts+".damaged"); err != nil {
			return r, err
		}
		if err := syncDir(s.Dir); err != nil {
			return r, err
		}
		r.Repaired = append(r.Repaired, opts)
		err = checkOpen(s, false, inspect)
		if err == nil || isDamage(err) {
			return r, err
		}
	}
	if d := Diagnose(s, err); d != nil {
		return r, d
	}
	return r, err
}

// IsCorruption reports whether err carries Pebble's corruption marker.
// Pebble marks its errors with cockroachdb/errors, whose marks the
// standard errors.Is does not see.
func IsCorruption(err error) bool { return err != nil && crdberrors.Is(err, pebble.ErrCorruption) }

func isDamage(err error) bool {
	var d *Damage
	return errors.As(err, &d)
}

// IsLocked reports whether err is Pebble failing to lock a store another
// process holds.
func IsLocked(err error) bool {
	return errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN)
}

// checkOpen opens the store read-only and verifies its tables. An error
// from the open is returned as Pebble gave it; a damaged table as a
// *Damage.
func checkOpen(s Store, hideOptions bool, inspect func(*pebble.DB) error) error {
	db, err := openReadOnly(s, hideOptions)
	if err != nil {
		return err
	}
	defer db.Close()
	if inspect != nil {
		if err := inspect(db); err != nil {
			return err
		}
	}
	levels, err := db.SSTables()
	if err != nil {
		return err
	}
	for _, level := range levels {
		for _, t := range level {
			if err := s.Table(filepath.Join(s.Dir, t.FileNum.String()+".sst")); err != nil {
				return err
			}
		}
	}
	return nil
}

// openReadOnly opens the store read-only with the options both of its
// users (Dragonboat's log store and raftsm) leave at Pebble's defaults:
// comparer, merger, format.
//
// It recovers a panic of Pebble's: Pebble is meant to return errors on
// damaged input, but a decoder that trusted a damaged length would panic,
// and this is the one place where Pebble reads the store before the member
// depends on it. The boundary is safe because nothing outlives it: the
// half-opened DB is dropped, and the caller refuses to start the member
// (it may still hold the store's LOCK, so nothing else in this process
// could open it anyway).
func openReadOnly(s Store, hideOptions bool) (db *pebble.DB, err error) {
	var fsys vfs.FS = vfs.Default
	if hideOptions {
		fsys = hideOptionsFS{vfs.Default}
	}
	return openReadOnlyFS(s, fsys)
}

// openReadOnlyFS is openReadOnly through fsys.
func openReadOnlyFS(s Store, fsys vfs.FS) (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("pebble panicked opening the store read-only: %v", r)
		}
	}()
	opts := &pebble.Options{}
	if s.Options != nil {
		*opts = *s.Options
	}
	opts.ReadOnly, opts.FS, opts.Logger, opts.EventListener = true, fsys, panicLogger{}, pebble.EventListener{}
	if s.WALDir != "" {
		opts.WALDir = s.WALDir
	}
	return pebble.Open(s.Dir, opts)
}

// panicLogger drops Pebble's informational lines and turns its fatal ones
// into a panic that openReadOnly recovers (Pebble's own logger would exit
// the process with a message the member could not classify).
type panicLogger struct{}

func (panicLogger) Infof(string, ...interface{}) {}
func (panicLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf(format, args...))
}

// hideOptionsFS is the file system without the OPTIONS files: opened
// through it, Pebble skips the options check.
type hideOptionsFS struct{ vfs.FS }

func (f hideOptionsFS) List(dir string) ([]string, error) {
	names, err := f.FS.List(dir)
	out := names[:0]
	for _, n := range names {
		if !strings.HasPrefix(n, "OPTIONS-") {
			out = append(out, n)
		}
	}
	return out, err
}

// Table reads every block of one of the store's tables and verifies its
// checksum.
func (s Store) Table(path string) (err error) {
	defer func() {
		// The same boundary as openReadOnly's, for the table reader.
		if r := recover(); r != nil {
			err = &Damage{File: path, Problem: fmt.Sprintf("Pebble panicked reading the table: %v", r)}
		}
	}()
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	ro := sstable.ReaderOptions{Comparer: pebble.DefaultComparer, MergerName: pebble.DefaultMerger.Name}
	if s.Options != nil && s.Options.Comparer != nil {
		ro.Comparer = s.Options.Comparer
	}
	if s.Options != nil && s.Options.Merger != nil {
		ro.MergerName = s.Options.Merger.Name
	}
	if s.Options != nil {
		for _, l := range s.Options.Levels {
			if l.FilterPolicy != nil {
				if ro.Filters == nil {
					ro.Filters = map[string]pebble.FilterPolicy{}
				}
				ro.Filters[l.FilterPolicy.Name()] = l.FilterPolicy
			}
		}
	}
	r, err := sstable.NewReader(f, ro)
	if err != nil { // NewReader closed f
		if IsCorruption(err) {
			return &Damage{File: path, Problem: "not a whole table (cut short or overwritten)", Err: err}
		}
		return err
	}
	defer r.Close()
	if err := r.ValidateBlockChecksums(); err != nil {
		if IsCorruption(err) {
			return &Damage{File: path, Problem: "a block's checksum does not match", Err: err}
		}
		return err
	}
	return nil
}

// Diagnose looks for the file that made Pebble fail to open a store with
// cause: CURRENT, the MANIFEST CURRENT names, the tables that are there,
// OPTIONS, the tables the error says are missing and, if Pebble reported
// corruption, the WAL files. It
// returns nil if none of them is damaged and cause is not Pebble's
// corruption error: the failure is then not damage (a full disk, a
// permission) and the caller reports cause itself.
func Diagnose(s Store, cause error) *Damage {
	manifest, d := checkCurrent(s)
	if d != nil {
		return d
	}
	// A MANIFEST with a torn record is named before any table: a member
	// killed while Pebble wrote a flush or a compaction leaves that table
	// cut short, a file no version lists (Pebble deletes it as obsolete
	// when it opens the store), and blaming it would hide the MANIFEST.
	if d := checkRecords(manifest, 0, "MANIFEST"); d != nil {
		d.Err = cause
		return d
	}
	for _, t := range files(s.Dir, "", ".sst") {
		var td *Damage
		if err := s.Table(t); errors.As(err, &td) {
			return td
		}
	}
	if opts := newestOptions(s.Dir); opts != "" {
		b, err := os.ReadFile(opts)
		if err == nil {
			if err := new(pebble.Options).Parse(string(b), &pebble.ParseHooks{SkipUnknown: func(string, string) bool { return true }}); err != nil {
				return &Damage{File: opts, Problem: "Pebble cannot parse it", Err: err}
			}
		}
	}
	if cause != nil {
		if missing := tableNames.FindAllString(cause.Error(), -1); len(missing) > 0 {
			if d := staleManifest(s, manifest, missing); d != nil {
				d.Err = cause
				return d
			}
			return &Damage{File: filepath.Join(s.Dir, missing[0]), Problem: "missing or of another size than the MANIFEST lists", Err: cause}
		}
	}
	if IsCorruption(cause) {
		for _, w := range wals(s) {
			if d := checkRecords(w, walNum(w), "WAL"); d != nil {
				d.Err = cause
				return d
			}
		}
		return &Damage{File: s.Dir, Problem: "Pebble reports corruption", Err: cause}
	}
	return nil
}

// tableNames finds the tables a Pebble error names.
var tableNames = regexp.MustCompile(`[0-9]{6,}\.sst`)

// staleManifest tells a MANIFEST that lost its newest records from a
// table that went missing, when Pebble failed to open the store because
// tables the MANIFEST lists are not there. A MANIFEST cut at a record
// boundary reads as whole (checkRecords finds nothing) and describes an
// older version of the store: it lists the tables a later compaction
// replaced (and Pebble deleted once the compaction's record was synced)
// and does not know the tables that replaced them. So when the store
// holds tables the MANIFEST does not list while tables it lists are
// missing, the MANIFEST is what is damaged. A table missing from a whole
// store leaves no unlisted table behind (a flush or compaction cut short
// by a crash may leave one, but then every listed table is there), and
// staleManifest returns nil: the table is named.
//
// The tables the MANIFEST lists are learnt from Pebble itself: opening
// the store read-only, it stats every table of its version before it
// fails on the missing ones.
func staleManifest(s Store, manifest string, missing []string) *Damage {
	if manifest == "" {
		return nil
	}
	fsys := &statLog{FS: vfs.Default, stats: map[string]bool{}}
	if db, err := openReadOnlyFS(s, fsys); err == nil {
		db.Close() // it opens now: not the store Diagnose was asked about
		return nil
	}
	var unlisted []string
	for _, t := range files(s.Dir, "", ".sst") {
		if !fsys.stated(t) {
			unlisted = append(unlisted, filepath.Base(t))
		}
	}
	if len(unlisted) == 0 {
		return nil
	}
	return &Damage{File: manifest, Problem: fmt.Sprintf(
		"lost its newest records (a MANIFEST cut at a record boundary looks whole): it lists %s, which the store does not hold, and not %s, which it holds",
		strings.Join(missing, ", "), strings.Join(unlisted, ", "))}
}

// statLog is a file system that notes the paths Pebble stats.
type statLog struct {
	vfs.FS
	mu    sync.Mutex
	stats map[string]bool
}

func (f *statLog) Stat(name string) (os.FileInfo, error) {
	f.mu.Lock()
	f.stats[filepath.Clean(name)] = true
	f.mu.Unlock()
	return f.FS.Stat(name)
}

func (f *statLog) stated(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats[filepath.Clean(name)]
}

// LostWrites names the file of a store that opened but proved to have lost
// writes that were durable (problem says how the member knows), from what
// Check found before the store was opened for writing: the WAL or
// MANIFEST record that was damaged or cut short if there was one, else the
// newest WAL, with the MANIFEST named in the problem (a file cut at a
// record boundary looks whole).
func LostWrites(r *Report, problem string) *Damage {
	if r.Torn != nil {
		return &Damage{File: r.Torn.File, Problem: problem + "; " + r.Torn.Problem}
	}
	manifest := "(none)"
	if r.Manifest != "" {
		manifest = r.Manifest
	}
	if len(r.WALs) == 0 {
		return &Damage{File: r.Store.Dir, Problem: problem + "; the store had no WAL file, and its MANIFEST " + manifest + " may have lost records"}
	}
	return &Damage{File: r.WALs[0], Problem: problem + "; this WAL (the newest) or the MANIFEST " + manifest + " lost records (a file cut at a record boundary looks whole)"}
}

// checkCurrent checks the CURRENT file and returns the MANIFEST it names.
func checkCurrent(s Store) (manifest string, d *Damage) {
	path := filepath.Join(s.Dir, "CURRENT")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if f := dataFile(s); f != "" {
			return "", &Damage{File: path, Problem: "missing, but the store holds data (" + filepath.Base(f) + ")"}
		}
		return "", nil
	}
	if err != nil {
		return "", nil // not damage; the caller reports Pebble's error
	}
	name, ok := strings.CutSuffix(string(b), "\n")
	if !ok || !currentContent.MatchString(name) {
		return "", &Damage{File: path, Problem: fmt.Sprintf("%d bytes that do not name a MANIFEST", len(b))}
	}
	manifest = filepath.Join(s.Dir, name)
	if _, err := os.Stat(manifest); errors.Is(err, fs.ErrNotExist) {
		return "", &Damage{File: path, Problem: "names " + name + ", which is missing"}
	}
	return manifest, nil
}

var currentContent = regexp.MustCompile(`^MANIFEST-[0-9]+$`)

// checkRecords reads every record of a WAL or MANIFEST (Pebble's record
// format, with Pebble's reader) and reports the first one that is damaged
// or cut short, which Pebble itself takes for the end of the file when it
// is in the newest WAL or the MANIFEST. A MANIFEST with no record is
// damaged too (Pebble writes one before CURRENT names it); an empty WAL is
// not (Pebble creates them empty).
func checkRecords(path string, logNum pebble.FileNum, kind string) *Damage {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	rr := record.NewReader(f, logNum)
	n := 0
	for {
		off := rr.Offset()
		r, err := rr.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		if err == io.EOF {
			if n == 0 && kind == "MANIFEST" {
				return &Damage{File: path, Problem: "a MANIFEST with no record (empty or cut short)"}
			}
			return nil
		}
		if err != nil {
			return &Damage{File: path, Problem: fmt.Sprintf("%s record %d at offset %d is damaged or cut short (%v)", kind, n+1, off, err)}
		}
		n++
	}
}

// dataFile returns a file that shows a store holds data: a table or a
// non-empty WAL.
func dataFile(s Store) string {
	if t := files(s.Dir, "", ".sst"); len(t) > 0 {
		return t[0]
	}
	for _, w := range wals(s) {
		if fi, err := os.Stat(w); err == nil && fi.Size() > 0 {
			return w
		}
	}
	return ""
}

// wals lists the store's WAL files, newest first.
func wals(s Store) []string {
	ws := files(s.walDir(), "", ".log")
	sort.Sort(sort.Reverse(sort.StringSlice(ws)))
	return ws
}

func walNum(path string) pebble.FileNum {
	n, _ := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), ".log"), 10, 64)
	return pebble.FileNum(n)
}

// files lists dir's files named prefix*suffix, in name order (Pebble's
// file numbers are zero-padded, so that is number order).
func files(dir, prefix, suffix string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && strings.HasPrefix(n, prefix) && strings.HasSuffix(n, suffix) {
			out = append(out, filepath.Join(dir, n))
		}
	}
	return out
}

// newestOptions returns the store's newest OPTIONS file (the one Pebble
// reads), or "".
func newestOptions(dir string) string {
	var last string
	for _, f := range files(dir, "OPTIONS-", "") {
		if optionsName.MatchString(filepath.Base(f)) {
			last = f
		}
	}
	return last
}

var optionsName = regexp.MustCompile(`^OPTIONS-[0-9]+$`)

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
