package server

import (
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// tanReadEntries is the most entries one read of tan returns when the
// reader asks for more under a byte limit (the leader replicating to a
// follower that lags).
//
// Why: a Dragonboat leader builds a Replicate message on its step worker,
// the goroutine that runs the whole shard, and asks the log store for every
// entry from the follower's next index up to 64 MiB
// (internal/raft/raft.go makeReplicateMessage, maxEntrySize =
// settings.Soft.MaxEntrySize). While the follower is in the Retry state
// (after a pause or a partition) it does so again on every heartbeat
// response (handleLeaderHeartbeatResp: waitToRetry, sendReplicateMessage),
// ten times a second, until the follower acknowledges. tan reads an entry
// range one index entry at a time, and keeps one index entry per update it
// wrote (internal/tan/db.go updateIndex leaves indexEntry.length at 0, so
// index.go indexEntry.merge never merges): each one opens the log file,
// allocates a 32 KiB reader, seeks, reads a block and decodes the whole
// update (db.readLog). A gap of 3,470 entries was 3,182 such reads:
// 60 ms to 1.1 s each on the loaded 2-core test machine (load average
// 17-20), against ~100 ms between heartbeat responses, so the step worker
// fell behind, its own heartbeats and the other follower's
// acknowledgements waited, nothing committed, the other follower called
// an election and sessions expired (faulttest, 15-42 s stalls). The
// Pebble store reads such a range with one iterator.
//
// At most tanReadEntries records per read bounds that to a few
// milliseconds; Raft sends a lagging follower its entries in more, smaller
// messages (the next one as soon as it acknowledges), as it does when the
// byte limit is reached.
const tanReadEntries = 128

// tanLogDB is Dragonboat's tan with reads bounded to tanReadEntries.
type tanLogDB struct {
	raftio.ILogDB
}

// IterateEntries reads [low, high) as tan does, but at most tanReadEntries
// entries when maxSize is set (tanReadEntries+1: the last stands for
// the one that would have gone over). A shorter answer is reported as one
// whose size exceeds maxSize: Dragonboat's LogReader
// (internal/logdb/logreader.go entriesLocked) takes a result shorter than
// the range as a gap unless its size exceeds maxSize, and its caller
// (internal/raft/logentry.go getEntriesFromLogDB) then returns the entries
// read without appending the in-memory ones after them, so Raft sends what
// was read and the rest in later messages. maxSize 0 (no limit:
// Dragonboat's reads of one entry's term) is passed through.
func (l tanLogDB) IterateEntries(ents []pb.Entry, size uint64, shardID, replicaID, low, high, maxSize uint64) ([]pb.Entry, uint64, error) {
	if maxSize == 0 || high <= low || high-low <= tanReadEntries+1 {
		return l.ILogDB.IterateEntries(ents, size, shardID, replicaID, low, high, maxSize)
	}
	had := len(ents)
	ents, size, err := l.ILogDB.IterateEntries(ents, size, shardID, replicaID, low, low+tanReadEntries+1, maxSize)
	if err != nil || size > maxSize {
		return ents, size, err
	}
	if len(ents)-had == tanReadEntries+1 {
		size = maxSize + 1
	}
	return ents, size, nil
}
