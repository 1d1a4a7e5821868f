// Package jute owns ZooKeeper's wire records: the Jute binary encoding, one Go
// type per record, and the named constants of the protocol (op codes, error
// codes, event types, keeper states, special xids, create flags, permissions).
//
// It imports the standard library only and knows nothing of sockets, trees or
// Raft. Decoding is hand-written and bounds-checked: a short or malformed
// buffer is an error returned to the caller, never a panic.
//
// Each op code has one entry in the op table (table.go, OpSpec): its name,
// its request and reply records, whether it is a write and whether a multi
// may hold it. NewRequest, NewResponse, OpCode.String and AllOpCodes read
// that table, and so do the layers above (znode.IsWrite, the server's own
// table of how each op is answered): a new op is a constant, one table
// entry and its records here, then its handler above.
//
// Callers frame records themselves (see AppendFrame) and must check
// Reader.Err after decoding. Unmarshal, AppendRecord and AppendFrame lend
// a Record pooled Readers and Writers: a Record's Decode and Encode must
// not keep them. Decoded strings never alias the input (the common ACL
// schemes and ids are shared constants); a shared Reader's buffers do.
package jute
