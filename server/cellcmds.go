package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zkraft/zkraft/fleet"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/znode"
)

// The operator commands on cells, AdminServer commands of the registry
// (operator.go adds them) that need the super user's credentials in
// ZooKeeper 3.9's AdminServer form (adminauth.go), a request header
//
//	Authorization: digest super:password
//
// matching Config.SuperDigest (no super digest: refused). They read
// and change the fleet's map through the system shard, and a cell's
// figures through this member's replica of it.
//
//	cells                                  list the map's cells
//	cell_show     ?name=                   one cell: the map's record, and this member's view of it
//	cell_create   ?name= &voters=1,2,3 [&observers=] &port= [&tls_port=] [&max_znodes= &max_data_bytes= &max_sessions= &max_watches= &max_request_rate=] [&import=true]
//	cell_release  ?name=                   let the members of a cell created with import=true start it (after zkraft import --cell on each)
//	cell_limits   ?name= [&max_...=]       replace a cell's limits
//	cell_move     ?name= &voters= [&observers=]  move a cell's replicas to another placement, online
//	cell_abort    ?name=                   abort a cell's move: its placement stays, the replicas the move added leave the shard
//	member_promote ?id=                    make a member's non-voting replica of the system shard a voter
//	member_leave  ?id=                     mark a member leaving (markLeaving): no new replica is placed on it
//	member_remove ?id=                     take a leaving member that hosts no replica out of the map and the system shard
//	cell_delete   ?name= [&force=true]     delete: refused unless the cell is empty (read here) or forced
//	cell_purge    ?name=                   drop a deleted cell from the map (its name and ports are free again)
//
// The registry lists them with auth set.

// adminSuper refuses a request whose Authorization header does not
// authenticate the super user (adminAuthenticate: 401 without one or for
// unknown credentials, 403 for another user's).
func (s *Server) adminSuper(r *http.Request) *authRefusal {
	ids, err := s.adminAuthenticate(r)
	if err != nil {
		var ar *authRefusal
		if errors.As(err, &ar) {
			return ar
		}
		return &authRefusal{http.StatusInternalServerError, authError}
	}
	for _, id := range ids {
		if id.Scheme == "super" {
			return nil
		}
	}
	return errNotAuthorized
}

// cellPost answers a POST of a cell command from its form (query or
// body), for the default cell's view.
func cellPost(fn func(s *cellView, q url.Values) (jobj, string)) func(s *Server, r *http.Request) adminReply {
	return func(s *Server, r *http.Request) adminReply {
		if err := r.ParseForm(); err != nil {
			return adminReply{status: http.StatusBadRequest, err: err.Error()}
		}
		fields, errText := fn(s.view(), r.Form)
		return adminReply{fields: fields, err: errText}
	}
}

// cellCtx bounds an operator command's waits on Raft.
func (s *cellView) cellCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.cfg.ProposalTimeout+5*time.Second)
}

func cellsJSON(s *cellView, _ url.Values) (jobj, string) {
	ctx, cancel := s.cellCtx()
	defer cancel()
	m, err := s.fleet.readMap(ctx)
	if err != nil {
		return jobj{}, err.Error()
	}
	cells := []any{}
	for _, c := range m.Cells() {
		cells = append(cells, cellRecordJSON(m, c))
	}
	return jobj{{"version", m.Version()}, {"cells", cells}}, ""
}

func cellShowJSON(s *cellView, q url.Values) (jobj, string) {
	name := q.Get("name")
	ctx, cancel := s.cellCtx()
	defer cancel()
	m, err := s.fleet.readMap(ctx)
	if err != nil {
		return jobj{}, err.Error()
	}
	c, ok := m.Cell(name)
	if !ok {
		return jobj{}, fmt.Sprintf("no cell %q", name)
	}
	out := jobj{{"version", m.Version()}, {"cell", cellRecordJSON(m, c)}}
	var cl *cell
	if name == fleet.DefaultCell {
		cl = s.Server.cell
	} else if h := s.fleet.hostedCell(name); h != nil {
		cl = h.c
	}
	if cl == nil {
		return append(out, kv{"here", jobj{{"member", s.cfg.ReplicaID}, {"hosted", false}}}), ""
	}
	here := jobj{{"member", s.cfg.ReplicaID}, {"hosted", true}, {"replica", cl.replicaID}}
	leader := cl.leaderID.Load()
	here = append(here, kv{"leader_replica", leader}, kv{"leader_member", memberOfReplica(c, leader)})
	nodes, eph, size := cl.treeCounts()
	here = append(here, kv{"zxid", cl.zxid.Load()}, kv{"sessions", cl.tracker.Len()}, kv{"znodes", nodes + 1},
		kv{"ephemerals", eph}, kv{"data_bytes", size}, kv{"watches", cl.watches.total()})
	if name != fleet.DefaultCell {
		_, addr, lnErr, _ := s.fleet.hostedState(name)
		switch {
		case addr != nil:
			here = append(here, kv{"serving", addr.String()})
		case lnErr != nil:
			here = append(here, kv{"not_serving", lnErr.Error()})
		}
	} else {
		here = append(here, kv{"serving", s.ln.Addr().String()})
	}
	return append(out, kv{"here", here}), ""
}

