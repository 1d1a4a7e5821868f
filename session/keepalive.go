package session

import (
	"slices"
	"sync"
)

// KeepAlives is the member-local set of sessions heard from since the last
// Drain (pings or any request). Once per tick the caller drains it and
// proposes the batch, so keep-alives cost one Raft entry per tick rather than
// one per packet.
//
// Safe for concurrent use. The zero value is ready to use.
type KeepAlives struct {
	mu struct {
		sync.Mutex
		ids map[int64]struct{}
	}
}

// Record notes that sessionID was heard from. It is cheap: called per packet.
func (k *KeepAlives) Record(sessionID int64) {
	k.mu.Lock()
	if k.mu.ids == nil {
		k.mu.ids = make(map[int64]struct{})
	}
	k.mu.ids[sessionID] = struct{}{}
	k.mu.Unlock()
}

// Drain returns the recorded sessions sorted ascending and empties the set.
// It returns nil when nothing was recorded.
func (k *KeepAlives) Drain() []int64 {
	k.mu.Lock()
	ids := k.mu.ids
	k.mu.ids = nil
	k.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	out := make([]int64, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// RecordAll notes that every session in ids was heard from, under one
// lock: a proxy's keep-alive batch.
func (k *KeepAlives) RecordAll(ids []int64) {
	if len(ids) == 0 {
		return
	}
	k.mu.Lock()
	if k.mu.ids == nil {
		k.mu.ids = make(map[int64]struct{}, len(ids))
	}
	for _, id := range ids {
		k.mu.ids[id] = struct{}{}
	}
	k.mu.Unlock()
}
