package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// root is the znode every workload works under; each run starts on an
// empty server, so it is the same for both systems.
const root = "/sbs"

var openACL = zk.WorldACL(zk.PermAll)

// plan is what a run's workload needs to know of the run.
type plan struct {
	shape     shape
	valueSize int
	znodes    int // the pre-created set of set-random, get and mixed
	children  int // children of the getChildren parent
	watchers  int
	value     []byte
}

func (p *plan) workers() int { return p.shape.Sessions * p.shape.PerSession }

func (p *plan) ownPath(w int) string      { return fmt.Sprintf("%s/own/w%05d", root, w) }
func (p *plan) setPath(i int) string      { return fmt.Sprintf("%s/set/n%05d", root, i) }
func (p *plan) multiPath(w, i int) string { return fmt.Sprintf("%s/multi/w%05d-%02d", root, w, i) }
func (p *plan) cdPath(w int) string       { return fmt.Sprintf("%s/cd/w%05d", root, w) }

// worker is one goroutine of a session: it runs one synchronous request
// at a time on the session's *zk.Conn, which it shares with the session's
// other workers.
type worker struct {
	idx  int // 0 .. sessions*perSession-1
	conn *zk.Conn
	p    *plan
	rng  *rand.Rand // seeded by idx: the same sequence against both systems

	paths   []string // pre-computed random targets (set-random, get, mixed)
	multi   []any    // the multi's setData requests
	lock    *zk.Lock
	created bool // create-delete: the node exists

	holders, violations *atomic.Int64 // lock: shared by the run's workers
}

// pick returns a random path of the pre-created set.
func (w *worker) pick() string { return w.paths[w.rng.IntN(len(w.paths))] }

// workload is one kind of client traffic.
type workload struct {
	name  string
	unit  string   // what ops counts
	about string   // one line for -h and the report
	kinds []string // operation kinds reported apart; nil: one kind, the name
	// setup creates what the workload needs under root, before the
	// sessions open.
	setup func(ctx context.Context, c *zk.Conn, p *plan) error
	// prepare readies one worker (after its session is open).
	prepare func(w *worker)
	// op runs one operation and returns its kind and, when it is not the
	// wall time of the call, its latency (lat 0: measure the call).
	op func(w *worker) (kind int, lat time.Duration, err error)
	// watch is set for the fan-out workload, which has its own driver and
	// ignores the shapes (its shape is -watchers sessions x 1).
	watch bool
}

var errWrongData = errors.New("reply with a wrong value length")

var workloads = []*workload{
	{
		name: "set-own", unit: "ops", about: "setData (version -1) of the worker's own znode",
		setup: func(ctx context.Context, c *zk.Conn, p *plan) error {
			return createAll(ctx, c, []string{root + "/own"}, nil, seqPaths(p.workers(), p.ownPath), p.value)
		},
		op: func(w *worker) (int, time.Duration, error) {
			_, err := w.conn.Set(w.p.ownPath(w.idx), w.p.value, -1)
			return 0, 0, err
		},
	},
	{
		name: "set-random", unit: "ops", about: "setData (version -1) of a random znode of the pre-created set",
		setup: setupSet, prepare: prepareSet,
		op: func(w *worker) (int, time.Duration, error) {
			_, err := w.conn.Set(w.pick(), w.p.value, -1)
			return 0, 0, err
		},
	},
	{
		name: "create-seq", unit: "ops", about: "create of a persistent sequential znode under one parent (the nodes stay)",
		setup: func(ctx context.Context, c *zk.Conn, p *plan) error {
			return createAll(ctx, c, []string{root + "/seq"}, nil, nil, nil)
		},
		op: func(w *worker) (int, time.Duration, error) {
			_, err := w.conn.Create(root+"/seq/n-", w.p.value, zk.FlagSequence, openACL)
			return 0, 0, err
		},
	},
	{
		name: "create-delete", unit: "ops", about: "create then delete of the worker's own znode; ops count both requests",
		kinds: []string{"create", "delete"},
		setup: func(ctx context.Context, c *zk.Conn, p *plan) error {
			return createAll(ctx, c, []string{root + "/cd"}, nil, nil, nil)
		},
		op: func(w *worker) (int, time.Duration, error) {
			path := w.p.cdPath(w.idx)
			if !w.created {
				_, err := w.conn.Create(path, w.p.value, 0, openACL)
				if err == nil || errors.Is(err, zk.ErrNodeExists) {
					w.created = true
				}
				return 0, 0, err
			}
			err := w.conn.Delete(path, -1)
			if err == nil || errors.Is(err, zk.ErrNoNode) {
				w.created = false
			}
			return 1, 0, err
		},
	},
	multiWorkload(4),
	multiWorkload(16),
	{
		name: "get", unit: "ops", about: "getData of a random znode of the pre-created set",
		setup: setupSet, prepare: prepareSet,
		op: func(w *worker) (int, time.Duration, error) {
			data, _, err := w.conn.Get(w.pick())
			if err == nil && len(data) != w.p.valueSize {
				err = errWrongData
			}
			return 0, 0, err
		},
	},
	{
		name: "children", unit: "ops", about: "getChildren of a znode with -children children",
		setup: func(ctx context.Context, c *zk.Conn, p *plan) error {
			kids := seqPaths(p.children, func(i int) string { return fmt.Sprintf("%s/kids/c%04d", root, i) })
			return createAll(ctx, c, []string{root + "/kids"}, nil, kids, p.value)
		},
		op: func(w *worker) (int, time.Duration, error) {
			kids, _, err := w.conn.Children(root + "/kids")
			if err == nil && len(kids) != w.p.children {
				err = fmt.Errorf("getChildren: %d children, want %d", len(kids), w.p.children)
			}
			return 0, 0, err
		},
	},
	{
		name: "mixed", unit: "ops", about: "90 % getData, 10 % setData, of random znodes of the pre-created set",
		kinds: []string{"get", "set"},
		setup: setupSet, prepare: prepareSet,
		op: func(w *worker) (int, time.Duration, error) {
			if w.rng.IntN(10) == 0 {
				_, err := w.conn.Set(w.pick(), w.p.value, -1)
				return 1, 0, err
			}
			data, _, err := w.conn.Get(w.pick())
			if err == nil && len(data) != w.p.valueSize {
				err = errWrongData
			}
			return 0, 0, err
		},
	},
	{
		name: "lock", unit: "acquisitions", about: "go-zookeeper's zk.Lock on one lock znode: Lock, then Unlock at once; latency is Lock's",
		setup: func(ctx context.Context, c *zk.Conn, p *plan) error {
			return createAll(ctx, c, []string{root + "/lock"}, nil, nil, nil)
		},
		prepare: func(w *worker) { w.lock = zk.NewLock(w.conn, root+"/lock", openACL) },
		op: func(w *worker) (int, time.Duration, error) {
			t0 := time.Now()
			if err := w.lock.Lock(); err != nil {
				return 0, 0, fmt.Errorf("lock: %w", err)
			}
			lat := time.Since(t0)
			if w.holders.Add(1) != 1 {
				w.violations.Add(1)
			}
			w.holders.Add(-1)
			if err := w.lock.Unlock(); err != nil {
				return 0, lat, fmt.Errorf("unlock: %w", err)
			}
			return 0, lat, nil
		},
	},
	{
		name: "watch", unit: "notifications", watch: true,
		about: "-watchers sessions watch one znode (getData with watch); a writer sets it; latency from the write's reply to each notification",
		setup: func(ctx context.Context, c *zk.Conn, p *plan) error {
			return createAll(ctx, c, []string{root + "/watch"}, p.value, nil, nil)
		},
	},
}

