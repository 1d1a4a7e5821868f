package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	rwatch "github.com/zkraft/zkraft/client/resumable"
	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/raftsm"
)

// testCluster is an ensemble of members in this process, each with its own
// NodeHost, data directory and ports on 127.0.0.1.
type testCluster struct {
	t         *testing.T
	snapEvery uint64
	tweak     func(*Config) // adjusts each member's config before start
	members   []Member
	dirs      []string
	mu        sync.Mutex
	servers   map[uint64]*Server
}

func freeAddr(t *testing.T) string {
	t.Helper()
	return freeport.Addr(t)
}

func newTestCluster(t *testing.T, n int) *testCluster {
	return newTestClusterSnap(t, n, 0)
}

func newTestClusterSnap(t *testing.T, n int, snapEvery uint64) *testCluster {
	t.Helper()
	return newTestClusterWith(t, n, snapEvery, nil)
}

// newTestClusterWith starts n members, tweak adjusting each config, and
// waits for a leader.
func newTestClusterWith(t *testing.T, n int, snapEvery uint64, tweak func(*Config)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, servers: map[uint64]*Server{}, snapEvery: snapEvery, tweak: tweak}
	base := t.TempDir()
	for i := 1; i <= n; i++ {
		tc.members = append(tc.members, Member{
			ID: uint64(i), RaftAddr: freeAddr(t), ElectionAddr: freeAddr(t), ClientAddr: freeAddr(t),
		})
		tc.dirs = append(tc.dirs, filepath.Join(base, fmt.Sprint(i)))
	}
	var wg sync.WaitGroup
	for _, m := range tc.members {
		wg.Add(1)
		go func(id uint64) {
			defer wg.Done()
			tc.start(id)
		}(m.ID)
	}
	wg.Wait()
	t.Cleanup(func() {
		tc.mu.Lock()
		defer tc.mu.Unlock()
		for _, s := range tc.servers {
			s.Close()
		}
	})
	tc.waitLeader(20 * time.Second)
	return tc
}

func (tc *testCluster) start(id uint64) {
	s, err := New(tc.config(id, tc.members))
	if err != nil {
		tc.t.Errorf("start member %d: %v", id, err)
		return
	}
	tc.mu.Lock()
	tc.servers[id] = s
	tc.mu.Unlock()
}

func (tc *testCluster) config(id uint64, members []Member) Config {
	m := members[id-1]
	cfg := Config{
		ClientAddr:      m.ClientAddr,
		DataDir:         tc.dirs[id-1],
		ReplicaID:       id,
		Members:         members,
		TickTime:        500 * time.Millisecond,
		SnapshotEntries: tc.snapEvery,
		Logger:          testLogger(tc.t, id),
		// Every cluster test also has the replicas compare their digests
		// through the log all along: one that diverged would stop.
		DigestCheckInterval: 50 * time.Millisecond,
	}
	if tc.tweak != nil {
		tc.tweak(&cfg)
	}
	return cfg
}

func (tc *testCluster) stop(id uint64) {
	tc.mu.Lock()
	s := tc.servers[id]
	delete(tc.servers, id)
	tc.mu.Unlock()
	if s != nil {
		s.Close()
	}
}

// waitLeader waits until every running member knows the same leader.
func (tc *testCluster) waitLeader(limit time.Duration) uint64 {
	tc.t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		tc.mu.Lock()
		var leader uint64
		agree := len(tc.servers) > 0
		for _, s := range tc.servers {
			id := s.cell.leaderID.Load()
			if id == 0 || (leader != 0 && id != leader) {
				agree = false
			}
			leader = id
		}
		_, alive := tc.servers[leader]
		tc.mu.Unlock()
		if agree && alive {
			return leader
		}
		time.Sleep(20 * time.Millisecond)
	}
	tc.t.Fatalf("no agreed leader within %v", limit)
	return 0
}

