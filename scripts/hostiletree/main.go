// Command hostiletree measures what odd trees do to a server's ordinary
// requests (issue 12, item 1). It starts zkraft (or Apache ZooKeeper 3.8,
// with -system zookeeper) on a fresh data directory and prints exists and
// create latencies on the fresh store, then after each hostile tree.
//
// longnames: 20 znodes whose names are about 1,000,000 bytes and share all
// but their last 5 bytes, then 40 setData of 1 MB (to force the store to
// flush), then a multi of 5,000 creates.
//
// deepchain: a chain 3,000 levels deep, getAllChildrenNumber of its top, a
// multi of 18,000 creates, then the chain deleted again.
//
// count: 250,000 znodes, getAllChildrenNumber("/") in a loop while another
// session does setData, with that setData's latencies.
//
//	go run ./scripts/hostiletree
//	go run ./scripts/hostiletree -system zookeeper
//
// It prints figures; it asserts nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/bench"
	"github.com/zkraft/zkraft/internal/launch"
	"github.com/zkraft/zkraft/jute"
)

var acl = zk.WorldACL(zk.PermAll)

func main() {
	system := flag.String("system", "zkraft", "zkraft or zookeeper")
	scenarios := flag.String("scenarios", "longnames,deepchain,count", "which trees, comma-separated")
	countNodes := flag.Int("count-nodes", 250000, "znodes of the count scenario")
	countFor := flag.Duration("count-for", 10*time.Second, "how long the count scenario runs")
	flag.StringVar(&zkraftBin, "bin", "", "zkraft binary to run (default: build ./cmd/zkraft)")
	flag.Parse()

	tmp, err := os.MkdirTemp("", "hostiletree-")
	must(err)
	defer os.RemoveAll(tmp)
	defer launch.KillAll() // the server dies with us, even on a panic
	addr, stop := start(*system, tmp)
	defer stop()

	c := connect(addr)
	defer c.Close()
	fresh := probe(c, "fresh store")
	for _, s := range strings.Split(*scenarios, ",") {
		switch s {
		case "longnames":
			longNames(c, fresh)
		case "deepchain":
			deepChain(c, fresh)
		case "count":
			count(addr, c, *countNodes, *countFor)
		default:
			fmt.Fprintf(os.Stderr, "unknown scenario %q\n", s)
			os.Exit(2)
		}
	}
}

// latencies are one probe's exists and create figures.
type latencies struct{ exists, create [2]time.Duration } // p50, p99

// probe times 500 exists of a small node and 500 creates (then deletes)
// of small nodes, one at a time.
func probe(c *zk.Conn, label string) latencies {
	ensure(c, "/probe")
	var ex, cr []time.Duration
	for i := 0; i < 500; i++ {
		t0 := time.Now()
		_, _, err := c.Exists("/probe")
		must(err)
		ex = append(ex, time.Since(t0))
	}
	for i := 0; i < 500; i++ {
		p := fmt.Sprintf("/probe/c%04d", i)
		t0 := time.Now()
		_, err := c.Create(p, []byte("x"), 0, acl)
		must(err)
		cr = append(cr, time.Since(t0))
	}
	for i := 0; i < 500; i++ {
		must(c.Delete(fmt.Sprintf("/probe/c%04d", i), -1))
	}
	l := latencies{exists: pcts(ex), create: pcts(cr)}
	fmt.Printf("%-44s exists p50 %8v p99 %8v   create p50 %8v p99 %8v\n", label,
		round(l.exists[0]), round(l.exists[1]), round(l.create[0]), round(l.create[1]))
	return l
}

func compare(fresh, now latencies) {
	fmt.Printf("%-44s exists p50 x%.2f p99 x%.2f   create p50 x%.2f p99 x%.2f\n", "  against the fresh store",
		ratio(now.exists[0], fresh.exists[0]), ratio(now.exists[1], fresh.exists[1]),
		ratio(now.create[0], fresh.create[0]), ratio(now.create[1], fresh.create[1]))
}

func longNames(c *zk.Conn, fresh latencies) {
	ensure(c, "/long")
	prefix := strings.Repeat("n", 1000000-5)
	t0 := time.Now()
	for i := 0; i < 20; i++ {
		_, err := c.Create(fmt.Sprintf("/long/%s%05d", prefix, i), nil, 0, acl)
		must(err)
	}
	fmt.Printf("longnames: 20 creates of ~1 MB names in %v\n", round(time.Since(t0)))
	ensure(c, "/long-data")
	mb := make([]byte, 1000000)
	t0 = time.Now()
	for i := 0; i < 40; i++ {
		_, err := c.Set("/long-data", mb, -1)
		must(err)
	}
	fmt.Printf("longnames: 40 setData of 1 MB in %v\n", round(time.Since(t0)))
	compare(fresh, probe(c, "longnames: after the long names"))
	multiCreate(c, "/long-multi", 5000, 60)
	compare(fresh, probe(c, "longnames: after the multi"))
}

// multiCreate creates n children of parent in one multi, names padded to
// about nameLen bytes, and reports the time and whether others were served
// meanwhile.
func multiCreate(c *zk.Conn, parent string, n, nameLen int) {
	ensure(c, parent)
	ops := make([]any, n)
	pad := strings.Repeat("m", max(0, nameLen-6))
	for i := range ops {
		ops[i] = &zk.CreateRequest{Path: fmt.Sprintf("%s/%s%06d", parent, pad, i), Acl: acl}
	}
	t0 := time.Now()
	_, err := c.Multi(ops...)
	fmt.Printf("multi of %d creates under %s: %v (err %v)\n", n, parent, round(time.Since(t0)), err)
}

