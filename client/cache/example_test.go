package cache_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/cache"
	"github.com/zkraft/zkraft/client/session"
	"github.com/zkraft/zkraft/internal/clienttest"
)

// servers are the addresses of the ensemble: the examples run against an
// in-process zkraft that TestMain starts.
var servers []string

func TestMain(m *testing.M) { os.Exit(clienttest.Main(m, &servers)) }

// A service keeps its configuration subtree in memory and reacts to each
// change, which comes with its zxid.
func ExampleNewTree() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Open(ctx, session.Config{Servers: servers})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	s.Conn().Create("/examples", nil, 0, zk.WorldACL(zk.PermAll))
	s.Conn().Create("/examples/config", nil, 0, zk.WorldACL(zk.PermAll))

	changes := make(chan cache.Change, 16)
	c, err := cache.NewTree(ctx, s, "/examples/config", cache.Options{
		OnChange: func(ch cache.Change) { changes <- ch },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println("mode:", c.Mode())

	s.Conn().Create("/examples/config/limit", []byte("10"), 0, zk.WorldACL(zk.PermAll))
	set, _ := s.Conn().Set("/examples/config/limit", []byte("20"), -1)
	for i := 0; i < 2; i++ {
		ch := <-changes
		fmt.Println(ch.Type, ch.Path) // ch.Zxid: the change's zxid; ch.Node: the node as read after it
	}
	n, _ := c.Get("/examples/config/limit")
	fmt.Println(string(n.Data), n.Stat.Mzxid == set.Mzxid, c.Zxid() >= set.Mzxid)
	// Output:
	// mode: watchFrom
	// created /examples/config/limit
	// changed /examples/config/limit
	// 20 true true
}

// A node cache follows one node, which need not exist yet.
func ExampleNewNode() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Open(ctx, session.Config{Servers: servers})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	c, err := cache.NewNode(ctx, s, "/examples/flag", cache.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	_, ok := c.Get()
	fmt.Println("exists:", ok)

	changed := c.Changed()
	s.Conn().Create("/examples", nil, 0, zk.WorldACL(zk.PermAll))
	s.Conn().Create("/examples/flag", []byte("on"), 0, zk.WorldACL(zk.PermAll))
	for {
		if n, ok := c.Get(); ok {
			fmt.Println("flag:", string(n.Data))
			break
		}
		<-changed
		changed = c.Changed()
	}
	// Output:
	// exists: false
	// flag: on
}
