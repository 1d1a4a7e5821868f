// Package recipes holds coordination recipes that surface what ZooKeeper
// keeps but never hands out: a fencing token with every lock grant (the
// holder's lock znode's czxid, Chubby's sequencer, Kleppmann's fencing
// token) and an epoch with every leadership (the leader znode's czxid). A
// resource protected by the lock checks tokens with a Guard and refuses any
// older than one it has already seen, so a holder that lost its session
// while paused cannot overwrite the work of the next one.
//
// The recipes run on a github.com/go-zookeeper/zk connection against any
// ZooKeeper-compatible server; czxids only grow, so tokens are strictly
// increasing across holders on ZooKeeper and zkraft alike. For that reason
// the package imports no zkraft package at all, and must never import the
// server, raftsm or anything that assumes the server is zkraft.
//
// The caller must:
//
//  1. use one Lock or Election from one goroutine at a time (they are not
//     safe for concurrent use; a Guard is);
//  2. send the token Acquire returned with every request it makes to the
//     protected resource, and have the resource pass it to Guard.Accept
//     before acting (a lock without a checked token is only advisory);
//  3. treat the end of its session (zk.StateExpired) as the loss of the
//     lock or the leadership: the znode that held it is gone;
//  4. call Release (Resign) when done.
package recipes
