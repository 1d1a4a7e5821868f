package recipes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/session"
)

// Queue is a distributed FIFO queue: each item is a persistent sequential
// node, taken by deleting it, so each item goes to exactly one consumer.
// Put survives connection losses without duplicating; a Take whose delete
// is cut off returns the item with ErrUncertain (it may have been taken by
// that call or by another consumer).
type Queue struct {
	s   *session.Session
	dir string
	opt options
}

const itemPrefix = "q-"

// Item is one queued element.
type Item struct {
	Data []byte
	// Path is the item's node; Zxid its czxid: the order of Put, and an
	// id a consumer can deduplicate on. An item Put returns has Zxid 0 if
	// a consumer took it before Put could read its Stat.
	Path string
	Zxid int64
}

// NewQueue returns the queue under dir.
func NewQueue(s *session.Session, dir string, opts ...Option) *Queue {
	return &Queue{s: s, dir: strings.TrimSuffix(dir, "/"), opt: buildOptions(opts)}
}

// Put appends data and returns its item.
func (q *Queue) Put(ctx context.Context, data []byte) (Item, error) {
	b, err := bind(ctx, q.s)
	if err != nil {
		return Item{}, err
	}
	path, st, err := b.createSeq(ctx, q.dir, itemPrefix, data, 0, q.opt.acl)
	if errors.Is(err, ErrNodeGone) && path != "" {
		// Queued, and already taken: the Put succeeded.
		return Item{Data: data, Path: path}, nil
	}
	if err != nil {
		return Item{}, err
	}
	return Item{Data: data, Path: path, Zxid: st.Czxid}, nil
}

// Take removes and returns the oldest item, waiting for one when the
// queue is empty.
func (q *Queue) Take(ctx context.Context) (Item, error) {
	for {
		b, err := bind(ctx, q.s)
		if err != nil {
			return Item{}, err
		}
		it, err := q.take(ctx, b)
		if err == nil || ctx.Err() != nil || b.gen.Err() == nil {
			return it, err
		}
		// The session was lost while waiting: wait on the next one.
	}
}

func (q *Queue) take(ctx context.Context, b bound) (Item, error) {
	for {
		var names []string
		var ev <-chan zk.Event
		err := b.do(ctx, func(c *zk.Conn) (err error) { names, _, ev, err = c.ChildrenW(q.dir); return })
		if errors.Is(err, zk.ErrNoNode) {
			if err := b.ensurePath(ctx, q.dir, q.opt.acl); err != nil {
				return Item{}, err
			}
			continue
		}
		if err != nil {
			return Item{}, err
		}
		for _, k := range sequenced(names, itemPrefix) {
			path := q.dir + "/" + k.name
			var data []byte
			var st *zk.Stat
			err := b.do(ctx, func(c *zk.Conn) (err error) { data, st, err = c.Get(path); return })
			if errors.Is(err, zk.ErrNoNode) {
				continue // taken by another consumer
			}
			if err != nil {
				return Item{}, err
			}
			it := Item{Data: data, Path: path, Zxid: st.Czxid}
			err = b.conn.Delete(path, st.Version)
			switch {
			case err == nil:
				return it, nil
			case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
				continue
			case retryable(err):
				if err := b.wait(ctx); err != nil {
					return it, fmt.Errorf("%w: %s", ErrUncertain, path)
				}
				var ok bool
				if err := b.do(ctx, func(c *zk.Conn) (err error) { ok, _, err = c.Exists(path); return }); err == nil && ok {
					if err := b.conn.Delete(path, st.Version); err == nil {
						return it, nil
					}
					continue
				}
				return it, fmt.Errorf("%w: %s", ErrUncertain, path)
			default:
				return Item{}, err
			}
		}
		if _, err := b.await(ctx, ev); err != nil {
			return Item{}, err
		}
	}
}

// Len is the number of items queued.
func (q *Queue) Len(ctx context.Context) (int, error) {
	b, err := bind(ctx, q.s)
	if err != nil {
		return 0, err
	}
	var st *zk.Stat
	err = b.do(ctx, func(c *zk.Conn) (err error) { _, st, err = c.Exists(q.dir); return })
	if err != nil || st == nil {
		return 0, err
	}
	return int(st.NumChildren), nil
}
