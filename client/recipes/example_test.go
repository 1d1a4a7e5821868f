package recipes_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/recipes"
)

// A client takes the lock and sends its fencing token with every write to
// the resource the lock protects; the resource checks it with a Guard.
func ExampleLock() {
	conn, _, err := zk.Connect([]string{"127.0.0.1:2181"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	lock := recipes.NewLock(conn, "/locks/ledger")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	token, err := lock.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release()

	// The ledger keeps this Guard (in its own process, in practice) and
	// checks the token that comes with each write before applying it.
	var ledger recipes.Guard
	if !ledger.Accept(token) {
		log.Fatal("refused: a later holder has already written")
	}
	fmt.Printf("write accepted under token 0x%x\n", token)
}

// A Guard accepts a token unless it has seen a higher one, so a holder
// that was paused past the end of its session and comes back is refused
// once the next holder has acted.
func ExampleGuard() {
	var g recipes.Guard
	fmt.Println(g.Accept(0x100000007)) // the first holder
	fmt.Println(g.Accept(0x100000009)) // the next holder, after the first lost its session
	fmt.Println(g.Accept(0x100000007)) // the first holder again, back from its pause
	fmt.Printf("0x%x\n", g.Highest())
	// Output:
	// true
	// true
	// false
	// 0x100000009
}

// Candidates campaign under one directory; the winner's epoch (its znode's
// czxid) is higher than every earlier leader's, so followers and resources
// can refuse orders from a deposed leader.
func ExampleElection() {
	conn, _, err := zk.Connect([]string{"127.0.0.1:2181"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	e := recipes.NewElection(conn, "/election/scheduler", []byte("host-a:8080"))
	epoch, err := e.Campaign(context.Background()) // blocks until this candidate leads
	if err != nil {
		log.Fatal(err)
	}
	defer e.Resign()
	fmt.Printf("leading in epoch 0x%x\n", epoch)
}

// Anyone can ask who leads, for instance to route requests to it.
func ExampleLeader() {
	conn, _, err := zk.Connect([]string{"127.0.0.1:2181"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	value, epoch, err := recipes.Leader(conn, "/election/scheduler")
	if errors.Is(err, zk.ErrNoNode) {
		fmt.Println("no leader right now")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s leads in epoch 0x%x\n", value, epoch)
}
