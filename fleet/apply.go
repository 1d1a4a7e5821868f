package fleet

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// applier applies the entries of one Update to a working copy of the map.
// Each command validates everything before it changes anything, so a
// refused command leaves the working map as it found it.
type applier struct {
	m      *Map // a shallow copy: replace records, never change them
	now    int64
	events []Event
	// The records the Update changed, to write (or delete) in its batch;
	// duplicates are removed when they are written.
	dirtyCells   []string
	dirtyMembers []uint64
}

// apply applies one decoded entry (or refuses the entry that did not
// decode) and returns its reply.
func (a *applier) apply(e Entry, decodeErr error) Reply {
	if decodeErr != nil {
		code := CodeMalformed
		if errors.Is(decodeErr, errUnknownKind) {
			code = CodeUnknownKind
		}
		return a.refuse(code, "%v", decodeErr)
	}
	a.now = e.Time
	switch c := e.Cmd.(type) {
	case *AddMember:
		return a.addMember(c)
	case *MarkLeaving:
		return a.markLeaving(c)
	case *RemoveMember:
		return a.removeMember(c)
	case *CreateCell:
		return a.createCell(c, CellCreating)
	case *ImportCell:
		return a.createCell((*CreateCell)(c), CellImporting)
	case *ReleaseCell:
		return a.releaseCell(c)
	case *ActivateCell:
		return a.activateCell(c)
	case *BeginMove:
		return a.beginMove(c)
	case *FinishMove:
		return a.endMove(c.Name, c.Expect, true)
	case *AbortMove:
		return a.endMove(c.Name, c.Expect, false)
	case *SetLimits:
		return a.setLimits(c)
	case *DeleteCell:
		return a.deleteCell(c)
	case *PurgeCell:
		return a.purgeCell(c)
	case *ImportDefault:
		return a.importDefault(c)
	}
	// Decode returns only the kinds of the registry, each handled above.
	return a.refuse(CodeUnknownKind, "no apply for %s", e.Kind)
}

func (a *applier) refuse(code Code, format string, args ...any) Reply {
	return Reply{Code: code, Version: a.m.version, Detail: fmt.Sprintf(format, args...)}
}

// unchanged is the reply of a command that found the map as it asked.
func (a *applier) unchanged(shard uint64) Reply {
	return Reply{Code: CodeOK, Version: a.m.version, ShardID: shard}
}

// bump advances the map's version for a change and returns it.
func (a *applier) bump() int64 {
	a.m.version++
	return a.m.version
}

func (a *applier) changed(shard uint64) Reply {
	return Reply{Code: CodeOK, Version: a.m.version, Changed: true, ShardID: shard}
}

func (a *applier) putMember(x *Member, kind EventKind) {
	a.m.putMember(x)
	a.dirtyMembers = append(a.dirtyMembers, x.ID)
	a.events = append(a.events, Event{Kind: kind, Version: a.m.version, Member: x.ID})
}

func (a *applier) putCell(c *Cell, kind EventKind) {
	a.m.putCell(c)
	a.dirtyCells = append(a.dirtyCells, c.Name)
	a.events = append(a.events, Event{Kind: kind, Version: a.m.version, Cell: c.Name, ShardID: c.ShardID})
}

// Members.

func (a *applier) addMember(c *AddMember) Reply {
	spec, r, ok := a.checkMemberSpec(c.Member)
	if !ok {
		return r
	}
	if x := a.m.member(spec.ID); x != nil {
		if x.RaftAddr == spec.RaftAddr && x.ClientHost == spec.ClientHost {
			return a.unchanged(0)
		}
		return a.refuse(CodeExists, "member %d is in the fleet with Raft address %s and client host %s", x.ID, x.RaftAddr, x.ClientHost)
	}
	if r, ok := a.checkNewMember(spec); !ok {
		return r
	}
	v := a.bump()
	a.putMember(&Member{ID: spec.ID, RaftAddr: spec.RaftAddr, ClientHost: spec.ClientHost, State: MemberActive,
		Created: v, Updated: v, AddedAt: a.now}, EventMemberAdded)
	return a.changed(0)
}

