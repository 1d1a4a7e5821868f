package fleet

import (
	"fmt"
	"slices"
	"strings"
)

// SystemShardID is the Dragonboat shard of the system shard. It is above
// every cell's shard id (cells take ids below MaxCellShardID), so no cell,
// not even a default cell imported with an operator's --shard-id, can
// collide with it.
const SystemShardID uint64 = 1 << 32

// FirstCellShardID is the first shard id the map allocates to a created
// cell. Ids below it are left to the default cell (today's ShardID is 1).
const FirstCellShardID uint64 = 2

// MaxCellShardID bounds cells' shard ids (exclusive).
const MaxCellShardID uint64 = 1 << 32

// DefaultCell is the name of the cell that holds the namespace a
// single-cell zkraft serves today (server.Config's ShardID, 1 unless
// --shard-id says otherwise). Only ImportDefault creates it.
const DefaultCell = "default"

// MaxMemberID is the highest member id: a member id is ZooKeeper's myid,
// and server.Config limits it to 1..254 (it is the top byte of session
// ids).
const MaxMemberID = 254

// MaxVoters bounds a cell's voters; MaxObservers its observers.
const (
	MaxVoters    = 7
	MaxObservers = 7
)

// AnyVersion in a command's Expect skips the optimistic-concurrency check.
// It is for automation that has just read the map in the same step; an
// operator's change names the version it saw.
const AnyVersion int64 = -1

// MemberState is a member's place in the fleet.
type MemberState int32

const (
	// MemberActive: cells may be placed on the member.
	MemberActive MemberState = 1
	// MemberLeaving: no new replica is placed on the member; moves take
	// its replicas away, then RemoveMember takes it out of the map.
	MemberLeaving MemberState = 2
)

func (s MemberState) String() string {
	switch s {
	case MemberActive:
		return "active"
	case MemberLeaving:
		return "leaving"
	}
	return fmt.Sprintf("MemberState(%d)", int32(s))
}

// Member is one zkraft process of the fleet: one NodeHost, which hosts a
// replica of the system shard if it is one of its voters and a replica of
// every cell placed on it.
type Member struct {
	// ID is the member's id (ZooKeeper's myid), 1..MaxMemberID.
	ID uint64
	// RaftAddr is host:port of the member's NodeHost: the Raft address of
	// every replica it hosts. Unique in the fleet.
	RaftAddr string
	// ClientHost is the host clients reach the member's cells at (the
	// host of a connect string), in canonical form (lower case; an IP
	// address as netip prints it). It also names the machine for port
	// uniqueness: two members with the same ClientHost share its ports.
	// Never a wildcard address.
	ClientHost string
	State      MemberState
	// Created and Updated are the map versions of the command that added
	// the member and of its last change; a command on the member names
	// Updated as the version it saw.
	Created, Updated int64
	// AddedAt is the proposer's wall time (ms) of the command that added it.
	AddedAt int64
}

// CellState is a cell's life-cycle state.
type CellState int32

const (
	// CellCreating: the cell is in the map; its members start its shard.
	// ActivateCell makes it Active once the shard has a leader.
	CellCreating CellState = 1
	// CellActive: the cell serves on its ports on every member of its
	// placement.
	CellActive CellState = 2
	// CellMoving: a move to Target is under way (replicas added, caught
	// up, then others removed); FinishMove or AbortMove ends it.
	CellMoving CellState = 3
	// CellDeleting: members stop serving the cell and remove their
	// replicas; its ports and shard id stay reserved until PurgeCell.
	CellDeleting CellState = 4
	// CellImporting: the cell is in the map (its shard id and ports are
	// reserved) but no member starts its replicas: `zkraft import --cell`
	// fills each member's replica offline; ReleaseCell makes it Creating.
	CellImporting CellState = 5
)

func (s CellState) String() string {
	switch s {
	case CellCreating:
		return "creating"
	case CellActive:
		return "active"
	case CellMoving:
		return "moving"
	case CellDeleting:
		return "deleting"
	case CellImporting:
		return "importing"
	}
	return fmt.Sprintf("CellState(%d)", int32(s))
}

// Placement says which members hold a cell's replicas: member ids in
// ascending order, no member twice.
type Placement struct {
	Voters    []uint64
	Observers []uint64
}

