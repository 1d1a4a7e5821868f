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
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
)

var logLevel *string

type member struct {
	id                     int
	client, peer, election int
	dir                    string
	cmd                    *exec.Cmd
}

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func main() {
	system := flag.String("system", "zkraft", "zkraft or zookeeper")
	rounds := flag.Int("rounds", 5, "leader kills")
	logLevel = flag.String("log-level", "warn", "zkraft members' log level")
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
	var bin string
	if *system == "zkraft" {
		bin = filepath.Join(tmp, "zkraft")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/zkraft").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	ms := make([]*member, 3)
	var lines []string
	for i := range ms {
		m := &member{id: i + 1, client: freePort(), peer: freePort(), election: freePort(), dir: filepath.Join(tmp, fmt.Sprint(i+1))}
		ms[i] = m
		lines = append(lines, fmt.Sprintf("server.%d=127.0.0.1:%d:%d:participant;127.0.0.1:%d", m.id, m.peer, m.election, m.client))
	}
	for _, m := range ms {
		os.MkdirAll(filepath.Join(m.dir, "data"), 0o755)
		os.WriteFile(filepath.Join(m.dir, "data", "myid"), []byte(fmt.Sprint(m.id)), 0o644)
		cfg := fmt.Sprintf("tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=%s\n4lw.commands.whitelist=*\nadmin.enableServer=false\nstandaloneEnabled=false\n%s\n",
			filepath.Join(m.dir, "data"), strings.Join(lines, "\n"))
		os.WriteFile(filepath.Join(m.dir, "zoo.cfg"), []byte(cfg), 0o644)
	}
	start := func(m *member) {
		var cmd *exec.Cmd
		if *system == "zkraft" {
			cmd = exec.Command(bin, "--config", filepath.Join(m.dir, "zoo.cfg"), "--log-level", *logLevel)
		} else {
			cp := "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-nop.jar"
			cmd = exec.Command("java", "-Xmx256m", "-Dzookeeper.admin.enableServer=false", "-cp", cp,
				"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(m.dir, "zoo.cfg"))
		}
		logf, _ := os.OpenFile(filepath.Join(m.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		m.cmd = cmd
	}
	defer func() {
		for _, m := range ms {
			if m.cmd != nil && m.cmd.Process != nil {
				m.cmd.Process.Kill()
				m.cmd.Wait()
			}
		}
	}()
	for _, m := range ms {
		start(m)
	}
	leader := waitLeader(ms, nil, 60*time.Second)
	if leader == nil {
		fmt.Fprintln(os.Stderr, "no leader")
		os.Exit(1)
	}
	var addrs []string
	for _, m := range ms {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", m.client))
	}
	conn, _, err := zk.Connect(addrs, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	var toLeader, toWrite []time.Duration
	for r := 0; r < *rounds; r++ {
		leader = waitLeader(ms, nil, 60*time.Second)
		// Writes flow before the kill.
		for i := 0; i < 20; i++ {
			conn.Create(fmt.Sprintf("/f-%d-%d", r, i), nil, 0, zk.WorldACL(zk.PermAll))
		}
		killed := time.Now()
		leader.cmd.Process.Signal(syscall.SIGKILL)
		leader.cmd.Wait()
		leader.cmd = nil
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
		nl := waitLeader(ms, leader, 60*time.Second)
		tl := time.Since(killed)
		tw := <-done
		fmt.Printf("round %d: killed member %d; member %v leads after %v; first write after %v\n", r+1, leader.id, idOf(nl), tl.Round(time.Millisecond), tw.Round(time.Millisecond))
		toLeader = append(toLeader, tl)
		toWrite = append(toWrite, tw)
		start(leader)
		time.Sleep(3 * time.Second) // let it rejoin
	}
	fmt.Printf("%s: leader kill -> new leader: median %v; -> writes succeed: median %v (%d rounds)\n",
		*system, median(toLeader).Round(time.Millisecond), median(toWrite).Round(time.Millisecond), *rounds)
}

func idOf(m *member) any {
	if m == nil {
		return "none"
	}
	return m.id
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// waitLeader polls srvr on the running members other than skip until one
// reports Mode: leader.
func waitLeader(ms []*member, skip *member, limit time.Duration) *member {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		for _, m := range ms {
			if m == skip || m.cmd == nil {
				continue
			}
			if strings.Contains(srvr(m.client), "Mode: leader") {
				return m
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

func srvr(port int) string {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
	if err != nil {
		return ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	c.Write([]byte("srvr"))
	var b strings.Builder
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}
