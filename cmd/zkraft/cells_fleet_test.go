package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/ackwrites"
	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/internal/linreg"
	"github.com/zkraft/zkraft/internal/zktest"
)

// fleetMember is one `zkraft serve` process of the cells test, on its own
// loopback address (the map refuses two replicas of a cell on one client
// host: they would need the same port).
type fleetMember struct {
	id                 int
	ip                 string
	client, raft, elec int
	admin              int
	dir                string
	p                  *zkraftProc
}

func (m *fleetMember) adminURL() string {
	return fmt.Sprintf("http://%s:%d/commands", m.ip, m.admin)
}

func (m *fleetMember) start(t *testing.T) {
	t.Helper()
	m.p = startZkraftProc(t, filepath.Join(m.dir, "log"), "serve", "--config", filepath.Join(m.dir, "zoo.cfg"),
		"--super-digest", zktest.SuperDigest, "--admin-addr", fmt.Sprintf("%s:%d", m.ip, m.admin),
		"--extended-types", "--enforce-quota", "--container-check-interval", "1s", "--4lw", "*")
}

// fourLetter asks addr a four-letter word ("" on any error).
func fourLetter(addr, word string) string {
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return ""
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := nc.Write([]byte(word)); err != nil {
		return ""
	}
	b, _ := io.ReadAll(nc)
	return string(b)
}

// waitServing waits until srvr on addr reports a serving mode.
func waitServing(t *testing.T, addr string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if out := fourLetter(addr, "srvr"); strings.Contains(out, "Mode: leader") || strings.Contains(out, "Mode: follower") || strings.Contains(out, "Mode: standalone") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s does not serve after %v: srvr %q", addr, limit, fourLetter(addr, "srvr"))
}

