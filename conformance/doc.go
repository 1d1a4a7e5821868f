// Package conformance is the protocol conformance suite. It is written with
// github.com/go-zookeeper/zk and small raw-socket helpers, and reaches a
// server only over TCP: an in-process zkraft on a free port by default, or
// the server at $CONFORMANCE_ADDR (a real Apache ZooKeeper for the
// differential run, see scripts/zk-differential.sh).
//
// It may import jute for codes, the client tree (client/resumable, whose
// stream it checks over TCP) and the test helpers under internal/; the
// server only in embedded_test.go, to start the in-process zkraft, and
// never the server's internals, raftsm, znode or session
// (internal/layout's test checks it).
package conformance