// checkMemberSpec validates a member's id and addresses and returns it in
// canonical form.
func (a *applier) checkMemberSpec(s MemberSpec) (MemberSpec, Reply, bool) {
	if s.ID == 0 || s.ID > MaxMemberID {
		return s, a.refuse(CodeInvalid, "member id %d outside 1..%d", s.ID, MaxMemberID), false
	}
	host, port, err := splitRaftAddr(s.RaftAddr)
	if err != nil {
		return s, a.refuse(CodeInvalid, "member %d: Raft address %q: %v", s.ID, s.RaftAddr, err), false
	}
	s.RaftAddr = joinHostPort(host, port)
	if s.ClientHost, err = canonHost(s.ClientHost); err != nil {
		return s, a.refuse(CodeInvalid, "member %d: client host: %v", s.ID, err), false
	}
	return s, Reply{}, true
}

// checkNewMember refuses a member whose Raft address another member has,
// or whose Raft port a cell serves on on the same host.
func (a *applier) checkNewMember(s MemberSpec) (Reply, bool) {
	for _, x := range a.m.members {
		if x.RaftAddr == s.RaftAddr {
			return a.refuse(CodeExists, "member %d already has Raft address %s", x.ID, s.RaftAddr), false
		}
	}
	host, port, _ := splitRaftAddr(s.RaftAddr)
	for _, c := range a.m.cells {
		if !c.UsesPort(port) {
			continue
		}
		for _, r := range c.Replicas {
			if a.m.member(r.Member).ClientHost == host {
				return a.refuse(CodePortTaken, "member %d's Raft port %d is cell %q's on host %s", s.ID, port, c.Name, host), false
			}
		}
	}
	return Reply{}, true
}

func (a *applier) memberFor(id uint64, expect int64) (*Member, Reply, bool) {
	x := a.m.member(id)
	if x == nil {
		return nil, a.refuse(CodeNoMember, "member %d is not in the fleet", id), false
	}
	if expect != AnyVersion && expect != x.Updated {
		return nil, a.refuse(CodeBadVersion, "member %d is at version %d, not %d", id, x.Updated, expect), false
	}
	return x, Reply{}, true
}

func (a *applier) markLeaving(c *MarkLeaving) Reply {
	x, r, ok := a.memberFor(c.ID, c.Expect)
	if !ok {
		return r
	}
	if x.State != MemberActive {
		return a.refuse(CodeBadState, "member %d is %v", x.ID, x.State)
	}
	v := a.bump()
	y := x.clone()
	y.State, y.Updated = MemberLeaving, v
	a.putMember(y, EventMemberChanged)
	return a.changed(0)
}

func (a *applier) removeMember(c *RemoveMember) Reply {
	x, r, ok := a.memberFor(c.ID, c.Expect)
	if !ok {
		return r
	}
	if x.State != MemberLeaving {
		return a.refuse(CodeBadState, "member %d is %v: mark it leaving and move its replicas away first", x.ID, x.State)
	}
	var hosted []string
	for _, cell := range a.m.cells {
		if cell.Hosts(x.ID) {
			hosted = append(hosted, cell.Name)
		}
	}
	if len(hosted) > 0 {
		return a.refuse(CodeMemberBusy, "member %d hosts replicas of %s", x.ID, strings.Join(hosted, ", "))
	}
	v := a.bump()
	a.m.dropMember(x.ID)
	a.dirtyMembers = append(a.dirtyMembers, x.ID)
	a.events = append(a.events, Event{Kind: EventMemberRemoved, Version: v, Member: x.ID})
	return a.changed(0)
}

// Cells.

// cellFor finds a cell and checks the version the command saw.
func (a *applier) cellFor(name string, expect int64) (*Cell, Reply, bool) {
	c := a.m.cell(name)
	if c == nil {
		return nil, a.refuse(CodeNoCell, "no cell %q", name), false
	}
	if expect != AnyVersion && expect != c.Updated {
		return nil, a.refuse(CodeBadVersion, "cell %q is at version %d, not %d", name, c.Updated, expect), false
	}
	return c, Reply{ShardID: c.ShardID}, true
}