// Members returns every member of p, ascending.
func (p Placement) Members() []uint64 {
	out := append(append([]uint64(nil), p.Voters...), p.Observers...)
	slices.Sort(out)
	return out
}

// Has reports whether member is a voter or an observer of p.
func (p Placement) Has(member uint64) bool {
	return slices.Contains(p.Voters, member) || slices.Contains(p.Observers, member)
}

// Equal reports whether p and q place the same members in the same roles.
func (p Placement) Equal(q Placement) bool {
	return slices.Equal(p.Voters, q.Voters) && slices.Equal(p.Observers, q.Observers)
}

// IsZero reports whether p places nothing.
func (p Placement) IsZero() bool { return len(p.Voters) == 0 && len(p.Observers) == 0 }

func (p Placement) clone() Placement {
	return Placement{Voters: slices.Clone(p.Voters), Observers: slices.Clone(p.Observers)}
}

// canonical sorts p's lists (a copy).
func (p Placement) canonical() Placement {
	q := p.clone()
	slices.Sort(q.Voters)
	slices.Sort(q.Observers)
	return q
}

func (p Placement) String() string {
	return fmt.Sprintf("voters %v observers %v", p.Voters, p.Observers)
}

// Replica is the Dragonboat replica id a member's replica of a cell has.
// The map allocates replica ids per cell and never reuses one: Dragonboat
// refuses to add back a replica id it has removed from a shard, so a
// member that leaves a cell and later returns gets a new one.
type Replica struct {
	Member uint64
	ID     uint64
}

// Limits are a cell's quotas; 0 means unlimited. The map stores them; the
// server enforces them (not built yet).
type Limits struct {
	MaxZnodes      int64
	MaxDataBytes   int64
	MaxSessions    int64
	MaxWatches     int64
	MaxRequestRate int64 // requests per second to the cell
}

// Emptiness is a caller's attestation that a cell's namespace holds no
// data, read from the cell's own shard: the map cannot see a cell's data.
// It is what DeleteCell needs unless forced.
type Emptiness struct {
	// ShardID is the shard the figures were read from; it must be the
	// cell's.
	ShardID uint64
	// Zxid is the cell's zxid the figures were read at (linearizably).
	Zxid int64
	// Znodes counts the znodes outside /zookeeper, the root not counted.
	Znodes int64
	// Sessions counts the cell's open sessions.
	Sessions int64
}

// IsEmpty reports whether e attests an empty namespace.
func (e Emptiness) IsEmpty() bool { return e.Znodes == 0 && e.Sessions == 0 }

// Deletion records how a delete was allowed: forced by the operator, or
// the caller's attestation of emptiness.
type Deletion struct {
	Forced bool
	Empty  Emptiness
}

// Cell is one ZooKeeper namespace: its own Dragonboat shard, served on its
// ports on every member that hosts a replica of it.
type Cell struct {
	Name    string
	ShardID uint64
	// Placement is where the cell's replicas are.
	Placement Placement
	// Target is the placement a move (State CellMoving) ends at; zero
	// otherwise. During a move the cell has replicas on the members of
	// both.
	Target Placement
	// Replicas gives the replica id of every member of Placement and
	// Target, ascending by member.
	Replicas []Replica
	// NextReplica is the replica id the cell's next new replica gets;
	// every id below it is in use or retired.
	NextReplica uint64
	// ClientPort is the plain client port, TLSPort the TLS one (0: none):
	// the same on every member that hosts a replica, and used by no other
	// cell on any member with the same ClientHost.
	ClientPort uint16
	TLSPort    uint16
	Limits     Limits
	State      CellState
	// Deletion is how the delete was allowed, in CellDeleting.
	Deletion Deletion
	// Created and Updated are the map versions of the command that created
	// the cell and of its last change; a command on the cell names Updated
	// as the version it saw.
	Created, Updated int64
	// CreatedAt and UpdatedAt are the proposers' wall times (ms).
	CreatedAt, UpdatedAt int64
}

// Members returns every member that hosts a replica of c (Placement and,
// during a move, Target), ascending.
func (c Cell) Members() []uint64 {
	out := make([]uint64, 0, len(c.Replicas))
	for _, r := range c.Replicas {
		out = append(out, r.Member)
	}
	return out
}

