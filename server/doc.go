// Package server owns the client-facing side of a member: listeners (plain
// and TLS), connections and framing, the per-connection request pipeline,
// proposing and reading through Dragonboat, the member-local watch
// registry and the server side of the resumable watch (watchFrom), the
// per-tick keep-alive batch and, on the Raft leader only, session expiry
// (both decided by package session, proposed from here), ensemble
// membership and reconfig, authentication (digest, SASL, x509), and the
// operator surfaces: four-letter words, the AdminServer and Prometheus
// metrics.
//
// One place for each table of facts: optable.go says how each op code is
// answered (with jute's op table, everything known about an op), and
// reads.go has one named handler per read op; commands.go is the registry
// of operator commands that fourlw.go (four-letter words) and admin.go (the
// AdminServer) serve; figures.go lists each figure mntr and the Prometheus
// endpoint show, once.
//
// It may import raftsm, znode, session and jute, Dragonboat, Pebble (for
// the store's metrics) and the Prometheus client; never zkdata, the client
// tree or cmd (internal/layout's test checks it).
//
// Its caller (cmd/zkraft) fills in a Config (each field's zero value is
// documented; New calls Validate to apply the defaults), calls New, which
// opens the data directories, starts the replica, waits for the shard to
// have a leader and starts listening, and calls Close, which stops
// everything New started and waits for it. The offline commands that start
// a replica without serving clients (export) use NodeHostConfig so that
// they open the same Raft directories.
package server
