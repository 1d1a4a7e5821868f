package raftsm

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/internal/smtest"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// recordSink is an EventSink that keeps every batch of events.
type recordSink struct {
	mu      sync.Mutex
	batches [][]Event
	zxids   []int64
}

var _ EventSink = (*recordSink)(nil)

func (r *recordSink) Applied(shardID uint64, zxid int64, events []Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, append([]Event(nil), events...))
	r.zxids = append(r.zxids, zxid)
}

func (r *recordSink) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, b := range r.batches {
		out = append(out, b...)
	}
	return out
}

func (r *recordSink) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches, r.zxids = nil, nil
}

// harness drives one state machine directly, without a NodeHost.
type harness struct {
	t     testing.TB
	dir   string
	sm    *StateMachine
	sink  *recordSink
	index uint64
}

func newHarness(t testing.TB, dir string) *harness {
	t.Helper()
	h := &harness{t: t, dir: dir, sink: &recordSink{}}
	h.sm = New(Config{Dir: dir, Options: znode.Options{ExtendedTypes: true}, Sink: h.sink}, 1, 1)
	idx, err := h.sm.Open(nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	h.index = idx
	t.Cleanup(func() { _ = h.sm.Close() })
	return h
}

// reopen closes the state machine and opens a new one on the same dir.
func (h *harness) reopen() uint64 {
	h.t.Helper()
	if err := h.sm.Close(); err != nil {
		h.t.Fatalf("Close: %v", err)
	}
	h.sm = New(Config{Dir: h.dir, Options: znode.Options{ExtendedTypes: true}, Sink: h.sink}, 1, 1)
	idx, err := h.sm.Open(nil)
	if err != nil {
		h.t.Fatalf("reopen: %v", err)
	}
	h.index = idx
	return idx
}

// apply applies commands as one Update, one entry each, and returns the
// decoded replies.
func (h *harness) apply(cmds ...*Command) []*Reply {
	h.t.Helper()
	entries := make([]sm.Entry, len(cmds))
	for i, c := range cmds {
		h.index++
		entries[i] = sm.Entry{Index: h.index, Cmd: EncodeCommand(c)}
	}
	out, err := h.sm.Update(entries)
	if err != nil {
		h.t.Fatalf("Update: %v", err)
	}
	replies := make([]*Reply, len(out))
	for i, e := range out {
		r := new(Reply)
		if err := jute.Unmarshal(e.Result.Data, r); err != nil {
			h.t.Fatalf("entry %d: reply does not decode: %v", e.Index, err)
		}
		if e.Result.Value != uint64(r.Zxid) {
			h.t.Errorf("entry %d: Result.Value %d, reply zxid %d", e.Index, e.Result.Value, r.Zxid)
		}
		replies[i] = r
	}
	return replies
}

// apply1 applies one command and returns its reply.
func (h *harness) apply1(c *Command) *Reply { return h.apply(c)[0] }

// view runs fn under Lookup.
func (h *harness) view(fn func(v View) (any, error)) any {
	h.t.Helper()
	out, err := h.sm.Lookup(ReadFunc(fn))
	if err != nil {
		h.t.Fatalf("Lookup: %v", err)
	}
	return out
}

// viewLocked is view with a LockedReadFunc.
func (h *harness) viewLocked(fn func(v View) (any, error)) any {
	h.t.Helper()
	out, err := h.sm.Lookup(LockedReadFunc(fn))
	if err != nil {
		h.t.Fatalf("Lookup: %v", err)
	}
	return out
}

func (h *harness) zxid() int64 {
	return h.view(func(v View) (any, error) { return v.Zxid(), nil }).(int64)
}

func (h *harness) node(path string) *znode.Node {
	h.t.Helper()
	return h.view(func(v View) (any, error) { return v.Tree().Get(path) }).(*znode.Node)
}

// dump returns every key and value in the store, in key order.
func (h *harness) dump() []string {
	h.t.Helper()
	h.sm.mu.RLock()
	defer h.sm.mu.RUnlock()
	return smtest.Dump(h.t, h.sm.mu.db)
}

// tree renders the data tree: path, client stat, data, ACL, one line each.
func (h *harness) tree() string {
	h.t.Helper()
	return h.view(func(v View) (any, error) {
		var b strings.Builder
		var walk func(p string) error
		walk = func(p string) error {
			n, err := v.Tree().Get(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%s %+v %q %v\n", p, n.Stat(), n.Data, n.ACL)
			kids, err := v.Tree().Children(p)
			if err != nil {
				return err
			}
			for _, k := range kids {
				if err := walk(znode.Join(p, k)); err != nil {
					return err
				}
			}
			return nil
		}
		return b.String(), walk("/")
	}).(string)
}

// Command builders.

func createSession(id int64, timeout int32) *Command {
	return &Command{Kind: KindCreateSession, Session: id, Timeout: timeout, Time: 1000}
}

func request(session int64, op jute.OpCode, req jute.Record) *Command {
	return &Command{Kind: KindRequest, Session: session, Time: 5000, Op: op, Body: jute.Marshal(req)}
}

func create(session int64, path string, flags int32) *Command {
	return request(session, jute.OpCreate, &jute.CreateRequest{Path: path, Data: []byte("v"), ACL: znode.OpenACL, Flags: flags})
}

func setData(session int64, path, data string, version int32) *Command {
	return request(session, jute.OpSetData, &jute.SetDataRequest{Path: path, Data: []byte(data), Version: version})
}

func deleteNode(session int64, path string, version int32) *Command {
	return request(session, jute.OpDelete, &jute.DeleteRequest{Path: path, Version: version})
}

func multi(session int64, ops ...jute.MultiOp) *Command {
	return request(session, jute.OpMulti, &jute.MultiRequest{Ops: ops})
}

func closeSession(id int64) *Command {
	return &Command{Kind: KindCloseSession, Session: id, Time: 9000}
}

func expire(ids ...int64) *Command {
	return &Command{Kind: KindExpireSessions, Sessions: ids, Time: 9000}
}

func keepAlive(ids ...int64) *Command {
	return &Command{Kind: KindKeepAlive, Sessions: ids, Time: 9000}
}
