package fleet

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/internal/smtest"
)

// recordSink is an EventSink that keeps what it is given.
type recordSink struct {
	mu     sync.Mutex
	maps   []*Map
	events []Event
}

var _ EventSink = (*recordSink)(nil)

func (r *recordSink) Applied(m *Map, events []Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maps = append(r.maps, m)
	r.events = append(r.events, events...)
}

func (r *recordSink) take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func (r *recordSink) last() *Map {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.maps) == 0 {
		return nil
	}
	return r.maps[len(r.maps)-1]
}

func (r *recordSink) count(kind EventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// harness drives one state machine on a real Pebble store in a temporary
// directory, without a NodeHost: entries are handed to Update as
// Dragonboat would, one index after another.
type harness struct {
	t     testing.TB
	dir   string
	sm    *StateMachine
	sink  *recordSink
	index uint64
	now   int64
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), sink: &recordSink{}, now: 1_700_000_000_000}
	h.open()
	t.Cleanup(func() { _ = h.sm.Close() })
	return h
}

func (h *harness) open() {
	h.t.Helper()
	h.sm = New(Config{Dir: h.dir, Sink: h.sink}, SystemShardID, 1)
	idx, err := h.sm.Open(nil)
	if err != nil {
		h.t.Fatalf("Open: %v", err)
	}
	h.index = idx
}

// reopen closes the state machine and opens a new one on the same store.
func (h *harness) reopen() {
	h.t.Helper()
	if err := h.sm.Close(); err != nil {
		h.t.Fatalf("Close: %v", err)
	}
	h.open()
}

// batch applies raw entries as one Update and returns the replies.
func (h *harness) batch(cmds ...[]byte) []Reply {
	h.t.Helper()
	entries := make([]sm.Entry, len(cmds))
	for i, c := range cmds {
		h.index++
		entries[i] = sm.Entry{Index: h.index, Cmd: c}
	}
	out, err := h.sm.Update(entries)
	if err != nil {
		h.t.Fatalf("Update: %v", err)
	}
	replies := make([]Reply, len(out))
	for i, e := range out {
		r, err := ParseResult(e.Result)
		if err != nil {
			h.t.Fatalf("entry %d: %v", e.Index, err)
		}
		if e.Result.Value != uint64(r.Version) {
			h.t.Errorf("entry %d: Result.Value %d, reply version %d", e.Index, e.Result.Value, r.Version)
		}
		replies[i] = r
	}
	return replies
}

// do applies one command as one Update. It checks what every command
// must keep: the map's invariants hold, and a refusal (or a command that
// found the map as it asked) changes neither the map's records nor its
// version.
func (h *harness) do(c Command) Reply {
	h.t.Helper()
	before := h.m()
	h.now += 1000
	r := h.batch(Encode(c, h.now))[0]
	after := h.m()
	if err := after.check(); err != nil {
		h.t.Fatalf("%s: invariant broken: %v", c.Kind(), err)
	}
	if !r.Changed {
		if !sameRecords(before, after) || before.Version() != after.Version() {
			h.t.Fatalf("%s: %v, yet the map changed", c.Kind(), r)
		}
	} else if after.Version() != before.Version()+1 || r.Version != after.Version() {
		h.t.Fatalf("%s: changed the map from version %d to %d (reply %d), want one step", c.Kind(), before.Version(), after.Version(), r.Version)
	}
	if r.Changed && r.Code != CodeOK {
		h.t.Fatalf("%s: refused yet changed: %v", c.Kind(), r)
	}
	return r
}

// ok applies c and fails unless it changed the map.
func (h *harness) ok(c Command) Reply {
	h.t.Helper()
	r := h.do(c)
	if r.Code != CodeOK || !r.Changed {
		h.t.Fatalf("%s %+v: %v, want a change", c.Kind(), c, r)
	}
	return r
}

// refused applies c and fails unless it was refused with code.
func (h *harness) refused(code Code, c Command) Reply {
	h.t.Helper()
	r := h.do(c)
	if r.Code != code {
		h.t.Fatalf("%s %+v: %v, want %s", c.Kind(), c, r, code)
	}
	if r.Detail == "" {
		h.t.Errorf("%s: refused (%s) without a detail", c.Kind(), r.Code)
	}
	return r
}

func (h *harness) m() *Map {
	h.t.Helper()
	v, err := h.sm.Lookup(MapQuery{})
	if err != nil {
		h.t.Fatalf("Lookup: %v", err)
	}
	return v.(*Map)
}

func (h *harness) status() Status {
	h.t.Helper()
	v, err := h.sm.Lookup(StatusQuery{})
	if err != nil {
		h.t.Fatalf("Lookup: %v", err)
	}
	return v.(Status)
}

func (h *harness) cell(name string) Cell {
	h.t.Helper()
	c, ok := h.m().Cell(name)
	if !ok {
		h.t.Fatalf("no cell %q", name)
	}
	return c
}

// dump returns every key and value in the store, in key order.
func (h *harness) dump() []string {
	h.t.Helper()
	h.sm.mu.RLock()
	defer h.sm.mu.RUnlock()
	return smtest.Dump(h.t, h.sm.mu.db)
}

func sameRecords(a, b *Map) bool {
	ra, rb := records(a), records(b)
	return slices.EqualFunc(ra, rb, func(x, y record) bool { return bytes.Equal(x.k, y.k) && bytes.Equal(x.v, y.v) })
}

// A fleet for the tests: members 1..5 on hosts 10.0.0.1..5, Raft on 7000.
func member(id uint64) MemberSpec {
	return MemberSpec{ID: id, RaftAddr: fmt.Sprintf("10.0.0.%d:7000", id), ClientHost: fmt.Sprintf("10.0.0.%d", id)}
}

func newFleet(t testing.TB, n uint64) *harness {
	t.Helper()
	h := newHarness(t)
	for id := uint64(1); id <= n; id++ {
		h.ok(&AddMember{Member: member(id)})
	}
	return h
}

func voters(ids ...uint64) Placement { return Placement{Voters: ids} }

func create(name string, port uint16, p Placement) *CreateCell {
	return &CreateCell{Name: name, Placement: p, ClientPort: port}
}
