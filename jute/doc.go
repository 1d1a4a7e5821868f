// Package jute owns ZooKeeper's wire records: the Jute binary encoding, one Go
// type per record, and the named constants of the protocol (op codes, error
// codes, event types, keeper states, special xids, create flags, permissions).
//
// It imports the standard library only and knows nothing of sockets, trees or
// Raft. Decoding is hand-written and bounds-checked: a short or malformed
// buffer is an error returned to the caller, never a panic.
//
// Callers frame records themselves (see AppendFrame) and must check
// Reader.Err after decoding.
package jute
