package faulttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/linreg"
)

// Settings of the run. The defaults are the short form run by go test in
// CI; scripts/soak.sh sets the environment for a longer run.
//
//	ZKRAFT_FAULT_ROUNDS=n       rounds of the four faults (default 2)
//	ZKRAFT_FAULT_DURATION=30m   keep starting rounds until this much time has passed
//	ZKRAFT_FAULT_NO_NETNS=1     run on 127.0.0.1 without namespaces; the partition step is skipped
//	ZKRAFT_FAULT_DIR=path       keep the run's files (member logs, configs) there
//	ZKRAFT_FAULT_SEED=n         seed of the workload's random choices
//	ZKRAFT_FAULT_BIN=path       test this zkraft binary instead of building ./cmd/zkraft
const (
	members        = 3
	tickTime       = 500 * time.Millisecond
	sessionTimeout = 6 * time.Second
	regClients     = 4
	lockClients    = 3
	keysPerRound   = 5
	settle         = 3 * time.Second                        // workload between faults
	pauseFor       = sessionTimeout + 1500*time.Millisecond // SIGSTOP longer than the session timeout
	partitionFor   = sessionTimeout + time.Second
	healthyWithin  = 60 * time.Second
)

// fault is one injected fault, as it happened.
type fault struct {
	kind       string // kill-leader, kill-follower, pause, partition
	member     int
	wasLeader  bool
	start, end int64 // the member's trouble: from the fault until it serves again
	// Leader faults: when another member was first seen leading, and when
	// the first write called after the fault was acknowledged (-1: none).
	newLeader   int
	leaderAt    int64
	firstWrite  int64
	round       int
	description string
}

