// Package raftsm is the Dragonboat on-disk state machine: command encoding,
// the Pebble key layout (keys.go, format 2; convert.go reads format 1),
// Update/Lookup/snapshots, the change history behind resumable watches and
// the store's digest.
//
// Update is deterministic: it reads nothing but its entries and its store
// (no clock, no randomness, no map-order output) and writes data,
// sessions, history, zxid, digest and the applied index in one Pebble
// batch. Keys hold hashes of paths and at most a 16-byte prefix of a name,
// never a path, so no key grows with a path's depth or length.
//
// Reads never hold up Update: Lookup runs a ReadFunc on a Pebble snapshot
// outside the lock Update holds. Whatever a read registers to hear about
// later changes must be registered as of View.Zxid (the caller keeps that
// ordering; the server's watch registry catches a watch up from it). A
// LockedReadFunc runs under the lock instead, for the short reads that
// must be atomic with the event stream (opening a history iterator with a
// live watcher).
//
// Open checks the store against its digest and refuses one that lost or
// changed data (ErrDamaged); it converts a format 1 store in place.
//
// The store keeps no WAL of its own: the Raft log is its write-ahead log
// (liveOptions in sm.go has the argument). Update's batch goes to the
// memtable only; Sync, which Dragonboat calls before it records a snapshot
// and so before it compacts the log, flushes; Open reports the index the
// tables hold and Dragonboat replays the log after it. After a kill the
// newest WAL of the Raft log is then the only copy of what was applied
// since the last flush, so each Update also writes the applied mark
// (mark.go), which survives a kill: the member refuses a Raft log that
// ends below it rather than serve without acknowledged writes (server's
// checkStores; docs/operations.md, Damaged data files).
//
// ImportState and ExportState write a whole tree into a fresh store and
// read one back out of a stopped one, for zkraft import and export.
//
// It may import znode, session, jute, Dragonboat's statemachine package and
// Pebble; never the server, zkdata or anything that knows about sockets
// (internal/layout's test checks it). Its caller hands it an EventSink in
// Config to receive watch triggers, session changes, keep-alives and
// resets as they are applied; the sink is called with the state machine's
// write lock held, so it must not block or call back into the state
// machine. Every replica of a shard must be given the same Options.
package raftsm
