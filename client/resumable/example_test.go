package resumable_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/zkraft/zkraft/client/resumable"
)

// A consumer that keeps a copy of everything under /app follows it from
// the zxid it last applied, across disconnects and failovers: the watch
// resumes on the next member from the last zxid it delivered.
func ExampleWatchFrom() {
	members := []string{"10.0.0.1:2181", "10.0.0.2:2181", "10.0.0.3:2181"}
	// The last Txn.Zxid this consumer applied, read back from the store
	// it keeps its copy in.
	var applied int64 = 0x200000041

	// ctx bounds only the start: the watch runs until Close.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := resumable.WatchFrom(ctx, members, "/app", applied, true, resumable.Options{})
	var compacted *resumable.ErrCompacted
	if errors.As(err, &compacted) {
		// Too far behind: the history starts after applied. Rebuild the
		// copy from a fresh read of /app and watch from a zxid that read
		// reflects (compacted.Oldest or later).
		log.Printf("resync: history begins at 0x%x", compacted.Oldest)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()

	for txn := range w.Txns {
		// One transaction's changes arrive together (a multi is one).
		for _, ch := range txn.Changes {
			fmt.Printf("0x%x %v %s\n", txn.Zxid, ch.Type, ch.Path)
		}
		applied = txn.Zxid // store it with the changes it describes
	}
	// Txns closes only when a server refused to go on.
	log.Printf("watch ended after 0x%x: %v", w.LastZxid(), w.Err())
}
