package server

import (
	"errors"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/zkraft/zkraft/console"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/znode"
)

// consolePrefix is where the AdminServer serves the web console.
const consolePrefix = "/console"

// consoleBackend is the member as the web console (package console) sees
// it: reads on the client read path with the viewer's ids, writes through
// Raft as a client's are, the AdminServer's authorization for actions.
type consoleBackend struct{ s *Server }

var _ console.Backend = consoleBackend{}

func (b consoleBackend) Identify(r *http.Request) []jute.ID {
	ids := []jute.ID{{Scheme: "ip", ID: httpRemoteIP(r)}}
	if r.Header.Get("Authorization") == "" {
		return ids
	}
	more, err := b.s.adminAuthenticate(r)
	if err != nil {
		return ids
	}
	for _, id := range more {
		if id.Scheme != "ip" {
			ids = append(ids, id)
		}
	}
	return ids
}

func (b consoleBackend) Authorize(r *http.Request) ([]jute.ID, error) {
	ids, err := b.s.adminAuthorize(r, jute.PermAll, "/")
	if err != nil {
		var ar *authRefusal
		if errors.As(err, &ar) {
			return nil, &console.Refusal{Status: ar.status, Text: ar.text}
		}
		return nil, err
	}
	// In a connection's order (reads.go's authenticate): the ip id, then
	// the digest id, then super; the audit log's user field follows it.
	out := []jute.ID{{Scheme: "ip", ID: httpRemoteIP(r)}}
	for _, pass := range []func(jute.ID) bool{
		func(id jute.ID) bool { return id.Scheme != "ip" && id.Scheme != "super" },
		func(id jute.ID) bool { return id.Scheme == "super" },
	} {
		for _, id := range ids {
			if pass(id) {
				out = append(out, id)
			}
		}
	}
	return out, nil
}

func (b consoleBackend) Node(ids []jute.ID, path string) (*console.Node, error) {
	return consoleRead(b.s, func(v raftsm.View) (*console.Node, error) {
		rd := znode.Reader{KV: v.Tree(), Auth: ids}
		n, err := rd.GetData(path)
		if err != nil {
			return nil, err
		}
		_, acl, err := znode.Reader{KV: v.Tree(), Auth: superAuth}.GetACL(path)
		if err != nil {
			return nil, err
		}
		return &console.Node{Data: n.Data, Stat: n.Stat(), ACL: acl}, nil
	})
}

func (b consoleBackend) Children(ids []jute.ID, path string) ([]string, error) {
	return consoleRead(b.s, func(v raftsm.View) ([]string, error) {
		_, names, err := znode.Reader{KV: v.Tree(), Auth: ids}.GetChildren(path)
		return names, err
	})
}

func (b consoleBackend) Sessions() []console.Session {
	s := b.s
	byID := map[int64]*console.Session{}
	buckets, _ := s.cell.tracker.Deadlines()
	for _, ids := range buckets {
		for _, id := range ids {
			cs := &console.Session{ID: id}
			if to, ok := s.cell.tracker.Timeout(id); ok {
				cs.Timeout = to
				if dl, ok := s.cell.tracker.Deadline(id); ok {
					cs.LastHeard = dl.Add(-to)
				}
			}
			byID[id] = cs
		}
	}
	get := func(id int64) *console.Session {
		if cs := byID[id]; cs != nil {
			return cs
		}
		cs := &console.Session{ID: id}
		byID[id] = cs
		return cs
	}
	for _, ci := range s.view().Connections() {
		if ci.HasSession {
			cs := get(ci.Session)
			cs.Remote = ci.Remote
			if cs.Timeout == 0 {
				cs.Timeout = time.Duration(ci.Timeout) * time.Millisecond
			}
		}
	}
	owners, paths := s.view().ephemeralsByOwner()
	for i, o := range owners {
		get(o).Ephemerals = paths[i]
	}
	for _, e := range s.cell.watches.bySession() {
		get(e.id).Watches = e.paths
	}
	out := make([]console.Session, 0, len(byID))
	for _, cs := range byID {
		out = append(out, *cs)
	}
	return out
}

func (b consoleBackend) Watches() []console.PathWatches {
	var out []console.PathWatches
	for _, e := range b.s.cell.watches.byPath() {
		out = append(out, console.PathWatches{Path: e.path, Sessions: e.ids})
	}
	return out
}

