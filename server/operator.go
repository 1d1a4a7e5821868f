package server

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/zkraft/zkraft/console"
	"github.com/zkraft/zkraft/fleet"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/operator"
	"github.com/zkraft/zkraft/raftsm"
)

// The member as package operator sees it: the four-letter words, the
// AdminServer's commands, mntr and the Prometheus figures are operator's,
// over the operator.Member a cellView is (one cell of this member) and the
// operator.Host the Server is; the commands on the fleet's cells
// (cellcmds.go), shed_connections (shed.go) and snapshot
// (snapshotstream.go) are the member's own, added to the registry here.

// Version is what zkraft reports as its ZooKeeper version.
const Version = operator.Version

// notServing is ZooKeeper's reply to most words while it has no quorum.
const notServing = operator.NotServing

// jobj and kv are operator's JSON objects, for the member's own commands.
type (
	jobj = operator.Object
	kv   = operator.KV
)

// cellView is the member as an operator command sees it: the member, and
// the cell the command answers for (the cell of the client port a
// four-letter word came in on; for the AdminServer the cell its ?cell=
// names, the default cell without one). Its cell field hides the
// Server's, so a command's s.cell is the cell it answers for.
type cellView struct {
	*Server
	cell *cell
}

var (
	_ operator.Member = (*cellView)(nil)
	_ operator.Host   = (*Server)(nil)
)

// view is the member as it answers for its default cell.
func (s *Server) view() *cellView { return &cellView{Server: s, cell: s.cell} }

// ownCommands are the member's commands beyond ZooKeeper's.
func (s *Server) ownCommands() []operator.Command {
	// The cells of the fleet (cellcmds.go): zkraft's own, for the super user.
	// Those that change the map answer POST (form or query), the others GET.
	return []operator.Command{
		{Name: "cell_abort", Auth: operator.AuthSuper, Post: s.adminPost(cellPost(cellAbortJSON))},
		{Name: "cell_create", Auth: operator.AuthSuper, Post: s.adminPost(cellPost(cellCreateJSON))},
		{Name: "cell_delete", Auth: operator.AuthSuper, Post: s.adminPost(cellPost(cellDeleteJSON))},
		{Name: "cell_limits", Auth: operator.AuthSuper, Post: s.adminPost(cellPost(cellLimitsJSON))},
		{Name: "cell_move", Auth: operator.AuthSuper, Post: s.adminPost(cellPost(cellMoveJSON))},
		{Name: "cell_purge", Auth: operator.AuthSuper, Post: s.adminPost(cellPost(cellPurgeJSON))},
		{Name: "cell_release", Auth: operator.AuthSuper, Post: s.adminPost(cellPost(cellReleaseJSON))},
		{Name: "cell_show", Auth: operator.AuthSuper, JSON: s.viewJSON(cellShowJSON)},
		{Name: "cells", Auth: operator.AuthSuper, JSON: s.viewJSON(cellsJSON)},
		{Name: "member_leave", Auth: operator.AuthSuper, Post: s.adminPost(cellPost(memberLeaveJSON))},
		{Name: "member_promote", Auth: operator.AuthSuper, Post: s.adminPost(cellPost(memberPromoteJSON))},
		{Name: "member_remove", Auth: operator.AuthSuper, Post: s.adminPost(cellPost(memberRemoveJSON))},
		// ZooKeeper 3.9's AdminServer (shed_connections is on its main branch, ZOOKEEPER-5015).
		{Name: "shed_connections", Aliases: []string{"shed"}, Serving: true, Auth: operator.AuthAllOnRoot, Post: s.adminPost(shedConnectionsPost)}, // shed.go
		{Name: "snapshot", Aliases: []string{"snap"}, Serving: true, Auth: operator.AuthAllOnRoot, Get: s.adminPost(snapshotGet)},                  // snapshotstream.go
	}
}

// viewJSON is a command of the fleet's cells: it answers for the member
// (the system shard), whichever cell the request names.
func (s *Server) viewJSON(fn func(*cellView, url.Values) (jobj, string)) func(operator.Member, url.Values) (operator.Object, string) {
	return func(_ operator.Member, q url.Values) (operator.Object, string) { return fn(s.view(), q) }
}

