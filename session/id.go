package session

import (
	"math"
	"sync/atomic"
)

// IDGenerator issues session ids laid out as ZooKeeper's SessionTrackerImpl
// does: the top byte is the member id, bits 16-55 are the low 40 bits of a
// millisecond clock reading taken at start (((ms << 24) >>> 8)), and each
// later session adds one. It never issues 0 (the "new session" id in a
// ConnectRequest) nor math.MinInt64 (0x8000000000000000, which ZooKeeper
// reserves because it collides with the TTL ephemeralOwner marker).
//
// Safe for concurrent use.
type IDGenerator struct {
	next atomic.Int64 // the next candidate id
}

// NewIDGenerator returns a generator for member memberID whose first id is
// derived from startMillis.
func NewIDGenerator(memberID uint8, startMillis int64) *IDGenerator {
	first := int64(uint64(startMillis<<24)>>8) | int64(memberID)<<56
	g := &IDGenerator{}
	g.next.Store(first)
	return g
}

// Next returns a fresh session id.
func (g *IDGenerator) Next() int64 {
	for {
		id := g.next.Add(1) - 1
		if id != 0 && id != math.MinInt64 {
			return id
		}
	}
}
