package znode

import (
	"errors"
	"fmt"

	"github.com/zkraft/zkraft/jute"
)

// Sentinel errors of the tree rules. Each wraps the wire code ZooKeeper
// answers with, so jute.CodeOf maps it in one place.
var (
	// ErrCorruptNode means a stored node could not be decoded: the store is
	// damaged and the replica must stop.
	ErrCorruptNode = errors.New("znode: corrupt stored node")
	ErrBadPath     = fmt.Errorf("znode: invalid path: %w", jute.ErrBadArguments)
)
