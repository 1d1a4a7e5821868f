package fleet

import (
	"reflect"
	"testing"
)

// todayConfig is ImportDefault as a member of today's three-member
// ensemble (zoo.cfg server.1..3, clientPort 2181, ShardID 1) proposes it.
func todayConfig() *ImportDefault {
	return &ImportDefault{ShardID: 1, Members: []MemberSpec{member(3), member(1), member(2)},
		Placement: voters(1, 2, 3), ClientPort: 2181, TLSPort: 2281}
}

func TestImportDefault(t *testing.T) {
	h := newHarness(t)
	r := h.ok(todayConfig())
	if r.ShardID != 1 || r.Version != 1 {
		t.Errorf("import: %v", r)
	}
	m := h.m()
	if len(m.Members()) != 3 || !m.DefaultImported() || m.NextShardID() != FirstCellShardID {
		t.Errorf("after import: members %v, imported %v, next shard %d", m.Members(), m.DefaultImported(), m.NextShardID())
	}
	c := h.cell(DefaultCell)
	// Today's replica ids are the members' ids: the data dirs stay the
	// default cell's.
	want := Cell{Name: DefaultCell, ShardID: 1, Placement: voters(1, 2, 3), Replicas: []Replica{{1, 1}, {2, 2}, {3, 3}}, NextReplica: 4,
		ClientPort: 2181, TLSPort: 2281, State: CellActive, Created: 1, Updated: 1, CreatedAt: h.now, UpdatedAt: h.now}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("default cell\n got %+v\nwant %+v", c, want)
	}
	if got, ok := m.CellOnPort(2, 2181); !ok || got.Name != DefaultCell {
		t.Errorf("port 2181 on member 2: %v %v", got.Name, ok)
	}
	if ev := h.sink.take(); len(ev) != 4 || ev[3].Kind != EventCellCreated || ev[3].ShardID != 1 {
		t.Errorf("import events %+v", ev)
	}

	// Every member proposes it at start: the others change nothing, even
	// with a zoo.cfg that has since gone stale (the map owns the cell now).
	for _, c := range []*ImportDefault{todayConfig(), {ShardID: 1, Members: []MemberSpec{member(1)}, Placement: voters(1), ClientPort: 2999}} {
		if r := h.do(c); r.Code != CodeOK || r.Changed || r.ShardID != 1 {
			t.Errorf("repeated import: %v", r)
		}
	}
	// A member configured with another shard id is refused loudly.
	h.refused(CodeConflict, &ImportDefault{ShardID: 5, Members: []MemberSpec{member(1)}, Placement: voters(1), ClientPort: 2181})
	h.refused(CodeInvalidName, create(DefaultCell, 2182, voters(1)))
	// Created cells continue above the default's shard.
	if r := h.ok(create("kafka", 2182, voters(1, 2, 3))); r.ShardID != 2 {
		t.Errorf("first created cell on shard %d", r.ShardID)
	}
	// Once deleted, the default cell is not imported again.
	v := h.ok(&DeleteCell{Name: DefaultCell, Expect: 1, Force: true}).Version
	h.ok(&PurgeCell{Name: DefaultCell, Expect: v})
	h.refused(CodeConflict, todayConfig())
}

func TestImportDefaultChecks(t *testing.T) {
	// A shard id the map has allocated is refused; one above its next id
	// moves the next id past it.
	h := newFleet(t, 3)
	h.ok(create("kafka", 2182, voters(1)))
	h.ok(create("hbase", 2183, voters(1)))
	imp := todayConfig()
	imp.ShardID = 3
	h.refused(CodeConflict, imp)
	imp.ShardID = 0
	h.refused(CodeInvalid, imp)
	imp.ShardID = SystemShardID
	h.refused(CodeInvalid, imp)
	imp.ShardID = 7
	h.ok(imp)
	if r := h.ok(create("solr", 2184, voters(1))); r.ShardID != 8 {
		t.Errorf("cell after importing shard 7 got shard %d", r.ShardID)
	}

	// All or nothing: a member that disagrees with the map adds no member.
	h = newFleet(t, 1)
	imp = todayConfig()
	imp.Members[1].RaftAddr = "10.0.0.1:7999" // member 1, already in the map at :7000
	h.refused(CodeConflict, imp)
	if n := len(h.m().Members()); n != 1 {
		t.Errorf("a refused import left %d members", n)
	}
	for _, bad := range []func(*ImportDefault){
		func(c *ImportDefault) { c.Members = append(c.Members, member(1)) },          // listed twice
		func(c *ImportDefault) { c.Members[0].ClientHost = "0.0.0.0" },               // wildcard
		func(c *ImportDefault) { c.Placement = voters(1, 2, 4) },                     // unknown member
		func(c *ImportDefault) { c.ClientPort = 0 },                                  // no port
		func(c *ImportDefault) { c.Members[2].RaftAddr = c.Members[1].RaftAddr },     // shared Raft address
		func(c *ImportDefault) { c.ClientPort = 7000 },                               // a Raft port
		func(c *ImportDefault) { c.Placement = Placement{} },                         // no voters
		func(c *ImportDefault) { c.Members[0].ID = 300; c.Placement = voters(1, 2) }, // bad id
	} {
		h := newHarness(t)
		imp := todayConfig()
		bad(imp)
		r := h.do(imp)
		if r.Code == CodeOK {
			t.Errorf("import %+v accepted", imp)
		}
		if len(h.m().Members()) != 0 || h.m().DefaultImported() {
			t.Errorf("refused import (%v) changed the map", r)
		}
	}
	// A standalone member imports itself alone; an observer is placed as one.
	h = newHarness(t)
	h.ok(&ImportDefault{ShardID: 1, Members: []MemberSpec{member(1), member(2)}, Placement: Placement{Voters: []uint64{1}, Observers: []uint64{2}}, ClientPort: 2181})
	if c := h.cell(DefaultCell); !reflect.DeepEqual(c.Placement.Observers, []uint64{2}) || c.TLSPort != 0 {
		t.Errorf("default cell %+v", c)
	}
}

