package fleet

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestAddMember(t *testing.T) {
	h := newHarness(t)
	r := h.ok(&AddMember{Member: MemberSpec{ID: 1, RaftAddr: "Node1.Example:7000", ClientHost: "Node1.Example"}})
	if r.Version != 1 {
		t.Errorf("first change at version %d", r.Version)
	}
	got, ok := h.m().Member(1)
	want := Member{ID: 1, RaftAddr: "node1.example:7000", ClientHost: "node1.example", State: MemberActive,
		Created: 1, Updated: 1, AddedAt: h.now}
	if !ok || got != want {
		t.Errorf("member 1 = %+v, want %+v", got, want)
	}
	// A retry (same addresses, in any case) changes nothing.
	if r := h.do(&AddMember{Member: MemberSpec{ID: 1, RaftAddr: "node1.example:7000", ClientHost: "NODE1.example"}}); r.Code != CodeOK || r.Changed {
		t.Errorf("retried add: %v", r)
	}
	h.refused(CodeExists, &AddMember{Member: MemberSpec{ID: 1, RaftAddr: "node1.example:7001", ClientHost: "node1.example"}})
	h.refused(CodeExists, &AddMember{Member: MemberSpec{ID: 2, RaftAddr: "node1.example:7000", ClientHost: "node2.example"}})
	for _, s := range []MemberSpec{
		{ID: 0, RaftAddr: "h:1", ClientHost: "h"},
		{ID: MaxMemberID + 1, RaftAddr: "h:1", ClientHost: "h"},
		{ID: 3, RaftAddr: "h", ClientHost: "h"},
		{ID: 3, RaftAddr: "h:0", ClientHost: "h"},
		{ID: 3, RaftAddr: "h:x", ClientHost: "h"},
		{ID: 3, RaftAddr: "h:70000", ClientHost: "h"},
		{ID: 3, RaftAddr: "::1:7000", ClientHost: "h"},
		{ID: 3, RaftAddr: "h_1:7000", ClientHost: "h"},
		{ID: 3, RaftAddr: "h:7000", ClientHost: ""},
		{ID: 3, RaftAddr: "h:7000", ClientHost: "0.0.0.0"},
		{ID: 3, RaftAddr: "h:7000", ClientHost: "[::]"},
		{ID: 3, RaftAddr: "h:7000", ClientHost: "-h"},
		{ID: 3, RaftAddr: "h:7000", ClientHost: "a..b"},
	} {
		h.refused(CodeInvalid, &AddMember{Member: s})
	}
	h.ok(&AddMember{Member: MemberSpec{ID: 3, RaftAddr: "[::1]:7000", ClientHost: "0:0:0:0:0:0:0:1"}})
	if x, _ := h.m().Member(3); x.RaftAddr != "[::1]:7000" || x.ClientHost != "::1" {
		t.Errorf("IPv6 member not canonical: %+v", x)
	}
	if ev := h.sink.take(); len(ev) != 2 || ev[0] != (Event{Kind: EventMemberAdded, Version: 1, Member: 1}) || ev[1].Member != 3 {
		t.Errorf("events %+v", ev)
	}
}

// TestImportCell: an imported cell is in the map, its shard id and ports
// taken, but no member serves it until releaseCell makes it creating.
func TestImportCell(t *testing.T) {
	h := newFleet(t, 3)
	imp := &ImportCell{Name: "zk-a", Placement: voters(1, 2, 3), ClientPort: 2182}
	r := h.ok(imp)
	c := h.cell("zk-a")
	if c.State != CellImporting || c.ShardID != r.ShardID || c.State.String() != "importing" {
		t.Fatalf("imported cell %+v", c)
	}
	for _, m := range []uint64{1, 2, 3} {
		if c.Serves(m) || !c.Hosts(m) {
			t.Errorf("member %d: serves %v, hosts %v; want a replica placed but not served", m, c.Serves(m), c.Hosts(m))
		}
	}
	// A retry changes nothing; its port is taken; it is not active yet.
	if r := h.do(imp); r.Code != CodeOK || r.Changed {
		t.Errorf("retried import: %v", r)
	}
	h.refused(CodePortTaken, create("other", 2182, voters(1)))
	h.refused(CodeBadState, &ActivateCell{Name: "zk-a", Expect: c.Updated})
	h.refused(CodeBadState, &BeginMove{Name: "zk-a", Expect: c.Updated, Target: voters(1, 2)})
	h.refused(CodeBadVersion, &ReleaseCell{Name: "zk-a", Expect: c.Updated - 1})
	h.ok(&ReleaseCell{Name: "zk-a", Expect: c.Updated})
	c = h.cell("zk-a")
	if c.State != CellCreating || !c.Serves(1) {
		t.Errorf("released cell %+v", c)
	}
	h.refused(CodeBadState, &ReleaseCell{Name: "zk-a", Expect: c.Updated})
	h.refused(CodeNoCell, &ReleaseCell{Name: "nosuch", Expect: AnyVersion})
	// An importing cell can be deleted (forced: nothing can read it).
	h.ok(&ImportCell{Name: "zk-b", Placement: voters(1), ClientPort: 2183})
	h.ok(&DeleteCell{Name: "zk-b", Expect: AnyVersion, Force: true})
}

