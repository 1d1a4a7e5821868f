package cache

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/internal/wire"
	"github.com/zkraft/zkraft/client/resumable"
	"github.com/zkraft/zkraft/client/session"
	"github.com/zkraft/zkraft/jute"
)

// Mode is how a cache is kept current.
type Mode int

const (
	// WatchFrom: zkraft's resumable watch, gap-free across reconnections
	// to any member; every change arrives with its own zxid.
	WatchFrom Mode = iota + 1
	// PersistentWatch: a persistent recursive watch (ZooKeeper 3.6+), and
	// a re-read of the tree after every reconnection.
	PersistentWatch
)

func (m Mode) String() string {
	switch m {
	case WatchFrom:
		return "watchFrom"
	case PersistentWatch:
		return "persistent watch"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// EventType is the kind of a Change.
type EventType int

const (
	Created EventType = iota + 1
	Changed
	Deleted
)

func (t EventType) String() string {
	switch t {
	case Created:
		return "created"
	case Changed:
		return "changed"
	case Deleted:
		return "deleted"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Node is a cached znode.
type Node struct {
	Path string
	Data []byte
	// Stat is the node's Stat as last read. Its children fields
	// (NumChildren, Cversion, Pzxid) are as of that read: a cache follows
	// data, creations and deletions; use Children for the children.
	Stat zk.Stat
}

// Change is one change the cache applied.
type Change struct {
	// Zxid of the change; see the package doc for how exact it is in each
	// mode. Successive changes' zxids never decrease.
	Zxid int64
	Type EventType
	Path string
	// Node is the node as the cache read it after the change (for
	// Deleted, as it was before): its Stat.Mzxid says which version of
	// the data it holds, which is the change's own unless the node changed
	// again since (a later Change follows). Nil when the node was already
	// gone when read (a Deleted follows).
	Node *Node
}

// Options configure a cache. The zero value is the default.
type Options struct {
	// OnChange, if set, is called with every change after the initial
	// load, in order, from the cache's own goroutine, after the cache
	// applied it; it must return promptly.
	OnChange func(Change)
	// Depth limits a TreeCache to the root and that many levels below
	// it; 0 means the whole subtree.
	Depth int
	// Persistent forces persistent watches even against a server that
	// offers watchFrom.
	Persistent bool
}

// engine keeps one subtree (or one node) current.
type engine struct {
	s     *session.Session
	root  string
	depth int // -1: the root only; 0: unlimited; n: n levels below
	opts  Options
	wc    *wire.Conn

	cancel context.CancelFunc
	done   chan struct{}

	// Owned by run.
	known    map[string]int64 // path -> zxid of the read that last determined it (load or resync)
	listed   map[string]int64 // path -> zxid of the read of its children (load or resync)
	lastEmit int64
	loaded   bool // the initial load is installed

	mu struct {
		sync.Mutex
		nodes   map[string]*Node
		kids    map[string]map[string]bool
		zxid    int64
		mode    Mode
		err     error
		changed chan struct{}
	}
}

var errFatal = errors.New("cache: stopped")

func start(ctx context.Context, s *session.Session, root string, depth int, opts Options) (*engine, error) {
	if root == "" || root[0] != '/' || (len(root) > 1 && strings.HasSuffix(root, "/")) {
		return nil, fmt.Errorf("cache: bad path %q", root)
	}
	var auth []wire.Auth
	for _, a := range s.Auth() {
		auth = append(auth, wire.Auth{Scheme: a.Scheme, Auth: a.Auth})
	}
	wc, err := wire.Dial(ctx, wire.Config{Servers: s.Servers(), Timeout: s.Timeout(), Auth: auth})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	e := &engine{s: s, root: root, depth: depth, opts: opts, wc: wc, cancel: cancel, done: make(chan struct{})}
	e.mu.changed = make(chan struct{})
	first := make(chan error, 1)
	go e.run(rctx, first)
	select {
	case err := <-first:
		if err != nil {
			e.close()
			return nil, err
		}
		return e, nil
	case <-ctx.Done():
		e.close()
		return nil, context.Cause(ctx)
	}
}

func (e *engine) close() error {
	e.cancel()
	<-e.done
	return nil
}

func (e *engine) run(ctx context.Context, first chan<- error) {
	defer close(e.done)
	defer e.wc.Close()
	reported := false
	report := func(err error) {
		if !reported {
			reported = true
			first <- err
		}
	}
	mode := PersistentWatch
	if !e.opts.Persistent && e.offersWatchFrom(ctx) {
		mode = WatchFrom
	}
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		var err error
		if mode == WatchFrom {
			err = e.runWatchFrom(ctx, report)
			if errors.Is(err, resumable.ErrUnsupported) {
				mode = PersistentWatch
				continue
			}
		} else {
			err = e.runPersistent(ctx, report)
		}
		if ctx.Err() != nil {
			break
		}
		var compacted *resumable.ErrCompacted
		if !reported || (err != nil && !errors.As(err, &compacted) && errors.Is(err, errFatal)) {
			report(err)
			e.setErr(err)
			return
		}
		// Compacted history or a passing failure: read the tree again and
		// go on from there.
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		backoff = min(2*backoff, 2*time.Second)
	}
	report(context.Cause(ctx))
}

func (e *engine) setErr(err error) {
	e.mu.Lock()
	e.mu.err = err
	e.mu.Unlock()
}

// offersWatchFrom reads zkraft's feature node.
func (e *engine) offersWatchFrom(ctx context.Context) bool {
	var resp jute.GetDataResponse
	_, err := e.do(ctx, jute.OpGetData, &jute.GetDataRequest{Path: "/zookeeper/zkraft"}, &resp)
	return err == nil && strings.Contains(string(resp.Data), "watchFrom=1")
}

// do retries a read across lost connections.
func (e *engine) do(ctx context.Context, op jute.OpCode, req, resp jute.Record) (int64, error) {
	for {
		z, err := e.wc.Do(ctx, op, req, resp)
		if !errors.Is(err, wire.ErrConnLost) {
			return z, err
		}
		if ctx.Err() != nil {
			return 0, context.Cause(ctx)
		}
	}
}

// inScope says whether the cache follows path.
func (e *engine) inScope(path string) bool {
	if path == e.root {
		return true
	}
	if e.depth < 0 {
		return false
	}
	rel := ""
	switch {
	case e.root == "/":
		rel = path[1:]
	case strings.HasPrefix(path, e.root+"/"):
		rel = path[len(e.root)+1:]
	default:
		return false
	}
	return e.depth == 0 || strings.Count(rel, "/")+1 <= e.depth
}

func (e *engine) level(path string) int {
	if path == e.root {
		return 0
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(path, e.root), "/")
	return strings.Count(rel, "/") + 1
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

func parent(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}

// read reads one node: the node or nil, and the reply's zxid. A read
// served from a member behind zxid atLeast is repeated after a sync.
func (e *engine) read(ctx context.Context, path string, atLeast int64) (*Node, int64, error) {
	for attempt := 0; ; attempt++ {
		var resp jute.GetDataResponse
		z, err := e.do(ctx, jute.OpGetData, &jute.GetDataRequest{Path: path}, &resp)
		if z < atLeast && attempt < 3 && (err == nil || errors.Is(err, jute.ErrNoNode)) {
			if _, err := e.do(ctx, jute.OpSync, &jute.SyncRequest{Path: path}, nil); err != nil && !errors.Is(err, jute.ErrNoNode) {
				return nil, 0, err
			}
			continue
		}
		if errors.Is(err, jute.ErrNoNode) {
			return nil, z, nil
		}
		if err != nil {
			return nil, 0, err
		}
		return &Node{Path: path, Data: resp.Data, Stat: zkStat(resp.Stat)}, z, nil
	}
}

func zkStat(s jute.Stat) zk.Stat {
	return zk.Stat{Czxid: s.Czxid, Mzxid: s.Mzxid, Ctime: s.Ctime, Mtime: s.Mtime, Version: s.Version,
		Cversion: s.Cversion, Aversion: s.Aversion, EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength,
		NumChildren: s.NumChildren, Pzxid: s.Pzxid}
}

// snapshot is one read of the whole scope.
type snapshot struct {
	nodes  map[string]*Node
	known  map[string]int64
	listed map[string]int64
	first  int64 // zxid of the first read: every read reflects at least it
	last   int64 // zxid of the last read
}

func (e *engine) walk(ctx context.Context) (*snapshot, error) {
	sn := &snapshot{nodes: map[string]*Node{}, known: map[string]int64{}, listed: map[string]int64{}}
	var visit func(path string) error
	visit = func(path string) error {
		n, z, err := e.read(ctx, path, 0)
		if err != nil {
			return err
		}
		if sn.first == 0 {
			sn.first = z
		}
		sn.last = max(sn.last, z)
		sn.known[path] = z
		if n == nil {
			return nil
		}
		sn.nodes[path] = n
		if e.depth < 0 || (e.depth > 0 && e.level(path) >= e.depth) {
			return nil
		}
		var resp jute.GetChildrenResponse
		z, err = e.do(ctx, jute.OpGetChildren, &jute.GetChildrenRequest{Path: path}, &resp)
		if errors.Is(err, jute.ErrNoNode) {
			delete(sn.nodes, path)
			sn.known[path] = z
			return nil
		}
		if err != nil {
			return err
		}
		sn.listed[path] = z
		sn.last = max(sn.last, z)
		sort.Strings(resp.Children)
		for _, k := range resp.Children {
			if path == "/" && k == "zookeeper" {
				continue // the server's own tree
			}
			if err := visit(join(path, k)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := visit(e.root); err != nil {
		return nil, err
	}
	return sn, nil
}

// knownAt is the zxid up to which the cache's last full read already
// reflects path.
func (e *engine) knownAt(path string) int64 {
	if z, ok := e.known[path]; ok {
		return z
	}
	return e.listed[parent(path)]
}

// install replaces the cache's contents with sn, emitting the
// differences as changes (none the first time).
func (e *engine) install(sn *snapshot, initial bool) {
	var changes []Change
	e.mu.Lock()
	if !initial {
		for p, n := range sn.nodes {
			old := e.mu.nodes[p]
			switch {
			case old == nil:
				changes = append(changes, Change{Zxid: n.Stat.Mzxid, Type: Created, Path: p, Node: n})
			case old.Stat.Czxid != n.Stat.Czxid:
				changes = append(changes, Change{Zxid: n.Stat.Czxid, Type: Deleted, Path: p, Node: old},
					Change{Zxid: n.Stat.Mzxid, Type: Created, Path: p, Node: n})
			case old.Stat.Mzxid != n.Stat.Mzxid:
				changes = append(changes, Change{Zxid: n.Stat.Mzxid, Type: Changed, Path: p, Node: n})
			}
		}
		for p, old := range e.mu.nodes {
			if sn.nodes[p] == nil {
				z := sn.known[p]
				if z == 0 {
					z = sn.listed[parent(p)]
				}
				if z == 0 {
					z = sn.last
				}
				changes = append(changes, Change{Zxid: z, Type: Deleted, Path: p, Node: old})
			}
		}
		sort.SliceStable(changes, func(i, j int) bool { return changes[i].Zxid < changes[j].Zxid })
	}
	e.mu.nodes = sn.nodes
	e.mu.kids = map[string]map[string]bool{}
	for p := range sn.nodes {
		if p != e.root {
			e.addKidLocked(p)
		}
	}
	e.mu.zxid = max(e.mu.zxid, sn.last)
	e.mu.Unlock()
	e.known, e.listed, e.loaded = sn.known, sn.listed, true
	for _, c := range changes {
		e.emit(c)
	}
	e.bump()
}

func (e *engine) addKidLocked(p string) {
	dir := parent(p)
	m := e.mu.kids[dir]
	if m == nil {
		m = map[string]bool{}
		e.mu.kids[dir] = m
	}
	m[p[strings.LastIndexByte(p, '/')+1:]] = true
}

func (e *engine) setNode(n *Node) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mu.nodes[n.Path] = n
	if n.Path != e.root {
		e.addKidLocked(n.Path)
	}
}

func (e *engine) removeNode(path string) *Node {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.mu.nodes[path]
	delete(e.mu.nodes, path)
	if m := e.mu.kids[parent(path)]; m != nil {
		delete(m, path[strings.LastIndexByte(path, '/')+1:])
	}
	return old
}

func (e *engine) cached(path string) *Node {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.nodes[path]
}

// emit delivers c, its zxid raised to the last one's if need be (only
// estimates can be lower).
func (e *engine) emit(c Change) {
	if c.Zxid < e.lastEmit {
		c.Zxid = e.lastEmit
	}
	e.lastEmit = c.Zxid
	e.mu.Lock()
	e.mu.zxid = max(e.mu.zxid, c.Zxid)
	e.mu.Unlock()
	if e.opts.OnChange != nil {
		e.opts.OnChange(c)
	}
}

func (e *engine) bump() {
	e.mu.Lock()
	close(e.mu.changed)
	e.mu.changed = make(chan struct{})
	e.mu.Unlock()
}

// applyExact applies one change whose zxid the server gave.
func (e *engine) applyExact(ctx context.Context, z int64, typ jute.EventType, path string, memo map[string]memoRead) error {
	if typ == jute.EventNodeChildrenChanged || !e.inScope(path) || z <= e.knownAt(path) {
		return nil
	}
	switch typ {
	case jute.EventNodeCreated, jute.EventNodeDataChanged:
		m, ok := memo[path]
		if !ok || m.zxid < z {
			n, r, err := e.read(ctx, path, z)
			if err != nil {
				return err
			}
			m = memoRead{n, r}
			memo[path] = m
		}
		t := Created
		if typ == jute.EventNodeDataChanged {
			t = Changed
		}
		if m.node != nil {
			e.setNode(m.node)
		}
		e.emit(Change{Zxid: z, Type: t, Path: path, Node: m.node})
	case jute.EventNodeDeleted:
		delete(memo, path)
		old := e.removeNode(path)
		e.emit(Change{Zxid: z, Type: Deleted, Path: path, Node: old})
	}
	return nil
}

type memoRead struct {
	node *Node
	zxid int64
}

func (e *engine) watchMode() int32 {
	if e.depth < 0 {
		return jute.WatchModeNode
	}
	return jute.WatchModeSubtree
}

// runWatchFrom loads the scope, then follows the resumable watch from
// before the load until the watch ends.
func (e *engine) runWatchFrom(ctx context.Context, report func(error)) error {
	e.setMode(WatchFrom)
	sn, err := e.walk(ctx)
	if err != nil {
		return err
	}
	w, err := resumable.WatchFrom(ctx, e.s.Servers(), e.root, sn.first, e.watchMode() == jute.WatchModeSubtree,
		resumable.Options{SessionTimeout: e.s.Timeout()})
	if err != nil {
		return err
	}
	defer w.Close()
	e.install(sn, !e.loaded)
	report(nil)
	memo := map[string]memoRead{}
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-e.wc.Wake():
			e.wc.Drain() // the read connection's reconnections: nothing to do
		case tx, ok := <-w.Txns:
			if !ok {
				return w.Err()
			}
			for _, ch := range tx.Changes {
				if err := e.applyExact(ctx, tx.Zxid, ch.Type, ch.Path, memo); err != nil {
					return err
				}
			}
			e.mu.Lock()
			e.mu.zxid = max(e.mu.zxid, tx.Zxid)
			e.mu.Unlock()
			if len(memo) > 4096 {
				clear(memo)
			}
			e.bump()
		}
	}
}

func (e *engine) setMode(m Mode) {
	e.mu.Lock()
	e.mu.mode = m
	e.mu.Unlock()
}

// runPersistent adds a persistent watch, loads the scope, and applies
// each notification by reading the node; after a reconnection it reads
// the scope again and applies the differences.
func (e *engine) runPersistent(ctx context.Context, report func(error)) error {
	e.setMode(PersistentWatch)
	mode := jute.AddWatchModePersistentRecursive
	if e.depth < 0 {
		mode = jute.AddWatchModePersistent
	}
	if err := e.wc.AddWatch(ctx, e.root, mode); err != nil {
		if errors.Is(err, jute.ErrUnimplemented) {
			return fmt.Errorf("%w: the server has no persistent watches (ZooKeeper 3.6+) and no watchFrom", errFatal)
		}
		return err
	}
	e.wc.Drain() // whatever came before the watch, the load covers
	sn, err := e.walk(ctx)
	if err != nil {
		return err
	}
	e.install(sn, !e.loaded)
	report(nil)
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-e.wc.Wake():
		}
		resync := false
		for _, ev := range e.wc.Drain() {
			if ev.Kind != wire.Notify {
				resync = true
				continue
			}
			if resync {
				continue // the re-read covers it
			}
			if err := e.applyNotification(ctx, ev); err != nil {
				return err
			}
		}
		if resync {
			sn, err := e.walk(ctx)
			if err != nil {
				return err
			}
			e.install(sn, false)
		}
		e.bump()
	}
}

// applyNotification applies one persistent-watch notification.
func (e *engine) applyNotification(ctx context.Context, ev wire.Event) error {
	if ev.Type == jute.EventNodeChildrenChanged || !e.inScope(ev.Path) {
		return nil
	}
	if ev.Zxid > 0 {
		// The server says which change it was (ZooKeeper 3.9+, zkraft).
		return e.applyExact(ctx, ev.Zxid, ev.Type, ev.Path, map[string]memoRead{})
	}
	n, r, err := e.read(ctx, ev.Path, 0)
	if err != nil {
		return err
	}
	old := e.cached(ev.Path)
	switch {
	case n == nil && old == nil:
	case n == nil:
		e.removeNode(ev.Path)
		e.emit(Change{Zxid: r, Type: Deleted, Path: ev.Path, Node: old})
	case old == nil:
		e.setNode(n)
		e.emit(Change{Zxid: n.Stat.Mzxid, Type: Created, Path: ev.Path, Node: n})
	case old.Stat.Czxid != n.Stat.Czxid:
		e.setNode(n)
		e.emit(Change{Zxid: n.Stat.Czxid, Type: Deleted, Path: ev.Path, Node: old})
		e.emit(Change{Zxid: n.Stat.Mzxid, Type: Created, Path: ev.Path, Node: n})
	case old.Stat.Mzxid != n.Stat.Mzxid:
		e.setNode(n)
		e.emit(Change{Zxid: n.Stat.Mzxid, Type: Changed, Path: ev.Path, Node: n})
	}
	return nil
}

// The accessors.

func (e *engine) get(path string) (Node, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.mu.nodes[path]
	if n == nil {
		return Node{}, false
	}
	return *n, true
}

func (e *engine) children(path string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for k := range e.mu.kids[path] {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (e *engine) nodes() []Node {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Node, 0, len(e.mu.nodes))
	for _, n := range e.mu.nodes {
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func (e *engine) zxid() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.zxid
}

func (e *engine) mode() Mode {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.mode
}

func (e *engine) err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.err
}

func (e *engine) changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.changed
}
