// Package zkdata reads and writes Apache ZooKeeper's on-disk formats: the
// snapshots and transaction logs of a ZooKeeper data directory, for
// `zkraft import` and `zkraft export`. It has one purpose, to turn such a
// directory into a Tree and a Tree back into one, exactly as ZooKeeper 3.8
// would.
//
// Reading a ZooKeeper data directory (Restore) is what ZooKeeper 3.8 does
// at startup: it loads the newest snapshot that reads cleanly (plain, .gz,
// or .snappy in snappy-java's stream framing), checks its Adler32 seals
// and, where present, the tree digest, then replays the transaction logs
// after it with ZooKeeper's idempotent rules (a snapshot is fuzzy: NODEEXISTS
// and NONODE are ignored, a parent's cversion only ever rises, versions are
// absolute), and finally recounts quota usage and deletes the ephemerals of
// sessions that are gone. The result is a Tree: every znode with the Stat
// ZooKeeper stores (cversion counts child creates), its data and ACL, the
// open sessions with their timeouts, and the last zxid.
//
// Writing (WriteSnapshot, WriteDataDir) produces a snapshot ZooKeeper 3.8
// loads: the same sections in the same order, seal, digest, second seal,
// and an empty transaction log beside it.
//
// Bad input (a truncated file, a checksum mismatch, a wrong magic number,
// garbage) is an error that names the file and the offset, never a panic.
//
// zkdata imports jute and znode only (and the standard library and a
// snappy codec); it must never import raftsm, the server or anything that
// knows Raft, Pebble or sockets, so that what it reads is ZooKeeper's view
// of the data and nothing of zkraft's.
//
// Its caller (cmd/zkraft) moves a Tree into and out of zkraft's state
// machine, and must:
//
//  1. run it on a data directory no ZooKeeper is writing to: Restore takes
//     no lock, and WriteDataDir refuses a directory that already holds
//     snapshots or logs (ErrExists) but cannot tell whether a server is
//     about to write one;
//  2. decide what a recorded digest that differs from the replayed tree
//     means: Restore reports it in Restored.DigestMismatches and does not
//     fail (ErrDigestMismatch is for the caller to return);
//  3. hand WriteDataDir a whole tree, read from a stopped store: it writes
//     what it is given, as snapshot.<t.Zxid> with log.<t.Zxid+1> after it.
package zkdata
