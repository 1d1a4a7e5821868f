package recipes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/session"
)

// Semaphore hands out at most N leases at a time, across processes. Each
// Acquire creates an ephemeral sequential node; the first N by sequence
// hold leases. A lease ends when released or when its session is lost
// (its node goes with it), so a crashed holder frees its slot.
//
// Waiters watch the directory's children: any release may admit any
// waiter, so unlike the locks a release wakes every waiter (ZooKeeper
// cannot watch "the N-th node before mine").
//
// Tokens: each lease's Token is its node's czxid. With N > 1 holders are
// concurrent by design, so a resource cannot refuse by order alone; it
// can refuse a token it has not seen granted, or per slot use a Lock.
type Semaphore struct {
	s   *session.Session
	dir string
	max int
	opt options
}

const leasePrefix = "lease-"

// NewSemaphore returns the semaphore of max leases under dir. Every
// process must use the same max.
func NewSemaphore(s *session.Session, dir string, max int, opts ...Option) *Semaphore {
	return &Semaphore{s: s, dir: strings.TrimSuffix(dir, "/"), max: max, opt: buildOptions(opts)}
}

// Acquire blocks until a lease is held.
func (m *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	if m.max < 1 {
		return nil, errors.New("recipes: a semaphore needs at least one lease")
	}
	b, err := bind(ctx, m.s)
	if err != nil {
		return nil, err
	}
	path, st, err := b.createSeq(ctx, m.dir, leasePrefix, nil, zk.FlagEphemeral, m.opt.acl)
	if err != nil {
		return nil, err
	}
	name := base(path)
	for {
		var names []string
		var ev <-chan zk.Event
		if err := b.do(ctx, func(c *zk.Conn) (err error) { names, _, ev, err = c.ChildrenW(m.dir); return }); err != nil {
			b.abandon(path)
			return nil, err
		}
		kids := sequenced(names, leasePrefix)
		i := indexOf(kids, name)
		if i < 0 {
			b.abandon(path)
			if err := b.gen.Err(); err != nil {
				return nil, context.Cause(b.gen)
			}
			return nil, fmt.Errorf("%w: %s", ErrNodeGone, path)
		}
		if i < m.max {
			return newLease(b, path, st.Czxid), nil
		}
		if _, err := b.await(ctx, ev); err != nil {
			b.abandon(path)
			return nil, err
		}
	}
}
