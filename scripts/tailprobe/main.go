// Command tailprobe drives write load with go-zookeeper against a server
// that is already running (setData of each worker's own znode, or a multi
// of 4 of them) and prints, besides p50/p99/p99.9, the wall-clock time
// (UTC) of the worst reply of every 100 ms in which a reply was slower
// than -slow, with when it was sent. Those times are what to line up with
// the server's own: its log, a runtime/trace taken meanwhile
// (ZKRAFT_PPROF_ADDR), Pebble's and Dragonboat's events. A debugging aid
// for the write tail (docs/performance.md, "Write tail");
// scripts/sidebyside is the comparison figures are judged by.
//
//	go run ./scripts/tailprobe -addr 127.0.0.1:2181 -sessions 64 -duration 15s
//	go run ./scripts/tailprobe -addr 127.0.0.1:2181 -sessions 16 -per 16 -multi4
//	go run ./scripts/tailprobe -free-ports 3    # loopback ports for servers to start
//
// It prints figures and asserts nothing. Its loops are bounded by
// -duration and by -max-ops per worker.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
)

const root = "/tailprobe"

func main() {
	addr := flag.String("addr", "127.0.0.1:2181", "server address")
	sessions := flag.Int("sessions", 64, "sessions")
	per := flag.Int("per", 1, "goroutines per session, each one synchronous request at a time")
	dur := flag.Duration("duration", 15*time.Second, "measured duration")
	warm := flag.Duration("warmup", 3*time.Second, "warm-up, not measured")
	slow := flag.Duration("slow", 50*time.Millisecond, "list the 100 ms buckets whose worst reply is slower than this")
	multi := flag.Bool("multi4", false, "multi of 4 setData instead of one setData")
	maxOps := flag.Int("max-ops", 5_000_000, "bound on each worker's requests")
	freePorts := flag.Int("free-ports", 0, "print this many free loopback ports (internal/freeport) and exit")
	flag.Parse()
	if *freePorts > 0 {
		for range *freePorts {
			p, err := freeport.Get()
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println(p)
		}
		return
	}

	value := make([]byte, 1024)
	conns := make([]*zk.Conn, *sessions)
	for i := range conns {
		c, ev, err := zk.Connect([]string{*addr}, 30*time.Second, zk.WithLogger(nolog{}))
		if err != nil {
			log.Fatal(err)
		}
		timeout := time.After(30 * time.Second)
	wait:
		for {
			select {
			case e := <-ev:
				if e.State == zk.StateHasSession {
					break wait
				}
			case <-timeout:
				log.Fatalf("session %d: no session after 30s", i)
			}
		}
		defer c.Close()
		conns[i] = c
	}
	acl := zk.WorldACL(zk.PermAll)
	path := func(w, j int) string { return fmt.Sprintf("%s/w%05d-%d", root, w, j) }
	workers := *sessions * *per
	if _, err := conns[0].Create(root, nil, 0, acl); err != nil && err != zk.ErrNodeExists {
		log.Fatal(err)
	}
	for w := range workers {
		for j := range 4 {
			if _, err := conns[0].Create(path(w, j), value, 0, acl); err != nil && err != zk.ErrNodeExists {
				log.Fatal(err)
			}
		}
	}

	type reply struct {
		at  time.Time // when it arrived
		lat time.Duration
	}
	start := time.Now().Add(*warm)
	end := start.Add(*dur)
	var mu sync.Mutex
	var all []reply
	errs := map[string]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := conns[w%*sessions]
			var ops []any
			for j := range 4 {
				ops = append(ops, &zk.SetDataRequest{Path: path(w, j), Data: value, Version: -1})
			}
			var mine []reply
			myErrs := map[string]int{}
			for range *maxOps {
				t0 := time.Now()
				if t0.After(end) {
					break
				}
				var err error
				if *multi {
					_, err = c.Multi(ops...)
				} else {
					_, err = c.Set(path(w, 0), value, -1)
				}
				t1 := time.Now()
				if err != nil {
					myErrs[err.Error()]++
					continue
				}
				if t1.After(start) && t1.Before(end) {
					mine = append(mine, reply{t1, t1.Sub(t0)})
				}
			}
			mu.Lock()
			all = append(all, mine...)
			for k, n := range myErrs {
				errs[k] += n
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for k, n := range errs {
		fmt.Printf("errors %d: %s\n", n, k)
	}
	if len(all) == 0 {
		fmt.Println("no replies in the window")
		os.Exit(1)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].lat < all[j].lat })
	q := func(f float64) time.Duration { return all[int(f*float64(len(all)-1))].lat.Round(10 * time.Microsecond) }
	fmt.Printf("ops %d  %.0f/s  p50 %v p99 %v p99.9 %v max %v\n", len(all), float64(len(all))/dur.Seconds(),
		q(0.5), q(0.99), q(0.999), q(1))

	// The worst reply of each 100 ms (by arrival), for the slow buckets.
	worst := map[int64]reply{}
	count := map[int64]int{}
	for _, r := range all {
		b := r.at.UnixMilli() / 100
		count[b]++
		if r.lat > worst[b].lat {
			worst[b] = r
		}
	}
	var buckets []int64
	for b, r := range worst {
		if r.lat >= *slow {
			buckets = append(buckets, b)
		}
	}
	sort.Slice(buckets, func(i, j int) bool { return buckets[i] < buckets[j] })
	for _, b := range buckets {
		r := worst[b]
		fmt.Printf("slow %s  worst %v (sent %s)  replies in its 100 ms: %d\n", r.at.UTC().Format("15:04:05.000"),
			r.lat.Round(100*time.Microsecond), r.at.Add(-r.lat).UTC().Format("15:04:05.000"), count[b])
	}
}

type nolog struct{}

func (nolog) Printf(string, ...any) {}
