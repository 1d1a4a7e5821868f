// Package server owns the client-facing side of a member: listeners,
// connections and framing, the per-connection request pipeline, proposing
// and reading through Dragonboat, the member-local watch registry, session
// keep-alive batching and leader-only expiry.
//
// It may import raftsm, znode, session and jute. Its caller (cmd/zkraft)
// builds a Config, calls New and Start, and Close stops everything the
// server started.
package server