func TestCreateCell(t *testing.T) {
	h := newFleet(t, 5)
	r := h.ok(&CreateCell{Name: "kafka", Placement: voters(3, 1, 2), ClientPort: 2182, TLSPort: 2282, Limits: Limits{MaxZnodes: 1000}})
	if r.ShardID != FirstCellShardID {
		t.Errorf("first cell on shard %d, want %d", r.ShardID, FirstCellShardID)
	}
	c := h.cell("kafka")
	want := Cell{Name: "kafka", ShardID: 2, Placement: voters(1, 2, 3), Replicas: []Replica{{1, 1}, {2, 2}, {3, 3}}, NextReplica: 4,
		ClientPort: 2182, TLSPort: 2282, Limits: Limits{MaxZnodes: 1000}, State: CellCreating,
		Created: r.Version, Updated: r.Version, CreatedAt: h.now, UpdatedAt: h.now}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("cell\n got %+v\nwant %+v", c, want)
	}
	// Replica ids are the cell's own, in member order.
	r2 := h.ok(&CreateCell{Name: "hbase", Placement: Placement{Voters: []uint64{5, 4, 2}, Observers: []uint64{1}}, ClientPort: 2183})
	if r2.ShardID != 3 {
		t.Errorf("second cell on shard %d", r2.ShardID)
	}
	if c := h.cell("hbase"); !reflect.DeepEqual(c.Replicas, []Replica{{1, 1}, {2, 2}, {4, 3}, {5, 4}}) || !reflect.DeepEqual(c.Placement.Observers, []uint64{1}) {
		t.Errorf("hbase replicas %v placement %v", c.Replicas, c.Placement)
	}
	// A retry is not a second cell.
	if r := h.do(&CreateCell{Name: "kafka", Placement: voters(1, 2, 3), ClientPort: 2182, TLSPort: 2282, Limits: Limits{MaxZnodes: 1000}}); r.Code != CodeOK || r.Changed || r.ShardID != 2 {
		t.Errorf("retried create: %v", r)
	}
	h.refused(CodeExists, create("kafka", 2190, voters(1, 2, 3)))

	for _, name := range []string{"", "Kafka", "1kafka", "-kafka", "kafka-", "ka_fka", "ka.fka", "ka fka", strings.Repeat("a", 64), "default", "system", "kafkä"} {
		h.refused(CodeInvalidName, create(name, 2190, voters(1)))
	}
	h.ok(create(strings.Repeat("a", 63), 2191, voters(1)))
	h.ok(create("a-1", 2192, voters(1)))

	for _, p := range []Placement{
		{},
		voters(1, 2, 3, 4, 5, 6, 7, 8),
		{Observers: []uint64{1}},
		voters(1, 1, 2),
		{Voters: []uint64{1, 2}, Observers: []uint64{2}},
		{Voters: []uint64{1}, Observers: []uint64{3, 3}},
		{Voters: []uint64{1}, Observers: []uint64{2, 3, 4, 5, 6, 7, 8, 9}},
		voters(1, 9),
	} {
		h.refused(CodeInvalidPlacement, create("zk", 2195, p))
	}
	h.refused(CodeInvalid, create("zk", 0, voters(1)))
	h.refused(CodeInvalid, &CreateCell{Name: "zk", Placement: voters(1), ClientPort: 2195, TLSPort: 2195})
	h.refused(CodeInvalid, &CreateCell{Name: "zk", Placement: voters(1), ClientPort: 2195, Limits: Limits{MaxWatches: -1}})
	// Ports: taken on a host of the placement (plain or TLS, either way
	// round), by a cell in any state; free on other hosts.
	h.refused(CodePortTaken, create("zk", 2182, voters(3, 4)))
	h.refused(CodePortTaken, create("zk", 2282, voters(3, 4)))
	h.refused(CodePortTaken, &CreateCell{Name: "zk", Placement: voters(4), ClientPort: 2199, TLSPort: 2183})
	h.ok(create("zk", 2182, voters(4, 5)))
	// The Raft port of a member on the same host.
	h.refused(CodePortTaken, create("raft", 7000, voters(1)))
	// A member on another member's host shares its ports, and no cell puts
	// two replicas on one host.
	h.ok(&AddMember{Member: MemberSpec{ID: 6, RaftAddr: "10.0.0.1:7001", ClientHost: "10.0.0.1"}})
	h.refused(CodePortTaken, create("solr", 2182, voters(6)))
	h.refused(CodePortTaken, create("solr", 7000, voters(6)))
	h.refused(CodeInvalidPlacement, create("solr", 2300, voters(1, 6)))
	h.ok(create("solr", 2300, voters(6, 2)))
	// A member whose Raft port a cell serves on its host is refused.
	h.refused(CodePortTaken, &AddMember{Member: MemberSpec{ID: 7, RaftAddr: "10.0.0.2:2300", ClientHost: "10.0.0.9"}})

	// Shard ids only grow.
	var ids []uint64
	for _, c := range h.m().Cells() {
		ids = append(ids, c.ShardID)
	}
	slices.Sort(ids)
	if want := []uint64{2, 3, 4, 5, 6, 7}; !slices.Equal(ids, want) || h.m().NextShardID() != 8 {
		t.Errorf("shard ids %v next %d", ids, h.m().NextShardID())
	}
}