// Hosts reports whether member hosts a replica of c.
func (c Cell) Hosts(member uint64) bool {
	_, ok := c.ReplicaOf(member)
	return ok
}

// ReplicaOf returns member's replica id in c.
func (c Cell) ReplicaOf(member uint64) (uint64, bool) {
	i, ok := slices.BinarySearchFunc(c.Replicas, member, func(r Replica, m uint64) int { return cmpUint(r.Member, m) })
	if !ok {
		return 0, false
	}
	return c.Replicas[i].ID, true
}

// Serves reports whether c's ports should be open on member: the cell is
// creating, active or moving and member hosts a replica of it. (Whether a
// replica that is still catching up during a move serves clients is the
// server's choice; it may answer them as a lagging follower does.)
func (c Cell) Serves(member uint64) bool {
	return c.State != CellDeleting && c.State != CellImporting && c.Hosts(member)
}

// UsesPort reports whether port is c's client or TLS port.
func (c Cell) UsesPort(port uint16) bool {
	return port != 0 && (c.ClientPort == port || c.TLSPort == port)
}

func (c *Cell) clone() *Cell {
	d := *c
	d.Placement = c.Placement.clone()
	d.Target = c.Target.clone()
	d.Replicas = slices.Clone(c.Replicas)
	return &d
}

func (m *Member) clone() *Member { d := *m; return &d }

// Map is the fleet's cell map at one version. A *Map is immutable: the
// state machine builds a new one for each change, so a reader may keep and
// share one; the values its methods return are copies.
type Map struct {
	version         int64
	nextShard       uint64
	defaultImported bool
	members         []*Member // ascending by ID
	cells           []*Cell   // ascending by Name
}

// emptyMap is the map of a new system shard.
func emptyMap() *Map { return &Map{nextShard: FirstCellShardID} }

// Version is the map's version: the number of changes applied, each
// command that changed the map counting one. It only grows; the server
// watches it (or the EventSink) to learn of changes.
func (m *Map) Version() int64 { return m.version }

// NextShardID is the shard id the next created cell gets.
func (m *Map) NextShardID() uint64 { return m.nextShard }

// DefaultImported reports whether ImportDefault has run (the default cell
// may since have been deleted).
func (m *Map) DefaultImported() bool { return m.defaultImported }

// Members lists the fleet's members, ascending by id.
func (m *Map) Members() []Member {
	out := make([]Member, len(m.members))
	for i, x := range m.members {
		out[i] = *x
	}
	return out
}

// Member returns the member with id.
func (m *Map) Member(id uint64) (Member, bool) {
	if x := m.member(id); x != nil {
		return *x, true
	}
	return Member{}, false
}

// Cells lists every cell, ascending by name.
func (m *Map) Cells() []Cell {
	out := make([]Cell, len(m.cells))
	for i, c := range m.cells {
		out[i] = *c.clone()
	}
	return out
}

// Cell returns the cell called name.
func (m *Map) Cell(name string) (Cell, bool) {
	if c := m.cell(name); c != nil {
		return *c.clone(), true
	}
	return Cell{}, false
}

// CellByShard returns the cell whose shard is shardID.
func (m *Map) CellByShard(shardID uint64) (Cell, bool) {
	for _, c := range m.cells {
		if c.ShardID == shardID {
			return *c.clone(), true
		}
	}
	return Cell{}, false
}

// CellOnPort returns the cell a client reaching member on port talks to:
// the one with a replica on member whose client or TLS port is port.
func (m *Map) CellOnPort(member uint64, port uint16) (Cell, bool) {
	for _, c := range m.cells {
		if c.UsesPort(port) && c.Hosts(member) {
			return *c.clone(), true
		}
	}
	return Cell{}, false
}

// CellsOn lists the cells with a replica on member (in their placement or,
// during a move, their target), ascending by name: the shards the member
// runs.
func (m *Map) CellsOn(member uint64) []Cell {
	var out []Cell
	for _, c := range m.cells {
		if c.Hosts(member) {
			out = append(out, *c.clone())
		}
	}
	return out
}

func (m *Map) member(id uint64) *Member {
	i, ok := slices.BinarySearchFunc(m.members, id, func(x *Member, id uint64) int { return cmpUint(x.ID, id) })
	if !ok {
		return nil
	}
	return m.members[i]
}

