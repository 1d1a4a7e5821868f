package recipes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/session"
)

// Barrier holds processes back until it is removed: while its node
// exists, Wait blocks (Curator's DistributedBarrier).
type Barrier struct {
	s    *session.Session
	path string
	opt  options
}

// NewBarrier returns the barrier at path.
func NewBarrier(s *session.Session, path string, opts ...Option) *Barrier {
	return &Barrier{s: s, path: strings.TrimSuffix(path, "/"), opt: buildOptions(opts)}
}

// Set raises the barrier (creates its node; raising a raised barrier is
// not an error).
func (b *Barrier) Set(ctx context.Context) error {
	g, err := bind(ctx, b.s)
	if err != nil {
		return err
	}
	return g.ensurePath(ctx, b.path, b.opt.acl)
}

// Remove lowers the barrier, releasing every waiter.
func (b *Barrier) Remove(ctx context.Context) error {
	g, err := bind(ctx, b.s)
	if err != nil {
		return err
	}
	return g.deleteNode(ctx, b.path)
}

// Wait blocks until the barrier is down (at once if it is not raised).
// It follows the session across a loss.
func (b *Barrier) Wait(ctx context.Context) error {
	for {
		g, err := bind(ctx, b.s)
		if err != nil {
			return err
		}
		var ok bool
		var ev <-chan zk.Event
		err = g.do(ctx, func(c *zk.Conn) (err error) { ok, _, ev, err = c.ExistsW(b.path); return })
		if err == nil && !ok {
			return nil
		}
		if err == nil {
			_, err = g.await(ctx, ev)
		}
		if err != nil && (ctx.Err() != nil || g.gen.Err() == nil) {
			return err
		}
	}
}

// DoubleBarrier lets a fixed number of processes start a computation
// together and finish it together (ZooKeeper's double barrier recipe):
// Enter blocks until count participants have entered, Leave until all of
// them have left. Participants are ephemeral nodes, so one whose session
// is lost leaves by itself.
type DoubleBarrier struct {
	s     *session.Session
	dir   string
	count int
	opt   options
	b     bound
	node  string // our participant node between Enter and Leave
}

const (
	participantPrefix = "p-"
	readyNode         = "ready"
)

// NewDoubleBarrier returns the double barrier of count participants
// under dir; every participant must use the same count. A DoubleBarrier
// is one participant: use one per process (or goroutine), not
// concurrently.
func NewDoubleBarrier(s *session.Session, dir string, count int, opts ...Option) *DoubleBarrier {
	return &DoubleBarrier{s: s, dir: strings.TrimSuffix(dir, "/"), count: count, opt: buildOptions(opts)}
}

// Enter joins and blocks until count participants have joined.
func (d *DoubleBarrier) Enter(ctx context.Context) error {
	if d.node != "" {
		return errors.New("recipes: double barrier entered twice")
	}
	b, err := bind(ctx, d.s)
	if err != nil {
		return err
	}
	path, _, err := b.createSeq(ctx, d.dir, participantPrefix, nil, zk.FlagEphemeral, d.opt.acl)
	if err != nil {
		return err
	}
	d.b, d.node = b, path
	ready := d.dir + "/" + readyNode
	for {
		var ok bool
		var ev <-chan zk.Event
		if err := b.do(ctx, func(c *zk.Conn) (err error) { ok, _, ev, err = c.ExistsW(ready); return }); err != nil {
			return d.fail(err)
		}
		if ok {
			return nil
		}
		var names []string
		if err := b.do(ctx, func(c *zk.Conn) (err error) { names, _, err = c.Children(d.dir); return }); err != nil {
			return d.fail(err)
		}
		if len(sequenced(names, participantPrefix)) >= d.count {
			err := b.do(ctx, func(c *zk.Conn) error {
				_, err := c.Create(ready, nil, 0, d.opt.acl)
				if errors.Is(err, zk.ErrNodeExists) {
					return nil
				}
				return err
			})
			if err != nil {
				return d.fail(err)
			}
			return nil
		}
		e, err := b.await(ctx, ev)
		if err != nil {
			return d.fail(err)
		}
		if e.Type == zk.EventNodeCreated {
			return nil // ready, even if it is already gone again
		}
	}
}

func (d *DoubleBarrier) fail(err error) error {
	d.b.abandon(d.node)
	d.node = ""
	return err
}

// Leave leaves and blocks until every participant has left. The last one
// out lowers the barrier for the next round.
func (d *DoubleBarrier) Leave(ctx context.Context) error {
	if d.node == "" {
		return errors.New("recipes: double barrier left without entering")
	}
	b, name := d.b, base(d.node)
	defer func() { d.node = "" }()
	for {
		var names []string
		if err := b.do(ctx, func(c *zk.Conn) (err error) { names, _, err = c.Children(d.dir); return }); err != nil {
			return err
		}
		kids := sequenced(names, participantPrefix)
		i := indexOf(kids, name)
		var watch string
		switch {
		case len(kids) == 0:
			return b.deleteNode(ctx, d.dir+"/"+readyNode)
		case len(kids) == 1 && i == 0:
			if err := b.deleteNode(ctx, d.node); err != nil {
				return err
			}
			return b.deleteNode(ctx, d.dir+"/"+readyNode)
		case i == 0:
			watch = kids[len(kids)-1].name // the lowest waits for the highest
		default:
			if i > 0 {
				if err := b.deleteNode(ctx, d.node); err != nil {
					return err
				}
			}
			watch = kids[0].name // the others wait for the lowest
			if watch == name {
				continue
			}
		}
		var ok bool
		var ev <-chan zk.Event
		if err := b.do(ctx, func(c *zk.Conn) (err error) { ok, _, ev, err = c.ExistsW(d.dir + "/" + watch); return }); err != nil {
			return err
		}
		if !ok {
			continue
		}
		if _, err := b.await(ctx, ev); err != nil {
			return fmt.Errorf("recipes: leaving the double barrier: %w", err)
		}
	}
}
