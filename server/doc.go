// Package server owns the client-facing side of a member: listeners,
// connections and framing, the per-connection request pipeline, proposing
// and reading through Dragonboat, the member-local watch registry, session
// keep-alive batching and leader-only expiry.
//
// One place for each table of facts: optable.go says how each op code is
// answered (with jute's op table, everything known about an op), and
// reads.go has one named handler per read op; commands.go is the registry
// of operator commands that fourlw.go (four-letter words) and admin.go (the
// AdminServer) serve; figures.go lists each figure mntr and the Prometheus
// endpoint show, once.
//
// It may import raftsm, znode, session and jute. Its caller (cmd/zkraft)
// builds a Config, calls New and Start, and Close stops everything the
// server started.
package server