func deepChain(c *zk.Conn, fresh latencies) {
	const depth = 3000
	p := "/deep"
	t0 := time.Now()
	for i := 0; i < depth; i++ {
		_, err := c.Create(p, nil, 0, acl)
		if err != nil && err != zk.ErrNodeExists {
			must(err)
		}
		p += "/d"
	}
	fmt.Printf("deepchain: %d levels created in %v\n", depth, round(time.Since(t0)))
	t0 = time.Now()
	n, err := getAllChildrenNumber("/deep")
	fmt.Printf("deepchain: getAllChildrenNumber(/deep) = %d in %v (err %v)\n", n, round(time.Since(t0)), err)
	compare(fresh, probe(c, "deepchain: with the chain"))
	multiCreate(c, "/dm", 18000, 6)
	compare(fresh, probe(c, "deepchain: after the multi"))
	t0 = time.Now()
	for i := depth; i > 0; i-- {
		must(c.Delete("/deep"+strings.Repeat("/d", i-1), -1))
	}
	fmt.Printf("deepchain: chain deleted in %v\n", round(time.Since(t0)))
	compare(fresh, probe(c, "deepchain: after deleting the chain"))
}

func count(addr string, c *zk.Conn, nodes int, dur time.Duration) {
	const per = 500
	ensure(c, "/count")
	t0 := time.Now()
	for first := 0; first < nodes; first += per {
		var ops []any
		for i := first; i < first+per && i < nodes; i++ {
			ops = append(ops, &zk.CreateRequest{Path: fmt.Sprintf("/count/n%07d", i), Data: make([]byte, 100), Acl: acl})
		}
		_, err := c.Multi(ops...)
		must(err)
	}
	fmt.Printf("count: %d znodes created in %v\n", nodes, round(time.Since(t0)))
	ensure(c, "/count-w")
	w := connect(addr)
	defer w.Close()
	var stop atomic.Bool
	var counts []time.Duration
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			t := time.Now()
			if _, err := getAllChildrenNumber("/"); err != nil {
				fmt.Println("count: getAllChildrenNumber:", err)
				return
			}
			counts = append(counts, time.Since(t))
		}
	}()
	var sets []time.Duration
	deadline := time.Now().Add(dur)
	for time.Now().Before(deadline) {
		t := time.Now()
		_, err := w.Set("/count-w", []byte("v"), -1)
		must(err)
		sets = append(sets, time.Since(t))
		time.Sleep(2 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	cp, sp := pcts(counts), pcts(sets)
	fmt.Printf("count: %d getAllChildrenNumber(/) p50 %v p99 %v; meanwhile %d setData p50 %v p99 %v max %v\n",
		len(counts), round(cp[0]), round(cp[1]), len(sets), round(sp[0]), round(sp[1]), round(slices.Max(sets)))
}

// getAllChildrenNumber sends op 104, which go-zookeeper does not offer,
// over a raw session of its own (bench.Conn).
func getAllChildrenNumber(path string) (int32, error) {
	rawOnce.Do(func() {
		raw, rawErr = bench.Dial(serverAddr, bench.ConnOptions{SessionTimeout: 30 * time.Second})
	})
	if rawErr != nil {
		return 0, rawErr
	}
	resp := new(jute.GetAllChildrenNumberResponse)
	err := raw.Do(jute.OpGetAllChildrenNumber, &jute.GetAllChildrenNumberRequest{Path: path}, resp, 5*time.Minute)
	return resp.TotalNumber, err
}

var (
	zkraftBin  string
	serverAddr string
	rawOnce    sync.Once
	raw        *bench.Conn
	rawErr     error
)

func ensure(c *zk.Conn, p string) {
	if _, err := c.Create(p, nil, 0, acl); err != nil && err != zk.ErrNodeExists {
		must(err)
	}
}

func connect(addr string) *zk.Conn {
	c, err := launch.Session(context.Background(), []string{addr}, 60*time.Second, 30*time.Second, zk.WithMaxBufferSize(4<<20))
	must(err)
	return c
}

func start(system, tmp string) (string, func()) {
	cfg := launch.Config{System: launch.System(system), Dir: filepath.Join(tmp, "server"),
		ExtraCfg: []string{"4lw.commands.whitelist=ruok,srvr,conf"}}
	if cfg.System == launch.Zkraft {
		cfg.ZkraftBin = zkraftBin
		if cfg.ZkraftBin == "" {
			cfg.ZkraftBin = filepath.Join(tmp, "zkraft")
			must(launch.BuildZkraft(cfg.ZkraftBin))
		}
	}
	ens, err := launch.New(cfg)
	must(err)
	must(ens.StartWait(context.Background(), 120*time.Second, 3))
	serverAddr = ens.Members[0].Addr()
	return serverAddr, func() { ens.Stop(); launch.KillAll() }
}

func pcts(d []time.Duration) [2]time.Duration {
	if len(d) == 0 {
		return [2]time.Duration{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return [2]time.Duration{s[len(s)/2], s[(len(s)*99)/100]}
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(max(b, 1)) }

func round(d time.Duration) time.Duration {
	switch {
	case d > time.Second:
		return d.Round(time.Millisecond)
	case d > time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostiletree:", err)
		launch.KillAll()
		os.Exit(1)
	}
}
