// Command bigtree measures zkraft with a large tree: it starts the binary,
// creates N znodes with 100-byte values (in multis of 500, from several
// goroutines), reports the server's RSS, SIGKILLs it, restarts it on the
// same data directory and reports how long until it serves a read of the
// last znode again.
//
//	go run ./scripts/bigtree -n 1000000
//
// With -system zookeeper it does the same to Apache ZooKeeper 3.8 (the
// Debian package; standalone, zoo.cfg from the same client port, JVM heap
// -Xmx1000m as zkServer.sh), for the memory comparison.
//
//	go run ./scripts/bigtree -n 1000000 -system zookeeper
//
// It prints figures; it asserts nothing.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
)

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func rssKiB(pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "VmRSS:") {
			var kb int
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(sc.Text(), "VmRSS:")), "%d", &kb)
			return kb
		}
	}
	return 0
}

func main() {
	n := flag.Int("n", 1000000, "znodes to create")
	system := flag.String("system", "zkraft", "zkraft or zookeeper")
	flag.Parse()
	tmp, _ := os.MkdirTemp("", "bigtree-")
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "zkraft")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/zkraft").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	client := fmt.Sprintf("127.0.0.1:%d", freePort())
	raft := fmt.Sprintf("127.0.0.1:%d", freePort())
	start := func() (*exec.Cmd, time.Time) {
		t0 := time.Now()
		cmd := exec.Command(bin, "--client-addr", client, "--raft-addr", raft, "--data-dir", filepath.Join(tmp, "data"), "--log-level", "warn", "--4lw", "ruok,srvr")
		cmd.Stderr = os.Stderr
		if *system == "zookeeper" {
			cfg := filepath.Join(tmp, "zoo.cfg")
			_, port, _ := net.SplitHostPort(client)
			os.WriteFile(cfg, []byte(fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\n4lw.commands.whitelist=ruok,srvr\nadmin.enableServer=false\n",
				filepath.Join(tmp, "data"), port)), 0o644)
			cmd = exec.Command("java", "-Xmx1000m", "-cp", "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-nop.jar",
				"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // the server dies with us, even on a panic
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		return cmd, t0
	}
	srv, _ := start()
	defer func() { srv.Process.Kill(); srv.Wait() }()
	waitServing(client)
	c, _, err := zk.Connect([]string{client}, 30*time.Second, zk.WithLogInfo(false))
	if err != nil {
		panic(err)
	}
	waitSession(c)
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
	rss := rssKiB(srv.Process.Pid)
	fmt.Printf("server RSS with the tree: %d MiB (%.0f bytes per znode)\n", rss/1024, float64(rss)*1024/float64(*n))
	du, _ := exec.Command("du", "-sm", filepath.Join(tmp, "data")).Output()
	fmt.Printf("data dir: %s", du)

	srv.Process.Signal(syscall.SIGKILL)
	srv.Wait()
	srv, t1 := start()
	waitServing(client)
	last := fmt.Sprintf("/p%04d/n%07d", (*n-1)/10000, *n-1)
	c2, _, err := zk.Connect([]string{client}, 30*time.Second, zk.WithLogInfo(false))
	if err != nil {
		panic(err)
	}
	defer c2.Close()
	waitSession(c2)
	if _, _, err := c2.Get(last); err != nil {
		fmt.Println("read after restart:", err)
		os.Exit(1)
	}
	fmt.Printf("restart after SIGKILL: serving %s again after %v\n", last, time.Since(t1).Round(time.Millisecond))
	time.Sleep(time.Second)
	fmt.Printf("server RSS after restart: %d MiB\n", rssKiB(srv.Process.Pid)/1024)
}

// waitSession waits until c has a session: ZooKeeper answers ruok before
// it takes sessions.
func waitSession(c *zk.Conn) {
	for deadline := time.Now().Add(60 * time.Second); c.State() != zk.StateHasSession && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

func waitServing(addr string) {
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			c.Write([]byte("ruok"))
			b := make([]byte, 4)
			k, _ := c.Read(b)
			c.Close()
			if string(b[:k]) == "imok" {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	panic("server did not come up")
}