type faultRun struct {
	t      *testing.T
	cl     *cluster
	clk    linreg.Clock
	w      *workload
	faults []*fault
	mu     sync.Mutex
	pruned map[int]bool // rounds whose ack log was checked and removed
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// TestFaults runs the ensemble under a client workload while members are
// killed, paused and cut off, then checks what the clients saw.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-member ensemble under faults for about two minutes; skipped with -short")
	}
	rounds := envInt(t, "ZKRAFT_FAULT_ROUNDS", 2)
	var duration time.Duration
	if v := os.Getenv("ZKRAFT_FAULT_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("ZKRAFT_FAULT_DURATION=%q: %v", v, err)
		}
		duration = d
	}
	seed := uint64(envInt(t, "ZKRAFT_FAULT_SEED", int(time.Now().UnixNano()%1e9)))
	noNetns := os.Getenv("ZKRAFT_FAULT_NO_NETNS") == "1"
	testStart := time.Now()

	dir := os.Getenv("ZKRAFT_FAULT_DIR")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "zkraft-faulttest-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if !t.Failed() {
				os.RemoveAll(dir)
			}
		})
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("run directory %s, seed %d", dir, seed)
	bin := os.Getenv("ZKRAFT_FAULT_BIN")
	if bin == "" {
		bin = buildBinary(t, dir)
	}

	var lab *netLab
	if noNetns {
		t.Log("ZKRAFT_FAULT_NO_NETNS=1: members on 127.0.0.1, the partition step is skipped")
	} else {
		var err error
		lab, err = newNetLab(members)
		if err != nil {
			t.Fatalf("cannot create the network namespaces for the partition test: %v\n"+
				"(the test needs root and iproute2; set ZKRAFT_FAULT_NO_NETNS=1 to run the other faults on 127.0.0.1)", err)
		}
		t.Cleanup(func() {
			if err := lab.close(); err != nil {
				t.Errorf("removing the test network: %v", err)
			}
		})
		t.Logf("test network %s: namespaces %s..%s", lab.cidr(), lab.nsName(1), lab.nsName(members))
	}
	cl := newCluster(t, bin, dir, members, tickTime, lab)
	t.Cleanup(cl.killAll)
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range cl.members {
				t.Logf("---- tail of %s stderr (%s) ----\n%s", m, filepath.Join(m.dir, "stderr.log"), m.logTail(40))
			}
			t.Logf("run directory kept: %s", dir)
		}
	})
	for _, m := range cl.members {
		cl.start(m)
	}
	if err := cl.waitHealthy(healthyWithin); err != nil {
		t.Fatalf("ensemble did not come up: %v", err)
	}

	clk := linreg.Clock{T0: time.Now()}
	clientLog, err := os.Create(filepath.Join(dir, "clients.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clientLog.Close() })
	logw := &syncWriter{w: clientLog}

	var allClients []*client
	var clientsMu sync.Mutex
	connect := func(name string, addrs []string) *client {
		t.Helper()
		c, err := newClient(name, addrs, sessionTimeout, clk, logw)
		if err != nil {
			t.Fatal(err)
		}
		clientsMu.Lock()
		allClients = append(allClients, c)
		clientsMu.Unlock()
		return c
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range allClients {
			wg.Add(1)
			go func() { defer wg.Done(); c.close() }()
		}
		wg.Wait()
	})

	admin := connect("admin", cl.clientAddrs())
	for _, p := range []string{"/reg", "/acked", lockDir} {
		mustCreate(t, admin, p)
	}
	w := &workload{clk: clk, keys: keysPerRound, hist: &linreg.History{}, acks: newAckLog()}
	startRound := func(r int) {
		mustCreate(t, admin, fmt.Sprintf("/reg/r%d", r))
		mustCreate(t, admin, fmt.Sprintf("/acked/r%d", r))
		w.round.Store(int32(r))
	}
	startRound(0)

	lr := &lockRun{clk: clk, res: &resource{}}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	var workers []*client
	for i := range regClients {
		c := connect(fmt.Sprintf("reg%d", i), cl.clientAddrs())
		workers = append(workers, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx, i, c, rand.New(rand.NewPCG(seed, uint64(i))))
		}()
	}
	for i := range lockClients {
		c := connect(fmt.Sprintf("lock%d", i), cl.clientAddrs())
		workers = append(workers, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			lr.runLock(ctx, i, c, rand.New(rand.NewPCG(seed, uint64(100+i))))
		}()
	}

	fr := &faultRun{t: t, cl: cl, clk: clk, w: w, pruned: map[int]bool{}}
	time.Sleep(settle)
	round := 0
	for ; round < rounds || (duration > 0 && time.Since(testStart) < duration); round++ {
		if round > 0 {
			startRound(round)
		}
		if round >= 2 {
			// Keep the tree small over a soak (srvr's cost grows with it):
			// the acks of two rounds ago, which have been through a whole
			// round of faults since, are checked on every member and
			// removed.
			fr.verifyAndPrune(round-2, admin, connect)
		}
		t.Logf("round %d at %s", round, clk.Fmt(clk.Now()))
		fr.killLeader(round)
		fr.killFollower(round)
		// Alternate the targets: even rounds pause the leader and cut off
		// a follower, odd rounds the other way round.
		fr.pause(round, round%2 == 0)
		if lab != nil {
			fr.partition(round, round%2 == 1)
		}
		if t.Failed() {
			break
		}
	}

	// Stop the workload and let the ensemble settle.
	stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatalf("workload did not stop within 90s")
	}
	if err := cl.waitHealthy(healthyWithin); err != nil {
		t.Fatalf("ensemble not healthy after the run: %v", err)
	}
	if ex := cl.unexpectedExits(); len(ex) > 0 {
		t.Errorf("members exited on their own: %v", ex)
	}

	// Read back through each member alone: every key (recorded in the
	// history like the workload's reads) and the ack log.
	verifiers := []*client{admin}
	for i, m := range cl.members {
		c := connect(fmt.Sprintf("verify-m%d", m.id), []string{m.clientAddr()})
		verifiers = append(verifiers, c)
		var rounds []int
		for r := 0; r < round; r++ {
			for k := range keysPerRound {
				w.get(regClients+i, c, keyPath(int32(r), k))
			}
			if !fr.pruned[r] {
				rounds = append(rounds, r)
			}
		}
		fr.checkAcked(m, c, rounds)
	}
	fr.checkLinearizable(dir)
	for _, p := range checkLocks(lr.held, clk) {
		t.Errorf("lock: %s", p)
	}
	fr.checkExpiries(append(workers, verifiers...))
	fr.summary(round, lr)
}

