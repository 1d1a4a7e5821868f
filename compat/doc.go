// Package compat holds what goes beyond or around ZooKeeper: the
// revision-resumable watch extension and its Go client helper, fencing-token
// recipes, and ZooKeeper on-disk format readers and writers used by import and
// export. It may import jute and znode; the server wires it in.
//
// Nothing lives here yet; the foundation issue only reserves the package.
package compat
