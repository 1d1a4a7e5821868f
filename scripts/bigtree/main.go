// Command bigtree measures zkraft with a large tree: it starts the binary,
// creates N znodes with 100-byte values (in multis of 500, from several
// goroutines), reports the server's RSS, SIGKILLs it, restarts it on the
// same data directory and reports how long until it serves a read of the
// last znode again.
//
//	go run ./scripts/bigtree -n 1000000
//
// With -system zookeeper it does the same to Apache ZooKeeper 3.8 (the
// Debian package; standalone, the same zoo.cfg as zkraft, JVM heap
// -Xmx1000m as zkServer.sh), for the memory comparison. Both are started
// by internal/launch.
//
//	go run ./scripts/bigtree -n 1000000 -system zookeeper
//
// It prints figures; it asserts nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/launch"
)

func main() {
	n := flag.Int("n", 1000000, "znodes to create")
	system := flag.String("system", "zkraft", "zkraft or zookeeper")
	flag.Parse()
	tmp, _ := os.MkdirTemp("", "bigtree-")
	defer os.RemoveAll(tmp)
	defer launch.KillAll() // the server dies with us, even on a panic
	cfg := launch.Config{System: launch.System(*system), Dir: filepath.Join(tmp, "server")}
	if cfg.System == launch.Zkraft {
		cfg.ZkraftBin = filepath.Join(tmp, "zkraft")
		if err := launch.BuildZkraft(cfg.ZkraftBin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	ens, err := launch.New(cfg)
	if err != nil {
		panic(err)
	}
	defer ens.Stop()
	ctx := context.Background()
	if err := ens.StartWait(ctx, 120*time.Second, 3); err != nil {
		panic(err)
	}
	srv := ens.Members[0]
	client := srv.Addr()
	c, err := launch.Session(ctx, []string{client}, 60*time.Second, 30*time.Second)
	if err != nil {
		panic(err)
	}
	value := make([]byte, 100)
	const per = 500
	parents := (*n + 9999) / 10000
	for p := 0; p < parents; p++ {
		if _, err := c.Create(fmt.Sprintf("/p%04d", p), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			panic(err)
		}
	}
	t0 := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := range jobs {
				var ops []any
				for i := first; i < first+per && i < *n; i++ {
					ops = append(ops, &zk.CreateRequest{Path: fmt.Sprintf("/p%04d/n%07d", i/10000, i), Data: value, Acl: zk.WorldACL(zk.PermAll)})
				}
				if _, err := c.Multi(ops...); err != nil {
					panic(err)
				}
			}
		}()
	}
	for i := 0; i < *n; i += per {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	fmt.Printf("created %d znodes in %v (%.0f/s)\n", *n, time.Since(t0).Round(time.Millisecond), float64(*n)/time.Since(t0).Seconds())
	c.Close()
	time.Sleep(2 * time.Second)
	rss := launch.RSSKiB(srv.PID())
	fmt.Printf("server RSS with the tree: %d MiB (%.0f bytes per znode)\n", rss/1024, float64(rss)*1024/float64(*n))
	du, _ := exec.Command("du", "-sm", srv.DataDir()).Output()
	fmt.Printf("data dir: %s", du)

	srv.Kill()
	t1 := time.Now()
	if err := srv.Start(); err != nil {
		panic(err)
	}
	if err := ens.Wait(ctx, 120*time.Second); err != nil {
		panic(err)
	}
	last := fmt.Sprintf("/p%04d/n%07d", (*n-1)/10000, *n-1)
	c2, err := launch.Session(ctx, []string{client}, 60*time.Second, 30*time.Second)
	if err != nil {
		panic(err)
	}
	defer c2.Close()
	if _, _, err := c2.Get(last); err != nil {
		fmt.Println("read after restart:", err)
		os.Exit(1)
	}
	fmt.Printf("restart after SIGKILL: serving %s again after %v\n", last, time.Since(t1).Round(time.Millisecond))
	time.Sleep(time.Second)
	fmt.Printf("server RSS after restart: %d MiB\n", launch.RSSKiB(srv.PID())/1024)
}