func TestCellLifeCycle(t *testing.T) {
	h := newFleet(t, 5)
	created := h.ok(create("kafka", 2182, voters(1, 2, 3))).Version

	// Optimistic concurrency: a change names the version it saw.
	h.refused(CodeBadVersion, &ActivateCell{Name: "kafka", Expect: created - 1})
	h.refused(CodeBadVersion, &ActivateCell{Name: "kafka", Expect: 0})
	h.refused(CodeNoCell, &ActivateCell{Name: "hbase", Expect: created})
	h.refused(CodeBadState, &BeginMove{Name: "kafka", Expect: created, Target: voters(1, 2, 4)})
	v := h.ok(&ActivateCell{Name: "kafka", Expect: created}).Version
	if c := h.cell("kafka"); c.State != CellActive || c.Created != created || c.Updated != v {
		t.Errorf("activated cell %+v", c)
	}
	h.refused(CodeBadState, &ActivateCell{Name: "kafka", Expect: v})
	h.refused(CodeBadVersion, &SetLimits{Name: "kafka", Expect: created, Limits: Limits{MaxSessions: 10}})
	h.ok(&SetLimits{Name: "kafka", Expect: v, Limits: Limits{MaxSessions: 10, MaxRequestRate: 500}})
	if c := h.cell("kafka"); c.Limits != (Limits{MaxSessions: 10, MaxRequestRate: 500}) {
		t.Errorf("limits %+v", c.Limits)
	}
	v = h.ok(&SetLimits{Name: "kafka", Expect: AnyVersion, Limits: Limits{}}).Version

	// A move: member 4 in, member 3 out. The new replica's id is fresh.
	h.refused(CodeInvalidPlacement, &BeginMove{Name: "kafka", Expect: v, Target: voters(3, 2, 1)})
	h.refused(CodeInvalidPlacement, &BeginMove{Name: "kafka", Expect: v, Target: voters(1, 2, 9)})
	h.refused(CodeInvalidPlacement, &BeginMove{Name: "kafka", Expect: v, Target: Placement{Voters: []uint64{1, 2}, Observers: []uint64{3}}})
	v = h.ok(&BeginMove{Name: "kafka", Expect: v, Target: voters(4, 2, 1)}).Version
	c := h.cell("kafka")
	if c.State != CellMoving || !c.Target.Equal(voters(1, 2, 4)) || !c.Placement.Equal(voters(1, 2, 3)) ||
		!reflect.DeepEqual(c.Replicas, []Replica{{1, 1}, {2, 2}, {3, 3}, {4, 4}}) {
		t.Errorf("moving cell %+v", c)
	}
	m := h.m()
	for _, id := range []uint64{1, 2, 3, 4} {
		if got, ok := m.CellOnPort(id, 2182); !ok || got.Name != "kafka" || len(m.CellsOn(id)) != 1 {
			t.Errorf("member %d does not serve kafka during the move", id)
		}
	}
	h.refused(CodeBadState, &BeginMove{Name: "kafka", Expect: v, Target: voters(1, 2, 5)})
	h.refused(CodeBadState, &DeleteCell{Name: "kafka", Expect: v, Force: true})
	h.refused(CodeBadState, &ActivateCell{Name: "kafka", Expect: v})
	v = h.ok(&FinishMove{Name: "kafka", Expect: v}).Version
	c = h.cell("kafka")
	if c.State != CellActive || !c.Placement.Equal(voters(1, 2, 4)) || !c.Target.IsZero() ||
		!reflect.DeepEqual(c.Replicas, []Replica{{1, 1}, {2, 2}, {4, 4}}) || c.Hosts(3) {
		t.Errorf("moved cell %+v", c)
	}
	h.refused(CodeBadState, &FinishMove{Name: "kafka", Expect: v})
	h.refused(CodeBadState, &AbortMove{Name: "kafka", Expect: v})
	// Member 3 comes back: a new replica id, never 3 again (Dragonboat
	// refuses a removed replica id). An aborted move retires its ids too.
	v = h.ok(&BeginMove{Name: "kafka", Expect: v, Target: voters(1, 2, 3, 4, 5)}).Version
	if c := h.cell("kafka"); !reflect.DeepEqual(c.Replicas, []Replica{{1, 1}, {2, 2}, {3, 5}, {4, 4}, {5, 6}}) {
		t.Errorf("replicas %v", c.Replicas)
	}
	v = h.ok(&AbortMove{Name: "kafka", Expect: v}).Version
	if c := h.cell("kafka"); !c.Placement.Equal(voters(1, 2, 4)) || len(c.Replicas) != 3 || c.NextReplica != 7 || c.State != CellActive {
		t.Errorf("aborted move left %+v", c)
	}
	// An observer may be promoted, keeping its replica id.
	v = h.ok(&BeginMove{Name: "kafka", Expect: v, Target: Placement{Voters: []uint64{1, 2, 4}, Observers: []uint64{5}}}).Version
	v = h.ok(&FinishMove{Name: "kafka", Expect: v}).Version
	v = h.ok(&BeginMove{Name: "kafka", Expect: v, Target: voters(1, 2, 4, 5)}).Version
	v = h.ok(&FinishMove{Name: "kafka", Expect: v}).Version
	if c := h.cell("kafka"); !reflect.DeepEqual(c.Replicas, []Replica{{1, 1}, {2, 2}, {4, 4}, {5, 7}}) {
		t.Errorf("promoted observer: replicas %v", c.Replicas)
	}

	// Deleting: refused without force or an attestation of emptiness.
	shard := h.cell("kafka").ShardID
	h.refused(CodeNotEmpty, &DeleteCell{Name: "kafka", Expect: v})
	h.refused(CodeInvalid, &DeleteCell{Name: "kafka", Expect: v, Empty: &Emptiness{ShardID: shard + 1}})
	h.refused(CodeNotEmpty, &DeleteCell{Name: "kafka", Expect: v, Empty: &Emptiness{ShardID: shard, Zxid: 9, Znodes: 3}})
	h.refused(CodeNotEmpty, &DeleteCell{Name: "kafka", Expect: v, Empty: &Emptiness{ShardID: shard, Zxid: 9, Sessions: 1}})
	h.refused(CodeBadState, &PurgeCell{Name: "kafka", Expect: v})
	empty := Emptiness{ShardID: shard, Zxid: 42}
	v = h.ok(&DeleteCell{Name: "kafka", Expect: v, Empty: &empty}).Version
	if c := h.cell("kafka"); c.State != CellDeleting || c.Deletion != (Deletion{Empty: empty}) || c.Serves(1) || !c.Hosts(1) {
		t.Errorf("deleting cell %+v", c)
	}
	h.refused(CodeBadState, &DeleteCell{Name: "kafka", Expect: v, Force: true})
	h.refused(CodeBadState, &SetLimits{Name: "kafka", Expect: v})
	// Its ports stay reserved until it is purged.
	h.refused(CodePortTaken, create("hbase", 2182, voters(1)))
	h.sink.take()
	h.ok(&PurgeCell{Name: "kafka", Expect: v})
	if _, ok := h.m().Cell("kafka"); ok {
		t.Error("purged cell still in the map")
	}
	if ev := h.sink.take(); len(ev) != 1 || ev[0].Kind != EventCellRemoved || ev[0].Cell != "kafka" || ev[0].ShardID != shard {
		t.Errorf("purge events %+v", ev)
	}
	// Name and port are free again; the shard id is not.
	if r := h.ok(create("kafka", 2182, voters(1))); r.ShardID <= shard {
		t.Errorf("recreated cell on shard %d, the purged one was %d", r.ShardID, shard)
	}
	// A forced delete records that it was forced.
	v = h.cell("kafka").Updated
	h.ok(&DeleteCell{Name: "kafka", Expect: v, Force: true})
	if c := h.cell("kafka"); !c.Deletion.Forced {
		t.Errorf("forced delete recorded %+v", c.Deletion)
	}
}