// createCell creates a cell in state (creating, or importing for
// ImportCell).
func (a *applier) createCell(c *CreateCell, state CellState) Reply {
	if err := validName(c.Name); err != nil {
		return a.refuse(CodeInvalidName, "%v", err)
	}
	p := c.Placement.canonical()
	if old := a.m.cell(c.Name); old != nil {
		if old.Placement.Equal(p) && old.ClientPort == c.ClientPort && old.TLSPort == c.TLSPort && old.Limits == c.Limits &&
			(old.State == CellCreating || old.State == CellActive || old.State == state) {
			return a.unchanged(old.ShardID)
		}
		return a.refuse(CodeExists, "cell %q exists (shard %d, %v)", c.Name, old.ShardID, old.State)
	}
	if r, ok := a.checkLimits(c.Limits); !ok {
		return r
	}
	if r, ok := a.checkPlacement(p, nil); !ok {
		return r
	}
	if r, ok := a.checkPorts(c.Name, p.Members(), c.ClientPort, c.TLSPort); !ok {
		return r
	}
	if a.m.nextShard >= MaxCellShardID {
		return a.refuse(CodeExhausted, "every cell shard id below %d has been allocated", MaxCellShardID)
	}
	v := a.bump()
	cell := &Cell{Name: c.Name, ShardID: a.m.nextShard, Placement: p, NextReplica: 1,
		ClientPort: c.ClientPort, TLSPort: c.TLSPort, Limits: c.Limits, State: state,
		Created: v, Updated: v, CreatedAt: a.now, UpdatedAt: a.now}
	a.m.nextShard++
	for _, m := range p.Members() {
		cell.Replicas = append(cell.Replicas, Replica{Member: m, ID: cell.NextReplica})
		cell.NextReplica++
	}
	a.putCell(cell, EventCellCreated)
	return a.changed(cell.ShardID)
}

// changeCell is every change of one existing cell: the cell name at
// version expect, check's refusal (nil: none) of the cell as it is, then a
// copy stamped with a new version that change edits, put as the cell.
func (a *applier) changeCell(name string, expect int64, check func(cell *Cell) (Reply, bool), change func(d *Cell)) Reply {
	cell, r, ok := a.cellFor(name, expect)
	if !ok {
		return r
	}
	if r, ok := check(cell); !ok {
		return r
	}
	d := cell.clone()
	d.Updated, d.UpdatedAt = a.bump(), a.now
	change(d)
	a.putCell(d, EventCellChanged)
	return a.changed(d.ShardID)
}

// pass is a check that refuses nothing.
func pass() (Reply, bool) { return Reply{}, true }

func (a *applier) activateCell(c *ActivateCell) Reply {
	return a.changeCell(c.Name, c.Expect, func(cell *Cell) (Reply, bool) {
		if cell.State != CellCreating {
			return a.refuse(CodeBadState, "cell %q is %v, not creating", c.Name, cell.State), false
		}
		return pass()
	}, func(d *Cell) { d.State = CellActive })
}

func (a *applier) releaseCell(c *ReleaseCell) Reply {
	return a.changeCell(c.Name, c.Expect, func(cell *Cell) (Reply, bool) {
		if cell.State != CellImporting {
			return a.refuse(CodeBadState, "cell %q is %v, not importing", c.Name, cell.State), false
		}
		return pass()
	}, func(d *Cell) { d.State = CellCreating })
}

func (a *applier) beginMove(c *BeginMove) Reply {
	t := c.Target.canonical()
	var added []uint64
	return a.changeCell(c.Name, c.Expect, func(cell *Cell) (Reply, bool) {
		return a.checkMove(c.Name, cell, t, &added)
	}, func(d *Cell) {
		d.State, d.Target = CellMoving, t
		for _, m := range added {
			d.Replicas = append(d.Replicas, Replica{Member: m, ID: d.NextReplica})
			d.NextReplica++
		}
		slices.SortFunc(d.Replicas, func(x, y Replica) int { return cmpUint(x.Member, y.Member) })
	})
}

// checkMove refuses a move of cell to t, and lists in *added the members
// the move adds.
func (a *applier) checkMove(name string, cell *Cell, t Placement, added *[]uint64) (Reply, bool) {
	if cell.State != CellActive {
		return a.refuse(CodeBadState, "cell %q is %v: only an active cell moves", name, cell.State), false
	}
	if t.Equal(cell.Placement) {
		return a.refuse(CodeInvalidPlacement, "cell %q is already on %v", name, t), false
	}
	if r, ok := a.checkPlacement(t, cell); !ok {
		return r, false
	}
	for _, v := range cell.Placement.Voters {
		if slices.Contains(t.Observers, v) {
			// Dragonboat cannot demote a voter, and one NodeHost cannot
			// hold two replicas of a shard: the member would need its
			// voter removed before its observer is added.
			return a.refuse(CodeInvalidPlacement, "member %d is a voter of %q: demote it in two moves (remove it, then add it as an observer)", v, name), false
		}
	}
	for _, m := range t.Members() {
		if !cell.Hosts(m) {
			*added = append(*added, m)
		}
	}
	if r, ok := a.checkPorts(name, *added, cell.ClientPort, cell.TLSPort); !ok {
		return r, false
	}
	return pass()
}