// TestFleetOfCells is issue 14's test: a fleet of 5 `zkraft serve`
// processes on loopback (one ensemble: the default cell and the system
// shard on all 5) hosts 3 cells on different sets of 3 members, created
// with `zkraft cell create`. The conformance suite passes against a port
// of each cell; a write in one cell is invisible in the others; killing
// (SIGKILL) a member that hosts two cells while clients write to both
// leaves both serving with every acknowledged write there, and the member
// restarted catches up in both; moving a cell (zkraft cell move) from
// members 1,4,5 to 2,4,5 while a client writes keeps its session and every
// acknowledged write. Through the kill and the restart (every cell) and
// through the move (gamma), clients run internal/linreg's register
// workload, and each cell's history is checked with porcupine.
func TestFleetOfCells(t *testing.T) {
	if testing.Short() {
		t.Skip("5 processes and 3 conformance runs; skipped with -short")
	}
	root := t.TempDir()
	// The conformance suite is built before the fleet starts: compiling it
	// while 5 members run their Raft groups starved them of CPU on a
	// loaded machine, long enough for a cell's leader to change during its
	// conformance run (whose clients then saw their connections closed, as
	// a ZooKeeper follower closes them when it loses its leader).
	conformanceBin := filepath.Join(root, "conformance.test")
	if out, err := exec.Command("go", "test", "-c", "-o", conformanceBin, "../../conformance/").CombinedOutput(); err != nil {
		t.Fatalf("build the conformance suite: %v\n%s", err, out)
	}
	// A loopback network of its own, so that other tests' servers on
	// 127.0.0.1 do not matter.
	netByte := 100 + os.Getpid()%100
	members := make([]*fleetMember, 5)
	var lines []string
	for i := range members {
		m := &fleetMember{id: i + 1, ip: fmt.Sprintf("127.%d.0.%d", netByte, i+1), client: freeport.Port(t), raft: freeport.Port(t),
			elec: freeport.Port(t), admin: freeport.Port(t), dir: filepath.Join(root, fmt.Sprintf("m%d", i+1))}
		members[i] = m
		lines = append(lines, fmt.Sprintf("server.%d=%s:%d:%d;%s:%d", m.id, m.ip, m.raft, m.elec, m.ip, m.client))
	}
	for _, m := range members {
		data := filepath.Join(m.dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintf("%d\n", m.id)), 0o644)
		cfg := fmt.Sprintf("tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=%s\n%s\n", data, strings.Join(lines, "\n"))
		if err := os.WriteFile(filepath.Join(m.dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		m.start(t)
	}
	defer func() {
		if t.Failed() {
			for _, m := range members {
				t.Logf("member %d:\n%s", m.id, tail(m.p.log, 30))
			}
		}
	}()
	for _, m := range members {
		waitServing(t, fmt.Sprintf("%s:%d", m.ip, m.client), 60*time.Second)
	}

	// Three cells, each on 3 of the 5 members: a and b share member 3.
	type cellSpec struct {
		name    string
		voters  []int
		port    int
		addrs   []string
		kill    bool // hosted by the member killed below
		history map[string]string
	}
	cells := []*cellSpec{
		{name: "alpha", voters: []int{1, 2, 3}, kill: true},
		{name: "beta", voters: []int{3, 4, 5}, kill: true},
		{name: "gamma", voters: []int{1, 4, 5}},
	}
	cellCmd := func(m *fleetMember, args ...string) (string, error) {
		var out bytes.Buffer
		err := runCell(append(args, "--admin", m.adminURL(), "--super", "super:secret"), &out)
		return out.String(), err
	}
	for i, c := range cells {
		c.port = freeport.Port(t)
		ids := make([]string, len(c.voters))
		for j, v := range c.voters {
			ids[j] = fmt.Sprint(v)
			c.addrs = append(c.addrs, fmt.Sprintf("%s:%d", members[v-1].ip, c.port))
		}
		// Asked on different members; the first may wait for the map's import.
		var out string
		var err error
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, err = cellCmd(members[i], "create", c.name, "--voters", strings.Join(ids, ","), "--port", fmt.Sprint(c.port))
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("create %s: %v\n%s", c.name, err, out)
		}
	}
	for _, c := range cells {
		for _, a := range c.addrs {
			waitServing(t, a, 60*time.Second)
		}
	}

	// The conformance suite against one port of each cell, one after the
	// other (each run assumes nobody else writes to its server).
	for i, c := range cells {
		addr := c.addrs[i%len(c.addrs)]
		start := time.Now()
		cmd := exec.Command(conformanceBin, "-test.count=1", "-test.timeout=5m")
		cmd.Dir = "../../conformance"
		cmd.Env = append(os.Environ(), "CONFORMANCE_ADDR="+addr)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("conformance against cell %s at %s: %v\n%s", c.name, addr, err, out)
		}
		t.Logf("conformance against cell %s at %s: passed in %v", c.name, addr, time.Since(start).Round(time.Second))
	}

	// Isolation: each cell's node is in that cell only.
	conns := map[string]*zk.Conn{}
	for _, c := range cells {
		zc, _, err := zk.Connect(c.addrs, 10*time.Second, zk.WithLogger(quiet{}))
		if err != nil {
			t.Fatal(err)
		}
		defer zc.Close()
		conns[c.name] = zc
		if _, err := zc.Create("/only-"+c.name, []byte(c.name), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create in %s: %v", c.name, err)
		}
	}
	for _, c := range cells {
		for _, o := range cells {
			ok, _, err := conns[c.name].Exists("/only-" + o.name)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (c == o) {
				t.Errorf("cell %s sees /only-%s: %v", c.name, o.name, ok)
			}
		}
	}

	// Writers on alpha and beta; member 3, which hosts both, is killed
	// mid-stream. Every acknowledged write must be there afterwards.
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	killedAt := make(chan struct{})
	afterKill := map[string]int{}
	for _, c := range cells {
		if !c.kill {
			continue
		}
		c.history = map[string]string{}
		zc := conns[c.name]
		if _, err := zc.Create("/load", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(c *cellSpec, w int) {
				defer wg.Done()
				for i := 0; i < 100000 && ctx.Err() == nil; i++ {
					p := fmt.Sprintf("/load/w%d-%06d", w, i)
					data := fmt.Sprintf("%s %d %d", c.name, w, i)
					if _, err := zc.Create(p, []byte(data), 0, zk.WorldACL(zk.PermAll)); err != nil {
						// Lost with the connection (not acknowledged):
						// go on; the client reconnects to a live member.
						time.Sleep(50 * time.Millisecond)
						continue
					}
					mu.Lock()
					c.history[p] = data
					select {
					case <-killedAt:
						afterKill[c.name]++
					default:
					}
					n := afterKill[c.name]
					mu.Unlock()
					if n >= 200 {
						return // enough written after the kill
					}
				}
			}(c, w)
		}
	}
	// And the register workload on every cell, through the kill and the
	// restart: each cell's history must be linearizable.
	clk := linreg.Clock{T0: time.Now()}
	regs := map[string]*regLoad{}
	for _, c := range cells {
		regs[c.name] = startRegLoad(t, c.name, "kill", c.addrs, clk)
	}
	time.Sleep(2 * time.Second)
	members[2].p.stop(syscall.SIGKILL)
	killAt := clk.Now()
	close(killedAt)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the writers did not get 200 writes acknowledged after the kill within the time: %v", afterKill)
	}
	for _, c := range cells {
		if !c.kill {
			continue
		}
		// Read from a surviving member only.
		var live []string
		for j, v := range c.voters {
			if v != 3 {
				live = append(live, c.addrs[j])
			}
		}
		rc, _, err := zk.Connect(live, 10*time.Second, zk.WithLogger(quiet{}))
		if err != nil {
			t.Fatal(err)
		}
		missing := 0
		for p, want := range c.history {
			got, _, err := rc.Get(p)
			if err != nil || string(got) != want {
				missing++
				if missing < 5 {
					t.Errorf("cell %s: acknowledged %s = %q, read %q %v", c.name, p, want, got, err)
				}
			}
		}
		rc.Close()
		t.Logf("cell %s: %d acknowledged writes, %d after the kill, %d missing", c.name, len(c.history), afterKill[c.name], missing)
	}

	// The member restarted serves both its cells again, caught up.
	members[2].start(t)
	for _, c := range cells {
		if !c.kill {
			continue
		}
		addr := fmt.Sprintf("%s:%d", members[2].ip, c.port)
		waitServing(t, addr, 60*time.Second)
		rc, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(quiet{}))
		if err != nil {
			t.Fatal(err)
		}
		kids, _, err := rc.Children("/load")
		if err != nil || len(kids) < len(c.history) {
			t.Errorf("cell %s on the restarted member: %d children of /load, %d acknowledged (%v)", c.name, len(kids), len(c.history), err)
		}
		rc.Close()
	}

	for _, c := range cells {
		r := regs[c.name]
		r.finish(t)
		// Each cell went on answering after the kill, the two that lost a
		// replica and the one that did not.
		if n := r.answeredAfter(killAt); n < 10 {
			t.Errorf("cell %s: only %d register operations answered after member 3 was killed", c.name, n)
		}
	}

	// Move gamma from 1,4,5 to 2,4,5 while a client writes through one
	// session whose connect string lists all four members.
	g := cells[2]
	mover, ev, err := zk.Connect(append(append([]string(nil), g.addrs...), fmt.Sprintf("%s:%d", members[1].ip, g.port)), 10*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer mover.Close()
	if _, err := mover.Create("/moving", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	sid := mover.SessionID()
	expired := make(chan struct{})
	go func() {
		for e := range ev {
			if e.State == zk.StateExpired {
				close(expired)
				return
			}
		}
	}()
	writes := ackwrites.Start(mover, "/moving", 50*time.Millisecond)
	moveReg := startRegLoad(t, g.name, "move", append(append([]string(nil), g.addrs...), fmt.Sprintf("%s:%d", members[1].ip, g.port)), clk)
	movedAt := clk.Now()
	if out, err := cellCmd(members[3], "move", "gamma", "--voters", "2,4,5"); err != nil {
		t.Fatalf("move: %v\n%s", err, out)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := cellCmd(members[3], "show", "gamma")
		if err == nil && strings.Contains(out, `"state" : "active"`) && strings.Contains(out, `"voters" : [ 2, 4, 5 ]`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the move did not finish:\n%s", out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	waitServing(t, fmt.Sprintf("%s:%d", members[1].ip, g.port), 60*time.Second)
	writes.WaitMore(t, 50, 60*time.Second)
	moved := writes.Stop()
	moveReg.finish(t)
	if n := moveReg.answeredAfter(movedAt); n < 10 {
		t.Errorf("cell gamma: only %d register operations answered during and after the move", n)
	}
	select {
	case <-expired:
		t.Fatal("the writer's session expired during the move")
	default:
	}
	if mover.SessionID() != sid {
		t.Fatalf("the writer's session %x became %x", sid, mover.SessionID())
	}
	rc, _, err := zk.Connect([]string{fmt.Sprintf("%s:%d", members[1].ip, g.port)}, 10*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	kids, _, err := rc.Children("/moving")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, k := range kids {
		have["/moving/"+k] = true
	}
	missing := 0
	for _, p := range moved {
		if !have[p] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d writes acknowledged across the move are missing on member 2", missing, len(moved))
	}
	t.Logf("cell gamma moved to 2,4,5: %d writes acknowledged across the move, none missing on member 2, session kept", len(moved))
}