// adminPost is a member's command answered with more than fields.
func (s *Server) adminPost(fn func(*Server, *http.Request) adminReply) func(*http.Request) operator.Reply {
	return func(r *http.Request) operator.Reply {
		rep := fn(s, r)
		return operator.Reply{Status: rep.status, Fields: rep.fields, Err: rep.err, Headers: rep.headers, Body: rep.body}
	}
}

// adminHandler serves ZooKeeper's AdminServer API at the command URL
// (operator.Admin) and the web console (package console; console.go).
func (s *Server) adminHandler() http.Handler {
	base := s.cfg.Admin.CommandURL
	mux := http.NewServeMux()
	h := operator.Admin(s.ops.commands, s, base, s.log)
	mux.Handle(base, h)
	mux.Handle(base+"/", h)
	ch := console.Handler(consoleBackend{s}, consolePrefix)
	mux.Handle(consolePrefix, ch)
	mux.Handle(consolePrefix+"/", ch)
	return mux
}

// Cell is the view of the cell an AdminServer request names: the default
// cell, or one hosted here.
func (s *Server) Cell(name string) (operator.Member, string) {
	v := s.view()
	if name != "" && name != fleet.DefaultCell {
		h := s.fleet.hostedCell(name)
		if h == nil {
			return nil, "cell " + name + " has no replica on this member"
		}
		v.cell = h.c
	}
	return v, ""
}

// Authorize is the AdminServer's authentication (adminauth.go): the super
// user for the fleet's cells, ALL on "/" for ZooKeeper 3.9's AuthRequest.
func (s *Server) Authorize(r *http.Request, need operator.Auth) (int, string, bool) {
	if need == operator.AuthSuper {
		if err := s.adminSuper(r); err != nil {
			return err.status, err.text, false
		}
		return 0, "", true
	}
	if _, err := s.adminAuthorize(r, jute.PermAll, "/"); err != nil {
		var ar *authRefusal
		if !errors.As(err, &ar) {
			ar = &authRefusal{http.StatusInternalServerError, authError}
		}
		return ar.status, ar.text, false
	}
	return 0, "", true
}

// promCells are the cells Prometheus shows: the default first, then the
// cells hosted here by name.
func (s *Server) promCells() []operator.Cell {
	cells := []operator.Cell{{Name: s.cell.name, Member: s.view()}}
	s.fleet.mu.Lock()
	for _, h := range s.fleet.mu.hosted {
		cells = append(cells, operator.Cell{Name: h.c.name, Member: &cellView{Server: s, cell: h.c}})
	}
	s.fleet.mu.Unlock()
	slices.SortFunc(cells[1:], func(a, b operator.Cell) int { return strings.Compare(a.Name, b.Name) })
	return cells
}

// fourLetterLinger bounds how long the connection of an answered
// four-letter word waits for the client to close its side
// (operator.Answer). A variable for tests.
var fourLetterLinger = operator.DefaultLinger

// fourLetterWord answers a four-letter word (the registry's text, for the
// cell of the port it came in on) and closes the connection. It runs on
// the handshake's goroutine and writes directly: nothing else writes to a
// connection that has no session.
func (c *conn) fourLetterWord(w string) {
	s := c.srv
	c.cell.reqs.received.Add(1)
	c.st.recved.Add(1)
	c.log().Debug("four-letter word", "word", w)
	out, ok := s.ops.commands.Word(w, s.cfg.FourLetterWords, c.nc, &cellView{Server: s, cell: c.cell})
	if !ok {
		return // the word's argument did not come
	}
	defer c.close()
	operator.Answer(c.nc, out, fourLetterLinger, func() {
		c.cell.reqs.sent.Add(1)
		c.st.sent.Add(1)
	})
}

// Serving reports whether the cell has a leader.
func (s *cellView) Serving() bool { return s.cell.serving() }

