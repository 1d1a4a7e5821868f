package raftsm

import (
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

// TreeStats walks the whole tree once. It is O(nodes): a member calls it
// when it opens a store or installs a snapshot and keeps the figures up to
// date from the applied events (Event.Size, Event.Ephemeral) afterwards.
func (v View) TreeStats() (TreeStats, error) {
	var st TreeStats
	lo := []byte{spaceNode}
	it := v.kv.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		n, err := znode.DecodeNode(it.Value())
		if err != nil {
			it.Close()
			return st, err
		}
		st.Nodes++
		// The key is 'n' parent 0x00 name; the path is parent "/" name,
		// without a second '/' under the root, and "/" for the root.
		plen := int64(len(k) - 1) // parent + name + the separator
		if len(k) == 2 {
			plen = 1
		} else if k[1] == '/' && k[2] == 0 {
			plen--
		}
		st.DataSize += plen + int64(len(n.Data))
	}
	if err := it.Error(); err != nil {
		it.Close()
		return st, err
	}
	if err := it.Close(); err != nil {
		return st, err
	}
	lo = []byte{spaceEphemeral}
	it = v.kv.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	for it.First(); it.Valid(); it.Next() {
		st.Ephemerals++
	}
	if err := it.Error(); err != nil {
		it.Close()
		return st, err
	}
	return st, it.Close()
}

// EphemeralsByOwner lists every session's ephemeral paths (for the dump
// four-letter word), owners and paths in ascending order.
func (v View) EphemeralsByOwner() (owners []int64, paths [][]string, err error) {
	lo := []byte{spaceEphemeral}
	it := v.kv.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) < 9 {
			continue
		}
		owner := int64(uint64(k[1])<<56 | uint64(k[2])<<48 | uint64(k[3])<<40 | uint64(k[4])<<32 |
			uint64(k[5])<<24 | uint64(k[6])<<16 | uint64(k[7])<<8 | uint64(k[8]))
		if len(owners) == 0 || owners[len(owners)-1] != owner {
			owners = append(owners, owner)
			paths = append(paths, nil)
		}
		paths[len(paths)-1] = append(paths[len(paths)-1], string(k[9:]))
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, nil, err
	}
	return owners, paths, it.Close()
}

// StoreMetrics returns the Pebble store's metrics (sizes, compactions).
func (v View) StoreMetrics() *pebble.Metrics { return v.db.Metrics() }

// AppliedIndex is the Raft index of the last applied entry.
func (v View) AppliedIndex() (uint64, error) {
	n, err := getInt64(v.kv.r, keyApplied)
	return uint64(n), err
}