func (tc *testCluster) connect(ids ...uint64) (*zk.Conn, <-chan zk.Event) {
	tc.t.Helper()
	var addrs []string
	for _, id := range ids {
		addrs = append(addrs, tc.members[id-1].ClientAddr)
	}
	c, ev, err := zk.Connect(addrs, 4*time.Second, zk.WithLogInfo(false))
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.t.Cleanup(c.Close)
	deadline := time.After(15 * time.Second)
	for c.State() != zk.StateHasSession {
		select {
		case <-ev:
		case <-deadline:
			tc.t.Fatalf("no session with %v", addrs)
		}
	}
	return c, ev
}

func TestClusterReplicatesAndServesOnEveryMember(t *testing.T) {
	tc := newTestCluster(t, 3)
	for id, s := range tc.servers {
		if s.cell.localReads.Load() {
			t.Fatalf("member %d of an ensemble reads locally: its reads must take a ReadIndex", id)
		}
	}
	c1, _ := tc.connect(1)
	c2, _ := tc.connect(2)
	c3, _ := tc.connect(3)
	if _, err := c1.Create("/x", []byte("one"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	// Linearizable reads: every member sees the write at once.
	for i, c := range []*zk.Conn{c2, c3} {
		data, st, err := c.Get("/x")
		if err != nil || string(data) != "one" {
			t.Fatalf("member %d: get /x = %q, %v", i+2, data, err)
		}
		if st.Czxid == 0 {
			t.Fatalf("member %d: czxid 0", i+2)
		}
	}
	// A watch set on one member fires for a write on another.
	_, _, w, err := c3.GetW("/x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Set("/x", []byte("two"), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w:
		if ev.Type != zk.EventNodeDataChanged || ev.Path != "/x" {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event on member 3 for a write through member 2")
	}
	// /zookeeper/config lists the ensemble in ZooKeeper's format.
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _, err := c1.Get("/zookeeper/config")
		if err == nil && len(data) > 0 {
			want := renderConfig(tc.members)
			if string(data) != want {
				t.Fatalf("/zookeeper/config = %q, want %q", data, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/zookeeper/config still empty: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClusterLeaderFailoverKeepsSessions kills the leader: clients of the
// other members keep their sessions and ephemerals, the killed member's
// client moves to another member with its session, and no acknowledged
// write is lost.
func TestClusterLeaderFailoverKeepsSessions(t *testing.T) {
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader(10 * time.Second)
	var others []uint64
	for id := uint64(1); id <= 3; id++ {
		if id != leader {
			others = append(others, id)
		}
	}
	// One client on the leader (it can move to the others), one on a follower.
	onLeader, _ := tc.connect(append([]uint64{leader}, others...)...)
	onFollower, _ := tc.connect(others[0])
	sidLeader, sidFollower := onLeader.SessionID(), onFollower.SessionID()
	for _, c := range []*zk.Conn{onLeader, onFollower} {
		if _, err := c.Create(fmt.Sprintf("/e-%x", c.SessionID()), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	var acked []string
	for i := 0; i < 50; i++ {
		p := fmt.Sprintf("/w-%d", i)
		if _, err := onFollower.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, p)
	}

	killed := time.Now()
	tc.stop(leader)
	newLeader := tc.waitLeader(20 * time.Second)
	t.Logf("leader %d stopped; member %d leads after %v", leader, newLeader, time.Since(killed).Round(time.Millisecond))

	// Writes resume through the follower's client.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := onFollower.Create("/after", nil, 0, zk.WorldACL(zk.PermAll))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes did not resume: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("writes resumed %v after the leader stopped", time.Since(killed).Round(time.Millisecond))
	// Wait longer than the session timeout: healthy sessions must survive.
	time.Sleep(6 * time.Second)
	for _, c := range []*zk.Conn{onLeader, onFollower} {
		if c.State() != zk.StateHasSession {
			t.Fatalf("session 0x%x state %v", c.SessionID(), c.State())
		}
	}
	if onLeader.SessionID() != sidLeader || onFollower.SessionID() != sidFollower {
		t.Fatalf("sessions changed: %x/%x -> %x/%x", sidLeader, sidFollower, onLeader.SessionID(), onFollower.SessionID())
	}
	for _, sid := range []int64{sidLeader, sidFollower} {
		ok, st, err := onFollower.Exists(fmt.Sprintf("/e-%x", sid))
		if err != nil || !ok || st.EphemeralOwner != sid {
			t.Fatalf("ephemeral of 0x%x after failover: %v %+v %v", sid, ok, st, err)
		}
	}
	for _, p := range acked {
		if ok, _, err := onLeader.Exists(p); err != nil || !ok {
			t.Fatalf("acknowledged %s lost: %v %v", p, ok, err)
		}
	}
}

// TestClusterLaggingMemberCatchesUpFromSnapshot stops a member, writes
// well past several snapshots (so the log it needs is compacted away),
// restarts it, and checks it installs a snapshot and serves the tree.
func TestClusterLaggingMemberCatchesUpFromSnapshot(t *testing.T) {
	catchUpFromSnapshot(t, newTestClusterSnap(t, 3, 50))
}

// catchUpFromSnapshot stops a follower of tc (member 1, or 2 when 1 leads),
// writes past several snapshots, restarts it and checks that it installed
// a snapshot streamed from the leader and serves the whole tree. It
// returns the follower's id.
func catchUpFromSnapshot(t *testing.T, tc *testCluster) uint64 {
	t.Helper()
	leader := tc.waitLeader(10 * time.Second)
	lag := uint64(1)
	if lag == leader {
		lag = 2
	}
	var live []uint64
	for id := uint64(1); id <= 3; id++ {
		if id != lag {
			live = append(live, id)
		}
	}
	// The test's claim is about the data a member catches up with: its
	// client retries a connection loss as ZooKeeper clients do (under
	// -race on a loaded machine, the 4 s sessions' connections time out).
	c, _ := tc.connect(live...)
	createRetrying(t, c, "/before", "b")
	tc.stop(lag)
	for i := 0; i < 400; i++ {
		createRetrying(t, c, fmt.Sprintf("/n-%03d", i), fmt.Sprint(i))
	}
	retryConnLoss(t, "set /before", func() error {
		_, err := c.Set("/before", []byte("after"), -1)
		return err
	})
	tc.start(lag)
	// The restarted member must reach the others' state on its own replica
	// (bounded for a slow machine under -race, not a speed claim).
	deadline := time.Now().Add(90 * time.Second)
	for {
		tc.mu.Lock()
		s := tc.servers[lag]
		tc.mu.Unlock()
		var got string
		if s != nil {
			v, err := readValue(s.cell.rep, nil, localRead, func(v raftsm.View) (string, error) {
				n, err := v.Tree().Get("/before")
				if err != nil || n == nil {
					return "", err
				}
				kids, err := v.Tree().Children("/")
				return fmt.Sprintf("%s/%d", n.Data, len(kids)), err
			})
			if err == nil {
				got = v
			}
		}
		if got == "after/402" { // /before, /zookeeper and 400 nodes
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %d did not catch up: %q", lag, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	tc.mu.Lock()
	resets := tc.servers[lag].cell.resets.Load()
	tc.mu.Unlock()
	if resets == 0 {
		t.Fatalf("member %d caught up without installing a snapshot; the test did not exercise snapshots", lag)
	}
	// And it serves clients with the full tree.
	cl, _ := tc.connect(lag)
	var kids []string
	retryConnLoss(t, fmt.Sprintf("children of / on member %d", lag), func() (err error) {
		kids, _, err = cl.Children("/")
		return err
	})
	if len(kids) != 402 {
		t.Fatalf("member %d children of /: %d", lag, len(kids))
	}
	return lag
}

// connLoss reports whether err is a connection loss, which a ZooKeeper
// client retries: the request may or may not have been applied.
func connLoss(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionExpired)
}

// retryConnLoss runs op until it ends other than by a connection loss, at
// most 50 times; it fails t on any other error.
func retryConnLoss(t *testing.T, what string, op func() error) {
	t.Helper()
	var err error
	for range 50 {
		if err = op(); !connLoss(err) {
			break
		}
		time.Sleep(200 * time.Millisecond) // the client reconnects meanwhile
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// createRetrying creates path holding data, retrying a connection loss: a
// retried create that finds the node holding data is the first attempt's,
// applied before the connection was lost.
func createRetrying(t *testing.T, c *zk.Conn, path, data string) {
	t.Helper()
	retried := false
	retryConnLoss(t, "create "+path, func() error {
		_, err := c.Create(path, []byte(data), 0, zk.WorldACL(zk.PermAll))
		if retried && errors.Is(err, zk.ErrNodeExists) {
			var got []byte
			if got, _, err = c.Get(path); err == nil && string(got) != data {
				err = fmt.Errorf("%s holds %q after a retried create of %q", path, got, data)
			}
		}
		retried = true
		return err
	})
}

// TestClusterObserverAndReconfig: a member declared an observer in the
// static configuration becomes a non-voting replica that serves clients;
// reconfig (as zkCli's reconfig -add/-remove sends it) adds a fifth member
// started with Join and removes it again, and /zookeeper/config follows.
func TestClusterObserverAndReconfig(t *testing.T) {
	tc := &testCluster{t: t, servers: map[uint64]*Server{}}
	tc.tweak = func(c *Config) {
		c.ReconfigEnabled = true
		c.SuperDigest = "super:lK75jTNcA+U9vtVEw5vB51mj/w4=" // super:secret
	}
	base := t.TempDir()
	for i := 1; i <= 5; i++ {
		tc.members = append(tc.members, Member{ID: uint64(i), RaftAddr: freeAddr(t), ElectionAddr: freeAddr(t), ClientAddr: freeAddr(t)})
		tc.dirs = append(tc.dirs, filepath.Join(base, fmt.Sprint(i)))
	}
	tc.members[3].Observer = true
	fifth := tc.members[4]
	tc.members = tc.members[:4] // member 5 joins later
	t.Cleanup(func() {
		tc.mu.Lock()
		defer tc.mu.Unlock()
		for _, s := range tc.servers {
			s.Close()
		}
	})
	var wg sync.WaitGroup
	for id := uint64(1); id <= 4; id++ {
		wg.Add(1)
		go func() { defer wg.Done(); tc.start(id) }()
	}
	wg.Wait()
	tc.waitLeader(20 * time.Second)

	// The observer is added as a non-voting replica and serves reads.
	obs, _ := tc.connect(4)
	admin, _ := tc.connect(1)
	if _, err := admin.Create("/seen", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if data, _, err := obs.Get("/seen"); err != nil || string(data) != "x" {
		t.Fatalf("observer read: %q, %v", data, err)
	}
	tc.mu.Lock()
	mode := tc.servers[4].mode()
	tc.mu.Unlock()
	if mode != "observer" {
		t.Fatalf("member 4 mode %q", mode)
	}

	// reconfig needs WRITE on /zookeeper/config: NOAUTH without super.
	join := fmt.Sprintf("server.5=%s:%s:participant;%s", fifth.RaftAddr, strings.Split(fifth.ElectionAddr, ":")[1], fifth.ClientAddr)
	if _, err := admin.IncrementalReconfig([]string{join}, nil, -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("reconfig without super: %v, want NOAUTH", err)
	}
	if err := admin.AddAuth("digest", []byte("super:secret")); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.IncrementalReconfig([]string{join}, nil, -1); err != nil {
		t.Fatalf("reconfig -add: %v", err)
	}
	all := append(append([]Member(nil), tc.members...), fifth)
	tc.members = all
	cfg5 := tc.config(5, all)
	cfg5.Join = true
	s5, err := New(cfg5)
	if err != nil {
		t.Fatal(err)
	}
	tc.mu.Lock()
	tc.servers[5] = s5
	tc.mu.Unlock()
	// Connect once the new member has caught up with the log. Before that
	// it may not know the leader yet (a handshake then gives up after the
	// grace period) or may install a snapshot (which closes its clients):
	// under -race and load, a read sent that early once met a closed
	// connection.
	_, seen, err := admin.Exists("/seen")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); s5.lastZxid() < seen.Mzxid; {
		if time.Now().After(deadline) {
			t.Fatalf("member 5 at zxid %#x, /seen written at %#x", s5.lastZxid(), seen.Mzxid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c5, _ := tc.connect(5)
	if data, _, err := c5.Get("/seen"); err != nil || string(data) != "x" {
		t.Fatalf("new member read: %q, %v", data, err)
	}
	data, _, err := c5.Get("/zookeeper/config")
	if err != nil || !strings.Contains(string(data), "server.5=") || !strings.Contains(string(data), ":observer;") {
		t.Fatalf("/zookeeper/config after add: %q, %v", data, err)
	}
	// Remove it again.
	if _, err := admin.IncrementalReconfig(nil, []string{"5"}, -1); err != nil {
		t.Fatalf("reconfig -remove: %v", err)
	}
	data, _, _ = admin.Get("/zookeeper/config")
	if strings.Contains(string(data), "server.5=") {
		t.Fatalf("/zookeeper/config after remove: %q", data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tc.mu.Lock()
	s1 := tc.servers[1]
	tc.mu.Unlock()
	m, err := s1.nh.SyncGetShardMembership(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Nodes[5]; ok || len(m.Nodes) != 3 || len(m.NonVotings) != 1 {
		t.Fatalf("membership after remove: voters %v non-voting %v", m.Nodes, m.NonVotings)
	}
}

// TestClusterResumableWatchSurvivesLeaderKill: a resumable watch streaming
// from the leader resumes on another member after the leader is stopped,
// and delivers every change exactly once, in order.
func TestClusterResumableWatchSurvivesLeaderKill(t *testing.T) {
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader(10 * time.Second)
	var others []uint64
	for id := uint64(1); id <= 3; id++ {
		if id != leader {
			others = append(others, id)
		}
	}
	c, _ := tc.connect(others...)
	if _, err := c.Create("/rw", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, st, _ := c.Exists("/rw")
	// The watch starts on the leader; the other members come after it.
	addrs := []string{tc.members[leader-1].ClientAddr}
	for _, id := range others {
		addrs = append(addrs, tc.members[id-1].ClientAddr)
	}
	w, err := rwatch.WatchFrom(context.Background(), addrs, "/rw", st.Czxid, true, rwatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var written []int64
	write := func(i int) {
		for {
			_, err := c.Create(fmt.Sprintf("/rw/n%03d", i), nil, 0, zk.WorldACL(zk.PermAll))
			if err == nil || errors.Is(err, zk.ErrNodeExists) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		_, st, err := c.Exists(fmt.Sprintf("/rw/n%03d", i))
		if err != nil {
			t.Fatal(err)
		}
		written = append(written, st.Czxid)
	}
	for i := 0; i < 30; i++ {
		write(i)
	}
	tc.stop(leader)
	for i := 30; i < 60; i++ {
		write(i)
	}
	got := map[int64]bool{}
	var last int64
	deadline := time.After(30 * time.Second)
	for len(got) < len(written) {
		select {
		case tx, ok := <-w.Txns:
			if !ok {
				t.Fatalf("watch ended: %v", w.Err())
			}
			if tx.Zxid <= last || got[tx.Zxid] {
				t.Fatalf("txn 0x%x out of order or repeated after 0x%x", tx.Zxid, last)
			}
			last = tx.Zxid
			got[tx.Zxid] = true
		case <-deadline:
			t.Fatalf("%d of %d changes delivered", len(got), len(written))
		}
	}
	for _, z := range written {
		if !got[z] {
			t.Fatalf("change at 0x%x never delivered", z)
		}
	}
	if w.Resumes() == 0 {
		t.Fatal("the watch never moved off the stopped leader")
	}
}
