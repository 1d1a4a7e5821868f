package fleet

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/config"
	dblogger "github.com/lni/dragonboat/v4/logger"

	"github.com/zkraft/zkraft/internal/freeport"
)

var quietDragonboat sync.Once

// replica is one member's NodeHost with its replica of the system shard,
// on real Raft transport over loopback and real disks in a test directory.
type replica struct {
	t    *testing.T
	id   uint64
	addr string
	dir  string
	sink *recordSink
	nh   *dragonboat.NodeHost
	// snapEvery is SnapshotEntries: small, so the log is compacted and a
	// replica that falls behind needs a snapshot.
	snapEvery uint64
}

// system is a system shard of n replicas, each on its own NodeHost.
type system struct {
	t        *testing.T
	replicas []*replica
	initial  map[uint64]dragonboat.Target
}

func newSystem(t *testing.T, n int, snapEvery uint64) *system {
	t.Helper()
	quietDragonboat.Do(func() {
		for _, name := range []string{"raft", "rsm", "transport", "grpc", "dragonboat", "logdb", "raftpb", "config", "settings", "tan", "registry"} {
			dblogger.GetLogger(name).SetLevel(dblogger.ERROR)
		}
	})
	s := &system{t: t, initial: map[uint64]dragonboat.Target{}}
	for i := 1; i <= n; i++ {
		r := &replica{t: t, id: uint64(i), addr: freeport.Addr(t), dir: t.TempDir(), sink: &recordSink{}, snapEvery: snapEvery}
		s.replicas = append(s.replicas, r)
		s.initial[r.id] = r.addr
	}
	for _, r := range s.replicas {
		r.start(s.initial)
	}
	t.Cleanup(func() {
		for _, r := range s.replicas {
			r.stop()
		}
	})
	s.waitLeader()
	return s
}

func (r *replica) start(initial map[uint64]dragonboat.Target) {
	r.t.Helper()
	nhc := config.NodeHostConfig{
		NodeHostDir:    filepath.Join(r.dir, "raft"),
		WALDir:         filepath.Join(r.dir, "raft-wal"),
		RTTMillisecond: 5,
		RaftAddress:    r.addr,
		Expert:         config.GetDefaultExpertConfig(),
	}
	nhc.Expert.LogDB = config.GetSmallMemLogDBConfig()
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		r.t.Fatalf("replica %d: NodeHost: %v", r.id, err)
	}
	rc := config.Config{
		ShardID:            SystemShardID,
		ReplicaID:          r.id,
		CheckQuorum:        true,
		PreVote:            true,
		ElectionRTT:        40,
		HeartbeatRTT:       4,
		SnapshotEntries:    r.snapEvery,
		CompactionOverhead: 2,
	}
	if err := nh.StartOnDiskReplica(initial, false, NewFactory(Config{Dir: filepath.Join(r.dir, "state"), Sink: r.sink}), rc); err != nil {
		nh.Close()
		r.t.Fatalf("replica %d: start: %v", r.id, err)
	}
	r.nh = nh
}

func (r *replica) stop() {
	if r.nh != nil {
		r.nh.Close()
		r.nh = nil
	}
}

