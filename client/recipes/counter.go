package recipes

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/session"
)

// Counter is a shared int64 kept in one node's data (eight bytes, big
// endian, as Curator's DistributedAtomicLong), changed by compare-and-set
// on the node's version: a step that raced another reads again and
// retries, so no step is lost.
type Counter struct {
	s    *session.Session
	path string
	opt  options
}

// NewCounter returns the counter at path (0 until first changed).
func NewCounter(s *session.Session, path string, opts ...Option) *Counter {
	return &Counter{s: s, path: path, opt: buildOptions(opts)}
}

// Get returns the value and the node's version (-1 when the node does
// not exist yet).
func (c *Counter) Get(ctx context.Context) (int64, int32, error) {
	b, err := bind(ctx, c.s)
	if err != nil {
		return 0, 0, err
	}
	return c.get(ctx, b)
}

func (c *Counter) get(ctx context.Context, b bound) (int64, int32, error) {
	var data []byte
	var st *zk.Stat
	err := b.do(ctx, func(cn *zk.Conn) (err error) { data, st, err = cn.Get(c.path); return })
	if errors.Is(err, zk.ErrNoNode) {
		return 0, -1, nil
	}
	if err != nil {
		return 0, 0, err
	}
	v, err := decodeInt64(data)
	return v, st.Version, err
}

func decodeInt64(b []byte) (int64, error) {
	switch len(b) {
	case 0:
		return 0, nil
	case 8:
		return int64(binary.BigEndian.Uint64(b)), nil
	}
	return 0, fmt.Errorf("recipes: counter data is %d bytes, not 8", len(b))
}

func encodeInt64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// Add adds delta and returns the new value. If the connection fails while
// the write is in flight, Add returns ErrUncertain: the step may have
// been applied.
func (c *Counter) Add(ctx context.Context, delta int64) (int64, error) {
	b, err := bind(ctx, c.s)
	if err != nil {
		return 0, err
	}
	for {
		v, version, err := c.get(ctx, b)
		if err != nil {
			return 0, err
		}
		ok, err := c.cas(ctx, b, version, v+delta)
		if err != nil {
			return 0, err
		}
		if ok {
			return v + delta, nil
		}
	}
}

// CompareAndSet sets the value to v if the node's version is still
// version (from Get; -1 for a counter not created yet), and reports
// whether it did.
func (c *Counter) CompareAndSet(ctx context.Context, version int32, v int64) (bool, error) {
	b, err := bind(ctx, c.s)
	if err != nil {
		return false, err
	}
	return c.cas(ctx, b, version, v)
}

func (c *Counter) cas(ctx context.Context, b bound, version int32, v int64) (bool, error) {
	var err error
	if version < 0 {
		if dir := parent(c.path); dir != "/" {
			if err := b.ensurePath(ctx, dir, c.opt.acl); err != nil {
				return false, err
			}
		}
		_, err = b.conn.Create(c.path, encodeInt64(v), 0, c.opt.acl)
		if errors.Is(err, zk.ErrNodeExists) {
			return false, nil
		}
	} else {
		_, err = b.conn.Set(c.path, encodeInt64(v), version)
		if errors.Is(err, zk.ErrBadVersion) {
			return false, nil
		}
	}
	if retryable(err) {
		return false, fmt.Errorf("%w: %s", ErrUncertain, c.path)
	}
	return err == nil, err
}

func parent(path string) string {
	i := len(path) - 1
	for i > 0 && path[i] != '/' {
		i--
	}
	if i == 0 {
		return "/"
	}
	return path[:i]
}
