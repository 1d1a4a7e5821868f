// Package session owns ZooKeeper sessions outside the replicated tree: session
// ids, passwords (derived from the id exactly as ZooKeeper derives them),
// timeout negotiation, the member-local keep-alive set that turns pings into
// one batch per tick, and the leader-only expiry tracker driven by an
// injected clock.
//
// It may import jute and the standard library only. The tracker is not
// replicated state: the caller feeds it from applied commands and asks it,
// on the leader only, which sessions to expire.
package session