func (s *system) waitLeader() {
	s.t.Helper()
	waitFor(s.t, 30*time.Second, "leader known to every running replica", func() bool {
		for _, r := range s.replicas {
			if r.nh == nil {
				continue
			}
			if _, _, ok, err := r.nh.GetLeaderID(SystemShardID); err != nil || !ok {
				return false
			}
		}
		return true
	})
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// propose proposes c through replica r (Dragonboat forwards it to the
// leader) and returns its reply.
func (r *replica) propose(c Command) Reply {
	r.t.Helper()
	reply, err := r.tryPropose(c)
	if err != nil {
		r.t.Fatalf("replica %d: propose %s: %v", r.id, c.Kind(), err)
	}
	return reply
}

// tryPropose is propose for any goroutine. A proposal dropped while the
// shard has no leader, or timed out, is retried: the commands are safe to
// repeat (a retried create or add finds the map as it asked; a versioned
// change is refused as stale).
func (r *replica) tryPropose(c Command) (Reply, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := r.nh.SyncPropose(ctx, r.nh.GetNoOPSession(SystemShardID), Encode(c, time.Now().UnixMilli()))
		cancel()
		if err == nil {
			return ParseResult(res)
		}
		retry := errors.Is(err, dragonboat.ErrTimeout) || errors.Is(err, dragonboat.ErrShardNotReady) || errors.Is(err, dragonboat.ErrSystemBusy)
		if !retry || time.Now().After(deadline) {
			return Reply{}, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ok proposes c and fails unless it changed the map.
func (r *replica) ok(c Command) Reply {
	r.t.Helper()
	reply := r.propose(c)
	if !reply.OK() || !reply.Changed {
		r.t.Fatalf("%s: %v", c.Kind(), reply)
	}
	return reply
}

// read is a linearizable read of the whole map through r.
func (r *replica) read() *Map {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, err := r.nh.SyncRead(ctx, SystemShardID, MapQuery{})
		cancel()
		if err == nil {
			return v.(*Map)
		}
		// Dropped while the replica has no leader yet (just restarted),
		// or timed out: a read is safe to repeat.
		retry := errors.Is(err, dragonboat.ErrTimeout) || errors.Is(err, dragonboat.ErrShardNotReady) || errors.Is(err, dragonboat.ErrSystemBusy)
		if !retry || time.Now().After(deadline) {
			r.t.Fatalf("replica %d: SyncRead: %v", r.id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// status is r's local position, read without Raft.
func (r *replica) status() Status {
	r.t.Helper()
	v, err := r.nh.StaleRead(SystemShardID, StatusQuery{})
	if err != nil {
		return Status{}
	}
	return v.(Status)
}

// local is r's local map, read without Raft.
func (r *replica) local() *Map {
	r.t.Helper()
	v, err := r.nh.StaleRead(SystemShardID, MapQuery{})
	if err != nil {
		r.t.Fatalf("replica %d: StaleRead: %v", r.id, err)
	}
	return v.(*Map)
}

// converge waits until every running replica has applied the same map
// (version and digest) as the linearizable read through the first one.
func (s *system) converge() *Map {
	s.t.Helper()
	var want *Map
	for _, r := range s.replicas {
		if r.nh != nil {
			want = r.read()
			break
		}
	}
	waitFor(s.t, 30*time.Second, fmt.Sprintf("convergence on version %d", want.Version()), func() bool {
		for _, r := range s.replicas {
			if r.nh == nil {
				continue
			}
			if st := r.status(); st.Version < want.Version() {
				return false
			}
		}
		return true
	})
	for _, r := range s.replicas {
		if r.nh == nil {
			continue
		}
		got := r.local()
		if got.Version() != want.Version() || !sameRecords(got, want) {
			s.t.Fatalf("replica %d holds map version %d, digest %#x; want version %d, digest %#x",
				r.id, got.Version(), digestOf(got), want.Version(), digestOf(want))
		}
	}
	return want
}

func TestSingleReplica(t *testing.T) {
	s := newSystem(t, 1, 1000)
	r := s.replicas[0]
	imp := &ImportDefault{ShardID: 1, Members: []MemberSpec{{ID: 1, RaftAddr: r.addr, ClientHost: "127.0.0.1"}},
		Placement: voters(1), ClientPort: 2181}
	r.ok(imp)
	if again := r.propose(imp); !again.OK() || again.Changed {
		t.Errorf("repeated import: %v", again)
	}
	kafka := r.ok(create("kafka", 2182, voters(1)))
	r.ok(&ActivateCell{Name: "kafka", Expect: kafka.Version})
	if stale := r.propose(&ActivateCell{Name: "kafka", Expect: kafka.Version}); stale.Code != CodeBadVersion {
		t.Errorf("stale activate through Raft: %v", stale)
	}
	m := r.read()
	if c, ok := m.CellOnPort(1, 2182); !ok || c.Name != "kafka" || c.State != CellActive || c.ShardID != kafka.ShardID {
		t.Errorf("kafka through a linearizable read: %+v %v", c, ok)
	}
	before := r.status()

	r.stop()
	r.start(s.initial)
	s.waitLeader()
	if got := r.status(); got != before {
		t.Errorf("after restart the replica reports %+v, before %+v", got, before)
	}
	if !sameRecords(r.read(), m) {
		t.Error("the restarted replica's map differs")
	}
	if n := r.sink.count(EventReset); n != 0 {
		t.Errorf("a restart from the replica's own store took %d snapshots", n)
	}
}

func TestThreeReplicasRestartAndCatchUp(t *testing.T) {
	s := newSystem(t, 3, 10)
	var specs []MemberSpec
	for _, r := range s.replicas {
		specs = append(specs, MemberSpec{ID: r.id, RaftAddr: r.addr, ClientHost: fmt.Sprintf("127.0.0.%d", r.id)})
	}
	r1, r2, r3 := s.replicas[0], s.replicas[1], s.replicas[2]
	// Every member proposes the import at start; one applies it.
	var wg sync.WaitGroup
	replies := make([]Reply, 3)
	for i, r := range s.replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			replies[i], err = r.tryPropose(&ImportDefault{ShardID: 1, Members: specs, Placement: voters(1, 2, 3), ClientPort: 2181})
			if err != nil {
				t.Errorf("replica %d: import: %v", r.id, err)
			}
		}()
	}
	wg.Wait()
	changed := 0
	for i, rep := range replies {
		if !rep.OK() || rep.ShardID != 1 {
			t.Errorf("import through replica %d: %v", i+1, rep)
		}
		if rep.Changed {
			changed++
		}
	}
	if changed != 1 {
		t.Errorf("%d imports changed the map, want 1", changed)
	}
	// Cells, proposed through different replicas.
	r2.ok(create("kafka", 2182, voters(1, 2, 3)))
	r3.ok(&CreateCell{Name: "hbase", Placement: Placement{Voters: []uint64{2}, Observers: []uint64{3}}, ClientPort: 2183, TLSPort: 2283})
	if taken := r1.propose(create("solr", 2183, voters(3))); taken.Code != CodePortTaken {
		t.Errorf("port taken through Raft: %v", taken)
	}
	want := s.converge()
	if len(want.Cells()) != 3 || want.NextShardID() != 4 {
		t.Fatalf("map after creates: %d cells, next shard %d", len(want.Cells()), want.NextShardID())
	}

	// A replica closed and reopened on its own dirs recovers the same map
	// from its store (no snapshot), and hears the same changes as a peer
	// that never stopped.
	r2.stop()
	r1.ok(&SetLimits{Name: "kafka", Expect: AnyVersion, Limits: Limits{MaxZnodes: 5000}})
	r2.start(s.initial)
	s.waitLeader()
	s.converge()
	if c, _ := r2.local().Cell("kafka"); c.Limits.MaxZnodes != 5000 {
		t.Errorf("restarted replica did not catch up on the entry it missed: %+v", c.Limits)
	}
	if n := r2.sink.count(EventReset); n != 0 {
		t.Errorf("replica 2 took %d snapshots to catch up on one entry", n)
	}
	if e1, e2 := r1.sink.take(), r2.sink.take(); !reflect.DeepEqual(e1, e2) || len(e1) == 0 {
		t.Errorf("replicas 1 and 2 heard different changes:\n%+v\n%+v", e1, e2)
	}

	// A replica that falls behind the compacted log catches up from a
	// snapshot streamed by the leader.
	r3.stop()
	for i := range 30 {
		name := fmt.Sprintf("cell-%02d", i)
		r1.ok(create(name, uint16(3000+i), voters(1, 2)))
	}
	r2.ok(&PurgeCell{Name: "kafka", Expect: r2.ok(&DeleteCell{Name: "kafka", Expect: AnyVersion, Force: true}).Version})
	r3.start(s.initial)
	s.waitLeader()
	want = s.converge()
	if r3.sink.count(EventReset) == 0 {
		t.Error("replica 3 caught up without a snapshot: the log was not compacted past it, the test proves nothing")
	}
	if got := r3.local(); !reflect.DeepEqual(got.Cells(), want.Cells()) || !reflect.DeepEqual(got.Members(), want.Members()) {
		t.Error("replica 3's map differs after catching up")
	}
	if _, ok := r3.local().Cell("kafka"); ok {
		t.Error("replica 3 still has the purged cell")
	}
	// It carries on applying with the others.
	r3.ok(create("late", 4000, voters(3)))
	s.converge()

	// And after all of that, a restart of every replica gives the same
	// map back.
	for _, r := range s.replicas {
		r.stop()
	}
	for _, r := range s.replicas {
		r.start(s.initial)
	}
	s.waitLeader()
	after := s.converge()
	if after.Version() != want.Version()+1 || len(after.Cells()) != len(want.Cells())+1 {
		t.Errorf("after a full restart: version %d, %d cells", after.Version(), len(after.Cells()))
	}
}