func (m *Map) cell(name string) *Cell {
	i, ok := slices.BinarySearchFunc(m.cells, name, func(c *Cell, n string) int { return strings.Compare(c.Name, n) })
	if !ok {
		return nil
	}
	return m.cells[i]
}

// shallow returns a copy of m whose slices may be changed; the records
// they point to are shared and must be replaced, never changed.
func (m *Map) shallow() *Map {
	d := *m
	d.members = slices.Clone(m.members)
	d.cells = slices.Clone(m.cells)
	return &d
}

// putMember inserts or replaces x (by ID).
func (m *Map) putMember(x *Member) {
	i, ok := slices.BinarySearchFunc(m.members, x.ID, func(y *Member, id uint64) int { return cmpUint(y.ID, id) })
	if ok {
		m.members[i] = x
		return
	}
	m.members = slices.Insert(m.members, i, x)
}

func (m *Map) dropMember(id uint64) {
	m.members = slices.DeleteFunc(m.members, func(x *Member) bool { return x.ID == id })
}

// putCell inserts or replaces c (by Name).
func (m *Map) putCell(c *Cell) {
	i, ok := slices.BinarySearchFunc(m.cells, c.Name, func(d *Cell, n string) int { return strings.Compare(d.Name, n) })
	if ok {
		m.cells[i] = c
		return
	}
	m.cells = slices.Insert(m.cells, i, c)
}

func (m *Map) dropCell(name string) {
	m.cells = slices.DeleteFunc(m.cells, func(c *Cell) bool { return c.Name == name })
}

// check verifies the map's invariants: what every command keeps, and what
// a store or snapshot that decodes must still satisfy.
func (m *Map) check() error {
	if m.nextShard < FirstCellShardID || m.nextShard > MaxCellShardID {
		return fmt.Errorf("next shard id %d outside %d..%d", m.nextShard, FirstCellShardID, MaxCellShardID)
	}
	for i, x := range m.members {
		if i > 0 && m.members[i-1].ID >= x.ID {
			return fmt.Errorf("members out of order at %d", x.ID)
		}
		if x.ID == 0 || x.ID > MaxMemberID || x.State != MemberActive && x.State != MemberLeaving {
			return fmt.Errorf("member %d: bad id or state %v", x.ID, x.State)
		}
	}
	for i, c := range m.cells {
		if i > 0 && m.cells[i-1].Name >= c.Name {
			return fmt.Errorf("cells out of order at %q", c.Name)
		}
		if c.ShardID == 0 || c.ShardID >= m.nextShard {
			return fmt.Errorf("cell %q: shard %d outside the allocated ids (next %d)", c.Name, c.ShardID, m.nextShard)
		}
		for _, d := range m.cells[:i] {
			if d.ShardID == c.ShardID {
				return fmt.Errorf("cells %q and %q share shard %d", d.Name, c.Name, c.ShardID)
			}
		}
		if (c.State == CellMoving) == c.Target.IsZero() {
			return fmt.Errorf("cell %q: state %v with target %v", c.Name, c.State, c.Target)
		}
		want := c.Placement.Members()
		for _, t := range c.Target.Members() {
			if !slices.Contains(want, t) {
				want = append(want, t)
			}
		}
		slices.Sort(want)
		if got := c.Members(); !slices.Equal(got, want) {
			return fmt.Errorf("cell %q: replicas on %v, placement and target on %v", c.Name, got, want)
		}
		for i, r := range c.Replicas {
			for _, q := range c.Replicas[:i] {
				if q.ID == r.ID {
					return fmt.Errorf("cell %q: members %d and %d share replica id %d", c.Name, q.Member, r.Member, r.ID)
				}
			}
			if r.ID == 0 || r.ID >= c.NextReplica {
				return fmt.Errorf("cell %q: replica id %d of member %d not below next %d", c.Name, r.ID, r.Member, c.NextReplica)
			}
			if m.member(r.Member) == nil {
				return fmt.Errorf("cell %q: member %d is not in the map", c.Name, r.Member)
			}
		}
		if len(c.Placement.Voters) == 0 {
			return fmt.Errorf("cell %q has no voters", c.Name)
		}
	}
	return nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
