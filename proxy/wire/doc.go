// Package wire is the upstream protocol between a zkraft proxy and a
// member (docs/proxy.md): zkraft's own versioned extension of Jute's
// framing that carries many client connections (channels) over one TCP
// connection. It holds the frame kinds, the records of the control frames
// and a bounded frame reader; nothing else.
//
// It imports jute and the standard library only, and never a socket
// package: its callers (server's upstream listener, package proxy) own the
// connections and hand it readers and buffers.
//
// Its callers must send Hello first (proxy) and answer it with Accept
// (member) before any other frame, read frames with ReadFrame's bound, and
// close the connection on any error it returns: a frame that does not
// decode is never skipped.
package wire
