package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/cache"
	"github.com/zkraft/zkraft/client/session"
)

// Instance is one instance of a service in a registry: the node
// <dir>/<ID>, ephemeral, with the instance as JSON.
type Instance struct {
	ID      string            `json:"id"`
	Address string            `json:"address"`
	Meta    map[string]string `json:"meta,omitempty"`
}

// Registration keeps an instance registered: its ephemeral node goes
// when its session is lost, and the Registration creates it again on the
// next session (and again if someone deletes it), until Close.
type Registration struct {
	s      *session.Session
	path   string
	data   []byte
	opt    options
	cancel context.CancelFunc
	done   chan struct{}
	first  chan error
}

// Register registers inst under dir and returns once its node exists.
func Register(ctx context.Context, s *session.Session, dir string, inst Instance, opts ...Option) (*Registration, error) {
	if inst.ID == "" || strings.Contains(inst.ID, "/") {
		return nil, fmt.Errorf("recipes: bad instance id %q", inst.ID)
	}
	data, err := json.Marshal(inst)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	r := &Registration{s: s, path: strings.TrimSuffix(dir, "/") + "/" + inst.ID, data: data, opt: buildOptions(opts),
		cancel: cancel, done: make(chan struct{}), first: make(chan error, 1)}
	go r.run(rctx)
	select {
	case err := <-r.first:
		if err != nil {
			r.Close()
			return nil, err
		}
		return r, nil
	case <-ctx.Done():
		r.Close()
		return nil, context.Cause(ctx)
	}
}

func (r *Registration) run(ctx context.Context) {
	defer close(r.done)
	reported := false
	report := func(err error) {
		if !reported {
			reported = true
			r.first <- err
		}
	}
	for ctx.Err() == nil {
		b, err := bind(ctx, r.s)
		if err != nil {
			continue // ctx ended
		}
		err = r.hold(ctx, b, func() { report(nil) })
		if err != nil && ctx.Err() == nil && b.gen.Err() == nil {
			// A server error, not a session loss: report it to Register,
			// or back off and retry.
			if !reported {
				report(err)
				return
			}
			t := time.NewTimer(time.Second)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
}

// hold creates the node on generation b and keeps it until ctx ends (it
// then deletes it) or the generation is lost.
func (r *Registration) hold(ctx context.Context, b bound, registered func()) error {
	if err := b.ensurePath(ctx, parent(r.path), r.opt.acl); err != nil {
		return err
	}
	for {
		var ok bool
		var st *zk.Stat
		var ev <-chan zk.Event
		err := b.do(ctx, func(c *zk.Conn) (err error) { ok, st, ev, err = c.ExistsW(r.path); return })
		if err != nil {
			return r.stop(b, err)
		}
		switch {
		case !ok:
			err := b.do(ctx, func(c *zk.Conn) error {
				_, err := c.Create(r.path, r.data, zk.FlagEphemeral, r.opt.acl)
				return err
			})
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return r.stop(b, err)
			}
			continue // watch what we created (or whoever beat us)
		case st.EphemeralOwner == b.conn.SessionID():
			registered()
		default:
			// Another session's node: a previous session of ours not yet
			// expired, or a duplicate id. Wait for it to go.
		}
		if _, err := b.await(ctx, ev); err != nil {
			return r.stop(b, err)
		}
	}
}

// stop deletes the node when the Registration is closing on a live
// session.
func (r *Registration) stop(b bound, err error) error {
	if b.gen.Err() == nil && errors.Is(err, context.Canceled) {
		ctx, cancel := context.WithTimeout(context.Background(), b.s.Timeout())
		defer cancel()
		var st *zk.Stat
		var ok bool
		if b.do(ctx, func(c *zk.Conn) (err error) { ok, st, err = c.Exists(r.path); return }) == nil &&
			ok && st.EphemeralOwner == b.conn.SessionID() {
			b.do(ctx, func(c *zk.Conn) error { return c.Delete(r.path, st.Version) })
		}
	}
	return err
}

// Close deregisters the instance and waits for the Registration's
// goroutine.
func (r *Registration) Close() error {
	r.cancel()
	<-r.done
	return nil
}

// View is a watch-driven view of a service's instances: a client/cache
// TreeCache of the service's directory, one level deep, so it follows
// every registration and deregistration (gap-free on zkraft) until Close.
type View struct {
	c   *cache.TreeCache
	dir string
}

// NewView starts a view of the instances under dir and returns once it
// has read them.
func NewView(ctx context.Context, s *session.Session, dir string, opts ...ViewOption) (*View, error) {
	var o cache.Options
	for _, f := range opts {
		f(&o)
	}
	o.Depth = 1
	dir = strings.TrimSuffix(dir, "/")
	c, err := cache.NewTree(ctx, s, dir, o)
	if err != nil {
		return nil, err
	}
	return &View{c: c, dir: dir}, nil
}

// ViewOption adjusts a View.
type ViewOption func(*cache.Options)

// OnViewChange calls f with every change of the view's directory (an
// instance registered, updated or gone), in zxid order, from the view's
// goroutine.
func OnViewChange(f func(cache.Change)) ViewOption {
	return func(o *cache.Options) { o.OnChange = f }
}

// Instances returns the registered instances, sorted by ID.
func (v *View) Instances() []Instance {
	var out []Instance
	for _, name := range v.c.Children(v.dir) {
		n, ok := v.c.Get(v.dir + "/" + name)
		if !ok {
			continue
		}
		var in Instance
		if json.Unmarshal(n.Data, &in) == nil && in.ID != "" {
			out = append(out, in)
		}
	}
	return out
}

// Changed returns a channel closed at the view's next change.
func (v *View) Changed() <-chan struct{} { return v.c.Changed() }

// Zxid is the zxid up to which the view is current.
func (v *View) Zxid() int64 { return v.c.Zxid() }

// Close stops the view and waits for it.
func (v *View) Close() error { return v.c.Close() }
