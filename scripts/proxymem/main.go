// Command proxymem measures what one idle client session costs a proxy
// (issue 15: at most half of Apache ZooKeeper's per session), by part: it
// starts a standalone zkraft member (a process, with a proxy port), runs
// a proxy in this process, opens -sessions idle sessions through it from
// a load process (proxyscale's minimal clients: a handshake, a ping every
// third of the timeout), waits -idle, and prints, per session, the
// growth of this process's resident memory and of the Go runtime's heap
// in use, goroutine stacks and goroutines, and writes a heap profile
// (go tool pprof -top -inuse_space) of the idle sessions.
//
// Bounded and loopback only; it asserts nothing.
//
//	go build -o /tmp/x/zkraft ./cmd/zkraft && go build -o /tmp/x/proxyscale ./scripts/proxyscale
//	go run ./scripts/proxymem -zkraft /tmp/x/zkraft -load /tmp/x/proxyscale -sessions 10000 -heap /tmp/x/heap.pb.gz
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	xproc "github.com/zkraft/zkraft/internal/proc"
	"github.com/zkraft/zkraft/proxy"
)

func main() {
	bin := flag.String("zkraft", "", "zkraft binary (required)")
	loadBin := flag.String("load", "", "proxyscale binary, for its load processes (required)")
	sessions := flag.Int("sessions", 10000, "idle sessions (at most 15,000: the open-file limit)")
	idle := flag.Duration("idle", 20*time.Second, "how long the sessions idle before the measurement")
	heap := flag.String("heap", "", "write the heap profile of the idle sessions here")
	flag.Parse()
	if *bin == "" || *loadBin == "" || *sessions <= 0 || *sessions > 15000 {
		log.Fatal("proxymem: -zkraft and -load are required; -sessions between 1 and 15,000")
	}
	dir, err := os.MkdirTemp("", "proxymem-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	client, proxyPort, pc := freeAddr(), freeAddr(), freeAddr()
	_, port, _ := net.SplitHostPort(proxyPort)
	m, err := xproc.Start("member", filepath.Join(dir, "member.log"), *bin, "serve", "--client-addr", client, "--data-dir", filepath.Join(dir, "data"),
		"--proxy-port", port, "--admin-enable=false", "--max-client-cnxns", "0", "--max-session-timeout", "60s")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Stop()
	if err := xproc.WaitPort(client, 60*time.Second); err != nil {
		log.Fatal(err)
	}
	p, err := proxy.New(proxy.Config{ClientAddr: pc, Members: []string{proxyPort}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	for deadline := time.Now().Add(30 * time.Second); p.Upstream() == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			log.Fatal("proxymem: no upstream connection")
		}
	}
	before := measure()

	cmd := exec.Command(*loadBin, "-load", "-addrs", pc, "-sessions", fmt.Sprint(*sessions), "-session-timeout", "30s")
	cmd.SysProcAttr = xproc.Orphanless()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	sc := bufio.NewScanner(stdout)
	ready := make(chan string, 1)
	go func() {
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready") {
				ready <- sc.Text()
			}
		}
	}()
	select {
	case r := <-ready:
		fmt.Println("load:", r)
	case <-time.After(5 * time.Minute):
		log.Fatal("proxymem: the sessions did not open within 5 minutes")
	}
	time.Sleep(*idle)
	after := measure()
	n := int64(p.Clients())
	if n == 0 {
		log.Fatal("proxymem: no client held")
	}
	per := func(a, b uint64) string { return fmt.Sprintf("%.2f KiB", float64(int64(a)-int64(b))/float64(n)/1024) }
	fmt.Printf("load average %s\n", xproc.LoadAvg())
	fmt.Printf("%d idle sessions through the proxy, per session:\n", n)
	fmt.Printf("  resident memory (VmRSS)   %s as it was, %s after a collection returned what it freed\n", per(after.rssRaw, before.rssRaw), per(after.rss, before.rss))
	fmt.Printf("  heap in use               %s\n", per(after.heap, before.heap))
	fmt.Printf("  goroutine stacks in use   %s\n", per(after.stack, before.stack))
	fmt.Printf("  runtime other (sys - heap - stacks) %s\n", per(after.sys-after.heap-after.stack, before.sys-before.heap-before.stack))
	fmt.Printf("  goroutines                %.2f\n", float64(after.goroutines-before.goroutines)/float64(n))
	if *heap != "" {
		f, err := os.Create(*heap)
		if err != nil {
			log.Fatal(err)
		}
		pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
		fmt.Println("heap profile:", *heap)
	}
}

type figures struct {
	rssRaw, rss, heap, stack, sys uint64
	goroutines                    int
}

// measure reads the resident memory as it is, then after a collection
// that returns what it freed to the system, and the runtime's figures.
func measure() figures {
	raw := uint64(xproc.RSSKB(os.Getpid())) * 1024
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return figures{
		rssRaw:     raw,
		rss:        uint64(xproc.RSSKB(os.Getpid())) * 1024,
		heap:       ms.HeapInuse,
		stack:      ms.StackInuse,
		sys:        ms.Sys - ms.HeapReleased,
		goroutines: runtime.NumGoroutine(),
	}
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