// cellMode is the cell's replica's role here, srvr's Mode: the default
// cell's as the ensemble's; another cell's as its placement has it (a cell
// of one voter is standalone).
func (s *cellView) cellMode() string {
	if s.cell == s.Server.cell {
		return s.mode()
	}
	spec, _, _, ok := s.fleet.hostedState(s.cell.name)
	switch {
	case ok && slices.Contains(spec.Placement.Observers, s.cfg.ReplicaID):
		return "observer"
	case ok && len(spec.Placement.Voters) == 1 && len(spec.Placement.Observers) == 0:
		return "standalone"
	case s.cell.leader.Load():
		return "leader"
	}
	return "follower"
}

// cellAddr is the address of the cell's client listener here.
func (s *cellView) cellAddr() net.Addr {
	if s.cell != s.Server.cell {
		if _, addr, _, _ := s.fleet.hostedState(s.cell.name); addr != nil {
			return addr
		}
	}
	return s.ln.Addr()
}

// Replica is the cell's replica's figures for Prometheus.
func (s *cellView) Replica() *operator.Replica {
	r := &operator.Replica{LeaderID: s.cell.leaderID.Load(), Term: s.metrics.term.Load(),
		SnapshotResets: s.cell.resets.Load(), SnapshotsCreated: s.ops.peers.snapshots.Load()}
	r.ApplyLag, r.ApplyLagKnown = s.applyLag()
	if f := s.storeFigures(); f != nil {
		r.Store = &operator.Store{DiskBytes: f.DiskBytes, MemTableBytes: f.MemTableBytes, WALBytes: f.WALBytes,
			LevelBytes: f.LevelBytes, Compactions: f.Compactions}
	}
	return r
}

// Conf is the cell's configuration for conf and configuration.
func (s *cellView) Conf() operator.Conf {
	c := &s.cfg
	out := operator.Conf{
		ClientPort:        portOf(s.cellAddr().String()),
		SecureClientPort:  -1,
		DataDir:           c.DataDir,
		DataLogDir:        c.LogDir,
		TickTime:          c.TickTime.Milliseconds(),
		MaxClientCnxns:    c.MaxClientCnxns,
		MinSessionTimeout: c.MinSessionTimeout.Milliseconds(),
		MaxSessionTimeout: c.MaxSessionTimeout.Milliseconds(),
	}
	if out.DataLogDir == "" {
		out.DataLogDir = c.DataDir
	}
	if s.ops.secureLn != nil {
		out.SecureClientPort = portOf(s.ops.secureLn.Addr().String())
	}
	if s.standalone() {
		return out
	}
	self := s.self()
	out.ServerID = c.ReplicaID
	e := &operator.Ensemble{ElectionPort: portOf(self.ElectionAddr), QuorumPort: portOf(self.RaftAddr),
		Observer: self.Observer, Members: renderConfig(c.Members),
		IsLeader: s.cell.leader.Load(), LeaderID: s.cell.leaderID.Load()}
	for _, m := range c.Members {
		if m.ID == e.LeaderID {
			e.LeaderIP, _ = splitHostPort(m.RaftAddr)
		}
	}
	out.Ensemble = e
	return out
}

func portOf(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return -1
	}
	return n
}

// DirSizes walks the data and log directories (dirs, conf): ZooKeeper's
// figures are likewise computed on demand.
func (s *cellView) DirSizes() (data, log int64) {
	size := func(dir string) int64 {
		var n int64
		filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					n += fi.Size()
				}
			}
			return nil
		})
		return n
	}
	data = size(s.cfg.DataDir)
	if s.cfg.LogDir == "" || s.cfg.LogDir == s.cfg.DataDir {
		return data, data
	}
	return data, size(s.cfg.LogDir)
}

// conns lists the live connections of the cell.
func (s *cellView) conns() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		if c.cell == s.cell {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].owner < out[j].owner })
	return out
}

