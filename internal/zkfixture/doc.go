// Command zkfixture is the client side of scripts/make-zk-fixtures.sh. It
// is not part of zkraft.
//
//	zkfixture load -addr 127.0.0.1:2181 -out expected.json [-bulk 150]
//
// runs a workload against a real Apache ZooKeeper that creates every kind
// of znode (persistent, sequential, ephemeral, ephemeral sequential,
// container, TTL, quota nodes), ACLs of every scheme, multis that succeed
// and fail, failed writes, and closes one session; it then dumps the tree
// as a super user into expected.json, prints READY and keeps three
// sessions (with ephemerals) open until it is killed, so that the server
// can be killed with them open.
//
//	zkfixture prune -keep 2 -data DATADIR [-log LOGDIR]
//
// keeps the newest snapshots and the logs a restore from the oldest kept
// one needs, and cuts the zero padding off every log.
//
// Only scripts/make-zk-fixtures.sh runs it. It uses internal/zktest for the
// dump and package zkdata for reading logs, and must never import the
// server or raftsm: the fixtures are what ZooKeeper wrote, not zkraft.
package main
