package storecheck

import (
	"encoding/binary"
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

	"github.com/cespare/xxhash/v2"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// Dragonboat's tan log store (v4, internal/tan), as this file reads it.
//
// A tandb directory holds bootstrap/BOOTSTRAP-S-R (one record: a replica's
// bootstrap information) and one database per replica, node-S-R (or
// shard-N when tan multiplexes replicas), with:
//
//	CURRENT          one record: "MANIFEST-NNNNNN\n"
//	MANIFEST-NNNNNN  records of version edits: tagged uvarints that add
//	                 (3) and delete (2) log file numbers and set the next
//	                 file number (1)
//	NNNNNN.log       records of Raft updates (shard, replica, state,
//	                 entries, snapshot)
//	NNNNNN.index     where the updates of NNNNNN.log are: written, whole,
//	                 when tan leaves the log for a newer one or closes; the
//	                 newest log has none after a crash, and tan rebuilds it
//	                 by reading that log
//
// Every one of these files is a sequence of records in 32 KiB blocks, as
// LevelDB and Pebble write their logs: a record is one or more chunks, each
// with a 7-byte header (checksum uint32, length uint16, type byte: full,
// first, middle, last) that never crosses a block; fewer than 7 bytes left
// in a block are padding. The checksum is the low 32 bits of the xxhash64
// of the type byte and the payload.
//
// What tan does with damage, and so why this check exists: a record that
// stops decoding in the newest log (a zeroed or invalid chunk, a file cut
// short) makes tan copy the records before it into a new file and rename
// it over the old one, anywhere in the file; a MANIFEST record that stops
// decoding ends the MANIFEST there; an older log is not read at start-up
// at all (its index is); a checksum mismatch makes Dragonboat panic.
const (
	tanBlockSize  = 32 * 1024
	tanHeaderSize = 7
	// tanZeroSkip: tan's reader takes a zeroed header with fewer than
	// this many bytes left in the block for padding.
	tanZeroSkip = 11

	tanFull, tanFirst, tanMiddle, tanLast = 1, 2, 3, 4

	tanTagNextFileNum, tanTagDeleted, tanTagNew = 1, 2, 3

	tanStateFlag    = ^uint64(0)
	tanSnapshotFlag = ^uint64(0) - 1
)

var (
	tanLogRe       = regexp.MustCompile(`^([0-9]+)\.log$`)
	tanBootstrapRe = regexp.MustCompile(`^BOOTSTRAP-[0-9]+-[0-9]+$`)
)

// TanReport is what CheckTan found in a tandb directory.
type TanReport struct {
	// Dir is the tandb directory.
	Dir string
	// Torn lists the torn tails it accepted: the end of a replica's newest
	// log (or of a MANIFEST) after its last whole record, short or zeroed,
	// as a crash in the middle of a write leaves it. tan drops that tail
	// when it opens the database; nothing there was acknowledged.
	Torn []*Damage
	// Logs is the number of log files read.
	Logs int
}

// CheckTan checks a tan log store before Dragonboat opens it: every record
// of every bootstrap file, CURRENT, MANIFEST, log and index file of every
// database under dir is read and its checksum verified, the updates in the
// logs decode, the MANIFEST lists every log that holds records and every
// log it lists is there, every log but a database's newest has its index,
// and every place an index names is the start of a record of the right
// replica. A directory that does not exist passes (tan creates it).
//
// The only damage it accepts is a torn tail of a database's newest log (or
// of its MANIFEST): the file ends inside its last record, or is zero from
// the end of its last whole record to its end. That is what a crash in the
// middle of a write leaves, and tan drops it. Anything else is a *Damage
// naming the file and the offset: zeroes followed by records, a checksum
// mismatch anywhere (tan would panic), a cut older log, a MANIFEST that
// lost the records naming a log. Another error means the directory could
// not be read.
func CheckTan(dir string) (*TanReport, error) {
	r := &TanReport{Dir: dir}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue // LOCK
		}
		sub := filepath.Join(dir, e.Name())
		if e.Name() == "bootstrap" {
			if err := checkTanBootstrap(sub); err != nil {
				return r, err
			}
			continue
		}
		if err := checkTanDB(sub, r); err != nil {
			return r, err
		}
	}
	return r, nil
}

