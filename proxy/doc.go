// Package proxy is `zkraft proxy`: a process that speaks ZooKeeper's
// client protocol to clients, holds no data, and forwards their sessions
// to a member over the upstream protocol (package wire, docs/proxy.md). It
// answers pings itself and sends one keep-alive batch per tick for all of
// its sessions; every other request is executed by the member, in order
// per session, with the member's own connection pipeline. It answers
// four-letter words, AdminServer commands and Prometheus scrapes about
// itself (operator.go, metrics.go), through package operator's registry.
//
// It imports jute, session (the keep-alive set), proxy/wire and operator,
// never server, raftsm, Dragonboat or Pebble: a proxy knows the cell only
// over the network (internal/layout's test checks it).
//
// Its caller fills in a Config (zero values documented; New calls
// Validate), calls New, which listens for clients and starts connecting
// upstream, and calls Close, which closes every connection and waits for
// every goroutine New started.
//
// With protocol version 2 identical watches of its sessions are one
// watch on the member, fanned out here with ZooKeeper's guarantees per
// session (watches.go, docs/proxy.md): one Event's notification is
// encoded once and written straight to each idle session's socket by
// the upstream reader and a few goroutines it waits for (fanout.go),
// and when its upstream connection ends it keeps the clients with
// nothing in flight and reattaches their sessions, watches included, on
// the next one (reattach.go). A member is
// silent only when no byte waits on the socket after the idle bound and
// none comes in a grace counted from when the reader runs (liveness.go).
// An idle client holds no goroutine: its reader parks it in the proxy's
// epoll set once nothing is left to read, and the poller answers a parked
// client's lone ping itself, without a goroutine (poller.go).
//
// Lock order: Proxy.mu, then upConn.mu, then client.fl, then client.out;
// sharedWatches.mu (watches.go) is taken alone or before upConn.out (an
// Unwatch is queued under it); upConn.out is otherwise taken alone. The
// figures' locks (stats.go: connStats.mu, proxyStats.mu,
// upstreamStats.mu) are taken with no other held, but for client.fl under
// connStats.mu (Connections). client.pmu is taken with no other lock
// held, then poller.mu.
package proxy
