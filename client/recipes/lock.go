package recipes

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/session"
)

// Lock is a distributed mutual-exclusion lock under a directory. Each
// Acquire creates an ephemeral sequential node; the lowest holds the
// lock, and every waiter watches only the node just before its own, so a
// release wakes one waiter, not all (no herd). A Lock holds only its
// configuration: it is safe for concurrent use, and two Acquires of one
// Lock exclude each other like any two contenders.
type Lock struct {
	s    *session.Session
	dir  string
	data []byte
	opt  options
}

const lockPrefix = "lock-"

// NewLock returns the lock under dir (created on first use).
func NewLock(s *session.Session, dir string, opts ...Option) *Lock {
	return &Lock{s: s, dir: strings.TrimSuffix(dir, "/"), opt: buildOptions(opts)}
}

// Acquire blocks until the lock is held, ctx ends, or the session is
// lost, and returns the grant. The lease's Token is the fencing token to
// send with every request to the protected resource.
func (l *Lock) Acquire(ctx context.Context) (*Lease, error) {
	return acquireExclusive(ctx, l.s, l.dir, lockPrefix, l.data, l.opt)
}

func acquireExclusive(ctx context.Context, s *session.Session, dir, prefix string, data []byte, opt options) (*Lease, error) {
	b, err := bind(ctx, s)
	if err != nil {
		return nil, err
	}
	path, st, err := b.createSeq(ctx, dir, prefix, data, zk.FlagEphemeral, opt.acl)
	if err != nil {
		return nil, err
	}
	if err := b.waitTurn(ctx, dir, path, []string{prefix}, predecessor); err != nil {
		b.abandon(path)
		return nil, err
	}
	lease := newLease(b, path, st.Czxid)
	if opt.delay > 0 {
		if err := b.lockDelay(ctx, dir, lease, opt.delay); err != nil {
			lease.Release()
			return nil, err
		}
	}
	return lease, nil
}

// predecessor is the node an exclusive contender at index i waits for.
func predecessor(kids []child, i int) string {
	if i == 0 {
		return ""
	}
	return kids[i-1].name
}

// waitTurn waits until blocker (given the sorted contenders and our
// index) names no node: it watches only the node blocker names, and looks
// again when that one goes.
func (b bound) waitTurn(ctx context.Context, dir, mine string, prefixes []string, blocker func([]child, int) string) error {
	name := base(mine)
	for {
		var names []string
		if err := b.do(ctx, func(c *zk.Conn) (err error) { names, _, err = c.Children(dir); return }); err != nil {
			return err
		}
		kids := sequenced(names, prefixes...)
		i := indexOf(kids, name)
		if i < 0 {
			if err := b.gen.Err(); err != nil {
				return context.Cause(b.gen)
			}
			return fmt.Errorf("%w: %s", ErrNodeGone, mine)
		}
		pred := blocker(kids, i)
		if pred == "" {
			return nil
		}
		var ok bool
		var ev <-chan zk.Event
		if err := b.do(ctx, func(c *zk.Conn) (err error) { ok, _, ev, err = c.ExistsW(dir + "/" + pred); return }); err != nil {
			return err
		}
		if !ok {
			continue // it went before we could watch it: look again
		}
		if _, err := b.await(ctx, ev); err != nil {
			return err
		}
	}
}

// The lock directory's data says whether the last holder released:
// "held <token>" while a holder holds (with lock-delay on), "free" after a
// release.
const (
	heldMark = "held "
	freeMark = "free"
)

// lockDelay waits d when the directory says a holder other than us held
// the lock and never released it (its session ended), then records us as
// the holder, and makes Release record the release.
func (b bound) lockDelay(ctx context.Context, dir string, lease *Lease, d time.Duration) error {
	var data []byte
	if err := b.do(ctx, func(c *zk.Conn) (err error) { data, _, err = c.Get(dir); return }); err != nil {
		return err
	}
	if prev, ok := strings.CutPrefix(string(data), heldMark); ok && prev != strconv.FormatInt(lease.Token, 16) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-b.gen.Done():
			return context.Cause(b.gen)
		}
	}
	mark := []byte(heldMark + strconv.FormatInt(lease.Token, 16))
	if err := b.do(ctx, func(c *zk.Conn) error { _, err := c.Set(dir, mark, -1); return err }); err != nil {
		return err
	}
	path := lease.Path
	lease.release = func(ctx context.Context, b bound) error {
		err := b.do(ctx, func(c *zk.Conn) error {
			_, err := c.Multi(&zk.DeleteRequest{Path: path, Version: -1},
				&zk.SetDataRequest{Path: dir, Data: []byte(freeMark), Version: -1})
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return nil // gone already (a retry after the multi applied)
		}
		return err
	}
	return nil
}
