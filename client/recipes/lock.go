package recipes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"
)

// Lock is a mutual-exclusion lock under a directory: each contender
// creates an ephemeral sequential znode and waits only on its predecessor.
type Lock struct {
	conn *zk.Conn
	dir  string
	acl  []zk.ACL
	data []byte

	node  string // our lock znode while contending or holding
	token int64
}

// NewLock returns a lock under dir (created if missing) with open ACLs.
func NewLock(conn *zk.Conn, dir string) *Lock {
	return &Lock{conn: conn, dir: strings.TrimSuffix(dir, "/"), acl: zk.WorldACL(zk.PermAll)}
}

const lockPrefix = "lock-"

// ErrNotHeld is returned by Release when the lock is not held.
var ErrNotHeld = errors.New("recipes: lock not held")

// Acquire blocks until the lock is held or ctx ends, and returns the
// fencing token of this grant.
func (l *Lock) Acquire(ctx context.Context) (int64, error) {
	if err := ensurePath(l.conn, l.dir, l.acl); err != nil {
		return 0, err
	}
	path, err := l.conn.CreateProtectedEphemeralSequential(l.dir+"/"+lockPrefix, l.data, l.acl)
	if err != nil {
		return 0, err
	}
	l.node = path
	_, st, err := l.conn.Exists(path)
	if err != nil {
		return 0, l.abandon(err)
	}
	l.token = st.Czxid
	for {
		pred, err := l.predecessor()
		if err != nil {
			return 0, l.abandon(err)
		}
		if pred == "" {
			return l.token, nil
		}
		ok, _, ev, err := l.conn.ExistsW(l.dir + "/" + pred)
		if err != nil {
			return 0, l.abandon(err)
		}
		if !ok {
			continue
		}
		select {
		case <-ev:
		case <-ctx.Done():
			return 0, l.abandon(ctx.Err())
		}
	}
}

// predecessor returns the child just before ours, "" if we are first.
func (l *Lock) predecessor() (string, error) {
	kids, _, err := l.conn.Children(l.dir)
	if err != nil {
		return "", err
	}
	mine := l.node[strings.LastIndex(l.node, "/")+1:]
	sort.Slice(kids, func(i, j int) bool { return seqOf(kids[i]) < seqOf(kids[j]) })
	prev := ""
	for _, k := range kids {
		if k == mine {
			return prev, nil
		}
		if strings.Contains(k, lockPrefix) {
			prev = k
		}
	}
	return "", fmt.Errorf("recipes: our lock node %s vanished (session lost?)", l.node)
}

// seqOf is the 10-digit sequence suffix ZooKeeper appended.
func seqOf(name string) string {
	if len(name) < 10 {
		return name
	}
	return name[len(name)-10:]
}

func (l *Lock) abandon(err error) error {
	if l.node != "" {
		_ = l.conn.Delete(l.node, -1)
		l.node = ""
	}
	return err
}

// Token is the fencing token of the current grant.
func (l *Lock) Token() int64 { return l.token }

// Release gives the lock up.
func (l *Lock) Release() error {
	if l.node == "" {
		return ErrNotHeld
	}
	err := l.conn.Delete(l.node, -1)
	l.node, l.token = "", 0
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

func ensurePath(conn *zk.Conn, path string, acl []zk.ACL) error {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	cur := ""
	for _, p := range parts {
		cur += "/" + p
		_, err := conn.Create(cur, nil, 0, acl)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// Guard is what a protected resource keeps: it accepts a fencing token
// only if no higher token has been seen, so a stale holder is refused.
type Guard struct {
	mu      sync.Mutex
	highest int64
}

// Accept reports whether token may act now, and records it.
func (g *Guard) Accept(token int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if token < g.highest {
		return false
	}
	g.highest = token
	return true
}

// Highest is the highest token accepted so far.
func (g *Guard) Highest() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.highest
}

// Election elects one leader among candidates under a directory; the
// leader's epoch is its znode's czxid, strictly increasing across leaders.
type Election struct{ lock *Lock }

// NewElection returns an election under dir; value is published as the
// candidate's data.
func NewElection(conn *zk.Conn, dir string, value []byte) *Election {
	l := NewLock(conn, dir)
	l.data = value
	return &Election{lock: l}
}

// Campaign blocks until this candidate leads, and returns its epoch.
func (e *Election) Campaign(ctx context.Context) (int64, error) { return e.lock.Acquire(ctx) }

// Resign gives up leadership (or the candidacy).
func (e *Election) Resign() error { return e.lock.Release() }

// Leader returns the current leader's value and epoch.
func Leader(conn *zk.Conn, dir string) (value []byte, epoch int64, err error) {
	kids, _, err := conn.Children(dir)
	if err != nil {
		return nil, 0, err
	}
	sort.Slice(kids, func(i, j int) bool { return seqOf(kids[i]) < seqOf(kids[j]) })
	for _, k := range kids {
		data, st, err := conn.Get(dir + "/" + k)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		return data, st.Czxid, nil
	}
	return nil, 0, zk.ErrNoNode
}
