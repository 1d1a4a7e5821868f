// Package storecheck checks the files of a stopped member's data directory
// before the libraries that own them open them, and names the damaged file
// when one of them fails to open.
//
// It knows two kinds of files: Dragonboat's flag files (dragonboat.ds,
// NODEHOST.ID, a snapshot's snapshot.metadata), which Dragonboat panics on
// when they are damaged, and Pebble stores (the Raft log store's shards and
// the state machine's store). A store is checked with Pebble itself: it is
// opened read-only (which changes nothing on disk and deletes nothing) and
// the checksum of every block of every live table is verified. What Pebble
// reports is classified with Pebble's own corruption marker; what Pebble
// accepts silently (a WAL or MANIFEST cut at a record boundary looks like
// the end of the file) cannot be seen here, which is why the member also
// compares what the stores say with each other (server). One such cut is
// seen: a MANIFEST that lost its newest records lists tables a compaction
// has since replaced, and when Pebble fails on them while the store holds
// tables the MANIFEST does not list, the MANIFEST is named, not a table.
//
// It also reads Dragonboat's other log store, tan (CheckTan), record by
// record, because tan cuts a log short where a record stops decoding,
// anywhere in the file, and panics on a checksum mismatch: everything but
// the torn tail a crash leaves at the end of a replica's newest log is
// named as damage before tan sees it.
//
// The one repair it makes is of a file that holds no data: an OPTIONS file
// Pebble cannot parse is moved aside (Pebble writes a new one when it opens
// the store).
//
// It may import Pebble, Dragonboat's raftpb (to decode tan's records) and
// the standard library; nothing of zkraft. Its
// caller runs it before starting Dragonboat on the data directory, and calls
// Diagnose (or LostWrites) when a store failed to open or proved to have
// lost writes, to learn which file to name.
package storecheck
