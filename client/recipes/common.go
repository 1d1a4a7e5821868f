package recipes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/session"
)

// Option adjusts a recipe.
type Option func(*options)

type options struct {
	acl   []zk.ACL
	delay time.Duration
}

func buildOptions(opts []Option) options {
	o := options{acl: zk.WorldACL(zk.PermAll)}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithACL sets the ACL of the nodes a recipe creates (default: open).
func WithACL(acl []zk.ACL) Option { return func(o *options) { o.acl = acl } }

// WithLockDelay makes a Lock wait d before granting itself after the
// previous holder's session ended without releasing (Chubby's
// lock-delay): a holder cut off from ZooKeeper gets d to notice and stop
// before the next one starts. It is for resources that cannot check
// fencing tokens yet; it narrows the window, where a token closes it.
func WithLockDelay(d time.Duration) Option { return func(o *options) { o.delay = d } }

// bound is one session generation: every call a recipe makes for one
// grant goes through its connection, and stops when its context ends (the
// session was lost).
type bound struct {
	s    *session.Session
	conn *zk.Conn
	gen  context.Context
}

// bind waits until the session is safe and returns its generation.
func bind(ctx context.Context, s *session.Session) (bound, error) {
	for i := 0; ; i++ {
		if err := s.WaitSafe(ctx); err != nil {
			return bound{}, err
		}
		conn, gen := s.Current()
		if gen.Err() == nil {
			return bound{s: s, conn: conn, gen: gen}, nil
		}
		if i > 100 {
			return bound{}, context.Cause(gen)
		}
	}
}

// retryable are the errors after which the same call may be made again
// on the same session once it is safe.
func retryable(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved)
}

// wait blocks until the session is safe again for a retry, and fails when
// ctx ends or the generation is lost.
func (b bound) wait(ctx context.Context) error {
	if err := b.gen.Err(); err != nil {
		return context.Cause(b.gen)
	}
	mctx, cancel := b.merge(ctx)
	defer cancel()
	if err := b.s.WaitSafe(mctx); err != nil {
		return err
	}
	if err := b.gen.Err(); err != nil {
		return context.Cause(b.gen)
	}
	// Do not spin while go-zookeeper notices the connection it failed on.
	t := time.NewTimer(10 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-mctx.Done():
		return context.Cause(mctx)
	}
}

// merge is ctx, also cancelled (with the session's cause) when the
// generation is lost.
func (b bound) merge(ctx context.Context) (context.Context, context.CancelFunc) {
	mctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(b.gen, func() { cancel(context.Cause(b.gen)) })
	return mctx, func() { stop(); cancel(context.Canceled) }
}

