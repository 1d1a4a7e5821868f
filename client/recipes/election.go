package recipes

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/session"
)

// Election elects one leader among the candidates under a directory: a
// candidate's node is ephemeral and sequential, the lowest leads, each
// waiting candidate watches only the one before it. A leadership term's
// Token is its epoch: the leader node's czxid, strictly greater than
// every earlier leader's, so followers and resources can refuse orders
// from a deposed leader.
type Election struct {
	s   *session.Session
	dir string
	opt options
}

const candidatePrefix = "n-"

// NewElection returns the election under dir.
func NewElection(s *session.Session, dir string, opts ...Option) *Election {
	return &Election{s: s, dir: strings.TrimSuffix(dir, "/"), opt: buildOptions(opts)}
}

// Campaign blocks until this candidate leads (ctx ends, or the session is
// lost) and returns the term. value is published as the candidate's data,
// what Leader and Observe report (an address, typically). Resign with the
// lease's Release.
func (e *Election) Campaign(ctx context.Context, value []byte) (*Lease, error) {
	return acquireExclusive(ctx, e.s, e.dir, candidatePrefix, value, e.opt)
}

// Leader is who leads an election.
type Leader struct {
	// Value is the leader's published value.
	Value []byte
	// Epoch is the leader node's czxid: 0 when nobody leads.
	Epoch int64
	// Path is the leader's node.
	Path string
}

// Leader returns the current leader, with Epoch 0 when there is none.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	b, err := bind(ctx, e.s)
	if err != nil {
		return Leader{}, err
	}
	l, _, err := e.leader(ctx, b, false)
	return l, err
}

// leader reads the lowest candidate; with watch it also returns a channel
// that fires when that changes (the leader's node goes or its data
// changes, or a first candidate arrives).
func (e *Election) leader(ctx context.Context, b bound, watch bool) (Leader, <-chan zk.Event, error) {
	for {
		var names []string
		var ev <-chan zk.Event
		err := b.do(ctx, func(c *zk.Conn) (err error) {
			names, _, err = c.Children(e.dir)
			return
		})
		if errors.Is(err, zk.ErrNoNode) {
			names, err = nil, nil
		}
		if err != nil {
			return Leader{}, nil, err
		}
		kids := sequenced(names, candidatePrefix)
		if len(kids) == 0 {
			if !watch {
				return Leader{}, nil, nil
			}
			// Wait for the first candidate (or for the directory).
			var ok bool
			err := b.do(ctx, func(c *zk.Conn) (err error) {
				ok, _, ev, err = c.ExistsW(e.dir)
				if err == nil && ok {
					names, _, ev, err = c.ChildrenW(e.dir)
				}
				return
			})
			if err != nil {
				return Leader{}, nil, err
			}
			if ok && len(sequenced(names, candidatePrefix)) > 0 {
				continue
			}
			return Leader{}, ev, nil
		}
		path := e.dir + "/" + kids[0].name
		var data []byte
		var st *zk.Stat
		err = b.do(ctx, func(c *zk.Conn) (err error) {
			if watch {
				data, st, ev, err = c.GetW(path)
			} else {
				data, st, err = c.Get(path)
			}
			return
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // it went between the two reads
		}
		if err != nil {
			return Leader{}, nil, err
		}
		return Leader{Value: data, Epoch: st.Czxid, Path: path}, ev, nil
	}
}

// Observer streams an election's leaders.
type Observer struct {
	// C receives the leader each time it changes, starting with the
	// current one; Epoch 0 means nobody leads. Epochs of successive
	// leaders strictly increase. It is closed when the Observer ends: see
	// Err.
	C <-chan Leader

	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Observe starts streaming the election's leaders until ctx ends or
// Close. It follows the session across a loss to its next session; what
// changed in between arrives as the next leader. The caller must drain C.
func (e *Election) Observe(ctx context.Context) *Observer {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan Leader, 1)
	o := &Observer{C: ch, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		defer close(ch)
		o.err = e.observe(ctx, ch)
	}()
	return o
}

func (e *Election) observe(ctx context.Context, ch chan<- Leader) error {
	var last Leader
	first := true
	for {
		b, err := bind(ctx, e.s)
		if err != nil {
			return err
		}
		for {
			l, ev, err := e.leader(ctx, b, true)
			if err != nil {
				if b.gen.Err() != nil && ctx.Err() == nil {
					break // the session was lost: follow it to the next
				}
				return err
			}
			if first || l.Epoch != last.Epoch || !bytes.Equal(l.Value, last.Value) {
				select {
				case ch <- l:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
				last, first = l, false
			}
			if _, err := b.await(ctx, ev); err != nil {
				if b.gen.Err() != nil && ctx.Err() == nil {
					break
				}
				return err
			}
		}
	}
}

// Close stops the Observer and waits for it.
func (o *Observer) Close() error {
	o.cancel()
	<-o.done
	return nil
}

// Err is why C closed: nil after Close, else ctx's cause or a server
// error.
func (o *Observer) Err() error {
	select {
	case <-o.done:
	default:
		return nil
	}
	if errors.Is(o.err, context.Canceled) {
		return nil
	}
	return o.err
}

// Latch is a leader latch (Curator's LeaderLatch): it stays in an
// election in the background, across session losses, until Close. At
// most one latch of an election leads at a time; Await waits for this
// one's term.
type Latch struct {
	e      *Election
	value  []byte
	cancel context.CancelFunc
	done   chan struct{}

	mu struct {
		sync.Mutex
		lease   *Lease
		changed chan struct{} // closed when lease changes
	}
}

// NewLatch joins the election under dir with value and returns at once.
func NewLatch(s *session.Session, dir string, value []byte, opts ...Option) *Latch {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Latch{e: NewElection(s, dir, opts...), value: value, cancel: cancel, done: make(chan struct{})}
	l.mu.changed = make(chan struct{})
	go l.run(ctx)
	return l
}

func (l *Latch) run(ctx context.Context) {
	defer close(l.done)
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		lease, err := l.e.Campaign(ctx, l.value)
		if err != nil {
			// The session was lost mid-campaign, or a server error: try
			// again on the next session.
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		l.set(lease)
		select {
		case <-lease.Done():
		case <-ctx.Done():
		}
		l.set(nil)
		lease.Release()
	}
}

func (l *Latch) set(lease *Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.lease = lease
	close(l.mu.changed)
	l.mu.changed = make(chan struct{})
}

// Leading returns the current term when this latch leads, else nil.
func (l *Latch) Leading() *Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.lease != nil && l.mu.lease.ctx.Err() == nil {
		return l.mu.lease
	}
	return nil
}

// Await blocks until this latch leads, and returns the term.
func (l *Latch) Await(ctx context.Context) (*Lease, error) {
	for {
		l.mu.Lock()
		lease, ch := l.mu.lease, l.mu.changed
		l.mu.Unlock()
		if lease != nil && lease.ctx.Err() == nil {
			return lease, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-l.done:
			return nil, ErrClosed
		}
	}
}

// Close leaves the election (resigning if leading) and waits for the
// latch's goroutine.
func (l *Latch) Close() error {
	l.cancel()
	<-l.done
	return nil
}