func TestMemberLeaving(t *testing.T) {
	h := newFleet(t, 4)
	v := h.ok(create("kafka", 2182, voters(1, 2, 3))).Version
	v = h.ok(&ActivateCell{Name: "kafka", Expect: v}).Version
	hv := h.ok(create("hbase", 2183, voters(1, 2, 4))).Version
	hv = h.ok(&ActivateCell{Name: "hbase", Expect: hv}).Version
	x, _ := h.m().Member(3)
	h.refused(CodeBadState, &RemoveMember{ID: 3, Expect: x.Updated})
	h.refused(CodeBadVersion, &MarkLeaving{ID: 3, Expect: x.Updated + 1})
	h.refused(CodeNoMember, &MarkLeaving{ID: 9, Expect: AnyVersion})
	lv := h.ok(&MarkLeaving{ID: 3, Expect: x.Updated}).Version
	if x, _ := h.m().Member(3); x.State != MemberLeaving || x.Updated != lv || x.Created != 3 {
		t.Errorf("leaving member %+v", x)
	}
	h.refused(CodeBadState, &MarkLeaving{ID: 3, Expect: lv})
	// No new replica goes to a leaving member...
	h.refused(CodeInvalidPlacement, create("solr", 2184, voters(3)))
	h.refused(CodeInvalidPlacement, &BeginMove{Name: "hbase", Expect: hv, Target: voters(1, 2, 3)})
	// ...but a move may keep the replica it has.
	r := h.refused(CodeMemberBusy, &RemoveMember{ID: 3, Expect: lv})
	if !strings.Contains(r.Detail, "kafka") || strings.Contains(r.Detail, "hbase") {
		t.Errorf("busy detail %q does not name the cell", r.Detail)
	}
	v = h.ok(&BeginMove{Name: "kafka", Expect: v, Target: voters(1, 2, 3, 4)}).Version
	v = h.ok(&FinishMove{Name: "kafka", Expect: v}).Version
	v = h.ok(&BeginMove{Name: "kafka", Expect: v, Target: voters(1, 2, 4)}).Version
	// Still busy while the move runs: its replica is still there.
	h.refused(CodeMemberBusy, &RemoveMember{ID: 3, Expect: lv})
	h.ok(&FinishMove{Name: "kafka", Expect: v})
	h.sink.take()
	h.ok(&RemoveMember{ID: 3, Expect: lv})
	if _, ok := h.m().Member(3); ok {
		t.Error("removed member still in the map")
	}
	if ev := h.sink.take(); len(ev) != 1 || ev[0].Kind != EventMemberRemoved || ev[0].Member != 3 {
		t.Errorf("remove events %+v", ev)
	}
	// Its id may join again, as a new member.
	h.ok(&AddMember{Member: member(3)})
}