// memberOfReplica is the member whose replica of c has id replica (0: none).
func memberOfReplica(c fleet.Cell, replica uint64) uint64 {
	for _, r := range c.Replicas {
		if r.ID == replica && replica != 0 {
			return r.Member
		}
	}
	return 0
}

func cellRecordJSON(m *fleet.Map, c fleet.Cell) jobj {
	replicas := []any{}
	for _, r := range c.Replicas {
		x, _ := m.Member(r.Member)
		replicas = append(replicas, jobj{{"member", r.Member}, {"replica", r.ID}, {"raft_addr", x.RaftAddr}, {"client_host", x.ClientHost}})
	}
	out := jobj{
		{"name", c.Name}, {"shard_id", c.ShardID}, {"state", c.State.String()},
		{"voters", uint64List(c.Placement.Voters)}, {"observers", uint64List(c.Placement.Observers)},
		{"replicas", replicas}, {"client_port", int64(c.ClientPort)}, {"tls_port", int64(c.TLSPort)},
		{"limits", limitsJSON(c.Limits)}, {"created", c.Created}, {"updated", c.Updated},
	}
	if c.State == fleet.CellMoving {
		out = append(out, kv{"target_voters", uint64List(c.Target.Voters)}, kv{"target_observers", uint64List(c.Target.Observers)})
	}
	if c.State == fleet.CellDeleting {
		out = append(out, kv{"forced", c.Deletion.Forced})
	}
	return out
}

func limitsJSON(l fleet.Limits) jobj {
	return jobj{{"max_znodes", l.MaxZnodes}, {"max_data_bytes", l.MaxDataBytes}, {"max_sessions", l.MaxSessions},
		{"max_watches", l.MaxWatches}, {"max_request_rate", l.MaxRequestRate}}
}

func uint64List(ns []uint64) []any {
	out := make([]any, len(ns))
	for i, n := range ns {
		out[i] = n
	}
	return out
}

// parseMembers parses "1,2,3" (empty: none).
func parseMembers(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseUint(f, 10, 8)
		if err != nil {
			return nil, fmt.Errorf("member id %q: want 1..%d", f, fleet.MaxMemberID)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// parseLimits reads the max_* parameters over base.
func parseLimits(q url.Values, base fleet.Limits) (fleet.Limits, error) {
	for _, x := range []struct {
		key string
		v   *int64
	}{{"max_znodes", &base.MaxZnodes}, {"max_data_bytes", &base.MaxDataBytes}, {"max_sessions", &base.MaxSessions},
		{"max_watches", &base.MaxWatches}, {"max_request_rate", &base.MaxRequestRate}} {
		if v := q.Get(x.key); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return base, fmt.Errorf("%s=%q: not a number", x.key, v)
			}
			*x.v = n
		}
	}
	return base, nil
}

func parsePort(q url.Values, key string) (uint16, error) {
	v := q.Get(key)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want a port", key, v)
	}
	return uint16(n), nil
}

// replyJSON is a command's reply from the system shard.
func replyJSON(rep fleet.Reply, err error) (jobj, string) {
	if err != nil {
		return jobj{}, err.Error()
	}
	out := jobj{{"result", rep.Code.String()}, {"version", rep.Version}, {"changed", rep.Changed}}
	if rep.ShardID != 0 {
		out = append(out, kv{"shard_id", rep.ShardID})
	}
	if !rep.OK() {
		return append(out, kv{"detail", rep.Detail}), rep.Code.String() + ": " + rep.Detail
	}
	return out, ""
}

// parsePlacement reads a command's ?voters= and ?observers= member ids; a
// refusal is its error text.
func parsePlacement(q url.Values) (voters, observers []uint64, errText string) {
	voters, err := parseMembers(q.Get("voters"))
	if err != nil {
		return nil, nil, "voters: " + err.Error()
	}
	observers, err = parseMembers(q.Get("observers"))
	if err != nil {
		return nil, nil, "observers: " + err.Error()
	}
	return voters, observers, ""
}