// endMove finishes (placement := target) or aborts (target dropped) a
// move; the replicas of members no longer placed are dropped, their ids
// retired.
func (a *applier) endMove(name string, expect int64, finish bool) Reply {
	return a.changeCell(name, expect, func(cell *Cell) (Reply, bool) {
		if cell.State != CellMoving {
			return a.refuse(CodeBadState, "cell %q is %v, not moving", name, cell.State), false
		}
		return pass()
	}, func(d *Cell) {
		if finish {
			d.Placement = d.Target
		}
		d.State, d.Target = CellActive, Placement{}
		d.Replicas = slices.DeleteFunc(d.Replicas, func(r Replica) bool { return !d.Placement.Has(r.Member) })
	})
}

func (a *applier) setLimits(c *SetLimits) Reply {
	return a.changeCell(c.Name, c.Expect, func(cell *Cell) (Reply, bool) {
		if cell.State == CellDeleting {
			return a.refuse(CodeBadState, "cell %q is deleting", c.Name), false
		}
		return a.checkLimits(c.Limits)
	}, func(d *Cell) { d.Limits = c.Limits })
}

func (a *applier) deleteCell(c *DeleteCell) Reply {
	var del Deletion
	return a.changeCell(c.Name, c.Expect, func(cell *Cell) (Reply, bool) {
		switch cell.State {
		case CellMoving:
			return a.refuse(CodeBadState, "cell %q is moving: finish or abort the move first", c.Name), false
		case CellDeleting:
			return a.refuse(CodeBadState, "cell %q is already deleting", c.Name), false
		}
		switch {
		case c.Force:
			del.Forced = true
			if c.Empty != nil {
				del.Empty = *c.Empty
			}
		case c.Empty == nil:
			return a.refuse(CodeNotEmpty, "cell %q: the map cannot see its data: delete it with an attestation that it is empty (read from shard %d) or force", c.Name, cell.ShardID), false
		case c.Empty.ShardID != cell.ShardID:
			return a.refuse(CodeInvalid, "cell %q is shard %d; the attestation was read from shard %d", c.Name, cell.ShardID, c.Empty.ShardID), false
		case !c.Empty.IsEmpty():
			return a.refuse(CodeNotEmpty, "cell %q holds %d znodes and %d sessions (at zxid %#x): delete it when empty, or force", c.Name, c.Empty.Znodes, c.Empty.Sessions, c.Empty.Zxid), false
		default:
			del.Empty = *c.Empty
		}
		return pass()
	}, func(d *Cell) { d.State, d.Deletion = CellDeleting, del })
}

func (a *applier) purgeCell(c *PurgeCell) Reply {
	cell, r, ok := a.cellFor(c.Name, c.Expect)
	if !ok {
		return r
	}
	if cell.State != CellDeleting {
		return a.refuse(CodeBadState, "cell %q is %v: delete it first", c.Name, cell.State)
	}
	v := a.bump()
	a.m.dropCell(cell.Name)
	a.dirtyCells = append(a.dirtyCells, cell.Name)
	a.events = append(a.events, Event{Kind: EventCellRemoved, Version: v, Cell: cell.Name, ShardID: cell.ShardID})
	return a.changed(cell.ShardID)
}

