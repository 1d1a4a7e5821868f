// Package linreg is the register workload's model and recorder shared by
// the tests that check zkraft's histories for linearizability with
// porcupine (faulttest's fault runs, cmd/zkraft's fleet of cells).
//
// Each key is a znode that may be absent; clients create, set (version -1),
// delete and read it, each write with a unique value. A History records
// every operation with its call and return times on one Clock; a write
// whose outcome is unknown (connection loss, timeout, expired session) is
// recorded with an open-ended return, a failed read not at all. Check runs
// porcupine on a history, partitioned by key, and names the keys whose
// histories are not linearizable.
//
// Its callers must give each key's history a bounded length (fresh keys
// per round, a pause between operations): porcupine's search is
// exponential in the number of concurrent operations on one key. It is
// test support: it imports go-zookeeper and porcupine, nothing of zkraft.
package linreg
