package raftsm

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/zkraft/zkraft/jute"
)

// The change history behind resumable watches. Every watch trigger an
// Update applies is also appended here, keyed by zxid, in the same Pebble
// batch. A transaction with one event has one record of the first form; a
// transaction with several (a create and its parent's children change, a
// multi) has one record of the second, at seq 0, holding all of them in
// order:
//
//	'h' zxid(8, BE) seq(2, BE)   int32 event type, ustring path, long time (ms),
//	                             ACL vector (null when anyone may read)
//	'h' zxid(8, BE) 0(2)         int32 histManyMarker, int32 n, long time (ms),
//	                             n x (int32 event type, ustring path, ACL vector)
//	m:hfloor                     every change with zxid > hfloor is retained
//	m:hcount                     events retained (not records)
//
// Stores written before the second form hold one record of the first form
// per event, at seq 0, 1, ...; readers take both (decodeHistoryRecord), so
// existing data directories and their resumable watches keep working. One
// record per transaction is one memtable insert instead of one per event:
// a multi of 4 setData writes 5 keys instead of 8 (docs/performance.md,
// "Write CPU, fourth pass").
//
// Trimming is deterministic: by count and by age measured against the time
// carried in the newest command of the Update, always whole zxids at a time
// so the events of one multi are kept or dropped together.
const spaceHistory = 'h'

// histManyMarker opens a record holding several events. It is no event
// type (jute's are -1 to 7), so a record of the first form never starts
// with it.
const histManyMarker = int32(-0x48_4d_4e) // "HMN"

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

// appendHistoryMany appends the record of the events evs, all of one
// transaction, to dst.
func appendHistoryMany(dst []byte, time int64, evs []HistoryEvent) []byte {
	w := jute.AppendWriter(dst)
	w.Int(histManyMarker)
	w.Int(int32(len(evs)))
	w.Long(time)
	for i := range evs {
		w.Int(int32(evs[i].Type))
		w.String(evs[i].Path)
		w.ACLs(evs[i].ACL)
	}
	return w.Bytes()
}

// decodeHistoryRecord appends the events of one history record, of either
// form, to dst.
func decodeHistoryRecord(dst []HistoryEvent, key, val []byte) ([]HistoryEvent, error) {
	r := jute.NewReader(val)
	zxid := historyZxid(key)
	first := r.Int()
	if first != histManyMarker {
		e := HistoryEvent{Zxid: zxid, Type: jute.EventType(first)}
		e.Path = r.String()
		e.Time = r.Long()
		e.ACL = r.ACLs()
		if err := r.Err(); err != nil {
			return dst, fmt.Errorf("%w: history record: %w", ErrBadSnapshot, err)
		}
		return append(dst, e), nil
	}
	n := r.Int()
	time := r.Long()
	// Each event takes at least 12 bytes (type, path length, ACL count).
	if n < 2 || int(n) > r.Remaining()/12 {
		return dst, fmt.Errorf("%w: history record of %d events in %d bytes", ErrBadSnapshot, n, len(val))
	}
	for range n {
		e := HistoryEvent{Zxid: zxid, Time: time}
		e.Type = jute.EventType(r.Int())
		e.Path = r.String()
		e.ACL = r.ACLs()
		dst = append(dst, e)
	}
	if err := r.Err(); err != nil {
		return dst, fmt.Errorf("%w: history record: %w", ErrBadSnapshot, err)
	}
	return dst, nil
}

// historyRecordHead is the number of events in a history record and their
// time, read from its head alone.
func historyRecordHead(val []byte) (n, time int64, err error) {
	r := jute.NewReader(val)
	if r.Int() != histManyMarker {
		_ = r.String()
		time = r.Long()
		n = 1
	} else {
		n = int64(r.Int())
		time = r.Long()
	}
	if err := r.Err(); err != nil {
		return 0, 0, fmt.Errorf("%w: history record: %w", ErrBadSnapshot, err)
	}
	if n < 1 {
		return 0, 0, fmt.Errorf("%w: history record of %d events", ErrBadSnapshot, n)
	}
	return n, time, nil
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

// appendHistory records the watch events of an Update, one record per
// zxid, and trims.
func (s *StateMachine) appendHistory(b *pebble.Batch, events []Event, times map[int64]int64, now int64) error {
	count, err := getInt64(b, keyHistCount)
	if err != nil {
		return err
	}
	added := int64(0)
	// One key and one value buffer for every record: the batch copies
	// both.
	var key [historyKeyLen]byte
	var val []byte
	var group []HistoryEvent // the watch events of one zxid
	put := func() error {
		if len(group) == 0 {
			return nil
		}
		z := group[0].Zxid
		if len(group) == 1 {
			val = appendHistory(val[:0], &group[0])
		} else {
			val = appendHistoryMany(val[:0], times[z], group)
		}
		added += int64(len(group))
		group = group[:0]
		return b.Set(historyKeyInto(key[:], z, 0), val, nil)
	}
	for i := range events {
		ev := &events[i]
		if ev.Kind != EventWatch {
			continue
		}
		if len(group) > 0 && group[0].Zxid != ev.Zxid {
			if err := put(); err != nil {
				return err
			}
		}
		he := HistoryEvent{Zxid: ev.Zxid, Type: ev.Type, Path: ev.Path, Time: times[ev.Zxid]}
		if !readableByAnyone(ev.ACL) {
			he.ACL = ev.ACL
		}
		group = append(group, he)
	}
	if err := put(); err != nil {
		return err
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
		n, t, err := historyRecordHead(it.Value())
		if err != nil {
			it.Close()
			return 0, err
		}
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
			tooOld := now-t > maxAge
			if s.histMaxAge <= 0 {
				tooOld = false
			}
			if !overCount && !tooOld {
				dropping = -1
				break
			}
			dropping, inZxid = z, 0
		}
		inZxid += n
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
	// buf holds the events of the record read last, from buf[next] on
	// not yet returned.
	buf  []HistoryEvent
	next int
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
	for h.next >= len(h.buf) {
		if h.err != nil || !h.it.Valid() {
			return HistoryEvent{}, false
		}
		h.buf, h.next = h.buf[:0], 0
		h.buf, h.err = decodeHistoryRecord(h.buf, h.it.Key(), h.it.Value())
		if h.err != nil {
			h.buf = h.buf[:0]
			return HistoryEvent{}, false
		}
		h.it.Next()
	}
	e := h.buf[h.next]
	h.next++
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