func cellCreateJSON(s *cellView, q url.Values) (jobj, string) {
	voters, observers, errText := parsePlacement(q)
	if errText != "" {
		return jobj{}, errText
	}
	port, err := parsePort(q, "port")
	if err != nil {
		return jobj{}, err.Error()
	}
	tlsPort, err := parsePort(q, "tls_port")
	if err != nil {
		return jobj{}, err.Error()
	}
	limits, err := parseLimits(q, fleet.Limits{})
	if err != nil {
		return jobj{}, err.Error()
	}
	ctx, cancel := s.cellCtx()
	defer cancel()
	cc := &fleet.CreateCell{Name: q.Get("name"), Placement: fleet.Placement{Voters: voters, Observers: observers},
		ClientPort: port, TLSPort: tlsPort, Limits: limits}
	if q.Get("import") == "true" {
		// Created importing: no member starts it until cell_release
		// (docs/cells.md, Consolidation).
		return replyJSON(s.fleet.propose(ctx, (*fleet.ImportCell)(cc)))
	}
	return replyJSON(s.fleet.propose(ctx, cc))
}

// cellReleaseJSON lets the members of an importing cell start their
// replicas, from the stores zkraft import --cell wrote.
func cellReleaseJSON(s *cellView, q url.Values) (jobj, string) {
	ctx, cancel := s.cellCtx()
	defer cancel()
	c, errText := s.cellFor(ctx, q.Get("name"))
	if errText != "" {
		return jobj{}, errText
	}
	return replyJSON(s.fleet.propose(ctx, &fleet.ReleaseCell{Name: c.Name, Expect: c.Updated}))
}

// cellFor reads the map linearizably and finds the cell name.
func (s *cellView) cellFor(ctx context.Context, name string) (fleet.Cell, string) {
	m, err := s.fleet.readMap(ctx)
	if err != nil {
		return fleet.Cell{}, err.Error()
	}
	c, ok := m.Cell(name)
	if !ok {
		return fleet.Cell{}, fmt.Sprintf("no cell %q", name)
	}
	return c, ""
}

func cellLimitsJSON(s *cellView, q url.Values) (jobj, string) {
	ctx, cancel := s.cellCtx()
	defer cancel()
	c, errText := s.cellFor(ctx, q.Get("name"))
	if errText != "" {
		return jobj{}, errText
	}
	limits, err := parseLimits(q, c.Limits)
	if err != nil {
		return jobj{}, err.Error()
	}
	return replyJSON(s.fleet.propose(ctx, &fleet.SetLimits{Name: c.Name, Expect: c.Updated, Limits: limits}))
}

func cellPurgeJSON(s *cellView, q url.Values) (jobj, string) {
	ctx, cancel := s.cellCtx()
	defer cancel()
	c, errText := s.cellFor(ctx, q.Get("name"))
	if errText != "" {
		return jobj{}, errText
	}
	return replyJSON(s.fleet.propose(ctx, &fleet.PurgeCell{Name: c.Name, Expect: c.Updated}))
}

// cellDeleteJSON deletes a cell (docs/cells.md, Deleting a cell). Without
// force it must be asked on a member that hosts the cell: it seals the cell
// in its own log (raftsm.KindSeal: every write after it is refused with
// NOTREADONLY, every new session closed), reads linearizably, so after the
// seal, that the cell is empty, and proposes deleteCell with that
// attestation; a delete the map refuses (the cell was not empty) unseals
// the cell. So no write lands between the read and the delete. A forced
// delete seals the cell first too when this member hosts it.
func cellDeleteJSON(s *cellView, q url.Values) (jobj, string) {
	ctx, cancel := s.cellCtx()
	defer cancel()
	c, errText := s.cellFor(ctx, q.Get("name"))
	if errText != "" {
		return jobj{}, errText
	}
	cmd := &fleet.DeleteCell{Name: c.Name, Expect: c.Updated, Force: q.Get("force") == "true"}
	var cl *cell
	if c.Name == fleet.DefaultCell {
		cl = s.Server.cell
	} else if h := s.fleet.hostedCell(c.Name); h != nil {
		cl = h.c
	}
	if cl == nil && !cmd.Force {
		return jobj{}, fmt.Sprintf("cell %q has no replica on this member to read its emptiness from: ask a member that hosts it (%v), or force", c.Name, c.Members())
	}
	sealed := false
	if cl != nil {
		if err := cl.seal(ctx, true); err != nil {
			if !cmd.Force {
				return jobj{}, "seal the cell before its delete: " + err.Error()
			}
			cl.log.Warn("cells: a forced delete could not seal the cell first", "err", err)
		} else {
			sealed = true
		}
	}
	if !cmd.Force {
		e, err := cl.emptiness()
		if err != nil {
			cl.unsealAfter(ctx, "its emptiness could not be read")
			return jobj{}, "read the cell: " + err.Error()
		}
		cmd.Empty = &e
		if testHookAttested != nil {
			testHookAttested(c.Name)
		}
	}
	rep, err := s.fleet.propose(ctx, cmd)
	if sealed && (err != nil || !rep.OK()) {
		cl.unsealAfter(ctx, "the map did not delete it")
	}
	out, errText := replyJSON(rep, err)
	if cmd.Empty != nil {
		out = append(out, kv{"znodes", cmd.Empty.Znodes}, kv{"sessions", cmd.Empty.Sessions}, kv{"zxid", cmd.Empty.Zxid})
	}
	return out, errText
}

