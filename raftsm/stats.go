package raftsm

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble"

	"github.com/zkraft/zkraft/znode"
)

// TreeStats are the figures ZooKeeper's mntr reports about the data tree.
type TreeStats struct {
	// Nodes counts the znodes, the root included once.
	Nodes int64
	// Ephemerals counts the nodes owned by sessions.
	Ephemerals int64
	// DataSize is ZooKeeper's approximate data size: the sum over nodes of
	// path length plus data length.
	DataSize int64
}

// keyStats holds the TreeStats of the applied state: three big-endian
// int64s. Update keeps them with every write (storeKV), so reading them
// costs O(1) on any tree; Open recomputes them in the pass that checks the
// digest.
var keyStats = []byte("m:stats")

func putStats(w writer, st TreeStats) error {
	var v [24]byte
	binary.BigEndian.PutUint64(v[0:], uint64(st.Nodes))
	binary.BigEndian.PutUint64(v[8:], uint64(st.Ephemerals))
	binary.BigEndian.PutUint64(v[16:], uint64(st.DataSize))
	return w.Set(keyStats, v[:], nil)
}

func storedStats(r reader) (TreeStats, bool, error) {
	v, err := getValue(r, keyStats)
	if err != nil || v == nil {
		return TreeStats{}, false, err
	}
	if len(v) != 24 {
		return TreeStats{}, false, fmt.Errorf("%w: tree stats of %d bytes", ErrDamaged, len(v))
	}
	x := func(i int) int64 { return int64(binary.BigEndian.Uint64(v[8*i:])) }
	return TreeStats{Nodes: x(0), Ephemerals: x(1), DataSize: x(2)}, true, nil
}

// TreeStats are the figures of the view's state, as Update kept them.
func (v View) TreeStats() (TreeStats, error) { return v.stats, nil }

// dataLen is the length of a stored node's data: the record's buffer
// after its version (znode.Node.Encode), read without decoding the rest.
func dataLen(rec []byte) (int64, error) {
	if len(rec) < 8 {
		return 0, fmt.Errorf("%w: node record of %d bytes", znode.ErrCorruptNode, len(rec))
	}
	return max(0, int64(int32(binary.BigEndian.Uint32(rec[4:8])))), nil
}

// EphemeralsByOwner lists every session's ephemeral paths (for the dump
// four-letter word), owners and paths in ascending order.
func (v View) EphemeralsByOwner() (owners []int64, paths [][]string, err error) {
	lo := []byte{spaceEphemeral}
	it := v.tree.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) < 9 {
			continue
		}
		owner := int64(binary.BigEndian.Uint64(k[1:9]))
		if len(owners) == 0 || owners[len(owners)-1] != owner {
			owners = append(owners, owner)
			paths = append(paths, nil)
		}
		paths[len(paths)-1] = append(paths[len(paths)-1], string(it.Value()))
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, nil, err
	}
	if err := it.Close(); err != nil {
		return nil, nil, err
	}
	for _, p := range paths {
		slices.Sort(p) // keyed by hash: sorted here
	}
	return owners, paths, nil
}

// StoreFigures are the figures of a replica's Pebble store that the
// member's metrics show, so that the server need not know Pebble.
type StoreFigures struct {
	DiskBytes     uint64  // disk space used
	MemTableBytes uint64  // memtable size
	WALBytes      uint64  // write-ahead log size
	LevelBytes    []int64 // sstable bytes by level
	Compactions   int64   // compactions run
}

// StoreFigures returns the Pebble store's figures (sizes, compactions).
func (v View) StoreFigures() *StoreFigures {
	m := v.db.Metrics()
	f := &StoreFigures{DiskBytes: m.DiskSpaceUsage(), MemTableBytes: m.MemTable.Size, WALBytes: m.WAL.Size,
		Compactions: m.Compact.Count, LevelBytes: make([]int64, len(m.Levels))}
	for i := range m.Levels {
		f.LevelBytes[i] = m.Levels[i].Size
	}
	return f
}

// AppliedIndex is the Raft index of the last applied entry.
func (v View) AppliedIndex() (uint64, error) {
	n, err := getInt64(v.tree.r, keyApplied)
	return uint64(n), err
}
