package fleet

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/zkraft/zkraft/jute"
)

// The Pebble key layout (format 1). A record per member and per cell and
// one for the map's own fields; the applied index, the digest and the
// format beside them. The map is small (a record per cell), so Open loads
// it whole and reads are served from memory.
var (
	keyApplied = []byte("a") // 8 bytes, big-endian
	keyDigest  = []byte("d") // 8 bytes: XOR of recordHash over the records
	keyFormat  = []byte("f") // 1 byte, formatVersion
	keyHeader  = []byte("h") // the map's version, next shard id, import flag
)

const (
	prefixCell   = 'c' // + name
	prefixMember = 'm' // + 8-byte big-endian id
)

const formatVersion = 1

// recordVersion starts every record value, so a later layout can tell its
// records from these.
const recordVersion = 1

func cellKey(name string) []byte { return append([]byte{prefixCell}, name...) }

func memberKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixMember}, id)
}

// isRecord reports whether k is a key of the map's records (what the
// digest covers and a snapshot carries).
func isRecord(k []byte) bool {
	return len(k) > 0 && (k[0] == prefixCell || k[0] == prefixMember || string(k) == string(keyHeader))
}

// recordHash is a record's share of the digest.
func recordHash(k, v []byte) uint64 {
	h := fnv.New64a()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(k)))
	h.Write(n[:])
	h.Write(k)
	h.Write(v)
	return h.Sum64()
}

func encodeHeader(m *Map) []byte {
	w := jute.NewWriter(32)
	w.Int(recordVersion)
	w.Long(m.version)
	w.Long(int64(m.nextShard))
	w.Bool(m.defaultImported)
	return w.Bytes()
}

func encodeMember(x *Member) []byte {
	w := jute.NewWriter(64)
	w.Int(recordVersion)
	w.Long(int64(x.ID))
	w.String(x.RaftAddr)
	w.String(x.ClientHost)
	w.Int(int32(x.State))
	w.Long(x.Created)
	w.Long(x.Updated)
	w.Long(x.AddedAt)
	return w.Bytes()
}

func encodeCell(c *Cell) []byte {
	w := jute.NewWriter(128)
	w.Int(recordVersion)
	w.String(c.Name)
	w.Long(int64(c.ShardID))
	encodePlacement(w, c.Placement)
	encodePlacement(w, c.Target)
	w.Int(int32(len(c.Replicas)))
	for _, r := range c.Replicas {
		w.Long(int64(r.Member))
		w.Long(int64(r.ID))
	}
	w.Long(int64(c.NextReplica))
	w.Int(int32(c.ClientPort))
	w.Int(int32(c.TLSPort))
	encodeLimits(w, c.Limits)
	w.Int(int32(c.State))
	w.Bool(c.Deletion.Forced)
	encodeEmptiness(w, c.Deletion.Empty)
	w.Long(c.Created)
	w.Long(c.Updated)
	w.Long(c.CreatedAt)
	w.Long(c.UpdatedAt)
	return w.Bytes()
}

func readRecordVersion(r *jute.Reader) {
	if v := r.Int(); v != recordVersion && r.Err() == nil {
		r.Fail(fmt.Errorf("record version %d", v))
	}
}

func decodeHeader(b []byte, m *Map) error {
	r := jute.NewReader(b)
	readRecordVersion(r)
	m.version = r.Long()
	m.nextShard = uint64(r.Long())
	m.defaultImported = r.Bool()
	return finish(r)
}

func decodeMember(b []byte) (*Member, error) {
	r := jute.NewReader(b)
	readRecordVersion(r)
	x := &Member{ID: uint64(r.Long()), RaftAddr: r.String(), ClientHost: r.String(), State: MemberState(r.Int())}
	x.Created, x.Updated, x.AddedAt = r.Long(), r.Long(), r.Long()
	return x, finish(r)
}

func decodeCell(b []byte) (*Cell, error) {
	r := jute.NewReader(b)
	readRecordVersion(r)
	c := &Cell{Name: r.String(), ShardID: uint64(r.Long())}
	c.Placement = decodePlacement(r)
	c.Target = decodePlacement(r)
	n := count(r, 16)
	for range n {
		c.Replicas = append(c.Replicas, Replica{Member: uint64(r.Long()), ID: uint64(r.Long())})
	}
	c.NextReplica = uint64(r.Long())
	c.ClientPort = decodePort(r)
	c.TLSPort = decodePort(r)
	c.Limits = decodeLimits(r)
	c.State = CellState(r.Int())
	c.Deletion.Forced = r.Bool()
	c.Deletion.Empty = decodeEmptiness(r)
	c.Created, c.Updated, c.CreatedAt, c.UpdatedAt = r.Long(), r.Long(), r.Long(), r.Long()
	return c, finish(r)
}

func finish(r *jute.Reader) error {
	if err := r.Err(); err != nil {
		return err
	}
	if r.Remaining() != 0 {
		return fmt.Errorf("%d bytes after the record", r.Remaining())
	}
	return nil
}

// record is one key and value of the map's records.
type record struct{ k, v []byte }

// records returns m's records in key order: cells, the header, members.
func records(m *Map) []record {
	out := make([]record, 0, len(m.cells)+len(m.members)+1)
	for _, c := range m.cells {
		out = append(out, record{cellKey(c.Name), encodeCell(c)})
	}
	out = append(out, record{keyHeader, encodeHeader(m)})
	for _, x := range m.members {
		out = append(out, record{memberKey(x.ID), encodeMember(x)})
	}
	return out
}

// digestOf is the digest of m's records.
func digestOf(m *Map) uint64 {
	var d uint64
	for _, r := range records(m) {
		d ^= recordHash(r.k, r.v)
	}
	return d
}

// mapLoader builds a map from its records, given in key order.
type mapLoader struct {
	m      *Map
	header bool
	digest uint64
}

func newMapLoader() *mapLoader { return &mapLoader{m: &Map{}} }

func (l *mapLoader) add(k, v []byte) error {
	l.digest ^= recordHash(k, v)
	switch {
	case string(k) == string(keyHeader):
		l.header = true
		return decodeHeader(v, l.m)
	case k[0] == prefixCell:
		c, err := decodeCell(v)
		if err != nil {
			return fmt.Errorf("cell %q: %w", k[1:], err)
		}
		if c.Name != string(k[1:]) {
			return fmt.Errorf("cell %q stored under %q", c.Name, k[1:])
		}
		if n := len(l.m.cells); n > 0 && strings.Compare(l.m.cells[n-1].Name, c.Name) >= 0 {
			return fmt.Errorf("cell %q out of order", c.Name)
		}
		l.m.cells = append(l.m.cells, c)
	case k[0] == prefixMember:
		x, err := decodeMember(v)
		if err != nil {
			return fmt.Errorf("member key %x: %w", k, err)
		}
		if len(k) != 9 || binary.BigEndian.Uint64(k[1:]) != x.ID {
			return fmt.Errorf("member %d stored under %x", x.ID, k)
		}
		if n := len(l.m.members); n > 0 && l.m.members[n-1].ID >= x.ID {
			return fmt.Errorf("member %d out of order", x.ID)
		}
		l.m.members = append(l.m.members, x)
	default:
		return fmt.Errorf("unknown key %q", k)
	}
	return nil
}

// done returns the loaded map, checked.
func (l *mapLoader) done() (*Map, uint64, error) {
	if !l.header {
		return nil, 0, fmt.Errorf("no header record")
	}
	if err := l.m.check(); err != nil {
		return nil, 0, err
	}
	return l.m, l.digest, nil
}
