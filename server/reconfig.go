package server

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/znode"
)

// parseConfig reads the ensemble from /zookeeper/config data in ZooKeeper's
// dynamic-config format (server.N=host:peer:election[:role];[clientHost:]clientPort
// lines and an optional version line).
func parseConfig(data string) ([]Member, error) {
	var out []Member
	for _, line := range strings.FieldsFunc(data, func(r rune) bool { return r == '\n' || r == ',' }) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "version=") {
			continue
		}
		m, err := parseServerLine(line)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// parseServerLine parses one dynamic-configuration line,
// "server.N=host:peer:election[:role];[clientHost:]clientPort": a line
// without its client address is refused.
func parseServerLine(line string) (Member, error) {
	key, value, ok := strings.Cut(line, "=")
	if !ok {
		return Member{}, fmt.Errorf("not a server line: %q", line)
	}
	m, hasClient, err := ParseServerLine(key, value)
	if err == nil && !hasClient {
		err = fmt.Errorf("%q: want host:peerPort:electionPort[:role];[clientHost:]clientPort", line)
	}
	return m, err
}

// reconfigOp runs ZooKeeper's reconfig (op 16) when reconfigEnabled is on:
// incremental (joining/leaving) or bulk (newMembers). The Raft membership
// changes first, then /zookeeper/config records the new ensemble; the reply
// is the new config data and its Stat, as ZooKeeper answers.
func (c *conn) reconfigOp(body []byte) func() (*result, error) {
	auth := c.authIDs()
	return func() (*result, error) {
		req := new(jute.ReconfigRequest)
		if jute.Unmarshal(body, req) != nil {
			return &result{zxid: c.cell.zxid.Load(), err: jute.ErrMarshallingError}, nil
		}
		code, err := c.cell.reconfig(req, auth)
		if err != nil {
			return nil, err
		}
		return readValue(c.cell.rep, nil, linearizableRead, func(v raftsm.View) (*result, error) {
			n, err := v.Tree().Get(znode.ConfigPath)
			if err != nil || n == nil {
				return nil, err
			}
			r := &result{zxid: v.Zxid(), err: code}
			if code == jute.ErrOK {
				r.resp = &jute.GetDataResponse{Data: n.Data, Stat: n.Stat()}
			}
			return r, nil
		})
	}
}

// reconfig changes the ensemble. A ZooKeeper failure is returned as code;
// err means the member could not reach the log.
func (c *cell) reconfig(req *jute.ReconfigRequest, auth []jute.ID) (jute.ErrCode, error) {
	// The current configuration, its version (the mzxid of
	// /zookeeper/config) and whether the caller may write it.
	type current struct {
		data    string
		version int64
		denied  bool
	}
	cur, err := readValue(c.rep, nil, linearizableRead, func(v raftsm.View) (current, error) {
		n, err := v.Tree().Get(znode.ConfigPath)
		if err != nil || n == nil {
			return current{}, errors.Join(err, errors.New("server: /zookeeper/config missing"))
		}
		return current{string(n.Data), n.Mzxid, znode.CheckACL(n.ACL, jute.PermWrite, auth) != nil}, nil
	})
	if err != nil {
		return 0, err
	}
	if cur.denied {
		return jute.ErrNoAuth, nil
	}
	if req.CurConfigID != -1 && req.CurConfigID != cur.version {
		return jute.ErrBadVersion, nil
	}
	members, err := parseConfig(cur.data)
	if err != nil || len(members) == 0 {
		members = append([]Member(nil), c.srv.cfg.Members...)
	}
	next := map[uint64]Member{}
	if req.NewMembers != "" {
		ms, err := parseConfig(req.NewMembers)
		if err != nil {
			return jute.ErrBadArguments, nil
		}
		for _, m := range ms {
			next[m.ID] = m
		}
	} else {
		for _, m := range members {
			next[m.ID] = m
		}
		for _, l := range splitList(req.LeavingServers) {
			id, err := strconv.ParseUint(l, 10, 64)
			if err != nil {
				return jute.ErrBadArguments, nil
			}
			delete(next, id)
		}
		for _, j := range splitList(req.JoiningServers) {
			m, err := parseServerLine(j)
			if err != nil {
				return jute.ErrBadArguments, nil
			}
			for _, o := range next {
				if o.ID != m.ID && (o.RaftAddr == m.RaftAddr || o.ClientAddr == m.ClientAddr) {
					return jute.ErrBadArguments, nil
				}
			}
			next[m.ID] = m
		}
	}
	voters := 0
	var nextList []Member
	for _, m := range next {
		nextList = append(nextList, m)
		if !m.Observer {
			voters++
		}
	}
	if voters == 0 {
		return jute.ErrBadArguments, nil
	}
	sort.Slice(nextList, func(i, j int) bool { return nextList[i].ID < nextList[j].ID })
	if err := c.applyMembership(nextList); err != nil {
		c.srv.log.Warn("reconfig: membership change failed", "shard", c.shardID, "err", err)
		return jute.ErrNewConfigNoQuorum, nil
	}
	rep, err := proposeWait(c.rep, &raftsm.Command{Kind: raftsm.KindSetConfig, Time: time.Now().UnixMilli(), Body: []byte(renderConfig(nextList))}, nil)
	if err != nil {
		return 0, err
	}
	c.srv.log.Info("reconfig", "shard", c.shardID, "members", len(nextList), "zxid", rep.Zxid)
	return rep.Err, nil
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// applyMembership brings the shard's Raft membership to members, one
// change at a time: removals first, then additions.
func (c *cell) applyMembership(members []Member) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := c.rep.membership(ctx)
	if err != nil {
		return err
	}
	want := map[uint64]Member{}
	for _, mem := range members {
		want[mem.ID] = mem
	}
	for id := range m.voters {
		if mem, ok := want[id]; !ok || mem.Observer {
			if err := c.rep.removeReplica(ctx, id, 0); err != nil {
				return fmt.Errorf("remove %d: %w", id, err)
			}
		}
	}
	for id := range m.nonVoting {
		// An observer that becomes a participant is promoted by the add
		// below (Dragonboat adds a non-voting replica as a voter in place);
		// removing it first would retire its id for good.
		if _, ok := want[id]; !ok {
			if err := c.rep.removeReplica(ctx, id, 0); err != nil {
				return fmt.Errorf("remove observer %d: %w", id, err)
			}
		}
	}
	for _, mem := range members {
		_, voter := m.voters[mem.ID]
		_, observer := m.nonVoting[mem.ID]
		switch {
		case mem.Observer && !observer:
			if err := c.rep.addReplica(ctx, mem.ID, mem.RaftAddr, true, 0); err != nil {
				return fmt.Errorf("add observer %d: %w", mem.ID, err)
			}
		case !mem.Observer && !voter:
			if err := c.rep.addReplica(ctx, mem.ID, mem.RaftAddr, false, 0); err != nil {
				return fmt.Errorf("add %d: %w", mem.ID, err)
			}
		}
	}
	return nil
}
