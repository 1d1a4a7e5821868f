// Package resumable is the Go client of zkraft's resumable-watch extension:
// WatchFrom streams every change under a path after a zxid, in zxid order,
// each transaction's changes together, and resumes by itself after a
// disconnect, on any member of the ensemble, from the last zxid it
// delivered, with no gap and no duplicate. It works beside a
// github.com/go-zookeeper/zk connection: it keeps its own connection (and
// session) for the stream.
//
// A server announces the extension with the node /zookeeper/zkraft
// (data "watchFrom=1"). Against a server without it WatchFrom fails with
// ErrUnsupported; when the requested zxid is older than the server's
// retained history it fails with *ErrCompacted, which carries the oldest
// zxid still available, so the caller can re-read the tree and watch from
// there.
//
// It speaks the wire protocol itself and imports no zkraft package but
// jute; it must never import the server, raftsm, znode or session, so that
// a client program does not pull in Dragonboat or Pebble and the stream is
// what any member serves over TCP.
//
// The caller must:
//
//  1. choose the zxid to start from: one its own state already reflects
//     (the last Txn.Zxid it applied, kept with that state), so the stream
//     neither skips nor repeats a change;
//  2. drain Watch.Txns: while its buffer is full the stream stops reading
//     from the server;
//  3. when Txns closes, look at Watch.Err: a lost connection is retried
//     on the next address for ever, so Txns closes only when a server
//     refused the watch (*ErrCompacted, ErrUnsupported, or another error
//     code such as for a zxid from the future) or after Close (Err nil);
//  4. call Watch.Close when done, which stops the stream's goroutines and
//     closes its session.
package resumable