func TestLookups(t *testing.T) {
	h := newFleet(t, 4)
	h.ok(create("kafka", 2182, voters(1, 2, 3)))
	h.ok(&CreateCell{Name: "hbase", Placement: Placement{Voters: []uint64{2, 3, 4}, Observers: []uint64{1}}, ClientPort: 2183, TLSPort: 2283})
	h.ok(create("clickhouse", 2184, voters(4)))
	m := h.m()
	var names []string
	for _, c := range m.Cells() {
		names = append(names, c.Name)
	}
	if want := []string{"clickhouse", "hbase", "kafka"}; !reflect.DeepEqual(names, want) {
		t.Errorf("cells %v", names)
	}
	if c, ok := m.CellByShard(3); !ok || c.Name != "hbase" {
		t.Errorf("shard 3: %v %v", c.Name, ok)
	}
	if _, ok := m.CellByShard(99); ok {
		t.Error("shard 99 found")
	}
	for _, tc := range []struct {
		member uint64
		port   uint16
		want   string
	}{
		{1, 2182, "kafka"}, {1, 2183, "hbase"}, {1, 2283, "hbase"}, {4, 2283, "hbase"}, {4, 2184, "clickhouse"},
		{4, 2182, ""}, {1, 2184, ""}, {1, 0, ""}, {9, 2182, ""},
	} {
		c, ok := m.CellOnPort(tc.member, tc.port)
		if ok != (tc.want != "") || c.Name != tc.want {
			t.Errorf("CellOnPort(%d, %d) = %q %v, want %q", tc.member, tc.port, c.Name, ok, tc.want)
		}
	}
	on := func(id uint64) []string {
		var out []string
		for _, c := range m.CellsOn(id) {
			out = append(out, c.Name)
		}
		return out
	}
	if got := on(1); !reflect.DeepEqual(got, []string{"hbase", "kafka"}) {
		t.Errorf("cells on 1: %v", got)
	}
	if got := on(4); !reflect.DeepEqual(got, []string{"clickhouse", "hbase"}) {
		t.Errorf("cells on 4: %v", got)
	}
	// What the map hands out is a copy: changing it changes no map.
	c, _ := m.Cell("kafka")
	c.Placement.Voters[0] = 99
	c.Replicas[0].ID = 99
	if again, _ := h.m().Cell("kafka"); again.Placement.Voters[0] != 1 || again.Replicas[0].ID != 1 {
		t.Error("a returned cell aliases the map")
	}
	// A map a reader holds does not change under it.
	before := m.Version()
	h.ok(create("solr", 2185, voters(1)))
	if m.Version() != before || len(m.Cells()) != 3 || len(h.m().Cells()) != 4 {
		t.Error("a *Map changed after it was read")
	}
	// The sink was handed the same maps.
	if last := h.sink.last(); last != h.m() {
		t.Error("the sink's last map is not the current one")
	}
	// Query runs on the current map; a query of another type is refused.
	v, err := h.sm.Lookup(Query(func(m *Map) (any, error) { return len(m.Cells()), nil }))
	if err != nil || v.(int) != 4 {
		t.Errorf("Query: %v %v", v, err)
	}
	if _, err := h.sm.Lookup("cells"); err == nil {
		t.Error("a string query was answered")
	}
}