func multiWorkload(n int) *workload {
	return &workload{
		name: fmt.Sprintf("multi%d", n), unit: "multis",
		about: fmt.Sprintf("multi of %d setData (version -1) of the worker's own znodes", n),
		setup: func(ctx context.Context, c *zk.Conn, p *plan) error {
			var paths []string
			for w := 0; w < p.workers(); w++ {
				for i := 0; i < n; i++ {
					paths = append(paths, p.multiPath(w, i))
				}
			}
			return createAll(ctx, c, []string{root + "/multi"}, nil, paths, p.value)
		},
		prepare: func(w *worker) {
			for i := 0; i < n; i++ {
				w.multi = append(w.multi, &zk.SetDataRequest{Path: w.p.multiPath(w.idx, i), Data: w.p.value, Version: -1})
			}
		},
		op: func(w *worker) (int, time.Duration, error) {
			res, err := w.conn.Multi(w.multi...)
			if err == nil {
				for _, r := range res {
					if r.Error != nil {
						return 0, 0, fmt.Errorf("multi: %w", r.Error)
					}
				}
			}
			return 0, 0, err
		},
	}
}

func setupSet(ctx context.Context, c *zk.Conn, p *plan) error {
	return createAll(ctx, c, []string{root + "/set"}, nil, seqPaths(p.znodes, p.setPath), p.value)
}

func prepareSet(w *worker) {
	w.paths = seqPaths(w.p.znodes, w.p.setPath)
}

func seqPaths(n int, f func(int) string) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = f(i)
	}
	return s
}

// workloadByName returns the workload called name, or nil.
func workloadByName(name string) *workload {
	for _, w := range workloads {
		if w.name == name {
			return w
		}
	}
	return nil
}

func workloadNames() []string {
	var n []string
	for _, w := range workloads {
		n = append(n, w.name)
	}
	return n
}

// createAll creates root (if missing), then parents (with parentData), then
// leaves with leafData, in multis of 100 from a few goroutines sharing c.
func createAll(ctx context.Context, c *zk.Conn, parents []string, parentData []byte, leaves []string, leafData []byte) error {
	for _, p := range append([]string{root}, parents...) {
		data := parentData
		if p == root {
			data = nil
		}
		if _, err := c.Create(p, data, 0, openACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	const batch = 100
	jobs := make(chan []string)
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for paths := range jobs {
				ops := make([]any, len(paths))
				for i, p := range paths {
					ops[i] = &zk.CreateRequest{Path: p, Data: leafData, Acl: openACL}
				}
				res, err := c.Multi(ops...)
				if err == nil {
					for _, r := range res {
						if r.Error != nil {
							err = r.Error
							break
						}
					}
				}
				if err != nil {
					select {
					case errs <- fmt.Errorf("create %s..: %w", paths[0], err):
					default:
					}
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := 0; i < len(leaves); i += batch {
		select {
		case jobs <- leaves[i:min(i+batch, len(leaves))]:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// errName names an error for the error counts: go-zookeeper's errors are
// sentinels with fixed texts; others are cut short.
func errName(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}