// do runs f until it returns something other than a connection error.
// f must be safe to repeat (a read, or a write whose repetition is
// harmless).
func (b bound) do(ctx context.Context, f func(c *zk.Conn) error) error {
	for {
		if err := b.gen.Err(); err != nil {
			return context.Cause(b.gen)
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		err := f(b.conn)
		if !retryable(err) {
			return err
		}
		if err := b.wait(ctx); err != nil {
			return err
		}
	}
}

// await waits for a watch event, ctx or the end of the generation.
func (b bound) await(ctx context.Context, ev <-chan zk.Event) (zk.Event, error) {
	select {
	case e := <-ev:
		return e, nil
	case <-ctx.Done():
		return zk.Event{}, context.Cause(ctx)
	case <-b.gen.Done():
		return zk.Event{}, context.Cause(b.gen)
	}
}

// ensurePath creates path and its parents as persistent nodes.
func (b bound) ensurePath(ctx context.Context, path string, acl []zk.ACL) error {
	cur := ""
	for _, p := range strings.Split(strings.Trim(path, "/"), "/") {
		cur += "/" + p
		err := b.do(ctx, func(c *zk.Conn) error {
			_, err := c.Create(cur, nil, 0, acl)
			if errors.Is(err, zk.ErrNodeExists) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("recipes: create %s: %w", cur, err)
		}
	}
	return nil
}

// protectedPrefix marks nodes whose creator can find them again after a
// connection loss, as Curator's and go-zookeeper's protected creates do.
const protectedPrefix = "_c_"

// createSeq creates a sequential node dir/<prefix>NNNNNNNNNN (flags adds
// zk.FlagEphemeral or not) exactly once despite connection losses: the
// name carries a random id, and after a failure the creator looks for it
// before trying again. It returns the node's path and Stat.
func (b bound) createSeq(ctx context.Context, dir, prefix string, data []byte, flags int32, acl []zk.ACL) (string, *zk.Stat, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", nil, err
	}
	guid := hex.EncodeToString(id[:])
	name := protectedPrefix + guid + "-" + prefix
	for {
		path, err := b.conn.Create(dir+"/"+name, data, flags|zk.FlagSequence, acl)
		if errors.Is(err, zk.ErrNoNode) {
			if err := b.ensurePath(ctx, dir, acl); err != nil {
				return "", nil, err
			}
			continue
		}
		if retryable(err) {
			if err := b.wait(ctx); err != nil {
				return "", nil, err
			}
			var kids []string
			if err := b.do(ctx, func(c *zk.Conn) (err error) { kids, _, err = c.Children(dir); return }); err != nil {
				return "", nil, err
			}
			for _, k := range kids {
				if strings.Contains(k, guid) {
					path, err = dir+"/"+k, nil
					break
				}
			}
			if path == "" {
				continue
			}
		}
		if err != nil {
			return "", nil, fmt.Errorf("recipes: create in %s: %w", dir, err)
		}
		var st *zk.Stat
		var ok bool
		if err := b.do(ctx, func(c *zk.Conn) (err error) { ok, st, err = c.Exists(path); return }); err != nil {
			return "", nil, err
		}
		if !ok {
			// Created, then deleted before its Stat was read: for a
			// queue, taken by a consumer already. The path is returned
			// with the error.
			return path, nil, fmt.Errorf("%w: %s", ErrNodeGone, path)
		}
		return path, st, nil
	}
}

// child is one sequential node of a recipe's directory.
type child struct {
	name string
	seq  string // the ten digits ZooKeeper appended
}

// sequenced returns the children of dir that carry one of prefixes,
// sorted by sequence number.
func sequenced(kids []string, prefixes ...string) []child {
	var out []child
	for _, k := range kids {
		if len(k) < 10 {
			continue
		}
		for _, p := range prefixes {
			if strings.Contains(k, p) {
				out = append(out, child{name: k, seq: k[len(k)-10:]})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

func base(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

func indexOf(kids []child, name string) int {
	for i, k := range kids {
		if k.name == name {
			return i
		}
	}
	return -1
}

// Lease is one grant of a recipe: a lock or read-write lock hold, a
// semaphore lease, a leadership term. Its Token is the fencing token to
// send to the resources it protects; its context ends when the grant
// does: released, or its session lost. It is safe for concurrent use.
type Lease struct {
	// Token is the czxid of the node that grants the lease: strictly
	// greater than the token of every earlier grant of the same lock
	// (or leadership) on ZooKeeper and zkraft alike.
	Token int64
	// Path is the node.
	Path string

	b       bound
	ctx     context.Context
	cancel  context.CancelCauseFunc
	once    sync.Once
	err     error
	release func(ctx context.Context, b bound) error
	watched chan struct{} // closed when watch returns
}

func newLease(b bound, path string, token int64) *Lease {
	l := &Lease{Token: token, Path: path, b: b, watched: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancelCause(b.gen)
	l.release = func(ctx context.Context, b bound) error { return b.deleteNode(ctx, path) }
	go l.watch()
	return l
}

// watch ends the lease when its node is deleted by anyone but Release
// (an operator, a buggy client) while the session lives: the grant is
// gone then too. It returns when the lease ends.
func (l *Lease) watch() {
	defer close(l.watched)
	for {
		var ok bool
		var ev <-chan zk.Event
		err := l.b.do(l.ctx, func(c *zk.Conn) (err error) { ok, _, ev, err = c.ExistsW(l.Path); return })
		if err != nil {
			return // the lease ended (released, or its session lost)
		}
		if !ok {
			l.cancel(fmt.Errorf("%w: %s", ErrNodeGone, l.Path))
			return
		}
		select {
		case e := <-ev:
			if e.Type == zk.EventNodeDeleted {
				l.cancel(fmt.Errorf("%w: %s", ErrNodeGone, l.Path))
				return
			}
		case <-l.ctx.Done():
			return
		}
	}
}

// Context is done when the lease ends; context.Cause says why:
// ErrReleased, ErrNodeGone (someone deleted the lease's node), or the
// session's cause (session.ErrExpired,
// session.ErrGraceExpired, session.ErrClosed; errors.Is(cause,
// session.ErrLost)). The session's jeopardy does not end it: pause with
// Session.WaitSafe(lease.Context()).
func (l *Lease) Context() context.Context { return l.ctx }

// Done is Context().Done().
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// SessionID is the session that holds the lease.
func (l *Lease) SessionID() int64 { return l.b.conn.SessionID() }

// Release gives the lease up: its node is deleted, its context cancelled
// with ErrReleased. After the session was lost there is nothing to delete
// (the node went with it) and Release returns nil. Repeated calls return
// the first result. Release waits for the goroutine the lease started.
func (l *Lease) Release() error {
	l.once.Do(func() {
		l.cancel(ErrReleased)
		<-l.watched
		if l.b.gen.Err() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.b.s.Timeout())
		defer cancel()
		l.err = l.release(ctx, l.b)
		if l.b.gen.Err() != nil {
			l.err = nil // the node went with the session
		}
	})
	return l.err
}

// deleteNode deletes path, retrying connection errors; a missing node is
// not an error.
func (b bound) deleteNode(ctx context.Context, path string) error {
	err := b.do(ctx, func(c *zk.Conn) error { return c.Delete(path, -1) })
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

// abandon deletes a node the caller gives up on (a cancelled wait) with a
// fresh deadline, since ctx may be what ended.
func (b bound) abandon(path string) {
	if b.gen.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.s.Timeout())
	defer cancel()
	b.deleteNode(ctx, path)
}