// checkTanBootstrap checks the replicas' bootstrap files: tan writes each
// whole (a temporary file renamed), so any damage is damage.
func checkTanBootstrap(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !tanBootstrapRe.MatchString(e.Name()) {
			continue // BOOTSTRAP-S-R.tmp: tan deletes it
		}
		path := filepath.Join(dir, e.Name())
		n := 0
		tail, err := tanRecords(path, func(off int64, rec []byte) error {
			n++
			var b pb.Bootstrap
			if err := b.Unmarshal(rec); err != nil {
				return fmt.Errorf("the bootstrap record does not decode: %w", err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if tail != nil {
			return &tail.Damage
		}
		if n == 0 {
			return &Damage{File: path, Problem: "empty, but tan writes one bootstrap record in it"}
		}
	}
	return nil
}

// tanUpdate is what the check keeps of a log record.
type tanUpdate struct {
	shard, replica uint64
	first, last    uint64 // the entries' indexes; 0 when it has none
	state, snap    bool
}

// tanLog is one log file the MANIFEST lists.
type tanLog struct {
	num  uint64
	path string
	// records maps the offset tan records for an update (the end of the
	// record before it, 0 for the first) to the update.
	records map[int64]tanUpdate
	read    bool // read to its end (its records are all there)
}

func checkTanDB(dir string, r *TanReport) error {
	current := filepath.Join(dir, "CURRENT")
	var manifestName string
	tail, err := tanRecords(current, func(off int64, rec []byte) error {
		if manifestName != "" {
			return errors.New("a second record (tan writes one)")
		}
		s := string(rec)
		if !strings.HasSuffix(s, "\n") || !strings.HasPrefix(s, "MANIFEST-") {
			return fmt.Errorf("%q does not name a MANIFEST", OneLine(s))
		}
		if _, err := strconv.ParseUint(strings.TrimSpace(s[len("MANIFEST-"):]), 10, 64); err != nil {
			return fmt.Errorf("%q does not name a MANIFEST", OneLine(s))
		}
		manifestName = strings.TrimSpace(s)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		if f := tanDataFile(dir); f != "" {
			return &Damage{File: current, Problem: "missing, but the tan database holds data (" + filepath.Base(f) + ")"}
		}
		return nil // never created: tan creates it
	}
	if err != nil {
		return err
	}
	if tail != nil {
		return &tail.Damage
	}
	if manifestName == "" {
		return &Damage{File: current, Problem: "empty, but tan writes the MANIFEST's name in it"}
	}

	// The MANIFEST: the log files of the current version.
	manifest := filepath.Join(dir, manifestName)
	added, deleted := map[uint64]bool{}, map[uint64]bool{}
	var maxNamed uint64
	tail, err = tanRecords(manifest, func(off int64, rec []byte) error {
		for len(rec) > 0 {
			tag, n := binary.Uvarint(rec)
			if n <= 0 {
				return errors.New("a version edit does not decode")
			}
			rec = rec[n:]
			v, n := binary.Uvarint(rec)
			if n <= 0 {
				return errors.New("a version edit does not decode")
			}
			rec = rec[n:]
			switch tag {
			case tanTagNextFileNum:
			case tanTagDeleted:
				if !added[v] {
					return fmt.Errorf("a version edit deletes log %06d, which no edit before it added", v)
				}
				deleted[v] = true
			case tanTagNew:
				if deleted[v] {
					return fmt.Errorf("a version edit adds log %06d, which an edit before it deleted", v)
				}
				added[v] = true
			default:
				return fmt.Errorf("a version edit has tag %d, which tan does not write", tag)
			}
			if tag != tanTagNextFileNum && v > maxNamed {
				maxNamed = v
			}
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return &Damage{File: manifest, Problem: "missing, but CURRENT names it"}
	}
	if err != nil {
		return err
	}
	if tail != nil {
		if !tail.torn {
			return &tail.Damage
		}
		r.Torn = append(r.Torn, &tail.Damage)
	}

	// The logs on disk: those the MANIFEST lists, and any newer than
	// every log it names (tan ignores those: it would lose their records).
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	onDisk := map[uint64]string{}
	for _, e := range ents {
		if m := tanLogRe.FindStringSubmatch(e.Name()); m != nil {
			n, err := strconv.ParseUint(m[1], 10, 64)
			if err == nil {
				onDisk[n] = filepath.Join(dir, e.Name())
			}
		}
	}
	var nums []uint64
	for n := range added {
		if !deleted[n] {
			nums = append(nums, n)
		}
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	for _, n := range nums {
		if _, ok := onDisk[n]; !ok {
			if tail != nil {
				// tan deletes a log after the record that deletes it
				// from the version is synced: that record is in the
				// torn end.
				return &Damage{File: manifest, Problem: fmt.Sprintf("lists %06d.log, which is missing, and ends in a damaged record (%s): it lost the record that deleted the log", n, tail.Problem)}
			}
			return &Damage{File: tanName(dir, n, ".log"), Problem: "missing, but the tan MANIFEST " + manifestName + " lists it"}
		}
	}
	for n, path := range onDisk {
		if n <= maxNamed || added[n] {
			continue
		}
		recs := 0
		if _, err := tanRecords(path, func(int64, []byte) error { recs++; return errStopRecords }); err != nil {
			return err
		}
		if recs > 0 {
			return &Damage{File: manifest, Problem: fmt.Sprintf("does not list %s, which holds records (the MANIFEST lost its newest records; tan would ignore the log)", filepath.Base(path))}
		}
	}

	logs := map[uint64]*tanLog{}
	for i, n := range nums {
		l := &tanLog{num: n, path: onDisk[n], records: map[int64]tanUpdate{}}
		logs[n] = l
		index := tanName(dir, n, ".index")
		_, statErr := os.Stat(index)
		hasIndex := statErr == nil
		newest := i == len(nums)-1
		if !hasIndex && !newest {
			return &Damage{File: index, Problem: fmt.Sprintf("missing: %s is not the newest log, and tan does not read a log without its index", filepath.Base(l.path))}
		}
		var end int64
		tail, err := tanRecords(l.path, func(off int64, rec []byte) error {
			u, err := decodeTanUpdate(rec)
			if err != nil {
				return err
			}
			l.records[end] = u
			end = off
			return nil
		})
		if err != nil {
			return err
		}
		r.Logs++
		l.read = tail == nil
		if tail != nil {
			if !tail.torn || hasIndex || !newest {
				if tail.torn {
					tail.Problem += "; it is not the newest log without an index, whose torn tail tan may drop"
				}
				return &tail.Damage
			}
			r.Torn = append(r.Torn, &tail.Damage)
		}
	}
	for _, n := range nums {
		index := tanName(dir, n, ".index")
		if _, err := os.Stat(index); err != nil {
			continue
		}
		if err := checkTanIndex(index, n, logs); err != nil {
			return err
		}
	}
	return nil
}

// tanName is the file of log number n in dir with the suffix.
func tanName(dir string, n uint64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%06d%s", n, suffix))
}

// tanDataFile is a file of a tan database that holds data, or "".
func tanDataFile(dir string) string {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, "MANIFEST-") || strings.HasSuffix(n, ".log") || strings.HasSuffix(n, ".index") {
			return filepath.Join(dir, n)
		}
	}
	return ""
}

// decodeTanUpdate reads a log record as tan writes a Raft update
// (raftpb.Update.MarshalTo): uvarint shard and replica; a byte 0, or 1 and
// a uint32 length and the state; a uint32 count of entries, each a uint32
// length and the entry; a byte 0, or 1 and a uint32 length and the
// snapshot. It checks every length against the record, which tan's own
// decoder (it panics on a short record) does not.
func decodeTanUpdate(b []byte) (u tanUpdate, err error) {
	bad := func(what string) error { return fmt.Errorf("a Raft update does not decode (%s)", what) }
	var n int
	if u.shard, n = binary.Uvarint(b); n <= 0 {
		return u, bad("shard")
	}
	b = b[n:]
	if u.replica, n = binary.Uvarint(b); n <= 0 {
		return u, bad("replica")
	}
	b = b[n:]
	part := func(what string) ([]byte, error) {
		if len(b) < 4 {
			return nil, bad(what + " length")
		}
		l := binary.LittleEndian.Uint32(b)
		if uint64(l) > uint64(len(b)-4) {
			return nil, bad(what + " longer than the record")
		}
		p := b[4 : 4+l]
		b = b[4+l:]
		return p, nil
	}
	if len(b) < 1 {
		return u, bad("state flag")
	}
	flag := b[0]
	b = b[1:]
	if flag == 1 {
		p, err := part("state")
		if err != nil {
			return u, err
		}
		var st pb.State
		if err := st.Unmarshal(p); err != nil {
			return u, bad("state: " + err.Error())
		}
		u.state = true
	}
	if len(b) < 4 {
		return u, bad("entry count")
	}
	count := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if uint64(count)*4 > uint64(len(b)) {
		return u, bad("entry count larger than the record")
	}
	for i := uint32(0); i < count; i++ {
		p, err := part("entry")
		if err != nil {
			return u, err
		}
		var e pb.Entry
		if err := e.Unmarshal(p); err != nil {
			return u, bad("entry: " + err.Error())
		}
		if i == 0 {
			u.first = e.Index
		} else if e.Index != u.last+1 {
			return u, bad(fmt.Sprintf("entry %d follows entry %d", e.Index, u.last))
		}
		u.last = e.Index
	}
	if len(b) < 1 {
		return u, bad("snapshot flag")
	}
	flag = b[0]
	b = b[1:]
	if flag == 1 {
		p, err := part("snapshot")
		if err != nil {
			return u, err
		}
		var ss pb.Snapshot
		if err := ss.Unmarshal(p); err != nil {
			return u, bad("snapshot: " + err.Error())
		}
		u.snap = true
	}
	return u, nil
}

// checkTanIndex reads the index of log num: a record with the count of
// replicas, and four records for each: shard and replica, the entries of
// the log, the newest snapshot and the newest state (each a uvarint count
// of (start, end, file, position, length) and a uvarint compactedTo).
// Every place it names in a log the check read whole must be the start of
// an update of that replica holding what the index says is there.
func checkTanIndex(path string, num uint64, logs map[uint64]*tanLog) error {
	var recs [][]byte
	tail, err := tanRecords(path, func(off int64, rec []byte) error {
		recs = append(recs, append([]byte(nil), rec...))
		return nil
	})
	if err != nil {
		return err
	}
	if tail != nil {
		return &tail.Damage // tan writes an index whole (a temporary file renamed)
	}
	damage := func(format string, args ...any) error {
		return &Damage{File: path, Problem: fmt.Sprintf(format, args...)}
	}
	uv := func(b *[]byte) (uint64, bool) {
		v, n := binary.Uvarint(*b)
		if n <= 0 {
			return 0, false
		}
		*b = (*b)[n:]
		return v, true
	}
	if len(recs) == 0 {
		return damage("holds no record (tan writes at least the count of replicas)")
	}
	first := recs[0]
	count, ok := uv(&first)
	if !ok || uint64(len(recs)-1) < count*4 {
		return damage("names %d replicas but holds %d records", count, len(recs))
	}
	for i := uint64(0); i < count; i++ {
		rb := recs[1+4*i]
		shard, ok1 := uv(&rb)
		replica, ok2 := uv(&rb)
		if !ok1 || !ok2 {
			return damage("replica %d's record does not decode", i)
		}
		for part, what := range []string{"entries", "snapshot", "state"} {
			b := recs[2+4*i+uint64(part)]
			n, ok := uv(&b)
			if !ok || n > uint64(len(b)) {
				return damage("node-%d-%d's %s do not decode", shard, replica, what)
			}
			for j := uint64(0); j < n; j++ {
				var f [5]uint64
				for k := range f {
					if f[k], ok = uv(&b); !ok {
						return damage("node-%d-%d's %s do not decode", shard, replica, what)
					}
				}
				start, end, file, pos := f[0], f[1], f[2], int64(f[3])
				if file == 0 {
					continue // none
				}
				if what == "entries" && file != num {
					return damage("node-%d-%d's entries %d-%d are in log %06d, not in this index's log", shard, replica, start, end, file)
				}
				l, ok := logs[file]
				if !ok || !l.read {
					continue // not in the version or not read whole: checked there
				}
				u, ok := l.records[pos]
				if !ok {
					return &Damage{File: l.path, Problem: fmt.Sprintf("holds no update at offset %d, where its index %s has node-%d-%d's %s (the log lost records)", pos, filepath.Base(path), shard, replica, what)}
				}
				wrong := u.shard != shard || u.replica != replica
				switch {
				case what == "entries":
					wrong = wrong || end == tanStateFlag || end == tanSnapshotFlag || u.first == 0 || start < u.first || start > u.last || end > u.last
				case what == "snapshot":
					wrong = wrong || !u.snap
				default:
					wrong = wrong || !u.state
				}
				if wrong {
					return &Damage{File: l.path, Problem: fmt.Sprintf("the update at offset %d is not node-%d-%d's %s its index %s names there", pos, shard, replica, what, filepath.Base(path))}
				}
			}
			if _, ok := uv(&b); !ok {
				return damage("node-%d-%d's %s do not decode (compactedTo)", shard, replica, what)
			}
		}
	}
	return nil
}

// errStopRecords, returned by tanRecords's each, stops the reading with
// no error.
var errStopRecords = errors.New("stop reading records")

// tanTail is a record file's first record that does not read.
type tanTail struct {
	Damage
	// torn: the file ends inside that record, or is zero from its start to
	// the end: what a crash in the middle of a write leaves.
	torn bool
}

// tanRecords reads the records of one of tan's record files in order and
// calls each with the offset of the record's end and its payload (valid
// until each returns). It returns, as a *tanTail, the first record that
// does not read or that each refuses (each's error is the problem); an
// error when the file cannot be read (fs.ErrNotExist if it is missing).
func tanRecords(path string, each func(end int64, rec []byte) error) (*tanTail, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	var (
		block    [tanBlockSize]byte
		blockNum = int64(-1)
		n        int // bytes of the block in the file
		rec      []byte
		recStart = int64(-1) // the record being read, -1 between records
		off      int64       // the next chunk
	)
	fail := func(at int64, torn bool, format string, args ...any) (*tanTail, error) {
		if recStart >= 0 {
			at = recStart
		}
		return &tanTail{Damage: Damage{File: path, Problem: fmt.Sprintf("the record at offset %d of %d: ", at, size) + fmt.Sprintf(format, args...)}, torn: torn}, nil
	}
	for {
		if off >= size {
			if recStart >= 0 {
				return fail(off, true, "the file ends inside it (cut short)")
			}
			return nil, nil
		}
		if b := off / tanBlockSize; b != blockNum {
			blockNum = b
			m, err := f.ReadAt(block[:], b*tanBlockSize)
			if err != nil && err != io.EOF {
				return nil, err
			}
			n = m
		}
		in := int(off % tanBlockSize)
		if tanBlockSize-in < tanHeaderSize {
			if recStart >= 0 {
				return fail(off, false, "a chunk ends %d bytes before its block", tanBlockSize-in)
			}
			off = (blockNum + 1) * tanBlockSize // padding
			continue
		}
		if n-in < tanHeaderSize {
			return fail(off, true, "the file ends inside a chunk header (cut short)")
		}
		h := block[in : in+tanHeaderSize]
		sum, length, typ := binary.LittleEndian.Uint32(h), int(binary.LittleEndian.Uint16(h[4:])), h[6]
		if sum == 0 && length == 0 && typ == 0 {
			if recStart < 0 && n-in < tanZeroSkip && n == tanBlockSize {
				off = (blockNum + 1) * tanBlockSize // tan takes it for padding
				continue
			}
			torn, err := zeroToEnd(f, off, size)
			if err != nil {
				return nil, err
			}
			if torn {
				return fail(off, true, "zero from offset %d to the end of the file", off)
			}
			return fail(off, false, "a zeroed chunk at offset %d, with data after it (tan would drop everything from there)", off)
		}
		if typ < tanFull || typ > tanLast {
			return fail(off, false, "a chunk at offset %d has type %d, which tan does not write", off, typ)
		}
		end := in + tanHeaderSize + length
		if end > tanBlockSize {
			return fail(off, false, "a chunk at offset %d runs %d bytes past its block", off, end-tanBlockSize)
		}
		if end > n {
			if n == tanBlockSize {
				return fail(off, false, "a chunk at offset %d runs past its block", off)
			}
			return fail(off, true, "the file ends inside the chunk at offset %d (cut short)", off)
		}
		if uint32(xxhash.Sum64(block[in+6:end])) != sum {
			return fail(off, false, "checksum mismatch in the chunk at offset %d", off)
		}
		switch {
		case (typ == tanFull || typ == tanFirst) && recStart >= 0:
			return fail(off, false, "a new record starts at offset %d inside it", off)
		case (typ == tanMiddle || typ == tanLast) && recStart < 0:
			return fail(off, false, "a chunk at offset %d continues no record", off)
		}
		if recStart < 0 {
			recStart, rec = off, rec[:0]
		}
		rec = append(rec, block[in+tanHeaderSize:end]...)
		off = blockNum*tanBlockSize + int64(end)
		if typ == tanFull || typ == tanLast {
			if err := each(off, rec); err != nil {
				if err == errStopRecords {
					return nil, nil
				}
				return fail(off, false, "%v", err)
			}
			recStart = -1
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// zeroToEnd reports whether f is zero from off to size.
func zeroToEnd(f *os.File, off, size int64) (bool, error) {
	buf := make([]byte, 64*1024)
	for off < size {
		m, err := f.ReadAt(buf, off)
		if m > 0 && !allZero(buf[:m]) {
			return false, nil
		}
		off += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}