func (b consoleBackend) Members() console.Members {
	s := b.s
	f := s.view().Figures()
	m := console.Members{Role: f.Mode, Term: s.metrics.term.Load(), Zxid: s.lastZxid(), Serving: s.cell.serving(), Lag: -1}
	if !s.standalone() {
		m.Self, m.Leader = s.cfg.ReplicaID, s.cell.leaderID.Load()
	}
	if lag, ok := s.view().applyLag(); ok {
		m.Lag = int64(lag)
	}
	if applied, err := readValue(s.cell.rep, nil, localRead, func(v raftsm.View) (uint64, error) { return v.AppliedIndex() }); err == nil {
		m.Applied = applied
	}
	members := s.cfg.Members
	if s.standalone() {
		members = []Member{s.self()}
	}
	for _, r := range members {
		m.Replicas = append(m.Replicas, console.Member{ID: r.ID, RaftAddr: r.RaftAddr, ClientAddr: r.ClientAddr, Observer: r.Observer})
	}
	return m
}

func (b consoleBackend) Gather() ([]*dto.MetricFamily, error) {
	if b.s.metrics == nil || b.s.metrics.gatherer == nil {
		return nil, errors.New("no Prometheus gatherer (server.Config.Metrics.Gatherer)")
	}
	// The console shows the default cell (the AdminServer's): of the
	// series a cell label tells apart only that cell's are kept, without
	// the label.
	mfs, err := b.s.metrics.gatherer.Gather()
	if err != nil {
		return nil, err
	}
	for _, mf := range mfs {
		kept := mf.Metric[:0]
		for _, m := range mf.Metric {
			if keepCell(m, b.s.cell.name) {
				kept = append(kept, m)
			}
		}
		mf.Metric = kept
	}
	return mfs, nil
}

// keepCell reports whether m is a member-wide series or the named cell's,
// and drops its cell label.
func keepCell(m *dto.Metric, cell string) bool {
	for i, l := range m.Label {
		if l.GetName() == "cell" {
			if l.GetValue() != cell {
				return false
			}
			m.Label = append(m.Label[:i:i], m.Label[i+1:]...)
			return true
		}
	}
	return true
}

// write proposes a client's write with the admin's ids and no session.
func (b consoleBackend) write(ids []jute.ID, op jute.OpCode, req jute.Record) (*raftsm.Reply, error) {
	if !b.s.cell.serving() {
		return nil, errors.New(strings.TrimSpace(notServing))
	}
	cmd := &raftsm.Command{Kind: raftsm.KindRequest, Time: time.Now().UnixMilli(), Op: op, Auth: ids, Body: jute.Marshal(req)}
	rep, _, err := b.s.cell.rep.proposeRetry(cmd, b.s.ctx.Done())
	if err != nil {
		return nil, err
	}
	if rep.Err != jute.ErrOK {
		return nil, rep.Err
	}
	return rep, nil
}

func (b consoleBackend) Create(ids []jute.ID, path string, data []byte, flags int32) (string, error) {
	op := jute.OpCreate
	if flags == jute.FlagContainer {
		op = jute.OpCreateContainer
	}
	if flags != jute.FlagPersistent && flags != jute.FlagPersistentSequential && flags != jute.FlagContainer {
		return "", jute.ErrBadArguments // an ephemeral needs a session, a TTL node createTTL
	}
	rep, err := b.write(ids, op, &jute.CreateRequest{Path: path, Data: data, ACL: openACL, Flags: flags})
	if err != nil {
		return "", err
	}
	return createdPath(op, rep.Body, path), nil
}

// openACL is the ACL the console creates znodes with (ZooDefs.Ids.OPEN_ACL_UNSAFE,
// zkCli's default).
var openACL = []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}

func (b consoleBackend) SetData(ids []jute.ID, path string, data []byte, version int32) error {
	_, err := b.write(ids, jute.OpSetData, &jute.SetDataRequest{Path: path, Data: data, Version: version})
	return err
}

func (b consoleBackend) Delete(ids []jute.ID, path string, version int32) error {
	_, err := b.write(ids, jute.OpDelete, &jute.DeleteRequest{Path: path, Version: version})
	return err
}

func (b consoleBackend) KillSession(id int64) error {
	if !b.s.cell.serving() {
		return errors.New(strings.TrimSpace(notServing))
	}
	cmd := &raftsm.Command{Kind: raftsm.KindCloseSession, Session: id, Time: time.Now().UnixMilli()}
	rep, _, err := b.s.cell.rep.proposeRetry(cmd, b.s.ctx.Done())
	if err != nil {
		return err
	}
	if rep.Err != jute.ErrOK {
		return rep.Err
	}
	return nil
}

func (b consoleBackend) Audit(e console.AuditEvent) {
	b.s.Audit(AuditEvent{Session: e.Session, User: e.User, IP: e.IP, Operation: e.Operation, Znode: e.Znode,
		ZnodeType: e.ZnodeType, Result: auditResult(e.Failed)})
}

func (b consoleBackend) AuditUser(ids []jute.ID) string { return AuditUsers(ids) }