// testHookAttested, when set (by tests), runs between a delete's
// attestation that the cell is empty and its deleteCell proposal: the
// window the seal closes.
var testHookAttested func(cell string)

// seal seals (on) or unseals the cell in its own log and waits for it to
// apply.
func (c *cell) seal(ctx context.Context, on bool) error {
	kind := raftsm.KindUnseal
	if on {
		kind = raftsm.KindSeal
	}
	// Both are idempotent: retried across leader changes.
	rep, _, err := c.rep.proposeRetry(&raftsm.Command{Kind: kind, Time: time.Now().UnixMilli()}, ctx.Done())
	if err != nil {
		return err
	}
	if rep.Err != jute.ErrOK {
		return rep.Err
	}
	return nil
}

// unsealAfter unseals a cell whose delete did not go ahead; a failure is
// logged (the operator retries the delete, or forces it).
func (c *cell) unsealAfter(ctx context.Context, why string) {
	if err := c.seal(ctx, false); err != nil {
		c.log.Error("cells: the cell stays sealed (writes refused): its delete did not go ahead and the unseal failed; "+
			"delete it again to retry", "why", why, "err", err)
		return
	}
	c.log.Info("cells: cell unsealed: its delete did not go ahead", "why", why)
}

// emptiness reads the cell's znodes outside /zookeeper (the root not
// counted) and its sessions, linearizably.
func (c *cell) emptiness() (fleet.Emptiness, error) {
	return readValue(c.rep, nil, linearizableRead, func(v raftsm.View) (fleet.Emptiness, error) {
		st, err := v.TreeStats()
		if err != nil {
			return fleet.Emptiness{}, err
		}
		ss, err := v.Sessions()
		if err != nil {
			return fleet.Emptiness{}, err
		}
		// Nodes counts the root; the /zookeeper subtree (small: the
		// quota and config nodes) is the server's own.
		own, err := countSubtree(v.Tree(), znode.ZooKeeperPath)
		if err != nil {
			return fleet.Emptiness{}, err
		}
		znodes := st.Nodes - 1 - own
		return fleet.Emptiness{ShardID: c.shardID, Zxid: v.Zxid(), Znodes: max(znodes, 0), Sessions: int64(len(ss))}, nil
	})
}

// countSubtree counts path and the nodes below it (0 if it does not
// exist), level by level.
func countSubtree(t znode.ReadKV, path string) (int64, error) {
	n, err := t.Get(path)
	if err != nil || n == nil {
		return 0, err
	}
	kids, err := t.Children(path)
	if err != nil {
		return 0, err
	}
	total := int64(1)
	for _, k := range kids {
		c, err := countSubtree(t, path+"/"+k)
		if err != nil {
			return 0, err
		}
		total += c
	}
	return total, nil
}

func cellMoveJSON(s *cellView, q url.Values) (jobj, string) {
	voters, observers, errText := parsePlacement(q)
	if errText != "" {
		return jobj{}, errText
	}
	ctx, cancel := s.cellCtx()
	defer cancel()
	c, errText := s.cellFor(ctx, q.Get("name"))
	if errText != "" {
		return jobj{}, errText
	}
	if c.Name == fleet.DefaultCell {
		// Its replicas are the ensemble's: they move by reconfig.
		return jobj{}, "the default cell's replicas are the ensemble's members: change them with reconfig"
	}
	return replyJSON(s.fleet.propose(ctx, &fleet.BeginMove{Name: c.Name, Expect: c.Updated, Target: fleet.Placement{Voters: voters, Observers: observers}}))
}

