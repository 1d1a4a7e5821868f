package raftsm

import (
	"encoding/binary"
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

// TreeStats walks the whole tree once. It is O(nodes): a member calls it
// when it opens a store or installs a snapshot and keeps the figures up to
// date from the applied events (Event.Size, Event.Ephemeral) afterwards.
func (v View) TreeStats() (TreeStats, error) {
	var st TreeStats
	lo := []byte{spaceNode}
	it := v.tree.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	for it.First(); it.Valid(); it.Next() {
		plen, rec, err := splitNodeValue(it.Value())
		if err != nil {
			it.Close()
			return st, err
		}
		n, err := znode.DecodeNodeShared(rec)
		if err != nil {
			it.Close()
			return st, err
		}
		st.Nodes++
		st.DataSize += int64(plen) + int64(len(n.Data))
	}
	if err := it.Error(); err != nil {
		it.Close()
		return st, err
	}
	if err := it.Close(); err != nil {
		return st, err
	}
	lo = []byte{spaceEphemeral}
	it = v.tree.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
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

// StoreMetrics returns the Pebble store's metrics (sizes, compactions).
func (v View) StoreMetrics() *pebble.Metrics { return v.db.Metrics() }

// AppliedIndex is the Raft index of the last applied entry.
func (v View) AppliedIndex() (uint64, error) {
	n, err := getInt64(v.tree.r, keyApplied)
	return uint64(n), err
}
