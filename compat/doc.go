// Package compat holds what goes beyond or around ZooKeeper. The package
// itself reads and writes Apache ZooKeeper's on-disk formats, for `zkraft
// import` and `zkraft export`; its subpackages hold the Go client of the
// revision-resumable watch extension (resumable), fencing-token recipes
// (recipes), and test helpers that drive a real ZooKeeper (zktest).
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
// compat may import jute and znode only, never raftsm or the server: the
// command (cmd/zkraft) moves a Tree into and out of zkraft's state machine.
package compat
