// Package console is zkraft's web console: pages served by the member's
// AdminServer at /console (files embedded in the binary, no CDN and no
// build step), over a small JSON API beside them under /console/api/.
//
// It shows the tree (children a page at a time, so a directory of 100,000
// children is browsed, not loaded; a znode's data as text, pretty JSON or
// hex; its Stat with czxid and mzxid; its ACL; its quota and usage from
// /zookeeper/quota), the sessions (id, client address, timeout, last
// heard, ephemerals owned, watches set), the watches by path, the members
// and this member's Raft state (role, leader, term, applied index, lag),
// and live charts of the member's own figures (its Prometheus registry:
// requests per second by op, read and update latency quantiles, the
// proposal commit time, outstanding requests, connections, znodes). Pages
// poll the API, so what clients change appears without a reload.
//
// What it owns: the pages, the API's JSON, the paging of children and the
// rules of its actions. What it must never import: the server or anything
// below it but jute (the server's internals move; the console sees them
// only through Backend, which the server implements); no Raft, no Pebble.
//
// Reads are made with the viewer's ids (Backend.Identify: the HTTP peer's
// ip, and the ids of an Authorization header "<scheme> <auth>" when one
// is given), so a znode's data and children are shown as a ZooKeeper
// client with those ids would see them. The console is read-only by
// default: its actions (create, set, delete, kill a session) run only for
// a request that Backend.Authorize accepts, the AdminServer's check for
// its write commands (ZooKeeper 3.9's AuthRequest, ALL on "/"), carry the
// admin's ids as a client's write would, and each is written to the audit
// log (Backend.Audit) whether it succeeded or not. A refused action is
// 401 or 403 with ZooKeeper's sentence, and changes nothing. The
// credentials travel in the Authorization header of each request (the
// page keeps them in sessionStorage), never in a cookie, and the console
// answers no CORS preflight: a page of another origin cannot make a
// signed-in browser act.
//
// What the caller must do: implement Backend (every method may be called
// concurrently, from HTTP handlers) and mount Handler at the prefix it
// was given.
package console
