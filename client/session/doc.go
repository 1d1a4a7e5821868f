// Package session is a ZooKeeper session with Chubby's jeopardy, over a
// github.com/go-zookeeper/zk connection: it tells a program whether what
// it holds on the session (locks, leaderships, ephemeral nodes) is sound
// now, in doubt, or gone, and cancels a context when it is gone.
//
//   - Safe: a server answered recently.
//   - Jeopardy: the connection was lost, or no reply came for half a
//     session timeout. The session may well be alive; go-zookeeper keeps
//     trying every server. Work that needs a lock should pause.
//   - Lost: the server said the session expired, or the grace period ran
//     out, or the Session was closed. The session's context is cancelled
//     (context.Cause: ErrExpired, ErrGraceExpired, ErrClosed, all
//     errors.Is ErrLost), and, unless closed, a new session is opened and
//     reported Safe with its own id and context.
//
// The grace period runs from the moment the server last certainly heard
// from the session: not when the client last read a reply, but when it
// sent the request that reply answers (the Session meters go-zookeeper's
// frames to know it). A server expires a session no earlier than a
// session timeout after it last heard from it, and the grace period is at
// most that timeout (nine tenths of it by default), so Lost is reported
// before any server can have expired the session, and so before another
// client can be granted a lock the session held. A holder that does not
// act on Lost in time (paused, or partitioned and ignoring its context)
// is what fencing tokens are for: see client/fence.
//
// The package imports no zkraft package but jute; it must never import
// the server or anything under it.
//
// The caller must:
//
//  1. Open a Session with every member's address (a failover needs
//     somewhere to go) and Close it when done: Close ends the session
//     (its ephemeral nodes go) and waits for what the Session started;
//  2. bind work to one session: take Current (connection and context
//     together), and stop when that context ends: after a Lost, Conn
//     returns the next session's connection, on which the old session's
//     locks are not held;
//  3. keep OnEvent short: it runs on the Session's own goroutine.
package session
