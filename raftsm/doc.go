// Package raftsm is the Dragonboat on-disk state machine: command encoding,
// the Pebble key layout, Update/Lookup/snapshots. Update is deterministic: it
// reads nothing but its entries and its store (no clock, no randomness, no
// map-order output) and writes data, sessions, zxid and the applied index in
// one Pebble batch.
//
// It may import znode, session, jute, Dragonboat's statemachine package and
// Pebble; never the server or anything that knows about sockets. Its caller
// registers an EventSink to receive watch triggers and session changes as
// they are applied.
package raftsm
