// Package znode owns the data-tree rules of ZooKeeper: path validation, Stat
// maintenance, create modes and sequential naming, version checks, ACL checks,
// and which watches each change triggers. The rules are pure functions over
// the small KV interface defined here; they never touch a clock, a random
// source, a socket or Raft.
//
// It may import jute and the standard library only. Its caller (raftsm)
// supplies a transactional store and the time of the transaction, and must
// discard the store's writes when an operation fails.
package znode
