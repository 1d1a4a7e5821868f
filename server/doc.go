// Package server owns the client-facing side of a member: listeners (plain
// and TLS), connections and framing, the per-connection request pipeline,
// proposing and reading through Dragonboat, the member-local watch
// registry and the server side of the resumable watch (watchFrom), the
// per-tick keep-alive batch and, on the Raft leader only, session expiry
// (both decided by package session, proposed from here), ensemble
// membership and reconfig, and the connection's side of authentication
// (addAuth, the SASL exchange, the TLS client certificate, enforced
// schemes, the AdminServer's AuthRequest against an ACL), the providers
// and mechanisms themselves being package auth's. The
// operator surfaces (four-letter words, the AdminServer, mntr and the
// Prometheus figures) are package operator's: operator.go implements its
// Member (a cellView: one cell of this member) and Host (the Server), and
// adds the member's own commands (the fleet's cells, shed_connections,
// snapshot) to its registry; metrics.go keeps the request instruments.
//
// One place for each table of facts: optable.go says how each op code is
// answered (with jute's op table, everything known about an op), and
// reads.go has one named handler per read op; the operator commands and
// the figures mntr and the Prometheus endpoint show are listed once, in
// package operator.
//
// Every goroutine has an owner: the go statements and time.AfterFunc
// calls are in goroutines.go only, which counts them and refuses new ones
// once Close has begun; Close waits for all of them before it closes the
// NodeHost (TestGoroutinesHaveOneOwner, TestCloseLeavesNoGoroutine).
//
// Lock order. A lock is taken only while holding locks above it in this
// list (never one below it), and each is released before calling out of
// its type unless this list allows the call:
//
//  1. the state machine's lock (raftsm): Applied (the EventSink) and the
//     LockedReadFunc reads run under it.
//  2. resumables.mu, then a resumable's mu (resumable.go): live events are
//     delivered under both.
//  3. registry.mu (watch.go): the watch tables, the recent triggers, each
//     connection's watchKeys and held notifications.
//  4. cell.mu (cell.go): session owners and keep-alive indexes; taken
//     under 1 only, and released before a connection is told anything.
//  5. conn.q, then conn.out (conn.go): a connection's queue and outbox;
//     notifications are queued in the outbox under 1 and 2 or 3.
//  6. Server.mu (server.go): the connection table.
//  7. goroutines.mu, then goroutines.timers (goroutines.go): a goroutine
//     may be started with any lock above held.
//
// fleetMember.mu (fleet.go: the cells hosted here) comes before every lock
// of a cell (2 to 5) and Server.mu. The proxy tier's upstream connections
// (upstream.go): upstreams.mu, then an upstream's locks, never the other
// way; a proxy's shared watch (version 2) is fired under registry.mu (3),
// which then takes the upstream's mu (its channels' auth, for the Event's
// denied list) and its outbox's lock.
//
// Leaves, under which nothing else is taken: outstandingLimit.mu (taken
// with no other lock held, limits.go), cell.servingMu, connStats.mu (then
// its latency's mu, stats.go), peerListener.mu (ops.go), Server.cellsMu,
// auditLog.mu (audit.go), a cell's tokenBucket.mu (celllimits.go),
// snapshotLimiter.mu (snapshotstream.go), a cell's sessionBatcher.mu
// (sessionbatch.go: the queue of proxied channels' handshakes, which are
// proposed together as raftsm.KindSessions batches).
//
// The connection pipeline and the cell's loops reach the shard through
// the replica interface (replica.go: propose, linearizable and local
// reads, membership), which raftReplica (raft.go) implements over
// Dragonboat: only raft.go sees Dragonboat's request states, and no Lookup
// result is type-asserted (readValue returns each read's value typed).
//
// It may import raftsm, fleet, znode, session and jute, auth, operator
// and console, Dragonboat and the Prometheus client; never Pebble (the store
// is raftsm's: its views, figures and checks), zkdata, the client tree or
// cmd (internal/layout's test checks it).
//
// Its caller (cmd/zkraft) fills in a Config (each field's zero value is
// documented; New calls Validate to apply the defaults), calls New, which
// opens the data directories, starts the replica, waits for the shard to
// have a leader and starts listening, and calls Close, which stops
// everything New started and waits for it. The offline commands that start
// a replica without serving clients (export) use NodeHostConfig so that
// they open the same Raft directories.
package server