func (a *applier) importDefault(c *ImportDefault) Reply {
	if a.m.defaultImported {
		d := a.m.cell(DefaultCell)
		switch {
		case d == nil:
			return a.refuse(CodeConflict, "the default cell was imported and has since been deleted")
		case d.ShardID != c.ShardID:
			return a.refuse(CodeConflict, "the default cell is shard %d, this member's configuration says %d", d.ShardID, c.ShardID)
		}
		return a.unchanged(d.ShardID)
	}
	switch {
	case c.ShardID == 0 || c.ShardID >= MaxCellShardID:
		return a.refuse(CodeInvalid, "default shard id %d outside 1..%d", c.ShardID, MaxCellShardID-1)
	case c.ShardID >= FirstCellShardID && c.ShardID < a.m.nextShard:
		return a.refuse(CodeConflict, "shard %d has been allocated to a created cell", c.ShardID)
	}
	// The members first, on a scratch copy: the placement is checked
	// against the map as it will be.
	specs := make([]MemberSpec, 0, len(c.Members))
	for _, s := range c.Members {
		s, r, ok := a.checkMemberSpec(s)
		if !ok {
			return r
		}
		specs = append(specs, s)
	}
	slices.SortFunc(specs, func(x, y MemberSpec) int { return cmpUint(x.ID, y.ID) })
	saved := a.m
	a.m = a.m.shallow()
	var added []*Member
	for i, s := range specs {
		if i > 0 && specs[i-1].ID == s.ID {
			a.m = saved
			return a.refuse(CodeInvalid, "member %d listed twice", s.ID)
		}
		if x := a.m.member(s.ID); x != nil {
			if x.RaftAddr != s.RaftAddr || x.ClientHost != s.ClientHost {
				a.m = saved
				return a.refuse(CodeConflict, "member %d is in the fleet with Raft address %s and client host %s, the configuration says %s and %s",
					s.ID, x.RaftAddr, x.ClientHost, s.RaftAddr, s.ClientHost)
			}
			continue
		}
		if r, ok := a.checkNewMember(s); !ok {
			a.m = saved
			return r
		}
		x := &Member{ID: s.ID, RaftAddr: s.RaftAddr, ClientHost: s.ClientHost, State: MemberActive, AddedAt: a.now}
		a.m.putMember(x)
		added = append(added, x)
	}
	p := c.Placement.canonical()
	if r, ok := a.checkPlacement(p, nil); !ok {
		a.m = saved
		return r
	}
	if r, ok := a.checkPorts(DefaultCell, p.Members(), c.ClientPort, c.TLSPort); !ok {
		a.m = saved
		return r
	}
	v := a.bump()
	for _, x := range added {
		x.Created, x.Updated = v, v
		a.dirtyMembers = append(a.dirtyMembers, x.ID)
		a.events = append(a.events, Event{Kind: EventMemberAdded, Version: v, Member: x.ID})
	}
	// Today's replica ids are the members' ids (myid): the default cell
	// keeps them, so today's Raft log and state store are its replicas'.
	cell := &Cell{Name: DefaultCell, ShardID: c.ShardID, Placement: p, ClientPort: c.ClientPort, TLSPort: c.TLSPort,
		State: CellActive, Created: v, Updated: v, CreatedAt: a.now, UpdatedAt: a.now}
	for _, m := range p.Members() {
		cell.Replicas = append(cell.Replicas, Replica{Member: m, ID: m})
		cell.NextReplica = max(cell.NextReplica, m+1)
	}
	a.m.defaultImported = true
	a.m.nextShard = max(a.m.nextShard, c.ShardID+1)
	a.putCell(cell, EventCellCreated)
	return a.changed(cell.ShardID)
}

// Validation.

func (a *applier) checkLimits(l Limits) (Reply, bool) {
	for _, v := range []int64{l.MaxZnodes, l.MaxDataBytes, l.MaxSessions, l.MaxWatches, l.MaxRequestRate} {
		if v < 0 {
			return a.refuse(CodeInvalid, "limit %d is negative (0 is unlimited)", v), false
		}
	}
	return Reply{}, true
}

// checkPlacement validates a canonical placement for a new cell (cur nil)
// or as the target of cur's move: 1..MaxVoters distinct voters, at most
// MaxObservers distinct observers that are not voters, every member in the
// fleet, every member new to the cell active, and no two replicas (of the
// placement, and during a move of both placements) on one client host,
// where they would need the same port twice.
func (a *applier) checkPlacement(p Placement, cur *Cell) (Reply, bool) {
	if n := len(p.Voters); n < 1 || n > MaxVoters {
		return a.refuse(CodeInvalidPlacement, "%d voters, want 1..%d", n, MaxVoters), false
	}
	if n := len(p.Observers); n > MaxObservers {
		return a.refuse(CodeInvalidPlacement, "%d observers, want at most %d", n, MaxObservers), false
	}
	all := p.Members()
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			return a.refuse(CodeInvalidPlacement, "member %d placed twice", all[i]), false
		}
	}
	if cur != nil {
		for _, m := range cur.Members() {
			if !slices.Contains(all, m) {
				all = append(all, m)
			}
		}
		slices.Sort(all)
	}
	var hosts []string
	for _, id := range all {
		x := a.m.member(id)
		if x == nil {
			return a.refuse(CodeInvalidPlacement, "member %d is not in the fleet", id), false
		}
		if x.State != MemberActive && (cur == nil || !cur.Hosts(id)) {
			return a.refuse(CodeInvalidPlacement, "member %d is %v: no new replica goes there", id, x.State), false
		}
		if slices.Contains(hosts, x.ClientHost) {
			return a.refuse(CodeInvalidPlacement, "two replicas on client host %s (member %d and another): they would share its ports", x.ClientHost, id), false
		}
		hosts = append(hosts, x.ClientHost)
	}
	return Reply{}, true
}