// Connections are the cell's connections as cons shows them.
func (s *cellView) Connections() []operator.Connection {
	var out []operator.Connection
	for _, c := range s.conns() {
		ci := operator.Connection{
			Remote:      c.nc.RemoteAddr().String(),
			Queued:      c.queued(),
			Received:    c.st.recved.Load(),
			Sent:        c.st.sent.Load(),
			Session:     c.sessionID,
			Established: c.st.established.UnixMilli(),
			Timeout:     c.timeout.Milliseconds(),
			Secure:      c.secure,
		}
		if c.sessionID != 0 {
			ci.HasSession, ci.Interest = true, 1
			c.st.mu.Lock()
			ci.LastOp, ci.LastCxid, ci.LastZxid, ci.LastResponse, ci.LastLatency = c.st.mu.lop, c.st.mu.lcxid, c.st.mu.lzxid, c.st.mu.lresp, c.st.mu.llat
			var cnt, sum int64
			ci.MinLat, _, ci.MaxLat, cnt, sum = c.st.mu.lat.get()
			c.st.mu.Unlock()
			if cnt > 0 {
				ci.AvgLat = sum / cnt
			}
		}
		out = append(out, ci)
	}
	return out
}

// ResetConnections is crst and connection_stat_reset.
func (s *cellView) ResetConnections() {
	for _, c := range s.conns() {
		c.st.reset()
	}
}

// Sessions is what dump shows.
func (s *cellView) Sessions() operator.Sessions {
	out := operator.Sessions{Started: s.started}
	out.Expiry, out.Count = s.cell.tracker.Deadlines()
	out.Owners, out.Ephemerals = s.ephemeralsByOwner()
	for _, c := range s.conns() {
		exp := c.st.established.Add(handshakeTimeout)
		if c.sessionID != 0 {
			if t, ok := s.cell.tracker.Deadline(c.sessionID); ok {
				exp = t
			}
		}
		out.Conns = append(out.Conns, operator.ConnExpiry{Remote: c.nc.RemoteAddr().String(), Session: c.sessionID, Expire: exp})
	}
	return out
}

func (s *cellView) ephemeralsByOwner() ([]int64, [][]string) {
	type res struct {
		owners []int64
		paths  [][]string
	}
	r, err := readValue(s.cell.rep, nil, localRead, func(v raftsm.View) (res, error) {
		o, p, err := v.EphemeralsByOwner()
		return res{o, p}, err
	})
	if err != nil {
		return nil, nil
	}
	return r.owners, r.paths
}

// WatchCount is wchs.
func (s *cellView) WatchCount() (watches, paths, conns int) { return s.cell.watches.count() }

// WatchesBySession is wchc.
func (s *cellView) WatchesBySession() []operator.SessionWatches {
	var out []operator.SessionWatches
	for _, e := range s.cell.watches.bySession() {
		out = append(out, operator.SessionWatches{ID: e.id, Paths: e.paths})
	}
	return out
}

// WatchesByPath is wchp.
func (s *cellView) WatchesByPath() []operator.PathWatches {
	var out []operator.PathWatches
	for _, e := range s.cell.watches.byPath() {
		out = append(out, operator.PathWatches{Path: e.path, IDs: e.ids})
	}
	return out
}

// total is mntr's watch_count: data and child watches, one per
// connection and path in each table.
func (r *registry) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, t := range r.mu.tables {
		for _, set := range t {
			n += len(set)
		}
	}
	return n
}

type sessionPaths struct {
	id    int64
	paths []string
}

type pathSessions struct {
	path string
	ids  []int64
}

// bySession is wchc: the data-table paths each session watches.
func (r *registry) bySession() []sessionPaths {
	r.mu.Lock()
	m := map[int64][]string{}
	for p, set := range r.mu.tables[tableData] {
		for c := range set {
			m[c.sessionID] = append(m[c.sessionID], p)
		}
	}
	r.mu.Unlock()
	out := make([]sessionPaths, 0, len(m))
	for id, ps := range m {
		sort.Strings(ps)
		out = append(out, sessionPaths{id, ps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// byPath is wchp: the sessions watching each data-table path.
func (r *registry) byPath() []pathSessions {
	r.mu.Lock()
	out := make([]pathSessions, 0, len(r.mu.tables[tableData]))
	for p, set := range r.mu.tables[tableData] {
		e := pathSessions{path: p}
		for c := range set {
			e.ids = append(e.ids, c.sessionID)
		}
		sort.Slice(e.ids, func(i, j int) bool { return e.ids[i] < e.ids[j] })
		out = append(out, e)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}
