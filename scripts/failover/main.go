// Command failover measures how long a 3-member ensemble takes to recover
// from the loss of its leader: it starts the ensemble on loopback (zkraft
// binaries, or Apache ZooKeeper 3.8 from the Debian package), keeps a client
// writing, SIGKILLs the leader, and reports the time to a new leader (srvr
// Mode on the survivors) and to the first acknowledged write after the
// kill. Several rounds; the killed member is restarted between rounds.
//
//	go run ./scripts/failover -system zkraft -rounds 5
//	go run ./scripts/failover -system zookeeper -rounds 5
//
// It prints figures; it asserts nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/launch"
)

func main() {
	system := flag.String("system", "zkraft", "zkraft or zookeeper")
	rounds := flag.Int("rounds", 5, "leader kills")
	logLevel := flag.String("log-level", "warn", "the members' log level")
	keep := flag.Bool("keep", false, "keep the members' directories and logs")
	flag.Parse()
	tmp, err := os.MkdirTemp("", "failover-")
	if err != nil {
		panic(err)
	}
	defer func() {
		if *keep {
			fmt.Println("kept", tmp)
			return
		}
		os.RemoveAll(tmp)
	}()
	defer launch.KillAll() // the members die with us, even on a panic
	cfg := launch.Config{System: launch.System(*system), Members: 3, Dir: tmp, Heap: "256m", LogLevel: *logLevel}
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
	if err := ens.StartWait(context.Background(), 60*time.Second, 3); err != nil {
		fmt.Fprintln(os.Stderr, "no leader:", err)
		os.Exit(1)
	}
	conn, _, err := zk.Connect(ens.Addrs(), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	var toLeader, toWrite []time.Duration
	for r := 0; r < *rounds; r++ {
		leader := ens.WaitLeader(nil, 60*time.Second)
		if leader == nil {
			fmt.Fprintln(os.Stderr, "no leader")
			os.Exit(1)
		}
		// Writes flow before the kill.
		for i := 0; i < 20; i++ {
			conn.Create(fmt.Sprintf("/f-%d-%d", r, i), nil, 0, zk.WorldACL(zk.PermAll))
		}
		killed := time.Now()
		leader.Kill()
		done := make(chan time.Duration, 1)
		go func() {
			for i := 0; ; i++ {
				if _, err := conn.Create(fmt.Sprintf("/after-%d-%d", r, i), nil, 0, zk.WorldACL(zk.PermAll)); err == nil {
					done <- time.Since(killed)
					return
				}
				if time.Since(killed) > 60*time.Second {
					done <- -1
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
		nl := ens.WaitLeader(leader, 60*time.Second)
		tl := time.Since(killed)
		tw := <-done
		fmt.Printf("round %d: killed member %d; member %v leads after %v; first write after %v\n", r+1, leader.ID, idOf(nl), tl.Round(time.Millisecond), tw.Round(time.Millisecond))
		toLeader = append(toLeader, tl)
		toWrite = append(toWrite, tw)
		if err := leader.Start(); err != nil {
			panic(err)
		}
		time.Sleep(3 * time.Second) // let it rejoin
	}
	fmt.Printf("%s: leader kill -> new leader: median %v; -> writes succeed: median %v (%d rounds)\n",
		*system, median(toLeader).Round(time.Millisecond), median(toWrite).Round(time.Millisecond), *rounds)
}

func idOf(m *launch.Member) any {
	if m == nil {
		return "none"
	}
	return m.ID
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
