package server

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/znode"
)

// membershipLoop runs on every member of an ensemble and acts on the
// leader: it adds the configured observers as non-voting replicas and keeps
// /zookeeper/config equal to the ensemble's configuration, in ZooKeeper's
// format, so that clients such as Curator's EnsembleTracker can read it.
func (c *cell) membershipLoop(ctx context.Context) {
	if c.srv.standalone() {
		return
	}
	c.onLeaderEvery(ctx, time.Second, func() {
		if err := c.reconcileMembers(ctx); err != nil {
			c.srv.log.Warn("membership", "shard", c.shardID, "err", err)
		}
	})
}

// reconcileMembers seeds /zookeeper/config from the configured members
// when it is empty, and adds the observers it lists that are not yet
// non-voting replicas. Once set, /zookeeper/config (changed by reconfig) is
// the ensemble; the static configuration only seeds it.
func (c *cell) reconcileMembers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	data, err := readValue(c.rep, nil, localRead, func(v raftsm.View) (string, error) {
		n, err := v.Tree().Get(znode.ConfigPath)
		if err != nil || n == nil {
			return "", err
		}
		return string(n.Data), nil
	})
	if err != nil {
		return err
	}
	if data == "" {
		rep, err := proposeWait(c.rep, &raftsm.Command{Kind: raftsm.KindSetConfig, Time: time.Now().UnixMilli(),
			Body: []byte(renderConfig(c.srv.cfg.Members))}, nil)
		if err != nil {
			return err
		}
		if rep.Err != jute.ErrOK {
			return rep.Err
		}
		return nil
	}
	members, err := parseConfig(data)
	if err != nil {
		return fmt.Errorf("%s: %w", znode.ConfigPath, err)
	}
	m, err := c.rep.membership(ctx)
	if err != nil {
		return err
	}
	for _, mem := range members {
		if !mem.Observer {
			continue
		}
		_, nonVoting := m.nonVoting[mem.ID]
		_, voting := m.voters[mem.ID]
		if nonVoting || voting || m.removed[mem.ID] {
			continue
		}
		c.srv.log.Info("adding observer", "shard", c.shardID, "member", mem.ID, "addr", mem.RaftAddr)
		if err := c.rep.addReplica(ctx, mem.ID, mem.RaftAddr, true, m.changeID); err != nil {
			return fmt.Errorf("add observer %d: %w", mem.ID, err)
		}
		return nil // one change at a time; the next tick continues
	}
	return nil
}

// renderConfig writes the ensemble in the format of ZooKeeper's dynamic
// configuration: one server.N=host:peer:election:role;clientAddr line per
// member, by id.
func renderConfig(members []Member) string {
	ms := append([]Member(nil), members...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
	var b strings.Builder
	for _, m := range ms {
		role := "participant"
		if m.Observer {
			role = "observer"
		}
		host, peer := splitHostPort(m.RaftAddr)
		_, election := splitHostPort(m.ElectionAddr)
		if election == "" {
			election = "0"
		}
		fmt.Fprintf(&b, "server.%d=%s:%s:%s:%s;%s\n", m.ID, host, peer, election, role, m.ClientAddr)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func splitHostPort(addr string) (host, port string) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return addr, ""
	}
	return addr[:i], addr[i+1:]
}

// mode is what srvr reports.
func (s *Server) mode() string {
	switch {
	case s.standalone():
		return "standalone"
	case s.self().Observer:
		return "observer"
	case s.cell.leader.Load():
		return "leader"
	default:
		return "follower"
	}
}