// cellAbortJSON aborts a cell's move (abortMove): the placement stays, the
// replica ids given to the target's new members are retired; their members
// stop and remove those replicas, and the member of the cell's leader takes
// them out of the shard (leaderDuties).
func cellAbortJSON(s *cellView, q url.Values) (jobj, string) {
	ctx, cancel := s.cellCtx()
	defer cancel()
	c, errText := s.cellFor(ctx, q.Get("name"))
	if errText != "" {
		return jobj{}, errText
	}
	return replyJSON(s.fleet.propose(ctx, &fleet.AbortMove{Name: c.Name, Expect: c.Updated}))
}

// memberOf reads the map linearizably and finds the member ?id=.
func (s *cellView) memberOf(ctx context.Context, q url.Values) (fleet.Member, string) {
	id, err := strconv.ParseUint(q.Get("id"), 10, 64)
	if err != nil || id == 0 {
		return fleet.Member{}, fmt.Sprintf("id: want a member id, not %q", q.Get("id"))
	}
	m, err := s.fleet.readMap(ctx)
	if err != nil {
		return fleet.Member{}, err.Error()
	}
	x, ok := m.Member(id)
	if !ok {
		return fleet.Member{}, fmt.Sprintf("no member %d in the map", id)
	}
	return x, ""
}

// memberPromoteJSON makes a member's non-voting replica of the system
// shard (a member added after the bootstrap: docs/cells.md) a voter, so
// that it votes on the map.
func memberPromoteJSON(s *cellView, q url.Values) (jobj, string) {
	ctx, cancel := s.cellCtx()
	defer cancel()
	x, errText := s.memberOf(ctx, q)
	if errText != "" {
		return jobj{}, errText
	}
	sys := systemShard{s.nh}
	mem, err := sys.membership(ctx)
	if err != nil {
		return jobj{}, err.Error()
	}
	if _, ok := mem.voters[x.ID]; ok {
		return jobj{{"result", "ok"}, {"member", x.ID}, {"changed", false}}, ""
	}
	addr, ok := mem.nonVoting[x.ID]
	if !ok {
		return jobj{}, fmt.Sprintf("member %d has no replica of the system shard yet (the system shard's leader adds one to every member of the ensemble): try again", x.ID)
	}
	if err := sys.promote(ctx, x.ID, addr, mem.changeID); err != nil {
		return jobj{}, err.Error()
	}
	return jobj{{"result", "ok"}, {"member", x.ID}, {"changed", true}}, ""
}

// memberLeaveJSON marks a member leaving: the map places no new replica on
// it; move its cells away, then remove it.
func memberLeaveJSON(s *cellView, q url.Values) (jobj, string) {
	ctx, cancel := s.cellCtx()
	defer cancel()
	x, errText := s.memberOf(ctx, q)
	if errText != "" {
		return jobj{}, errText
	}
	return replyJSON(s.fleet.propose(ctx, &fleet.MarkLeaving{ID: x.ID, Expect: x.Updated}))
}

// memberRemoveJSON takes a leaving member out of the map (removeMember:
// refused while it hosts a replica of any cell), then its replica out of
// the system shard, voter or not (the system shard's leader adds no
// replica Dragonboat has removed). The last voter of the system shard is
// not removed.
func memberRemoveJSON(s *cellView, q url.Values) (jobj, string) {
	ctx, cancel := s.cellCtx()
	defer cancel()
	x, errText := s.memberOf(ctx, q)
	if errText != "" {
		return jobj{}, errText
	}
	sys := systemShard{s.nh}
	mem, err := sys.membership(ctx)
	if err != nil {
		return jobj{}, err.Error()
	}
	if _, voter := mem.voters[x.ID]; voter && len(mem.voters) == 1 {
		return jobj{}, fmt.Sprintf("member %d is the system shard's only voter: promote another member first", x.ID)
	}
	out, errText := replyJSON(s.fleet.propose(ctx, &fleet.RemoveMember{ID: x.ID, Expect: x.Updated}))
	if errText != "" {
		return out, errText
	}
	_, voter := mem.voters[x.ID]
	_, nonVoting := mem.nonVoting[x.ID]
	if voter || nonVoting {
		if err := sys.remove(ctx, x.ID, mem.changeID); err != nil {
			return out, "removed from the map; the system shard: " + err.Error() + " (ask again)"
		}
	}
	return out, ""
}
