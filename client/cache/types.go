package cache

import (
	"context"

	"github.com/zkraft/zkraft/client/session"
)

// TreeCache keeps a subtree in memory: every node under its root (to
// Options.Depth), its data and Stat, current as the server changes them.
type TreeCache struct{ e *engine }

// NewTree loads the subtree at root and returns once it is loaded; the
// cache then follows every change until Close. It reaches the servers of
// s on connections of its own (s itself is not used for the stream).
func NewTree(ctx context.Context, s *session.Session, root string, opts Options) (*TreeCache, error) {
	depth := opts.Depth
	if depth < 0 {
		depth = 0
	}
	e, err := start(ctx, s, root, depth, opts)
	if err != nil {
		return nil, err
	}
	return &TreeCache{e}, nil
}

// Get returns the node at path, if the cache holds it.
func (c *TreeCache) Get(path string) (Node, bool) { return c.e.get(path) }

// Children returns the names of path's children, sorted.
func (c *TreeCache) Children(path string) []string { return c.e.children(path) }

// Nodes returns every cached node, by path.
func (c *TreeCache) Nodes() []Node { return c.e.nodes() }

// Zxid is the zxid up to which the cache has applied every change.
func (c *TreeCache) Zxid() int64 { return c.e.zxid() }

// Mode says how the cache is kept current.
func (c *TreeCache) Mode() Mode { return c.e.mode() }

// Changed returns a channel closed at the cache's next change.
func (c *TreeCache) Changed() <-chan struct{} { return c.e.changed() }

// Err is why the cache stopped following the server, nil while it does.
func (c *TreeCache) Err() error { return c.e.err() }

// Close stops the cache and waits for its goroutines.
func (c *TreeCache) Close() error { return c.e.close() }

// NodeCache keeps one node in memory, whether or not it exists.
type NodeCache struct{ e *engine }

// NewNode loads the node at path (which need not exist) and follows it
// until Close. Options.Depth is ignored.
func NewNode(ctx context.Context, s *session.Session, path string, opts Options) (*NodeCache, error) {
	e, err := start(ctx, s, path, -1, opts)
	if err != nil {
		return nil, err
	}
	return &NodeCache{e}, nil
}

// Get returns the node, and false while it does not exist.
func (c *NodeCache) Get() (Node, bool) { return c.e.get(c.e.root) }

// Zxid is the zxid up to which the cache has applied every change.
func (c *NodeCache) Zxid() int64 { return c.e.zxid() }

// Mode says how the cache is kept current.
func (c *NodeCache) Mode() Mode { return c.e.mode() }

// Changed returns a channel closed at the cache's next change.
func (c *NodeCache) Changed() <-chan struct{} { return c.e.changed() }

// Err is why the cache stopped following the server, nil while it does.
func (c *NodeCache) Err() error { return c.e.err() }

// Close stops the cache and waits for its goroutines.
func (c *NodeCache) Close() error { return c.e.close() }
