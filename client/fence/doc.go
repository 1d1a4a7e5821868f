// Package fence is the resource side of fencing tokens: a Guard that a
// protected resource (a storage service, a ledger, a job runner) keeps to
// refuse requests from a lock holder that has been superseded.
//
// A lock from client/recipes hands each holder a token, the czxid of the
// node that granted it, and every later grant's token is greater. A
// holder that was paused past its session timeout (a GC pause, a stopped
// VM, a partition) still believes it holds the lock and sends its old
// token; by then the next holder has acted with a greater one, and the
// Guard refuses the old. The Guard keeps the highest token it accepted
// for each protected object in a Store, durably, so a restart of the
// resource does not forget it (MemStore is for tests and for resources
// whose own state is lost on restart anyway).
//
// It imports no zkraft or ZooKeeper package: the resource needs none.
//
// The resource must:
//
//  1. receive the token with every request that acts on a protected
//     object, and run the request's effect inside Guard.Do (writes) or
//     Guard.Check (reads under a shared lease), so that no newer holder
//     can act between the check and the effect;
//  2. use one Guard per Store, in one process: the Guard serializes the
//     requests on one object in memory;
//  3. treat ErrStale as final: the sender no longer holds the lock.
package fence
