package main

import (
	"io"

	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/zkdata"
)

// writeZooKeeperSnapshot is the AdminServer's snapshot writer
// (server.AdminConfig.WriteSnapshot): the member's state as the ZooKeeper
// snapshot that `zkraft export` writes, uncompressed, as ZooKeeper's
// snapshot command streams it with the default
// zookeeper.snapshot.compression.method. The server cannot import zkdata,
// so it is handed in from here.
func writeZooKeeperSnapshot(w io.Writer, st *raftsm.ImportedState) error {
	t, err := treeOf(st)
	if err != nil {
		return err
	}
	return zkdata.WriteSnapshot(w, t, zkdata.CompressionNone)
}
