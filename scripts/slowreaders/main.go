// Command slowreaders runs the reproduction of issue 12 item 2 against a
// server: connections that pipeline getData of a 1 MB znode and never read
// (5 by default), one that reads at 300 KB/s, and 16 normal go-zookeeper
// clients (4 s sessions) doing getData/setData of small znodes for 20 s. It
// prints the normal clients' latencies, errors and disconnects and the
// highest zk_outstanding_requests seen in mntr. It asserts nothing.
//
//	go run ./scripts/slowreaders -addr 127.0.0.1:2181
//
// Start the server first: zkraft (`zkraft --client-addr ...`) or Apache
// ZooKeeper (scripts/lib/zookeeper.sh; mntr must be allowed).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/zkraft/zkraft/internal/slowload"
)

func main() {
	var cfg slowload.Config
	flag.StringVar(&cfg.Addr, "addr", "127.0.0.1:2181", "server address")
	flag.IntVar(&cfg.Stalled, "stalled", 5, "connections that never read")
	flag.IntVar(&cfg.Slow, "slow", 1, "connections that read slowly")
	flag.IntVar(&cfg.SlowRate, "slow-rate", 300_000, "bytes a second a slow connection reads")
	flag.IntVar(&cfg.Requests, "requests", 2000, "getData each stalled or slow connection pipelines")
	flag.IntVar(&cfg.BigSize, "big", 1_000_000, "bytes of the znode they read")
	flag.IntVar(&cfg.Normal, "normal", 16, "normal clients")
	flag.DurationVar(&cfg.NormalTimeout, "session-timeout", 4*time.Second, "normal clients' session timeout")
	flag.DurationVar(&cfg.Duration, "duration", 20*time.Second, "how long the normal clients are measured")
	flag.BoolVar(&cfg.NoReconnect, "no-reconnect", false, "do not reopen a stalled connection the server closes")
	verbose := flag.Bool("v", false, "log connection ends")
	flag.Parse()
	for _, n := range []*int{&cfg.Stalled, &cfg.Slow} {
		if *n == 0 {
			*n = -1 // slowload.Config: zero is the default, negative none
		}
	}
	if *verbose {
		cfg.Logf = log.Printf
	}
	res, err := slowload.Run(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(res)
	if res.FirstErr != "" {
		fmt.Println("first error:", res.FirstErr)
	}
}
