package session

import (
	"slices"
	"time"
)

// Deadlines groups the tracked sessions by deadline, as ZooKeeper's dump
// prints its expiry buckets; ids within a bucket are ascending. n is the
// number of sessions.
func (t *Tracker) Deadlines() (buckets map[time.Time][]int64, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	buckets = map[time.Time][]int64{}
	for id, e := range t.mu.sessions {
		d := time.Unix(0, e.deadline)
		buckets[d] = append(buckets[d], id)
	}
	for _, ids := range buckets {
		slices.Sort(ids)
	}
	return buckets, len(t.mu.sessions)
}

// Deadline returns a session's current deadline.
func (t *Tracker) Deadline(sessionID int64) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.mu.sessions[sessionID]
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, e.deadline), true
}
