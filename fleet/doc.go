// Package fleet is the state machine of the system shard: the fleet's cell
// map, changed only through the shard's Raft log, so that every member
// agrees on it and a restarted member recovers it from its own store.
//
// It owns the model (model.go): the members of the fleet (id, Raft
// address, client host, active or leaving), the cells (name, shard id,
// placement of voters and observers with the Dragonboat replica id of
// each, client and TLS port, limits, state, created and updated versions)
// and the rules that keep them consistent; the commands that change it and
// their encoding (command.go); the Dragonboat on-disk state machine that
// applies them to a Pebble store (sm.go, store.go) and streams it as a
// snapshot (snapshot.go). docs/cells.md describes the model and the
// commands for operators.
//
// Update is deterministic: it reads nothing but its entries and its store
// (no clock, no randomness, no goroutine, no map: every collection is a
// sorted slice; lint_test.go enforces it). The proposer's wall time
// travels in each command. A command the map refuses (a stale version, a
// taken port, an unknown kind at a known version, bytes that do not
// decode) is a result, Reply.Code, and changes nothing; only a command of
// a newer version than the binary knows (ErrNewerCommand) or a storage
// error stops the replica. Each Update writes the records it changed, the
// digest of all records and the applied index in one Pebble batch; Open
// checks the records against the digest (ErrDamaged).
//
// Reads never wait for Update beyond taking a pointer: a *Map is immutable
// (Update builds a new one), so Lookup hands it out and a reader may keep
// it. Lookup answers MapQuery (the *Map), Query (a function of the map) and
// StatusQuery (applied index, version, digest).
//
// It may import jute, Dragonboat's statemachine package and Pebble; never
// the server, raftsm, cmd or anything that knows sockets (net/netip's
// address values are fine; internal/layout's test checks it).
//
// Its caller (the server) must:
//
//  1. Start the system shard with NewFactory on SystemShardID, on the
//     fleet's voting members, with the same Config on every replica, and
//     each replica's Raft address the member's RaftAddr.
//  2. Propose Encode(cmd, now) through the shard and read the outcome with
//     ParseResult; a refusal is Reply.Code with Reply.Detail, not an error.
//     Commands carry Expect, the version of the record the operator saw.
//  3. Propose ImportDefault at start with today's configuration, before
//     anything else; it changes nothing once the default cell is imported.
//  4. Read the map linearizably (SyncRead with MapQuery) before a decision
//     that must see every change (what to start, whether a port is free),
//     or keep the *Map the EventSink is handed for local decisions.
//  5. Hand an EventSink in Config that does not block and does not call
//     back into the state machine: it runs under the state machine's lock.
//     It is called once at Open with the stored map and no events, after
//     every Update that changed the map, and with EventReset after a
//     snapshot replaced the map.
//  6. Never propose a command of a newer CommandVersion until every voter of
//     the system shard runs a binary that knows it.
//  7. Attest emptiness for DeleteCell honestly: the map cannot see a
//     cell's data. Read the cell's own shard linearizably for its znodes
//     outside /zookeeper and its sessions, and pass them with the zxid
//     read at; a write that lands between that read and the delete is lost
//     with the cell unless the cell's log refuses writes first
//     (docs/cells.md, "Deleting a cell").
package fleet
