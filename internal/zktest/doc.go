// Package zktest is the test harness that drives a real Apache ZooKeeper
// 3.8 (the Debian package's jar under java): Start runs a standalone
// server from a data directory, StartPeer and WaitQuorum run an ensemble,
// FourLetter and Connect reach them, and DumpTree, ReadDump/WriteDump and
// Compare give a client's view of a tree (every znode with its Stat and
// ACL) to check an import or an export against what ZooKeeper itself
// serves.
//
// It is internal: the tests of zkdata and cmd/zkraft and the fixture
// generators (internal/zkfixture, cmd/zkraft/testdata/format1/gen) use
// it, and nothing but tests and those generators may import it. It talks
// to ZooKeeper only through processes and sockets, so it imports no zkraft
// package but internal/freeport; it must never import the server, raftsm
// or zkdata, so that what it reports about ZooKeeper cannot be coloured by
// zkraft.
//
// Its caller passes the test's testing.TB: every server it starts is
// stopped when that test ends. A test that needs ZooKeeper calls Require
// (Start and StartPeer do), which fails the test when java or the jar is
// missing, or skips it when $ZKRAFT_NO_ZOOKEEPER is set.
package zktest
