package proxy

import (
	"slices"

	"github.com/zkraft/zkraft/proxy/wire"
)

// What the operator surfaces show of watches: a session's watches are its
// entries in its upstream connection's fan-out lists (watches.go), one per
// table and path as a member counts them. With upstream protocol version 1
// (no shared watches) the proxy keeps no watch of its own: every watch is
// the member's, on the session's channel, and the proxy shows none.

// clientWatches are the paths of c's watches in the data table (getData,
// exists, persistent and recursive) and the child table, sorted.
func (c *client) clientWatches() (data, child []string) {
	up := c.up.Load()
	if up == nil || up.sw == nil {
		return nil, nil
	}
	sw := up.sw
	sw.mu.Lock()
	for k := range c.subs {
		if k.table == wire.WatchTableChild {
			child = append(child, k.path)
		} else {
			data = append(data, k.path)
		}
	}
	sw.mu.Unlock()
	slices.Sort(data)
	slices.Sort(child)
	// A path held persistent and recursive is one watch of the table.
	return slices.Compact(data), slices.Compact(child)
}

// upstreamWatches is the number of shared watches the member holds for
// the upstream connection u (0 for a version 1 connection).
func (u *upConn) upstreamWatches() int {
	if u == nil || u.sw == nil {
		return 0
	}
	n, _ := u.sw.counts()
	return n
}