// syncWriter serializes writes of the clients' loggers.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// mustCreate creates a persistent znode, retrying unknown outcomes.
func mustCreate(t *testing.T, c *client, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
		if err == nil || errors.Is(err, zk.ErrNodeExists) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("create %s: %v", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *faultRun) record(ft *fault) {
	f.mu.Lock()
	f.faults = append(f.faults, ft)
	f.mu.Unlock()
	f.t.Logf("  %s", ft.description)
}

// leaderNow finds the leader, waiting for one.
func (f *faultRun) leaderNow() int {
	f.t.Helper()
	l, _, err := f.cl.waitLeader(30*time.Second, 0, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

func (f *faultRun) follower(leader int) int {
	for _, m := range f.cl.members {
		if m.id != leader {
			return m.id
		}
	}
	return 0
}

func (f *faultRun) healthy(what string) int64 {
	f.t.Helper()
	if ex := f.cl.unexpectedExits(); len(ex) > 0 {
		f.t.Fatalf("after %s: %v", what, ex)
	}
	if err := f.cl.waitHealthy(healthyWithin); err != nil {
		f.t.Fatalf("after %s: %v", what, err)
	}
	return f.clk.Now()
}

// awaitNewLeader measures the failover after the leader's fault.
func (f *faultRun) awaitNewLeader(ft *fault, skip func(*member) bool) {
	l, at, err := f.cl.waitLeader(30*time.Second, ft.member, skip)
	if err != nil {
		f.t.Fatalf("%s of leader %d: %v", ft.kind, ft.member, err)
	}
	ft.newLeader, ft.leaderAt = l, f.clk.At(at)
}

func (f *faultRun) killLeader(round int) {
	l := f.leaderNow()
	m := f.cl.member(l)
	ft := &fault{kind: "kill-leader", member: l, wasLeader: true, round: round}
	ft.start = f.clk.At(f.cl.kill(m))
	f.awaitNewLeader(ft, nil)
	time.Sleep(settle)
	f.cl.start(m)
	ft.end = f.healthy("restarting the killed leader")
	ft.firstWrite = f.w.firstWriteAfter(ft.start)
	ft.description = fmt.Sprintf("SIGKILL leader %d at %s; member %d leads %s later; first write acknowledged %s after the kill; restarted, healthy at %s",
		l, f.clk.Fmt(ft.start), ft.newLeader, f.clk.Dur(ft.start, ft.leaderAt), f.durOrNone(ft.start, ft.firstWrite), f.clk.Fmt(ft.end))
	f.record(ft)
	time.Sleep(settle)
}

func (f *faultRun) killFollower(round int) {
	l := f.leaderNow()
	id := f.follower(l)
	m := f.cl.member(id)
	ft := &fault{kind: "kill-follower", member: id, round: round}
	ft.start = f.clk.At(f.cl.kill(m))
	time.Sleep(settle)
	f.cl.start(m)
	ft.end = f.healthy("restarting the killed follower")
	ft.description = fmt.Sprintf("SIGKILL follower %d at %s; restarted, healthy at %s", id, f.clk.Fmt(ft.start), f.clk.Fmt(ft.end))
	f.record(ft)
	time.Sleep(settle)
}

func (f *faultRun) pause(round int, leader bool) {
	l := f.leaderNow()
	id := l
	if !leader {
		id = f.follower(l)
	}
	m := f.cl.member(id)
	ft := &fault{kind: "pause", member: id, wasLeader: leader, round: round}
	f.cl.pause(m)
	ft.start = f.clk.Now() // once the signal is sent: the test may be descheduled before it
	if leader {
		f.awaitNewLeader(ft, nil) // statuses skip the paused member
	}
	time.Sleep(pauseFor - f.clk.Since(ft.start))
	f.cl.resume(m)
	resumed := f.clk.Now()
	ft.end = f.healthy("SIGCONT")
	ft.firstWrite = f.w.firstWriteAfter(ft.start)
	role := "follower"
	if leader {
		role = "leader"
	}
	ft.description = fmt.Sprintf("SIGSTOP %s %d at %s for %s", role, id, f.clk.Fmt(ft.start), f.clk.Dur(ft.start, resumed))
	if leader {
		ft.description += fmt.Sprintf("; member %d leads %s later; first write acknowledged %s after the pause",
			ft.newLeader, f.clk.Dur(ft.start, ft.leaderAt), f.durOrNone(ft.start, ft.firstWrite))
	}
	ft.description += fmt.Sprintf("; SIGCONT, healthy at %s", f.clk.Fmt(ft.end))
	f.record(ft)
	time.Sleep(settle)
}

func (f *faultRun) partition(round int, leader bool) {
	l := f.leaderNow()
	id := l
	if !leader {
		id = f.follower(l)
	}
	ft := &fault{kind: "partition", member: id, wasLeader: leader, round: round}
	if err := f.cl.lab.isolate(id); err != nil {
		f.t.Fatalf("isolate member %d: %v", id, err)
	}
	ft.start = f.clk.Now() // once the link is down: ip(8) takes a few milliseconds
	cut := func(m *member) bool { return m.id == id }
	if leader {
		f.awaitNewLeader(ft, cut)
	}
	time.Sleep(partitionFor - f.clk.Since(ft.start))
	if err := f.cl.lab.heal(id); err != nil {
		f.t.Fatalf("heal member %d: %v", id, err)
	}
	healed := f.clk.Now()
	ft.end = f.healthy("healing the partition")
	ft.firstWrite = f.w.firstWriteAfter(ft.start)
	role := "follower"
	if leader {
		role = "leader"
	}
	ft.description = fmt.Sprintf("cut off %s %d at %s for %s", role, id, f.clk.Fmt(ft.start), f.clk.Dur(ft.start, healed))
	if leader {
		ft.description += fmt.Sprintf("; member %d leads %s later; first write acknowledged %s after the cut",
			ft.newLeader, f.clk.Dur(ft.start, ft.leaderAt), f.durOrNone(ft.start, ft.firstWrite))
	}
	ft.description += fmt.Sprintf("; healed, healthy at %s", f.clk.Fmt(ft.end))
	f.record(ft)
	time.Sleep(settle)
}

func (f *faultRun) durOrNone(from, to int64) string {
	if to < 0 {
		return "(none)"
	}
	return f.clk.Dur(from, to)
}

// checkAcked reads the ack log of the given rounds back through c, a
// client of member m alone: every acknowledged znode must be there, and
// none that was never created.
func (f *faultRun) checkAcked(m *member, c *client, rounds []int) {
	t := f.t
	a := f.w.acks
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range rounds {
		parent := fmt.Sprintf("/acked/r%d", r)
		if m.id == 1 {
			for p, e := range a.failed {
				if strings.HasPrefix(p, parent+"/") {
					t.Errorf("ack log: create of the unique path %s answered %s", p, e)
				}
			}
		}
		var kids []string
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := retry(rctx, func() (err error) { kids, _, err = c.conn.Children(parent); return }, zk.ErrNoNode)
		cancel()
		if err != nil {
			t.Errorf("member %d: children of %s: %v", m.id, parent, err)
			continue
		}
		present := map[string]bool{}
		for _, k := range kids {
			present[parent+"/"+k] = true
		}
		var lost, phantom []string
		for p := range a.acked {
			if strings.HasPrefix(p, parent+"/") && !present[p] {
				lost = append(lost, p)
			}
		}
		for p := range present {
			if !a.acked[p] && !a.unknown[p] {
				phantom = append(phantom, p)
			}
		}
		sort.Strings(lost)
		sort.Strings(phantom)
		if len(lost) > 0 {
			t.Errorf("member %d: %d acknowledged writes of round %d lost, e.g. %v", m.id, len(lost), r, head(lost, 10))
		}
		if len(phantom) > 0 {
			t.Errorf("member %d: %d znodes of round %d that no client created, e.g. %v", m.id, len(phantom), r, head(phantom, 10))
		}
	}
}

// verifyAndPrune checks round r's ack log through each member alone, then
// deletes its znodes.
func (f *faultRun) verifyAndPrune(r int, admin *client, connect func(string, []string) *client) {
	for _, m := range f.cl.members {
		c := connect(fmt.Sprintf("verify-r%d-m%d", r, m.id), []string{m.clientAddr()})
		f.checkAcked(m, c, []int{r})
		c.close()
	}
	parent := fmt.Sprintf("/acked/r%d", r)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		kids, _, err := admin.conn.Children(parent)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if len(kids) == 0 {
			f.pruned[r] = true
			return
		}
		for len(kids) > 0 {
			n := min(len(kids), 200)
			var ops []any
			for _, k := range kids[:n] {
				ops = append(ops, &zk.DeleteRequest{Path: parent + "/" + k, Version: -1})
			}
			kids = kids[n:]
			if _, err := admin.conn.Multi(ops...); err != nil {
				break // list again
			}
		}
	}
	f.t.Errorf("could not remove the ack log of round %d", r)
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// checkLinearizable runs porcupine on the register history.
func (f *faultRun) checkLinearizable(dir string) {
	t := f.t
	ops := f.w.hist.Ops()
	start := time.Now()
	res, info, bad := linreg.Check(ops, 3*time.Minute)
	t.Logf("porcupine: %d operations on %d keys: %s in %v", len(ops), len(linreg.Model.Partition(ops)), res, time.Since(start).Round(time.Millisecond))
	if res == porcupine.Ok {
		return
	}
	vis := filepath.Join(dir, "linearizability.html")
	if err := porcupine.VisualizePath(linreg.Model, info, vis); err != nil {
		t.Logf("visualization: %v", err)
	}
	if res == porcupine.Unknown {
		t.Errorf("porcupine could not decide within its time limit (%d operations); visualization %s", len(ops), vis)
		return
	}
	// Name the keys whose histories are not linearizable, and dump them.
	for _, part := range bad {
		key := linreg.Key(part)
		file := filepath.Join(dir, "history-"+strings.NewReplacer("/", "_").Replace(key)+".txt")
		f.dumpHistory(part, file)
		t.Errorf("history of %s (%d operations) is not linearizable: %s; visualization %s", key, len(part), file, vis)
	}
}

func (f *faultRun) dumpHistory(ops []porcupine.Operation, file string) {
	var b strings.Builder
	b.WriteString(linreg.Dump(ops, f.clk))
	for _, ft := range f.faults {
		fmt.Fprintf(&b, "fault: %s\n", ft.description)
	}
	os.WriteFile(file, []byte(b.String()), 0o644)
}

// checkExpiries fails the run for any session that expired while its
// client had been connected to a healthy member; expiries after the
// client's own member was faulted are reported.
func (f *faultRun) checkExpiries(clients []*client) {
	t := f.t
	byAddr := map[string]int{}
	for _, m := range f.cl.members {
		byAddr[m.clientAddr()] = m.id
	}
	for _, c := range clients {
		for _, e := range c.expiriesSeen() {
			id := byAddr[e.lastServer]
			var hit *fault
			for _, ft := range f.faults {
				// The fault's start is taken once it is injected; a client
				// may see its effect a moment before the test records it.
				if ft.member == id && ft.start-int64(time.Second) <= e.disconnected && ft.end >= e.disconnected-int64(sessionTimeout) {
					hit = ft
				}
			}
			desc := fmt.Sprintf("session of %s expired at %s; it was last connected to member %d (%s) and lost that connection at %s",
				e.client, f.clk.Fmt(e.at), id, e.lastServer, f.clk.Fmt(e.disconnected))
			if hit == nil {
				t.Errorf("%s, a healthy member", desc)
			} else {
				t.Logf("note: %s, during its fault (%s)", desc, hit.kind)
			}
		}
	}
}

func (f *faultRun) summary(rounds int, lr *lockRun) {
	t := f.t
	h := f.w.hist
	var b strings.Builder
	fmt.Fprintf(&b, "summary: %d rounds, %d faults, %d recorded operations\n", rounds, len(f.faults), len(h.Ops()))
	fmt.Fprintf(&b, "  results by operation:\n")
	for _, line := range strings.Split(strings.TrimSpace(h.Summary()), "\n") {
		fmt.Fprintf(&b, "    %s\n", line)
	}
	a := f.w.acks
	a.mu.Lock()
	fmt.Fprintf(&b, "  ack log: %d acknowledged, %d unknown outcome, all read back on every member unless reported\n", len(a.acked), len(a.unknown))
	a.mu.Unlock()
	lr.mu.Lock()
	var kindsL []string
	for k := range lr.errs {
		kindsL = append(kindsL, fmt.Sprintf("%s: %d", k, lr.errs[k]))
	}
	sort.Strings(kindsL)
	fmt.Fprintf(&b, "  lock: %d critical sections, %d resource accesses; recipe errors %v\n", len(lr.held), lr.res.seen, kindsL)
	lr.mu.Unlock()
	fmt.Fprintf(&b, "  failover (not asserted; after a pause or cut, clients of that member wait their receive timeout, %v, before moving):\n", sessionTimeout*2/3)
	for _, ft := range f.faults {
		if ft.wasLeader {
			fmt.Fprintf(&b, "    round %d %-12s leader %d: new leader after %s, first write acknowledged after %s\n",
				ft.round, ft.kind, ft.member, f.clk.Dur(ft.start, ft.leaderAt), f.durOrNone(ft.start, ft.firstWrite))
		}
	}
	t.Log(b.String())
}
