// Package recipes holds Curator's coordination recipes for Go, on a
// client/session Session, each grant with a fencing token: exclusive lock
// (with an optional lock-delay), read-write lock, semaphore, leader
// election with an observe stream and a leader latch, barrier and double
// barrier, queue, counter, and a service registry.
//
// Every grant is a *Lease: its Token is the czxid of the node that grants
// it, strictly increasing across the holders of one lock (or leaders of
// one election) on ZooKeeper and zkraft alike, and its Context ends when
// the grant does: Release, or the loss of the session that holds it. The
// session reports Lost before the server can have expired the session
// (see client/session), so a holder that hears it stops before the next
// holder is granted; a holder that does not hear it (paused, or ignoring
// its context) is stopped by the resource's client/fence Guard, which
// refuses its token once a later holder's has been accepted.
//
// Locks and elections follow ZooKeeper's own recipe: ephemeral sequential
// nodes, the lowest holds, each waiter watches only the node just before
// its own. Nodes are created with a random marker in their name, so a
// create cut off by a lost connection is found again, not repeated.
//
// The package speaks to servers only through go-zookeeper and
// client/session; it imports no server-side zkraft package and must never
// import the server, raftsm or anything that assumes the server is zkraft.
//
// The caller must:
//
//  1. open a session.Session and pass it to the recipes; close it last;
//  2. send a Lease's Token with every request to the protected resource,
//     and have the resource run the request inside fence.Guard.Do (a lock
//     without a checked token is advisory);
//  3. stop working for a Lease when its Context is done, and pause while
//     the session is in jeopardy (Session.WaitSafe(lease.Context()));
//  4. Release every Lease, and Close every Latch, Registration, View and
//     Observer it started (Close waits for what they started).
package recipes
