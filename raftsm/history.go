package raftsm

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/zkraft/zkraft/jute"
)

// The change history behind resumable watches. Every watch trigger an
// Update applies is also appended here, keyed by zxid, in the same Pebble
// batch:
//
//	'h' zxid(8, BE) seq(2, BE)   int32 event type, ustring path, long time (ms),
//	                             ACL vector (null when anyone may read)
//	m:hfloor                     every change with zxid > hfloor is retained
//	m:hcount                     records retained
//
// Trimming is deterministic: by count and by age measured against the time
// carried in the newest command of the Update, always whole zxids at a time
// so the events of one multi are kept or dropped together.
const spaceHistory = 'h'

var (
	keyHistFloor = []byte("m:hfloor")
	keyHistCount = []byte("m:hcount")
)

// HistoryEvent is one retained change.
type HistoryEvent struct {
	Zxid int64
	Type jute.EventType
	Path string
	Time int64
	ACL  []jute.ACL // nil: anyone may read
}

func historyKey(zxid int64, seq uint16) []byte {
	return historyKeyInto(make([]byte, historyKeyLen), zxid, seq)
}

// historyKeyLen is the length of every history key.
const historyKeyLen = 11

// historyKeyInto writes the history key into k, of historyKeyLen bytes,
// and returns it.
func historyKeyInto(k []byte, zxid int64, seq uint16) []byte {
	k = k[:historyKeyLen]
	k[0] = spaceHistory
	binary.BigEndian.PutUint64(k[1:], uint64(zxid))
	binary.BigEndian.PutUint16(k[9:], seq)
	return k
}

func historyZxid(key []byte) int64 { return int64(binary.BigEndian.Uint64(key[1:9])) }

// appendHistory appends e's history record to dst.
func appendHistory(dst []byte, e *HistoryEvent) []byte {
	w := jute.AppendWriter(dst)
	w.Int(int32(e.Type))
	w.String(e.Path)
	w.Long(e.Time)
	w.ACLs(e.ACL)
	return w.Bytes()
}

func decodeHistory(key, val []byte) (HistoryEvent, error) {
	r := jute.NewReader(val)
	e := HistoryEvent{Zxid: historyZxid(key)}
	e.Type = jute.EventType(r.Int())
	e.Path = r.String()
	e.Time = r.Long()
	e.ACL = r.ACLs()
	if err := r.Err(); err != nil {
		return e, fmt.Errorf("%w: history record: %w", ErrBadSnapshot, err)
	}
	return e, nil
}

func readableByAnyone(acl []jute.ACL) bool {
	if len(acl) == 0 {
		return true
	}
	for _, a := range acl {
		if a.Perms&jute.PermRead != 0 && a.ID.Scheme == "world" && a.ID.ID == "anyone" {
			return true
		}
	}
	return false
}