// checkPorts refuses ports that are bad, or taken on the client host of
// one of members by another cell than self (in any state: a deleting cell
// keeps its ports until purged) or by a member's Raft port.
func (a *applier) checkPorts(self string, members []uint64, client, tls uint16) (Reply, bool) {
	if client == 0 {
		return a.refuse(CodeInvalid, "a cell needs a client port"), false
	}
	if tls == client {
		return a.refuse(CodeInvalid, "client and TLS port are both %d", client), false
	}
	for _, id := range members {
		host := a.m.member(id).ClientHost
		for _, c := range a.m.cells {
			if c.Name == self || !c.UsesPort(client) && !c.UsesPort(tls) {
				continue
			}
			for _, r := range c.Replicas {
				if a.m.member(r.Member).ClientHost == host {
					return a.refuse(CodePortTaken, "cell %q serves on port %d or %d on host %s (member %d)", c.Name, client, tls, host, r.Member), false
				}
			}
		}
		for _, x := range a.m.members {
			rh, rp, _ := splitRaftAddr(x.RaftAddr)
			if rh == host && (rp == client || tls != 0 && rp == tls) {
				return a.refuse(CodePortTaken, "port %d is member %d's Raft port on host %s", rp, x.ID, host), false
			}
		}
	}
	return Reply{}, true
}

// validName checks a cell name: 1..63 of a-z, 0-9 and '-', starting with
// a letter and not ending with '-' (a DNS label: it names a directory, a
// metric label and a path segment of the admin API), and not a reserved
// name.
func validName(name string) error {
	if name == DefaultCell || name == "system" {
		return fmt.Errorf("cell name %q is reserved", name)
	}
	if len(name) == 0 || len(name) > 63 {
		return fmt.Errorf("cell name of %d bytes, want 1..63", len(name))
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		switch {
		case ch >= 'a' && ch <= 'z':
		case (ch >= '0' && ch <= '9' || ch == '-') && i > 0:
		default:
			return fmt.Errorf("cell name %q: want a-z, 0-9 and '-', starting with a letter", name)
		}
	}
	if name[len(name)-1] == '-' {
		return fmt.Errorf("cell name %q ends with '-'", name)
	}
	return nil
}

// canonHost checks a host (an IP address or a DNS name, not a wildcard)
// and returns its canonical form: an address as netip prints it, a name
// in lower case.
func canonHost(h string) (string, error) {
	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
		if ip.IsUnspecified() {
			return "", fmt.Errorf("%s is a wildcard address, not a host clients reach", h)
		}
		return ip.String(), nil
	}
	if len(h) == 0 || len(h) > 253 {
		return "", fmt.Errorf("host of %d bytes", len(h))
	}
	for _, label := range strings.Split(strings.ToLower(h), ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("host %q is neither an IP address nor a DNS name", h)
		}
		for i := 0; i < len(label); i++ {
			if ch := label[i]; !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-') {
				return "", fmt.Errorf("host %q is neither an IP address nor a DNS name", h)
			}
		}
	}
	return strings.ToLower(h), nil
}

// splitRaftAddr splits host:port ([v6]:port) into a canonical host and a
// port in 1..65535 (the package imports no net).
func splitRaftAddr(addr string) (string, uint16, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, errors.New("no port")
	}
	host, ps := addr[:i], addr[i+1:]
	if strings.Contains(host, ":") && !(strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]")) {
		return "", 0, errors.New("an IPv6 host must be in brackets")
	}
	p, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("port %q", ps)
	}
	h, err := canonHost(host)
	if err != nil {
		return "", 0, err
	}
	return h, uint16(p), nil
}

func joinHostPort(host string, port uint16) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(int(port))
}