func getInt64(r reader, key []byte) (int64, error) {
	v, err := getValue(r, key)
	if err != nil || len(v) != 8 {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

func putInt64(w writer, key []byte, v int64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	return w.Set(key, b[:], nil)
}

// appendHistory records the watch events of an Update and trims.
func (s *StateMachine) appendHistory(b *pebble.Batch, events []Event, times map[int64]int64, now int64) error {
	count, err := getInt64(b, keyHistCount)
	if err != nil {
		return err
	}
	var seq uint16
	var last int64 = -1
	added := int64(0)
	// One key and one value buffer for every record: the batch copies
	// both.
	var key [historyKeyLen]byte
	var val []byte
	for i := range events {
		ev := &events[i]
		if ev.Kind != EventWatch {
			continue
		}
		if ev.Zxid != last {
			last, seq = ev.Zxid, 0
		}
		he := HistoryEvent{Type: ev.Type, Path: ev.Path, Time: times[ev.Zxid]}
		if !readableByAnyone(ev.ACL) {
			he.ACL = ev.ACL
		}
		val = appendHistory(val[:0], &he)
		if err := b.Set(historyKeyInto(key[:], ev.Zxid, seq), val, nil); err != nil {
			return err
		}
		seq++
		added++
	}
	count += added
	if count > s.histMax+s.histMax/trimSlack || (s.histMaxAge > 0 && added > 0) {
		if count, err = s.trimHistory(b, count, now); err != nil {
			return err
		}
	}
	return putInt64(b, keyHistCount, count)
}

// trimSlack: history is trimmed only once it is 1/trimSlack over a bound
// (count, or age), and then back to the bound. Each trim is one range
// deletion, and every Pebble read until the next flush re-fragments the
// range deletions in the memtable: trimmed on every Update, the trims cost
// more than the writes (a quarter of a setData's apply time).
const trimSlack = 32

// trimHistory drops the oldest whole zxids while more than histMax records
// are kept or the oldest is older than histMaxAge before now, once the
// oldest or the count is over by the slack. The scan starts just above the
// current floor, so it never walks the tombstones of earlier trims, and
// what it drops goes in one range deletion.
func (s *StateMachine) trimHistory(b *pebble.Batch, count, now int64) (int64, error) {
	floor, err := getInt64(b, keyHistFloor)
	if err != nil {
		return 0, err
	}
	lo := historyKey(floor+1, 0)
	it := b.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound([]byte{spaceHistory})})
	newFloor := floor
	var dropping int64 = -1 // zxid being dropped
	var inZxid int64        // records of that zxid seen so far
	for it.First(); it.Valid(); it.Next() {
		z := historyZxid(it.Key())
		if z != dropping {
			if dropping >= 0 {
				count -= inZxid
				newFloor = dropping
			}
			maxCount, maxAge := s.histMax, s.histMaxAge
			if newFloor == floor && dropping < 0 {
				// The oldest retained zxid: trim only past the slack.
				maxCount += s.histMax / trimSlack
				maxAge += s.histMaxAge / trimSlack
			}
			overCount := count > maxCount
			tooOld := false
			if s.histMaxAge > 0 {
				e, err := decodeHistory(it.Key(), it.Value())
				if err != nil {
					it.Close()
					return 0, err
				}
				tooOld = now-e.Time > maxAge
			}
			if !overCount && !tooOld {
				dropping = -1
				break
			}
			dropping, inZxid = z, 0
		}
		inZxid++
	}
	if err := it.Error(); err != nil {
		it.Close()
		return 0, err
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	if dropping >= 0 {
		// The scan ended inside a zxid being dropped: all of it goes.
		count -= inZxid
		newFloor = dropping
	}
	if newFloor == floor {
		return count, nil
	}
	if err := b.DeleteRange(lo, historyKey(newFloor+1, 0), nil); err != nil {
		return 0, err
	}
	return count, putInt64(b, keyHistFloor, newFloor)
}

// HistoryFloor is the zxid after which every change is retained.
func (v View) HistoryFloor() (int64, error) { return getInt64(v.tree.r, keyHistFloor) }

// History is a consistent iterator over retained changes, valid after the
// ReadFunc that opened it returns; Close releases it.
type History struct {
	snap *pebble.Snapshot
	it   *pebble.Iterator
	err  error
}

// HistoryAfter opens an iterator over the changes with zxid > from, as of
// this view. The caller checks from against HistoryFloor first. Only a
// LockedReadFunc's view may open one: the iterator outlives the query, and
// only under the lock is the store the view's state.
func (v View) HistoryAfter(from int64) (*History, error) {
	if v.db == nil {
		return nil, ErrClosed
	}
	if !v.locked {
		return nil, ErrNotLocked
	}
	snap := v.db.NewSnapshot()
	lo := historyKey(from+1, 0)
	hi := historyKey(v.zxid+1, 0)
	it := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	it.First()
	return &History{snap: snap, it: it}, nil
}

// Next returns the next change, false at the end or on error (see Err).
func (h *History) Next() (HistoryEvent, bool) {
	if h.err != nil || !h.it.Valid() {
		return HistoryEvent{}, false
	}
	e, err := decodeHistory(h.it.Key(), h.it.Value())
	if err != nil {
		h.err = err
		return HistoryEvent{}, false
	}
	h.it.Next()
	return e, true
}

// Err is the first error met.
func (h *History) Err() error {
	if h.err != nil {
		return h.err
	}
	return h.it.Error()
}

// Close releases the snapshot.
func (h *History) Close() error {
	err := h.it.Close()
	if serr := h.snap.Close(); err == nil {
		err = serr
	}
	return err
}
