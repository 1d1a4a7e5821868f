package raftsm

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// TestOpenInitialTree: an empty directory opens at index 0 with the tree
// ZooKeeper's DataTree constructor builds.
func TestOpenInitialTree(t *testing.T) {
	h := newHarness(t, t.TempDir())
	if h.index != 0 {
		t.Fatalf("Open on an empty dir returned %d", h.index)
	}
	if z := h.zxid(); z != 0 {
		t.Errorf("zxid %d", z)
	}
	for _, tc := range []struct {
		path     string
		stat     jute.Stat
		acl      []jute.ACL
		children []string
	}{
		// A fresh ZooKeeper shows cversion -1 for / and -2 for /zookeeper
		// (2*stored - numChildren with stored 0).
		{"/", jute.Stat{Cversion: -1, NumChildren: 1}, znode.OpenACL, []string{"zookeeper"}},
		{"/zookeeper", jute.Stat{Cversion: -3, NumChildren: 3}, znode.OpenACL, []string{"config", "quota", "zkraft"}},
		{"/zookeeper/quota", jute.Stat{}, znode.OpenACL, []string{}},
		{"/zookeeper/config", jute.Stat{Aversion: -1}, znode.ReadACLUnsafe, []string{}},
	} {
		out := h.view(func(v View) (any, error) {
			r := znode.Reader{KV: v.Tree()}
			n, kids, err := r.GetChildren(tc.path)
			if err != nil {
				return nil, err
			}
			return []any{n, kids}, nil
		}).([]any)
		n, kids := out[0].(*znode.Node), out[1].([]string)
		if got := n.Stat(); got != tc.stat {
			t.Errorf("%s stat\n got %+v\nwant %+v", tc.path, got, tc.stat)
		}
		if !reflect.DeepEqual(n.ACL, tc.acl) {
			t.Errorf("%s acl %v, want %v", tc.path, n.ACL, tc.acl)
		}
		if !reflect.DeepEqual(kids, tc.children) {
			t.Errorf("%s children %v, want %v", tc.path, kids, tc.children)
		}
		// DataTree uses new byte[0]: clients get an empty buffer, not null.
		if n.Data == nil || len(n.Data) != 0 {
			t.Errorf("%s data %#v, want empty", tc.path, n.Data)
		}
	}
	// The reserved config node stays readable but not writable.
	if r := h.apply1(setData(0, "/zookeeper/config", "x", -1)); r.Err != jute.ErrNoAuth {
		t.Errorf("setData /zookeeper/config = %v", r.Err)
	}
	// A child create keeps the root's empty data empty.
	h.apply1(create(0, "/a", 0))
	if n := h.node("/"); n.Data == nil {
		t.Errorf("root data became null after a child create")
	}
}

type step struct {
	name    string
	cmd     *Command
	err     jute.ErrCode
	zxid    int64
	events  []Event
	checkFn func(t *testing.T, h *harness, r *Reply)
}

func watch(zxid int64, typ jute.EventType, path string) Event {
	return Event{Kind: EventWatch, Zxid: zxid, Type: typ, Path: path}
}

func runSteps(t *testing.T, h *harness, steps []step) {
	t.Helper()
	for _, s := range steps {
		h.sink.reset()
		r := h.apply1(s.cmd)
		if r.Err != s.err || r.Zxid != s.zxid {
			t.Errorf("%s: reply err %v zxid %d, want %v %d", s.name, r.Err, r.Zxid, s.err, s.zxid)
		}
		if got := eventsWithoutACL(h.sink.all()); !reflect.DeepEqual(got, s.events) {
			t.Errorf("%s: events\n got %+v\nwant %+v", s.name, got, s.events)
		}
		if len(h.sink.zxids) != 1 || h.sink.zxids[0] != s.zxid {
			t.Errorf("%s: sink called with zxids %v, want [%d]", s.name, h.sink.zxids, s.zxid)
		}
		if z := h.zxid(); z != s.zxid {
			t.Errorf("%s: state zxid %d, want %d", s.name, z, s.zxid)
		}
		if s.checkFn != nil {
			s.checkFn(t, h, r)
		}
	}
}

func TestUpdate(t *testing.T) {
	h := newHarness(t, t.TempDir())
	const s1, s2, gone = 0x101, 0x102, 0x999
	runSteps(t, h, []step{
		{name: "create session", cmd: createSession(s1, 30000), zxid: 1,
			events: []Event{{Kind: EventSessionCreated, Zxid: 1, Session: s1, Timeout: 30000}},
			checkFn: func(t *testing.T, h *harness, _ *Reply) {
				out := h.view(func(v View) (any, error) {
					to, ok, err := v.Session(s1)
					return []any{to, ok}, err
				}).([]any)
				if to, ok := out[0].(int32), out[1].(bool); !ok || to != 30000 {
					t.Errorf("session timeout %d ok %v", to, ok)
				}
			}},
		{name: "create session again", cmd: createSession(s1, 30000), err: jute.ErrNodeExists, zxid: 1},
		{name: "create session 0", cmd: createSession(0, 30000), err: jute.ErrNodeExists, zxid: 1},
		{name: "second session", cmd: createSession(s2, 4000), zxid: 2,
			events: []Event{{Kind: EventSessionCreated, Zxid: 2, Session: s2, Timeout: 4000}}},
		{name: "create", cmd: create(s1, "/a", 0), zxid: 3,
			events: []Event{watch(3, jute.EventNodeCreated, "/a"), watch(3, jute.EventNodeChildrenChanged, "/")},
			checkFn: func(t *testing.T, h *harness, r *Reply) {
				var resp jute.CreateResponse
				if err := jute.Unmarshal(r.Body, &resp); err != nil || resp.Path != "/a" {
					t.Errorf("create body %+v %v", resp, err)
				}
				if n := h.node("/a"); n.Czxid != 3 || n.Ctime != 5000 {
					t.Errorf("/a czxid %d ctime %d", n.Czxid, n.Ctime)
				}
			}},
		{name: "failed create consumes a zxid", cmd: create(s1, "/a", 0), err: jute.ErrNodeExists, zxid: 4},
		{name: "create2 returns a stat", cmd: request(s1, jute.OpCreate2, &jute.CreateRequest{Path: "/a/e", ACL: znode.OpenACL, Flags: jute.FlagEphemeral}), zxid: 5,
			events: []Event{watch(5, jute.EventNodeCreated, "/a/e"), watch(5, jute.EventNodeChildrenChanged, "/a")},
			checkFn: func(t *testing.T, h *harness, r *Reply) {
				var resp jute.Create2Response
				if err := jute.Unmarshal(r.Body, &resp); err != nil || resp.Path != "/a/e" || resp.Stat.EphemeralOwner != s1 || resp.Stat.Czxid != 5 {
					t.Errorf("create2 body %+v %v", resp, err)
				}
			}},
		{name: "other session's ephemeral", cmd: create(s2, "/e2", jute.FlagEphemeral), zxid: 6,
			events: []Event{watch(6, jute.EventNodeCreated, "/e2"), watch(6, jute.EventNodeChildrenChanged, "/")}},
		{name: "setData", cmd: setData(s1, "/a", "x", 0), zxid: 7,
			events: []Event{watch(7, jute.EventNodeDataChanged, "/a")},
			checkFn: func(t *testing.T, h *harness, r *Reply) {
				var resp jute.SetDataResponse
				if err := jute.Unmarshal(r.Body, &resp); err != nil || resp.Stat.Version != 1 || resp.Stat.Mzxid != 7 {
					t.Errorf("setData body %+v %v", resp, err)
				}
			}},
		{name: "setData bad version", cmd: setData(s1, "/a", "y", 0), err: jute.ErrBadVersion, zxid: 8},
		{name: "setACL fires nothing", cmd: request(s1, jute.OpSetACL, &jute.SetACLRequest{Path: "/a", ACL: znode.OpenACL, Version: 0}), zxid: 9},
		{name: "unknown session", cmd: create(gone, "/z", 0), err: jute.ErrSessionExpired, zxid: 10},
		{name: "marshalling error", cmd: &Command{Kind: KindRequest, Session: s1, Op: jute.OpError}, err: jute.ErrMarshallingError, zxid: 11},
		{name: "multi", cmd: multi(s1,
			jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/m", ACL: znode.OpenACL}},
			jute.MultiOp{Type: jute.OpCreate2, Req: &jute.CreateRequest{Path: "/m/c", ACL: znode.OpenACL}},
			jute.MultiOp{Type: jute.OpCreateContainer, Req: &jute.CreateRequest{Path: "/m/box", ACL: znode.OpenACL, Flags: jute.FlagContainer}},
			jute.MultiOp{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: "/m/c", Version: -1}},
		), zxid: 12,
			events: []Event{
				watch(12, jute.EventNodeCreated, "/m"), watch(12, jute.EventNodeChildrenChanged, "/"),
				watch(12, jute.EventNodeCreated, "/m/c"), watch(12, jute.EventNodeChildrenChanged, "/m"),
				watch(12, jute.EventNodeCreated, "/m/box"), watch(12, jute.EventNodeChildrenChanged, "/m"),
				watch(12, jute.EventNodeDeleted, "/m/c"), watch(12, jute.EventNodeChildrenChanged, "/m"),
			},
			checkFn: func(t *testing.T, h *harness, r *Reply) {
				var resp jute.MultiResponse
				if err := jute.Unmarshal(r.Body, &resp); err != nil {
					t.Fatalf("multi body: %v", err)
				}
				var types []jute.OpCode
				for _, x := range resp.Results {
					types = append(types, x.Type)
				}
				want := []jute.OpCode{jute.OpCreate, jute.OpCreate2, jute.OpCreate2, jute.OpDelete} // 3.9: create2 keeps its Stat
				if !reflect.DeepEqual(types, want) {
					t.Errorf("multi result types %v, want %v", types, want)
				}
				if n := h.node("/m"); n == nil || n.Czxid != 12 || n.NumChildren != 1 || n.Cversion != 2 {
					t.Errorf("/m after multi %+v", n)
				}
			}},
		{name: "failed multi", cmd: multi(s1,
			jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/f", ACL: znode.OpenACL}},
			jute.MultiOp{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: "/nope", Version: -1}},
			jute.MultiOp{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: "/a", Version: -1}},
		), zxid: 13,
			checkFn: func(t *testing.T, h *harness, r *Reply) {
				var resp jute.MultiResponse
				if err := jute.Unmarshal(r.Body, &resp); err != nil {
					t.Fatalf("multi body: %v", err)
				}
				var codes []jute.ErrCode
				for _, x := range resp.Results {
					codes = append(codes, x.Err)
				}
				if want := []jute.ErrCode{0, jute.ErrNoNode, jute.ErrRuntimeInconsistency}; !reflect.DeepEqual(codes, want) {
					t.Errorf("failed multi codes %v, want %v", codes, want)
				}
				if h.node("/f") != nil {
					t.Errorf("failed multi created /f")
				}
			}},
		{name: "keep-alive for live sessions only", cmd: keepAlive(s1, gone, s2), zxid: 13,
			events: []Event{{Kind: EventKeepAlive, Zxid: 13, Sessions: []int64{s1, s2}}}},
		{name: "keep-alive for nobody", cmd: keepAlive(gone), zxid: 13},
		{name: "delete", cmd: deleteNode(s1, "/m/box", -1), zxid: 14,
			events: []Event{watch(14, jute.EventNodeDeleted, "/m/box"), watch(14, jute.EventNodeChildrenChanged, "/m")}},
		{name: "close session", cmd: closeSession(s1), zxid: 15,
			events: []Event{
				watch(15, jute.EventNodeDeleted, "/a/e"), watch(15, jute.EventNodeChildrenChanged, "/a"),
				{Kind: EventSessionClosed, Zxid: 15, Session: s1},
			},
			checkFn: func(t *testing.T, h *harness, _ *Reply) {
				if h.node("/a/e") != nil {
					t.Errorf("ephemeral survived close")
				}
				if h.node("/e2") == nil {
					t.Errorf("other session's ephemeral deleted")
				}
				if a := h.node("/a"); a.Pzxid != 15 {
					t.Errorf("/a pzxid %d", a.Pzxid)
				}
			}},
		{name: "close again", cmd: closeSession(s1), err: jute.ErrSessionExpired, zxid: 15},
		{name: "write after close", cmd: create(s1, "/late", 0), err: jute.ErrSessionExpired, zxid: 16},
		{name: "session 0 may write", cmd: create(0, "/sys", 0), zxid: 17,
			events: []Event{watch(17, jute.EventNodeCreated, "/sys"), watch(17, jute.EventNodeChildrenChanged, "/")}},
	})
	sessions := h.view(func(v View) (any, error) { return v.Sessions() }).([]SessionInfo)
	if want := []SessionInfo{{ID: s2, Timeout: 4000}}; !reflect.DeepEqual(sessions, want) {
		t.Errorf("sessions %v, want %v", sessions, want)
	}
}

// TestUpdateBatch: several entries in one Update are one batch; the sink
// gets all their events once, in log order, with the last zxid.
func TestUpdateBatch(t *testing.T) {
	h := newHarness(t, t.TempDir())
	replies := h.apply(
		createSession(0x1, 1000),
		create(0x1, "/a", 0),
		create(0x1, "/a", 0),
		&Command{Kind: KindRequest, Session: 0x1, Op: jute.OpError},
		keepAlive(0x1),
		create(0x1, "/a/b", jute.FlagEphemeral),
	)
	var got []int64
	for _, r := range replies {
		got = append(got, r.Zxid)
	}
	if want := []int64{1, 2, 3, 4, 4, 5}; !reflect.DeepEqual(got, want) {
		t.Errorf("reply zxids %v, want %v", got, want)
	}
	if len(h.sink.batches) != 1 || h.sink.zxids[0] != 5 {
		t.Fatalf("sink called %d times with zxids %v", len(h.sink.batches), h.sink.zxids)
	}
	want := []Event{
		{Kind: EventSessionCreated, Zxid: 1, Session: 1, Timeout: 1000},
		watch(2, jute.EventNodeCreated, "/a"), watch(2, jute.EventNodeChildrenChanged, "/"),
		{Kind: EventKeepAlive, Zxid: 4, Sessions: []int64{1}},
		watch(5, jute.EventNodeCreated, "/a/b"), watch(5, jute.EventNodeChildrenChanged, "/a"),
	}
	if !reflect.DeepEqual(eventsWithoutACL(h.sink.batches[0]), want) {
		t.Errorf("events\n got %+v\nwant %+v", h.sink.batches[0], want)
	}
	// An empty entry (Dragonboat's no-op) advances the index only.
	h.index++
	if _, err := h.sm.Update([]sm.Entry{{Index: h.index}}); err != nil {
		t.Fatal(err)
	}
	if h.zxid() != 5 {
		t.Errorf("empty entry changed zxid")
	}
}

// TestExpire: each expired session is closed with its own zxid; unknown ids
// are skipped.
func TestExpire(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.apply(createSession(0x1, 1000), createSession(0x2, 1000), createSession(0x3, 1000))
	h.apply(create(0x1, "/p", 0), create(0x1, "/p/a", jute.FlagEphemeral), create(0x1, "/b", jute.FlagEphemeral),
		create(0x2, "/p/c", jute.FlagEphemeralSequential), create(0x3, "/keep", jute.FlagEphemeral))
	// zxid is now 8.
	h.sink.reset()
	r := h.apply1(expire(0x1, 0x999, 0x2))
	if r.Err != 0 || r.Zxid != 10 {
		t.Errorf("expire reply %+v, want zxid 10", r)
	}
	want := []Event{
		watch(9, jute.EventNodeDeleted, "/b"), watch(9, jute.EventNodeChildrenChanged, "/"),
		watch(9, jute.EventNodeDeleted, "/p/a"), watch(9, jute.EventNodeChildrenChanged, "/p"),
		{Kind: EventSessionClosed, Zxid: 9, Session: 0x1},
		watch(10, jute.EventNodeDeleted, "/p/c0000000001"), watch(10, jute.EventNodeChildrenChanged, "/p"),
		{Kind: EventSessionClosed, Zxid: 10, Session: 0x2},
	}
	if got := eventsWithoutACL(h.sink.all()); !reflect.DeepEqual(got, want) {
		t.Errorf("events\n got %+v\nwant %+v", got, want)
	}
	if p := h.node("/p"); p.NumChildren != 0 || p.Pzxid != 10 || p.Cversion != 2 {
		t.Errorf("/p after expiry %+v", p)
	}
	if h.node("/keep") == nil {
		t.Errorf("live session's ephemeral deleted")
	}
	sessions := h.view(func(v View) (any, error) { return v.Sessions() }).([]SessionInfo)
	if want := []SessionInfo{{ID: 3, Timeout: 1000}}; !reflect.DeepEqual(sessions, want) {
		t.Errorf("sessions %v", sessions)
	}
	// Expiring only unknown sessions changes nothing.
	if r := h.apply1(expire(0x999)); r.Zxid != 10 {
		t.Errorf("empty expiry reply %+v", r)
	}
}

// TestReopen: the applied index, zxid, tree and sessions survive Close.
func TestReopen(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.apply(createSession(0x1, 1000), create(0x1, "/a", 0), create(0x1, "/a/e", jute.FlagEphemeral))
	h.apply(setData(0x1, "/a", "x", -1), create(0x1, "/a", 0))
	before, dump, zxid := h.tree(), h.dump(), h.zxid()
	if idx := h.reopen(); idx != 5 {
		t.Fatalf("reopen returned %d, want 5", idx)
	}
	if h.zxid() != zxid || h.tree() != before || !reflect.DeepEqual(h.dump(), dump) {
		t.Errorf("state changed across reopen")
	}
	// Work continues where it stopped.
	if r := h.apply1(create(0x1, "/b", 0)); r.Zxid != zxid+1 || r.Err != 0 {
		t.Errorf("after reopen %+v", r)
	}
	// Sync is allowed at any time.
	if err := h.sm.Sync(); err != nil {
		t.Errorf("Sync: %v", err)
	}
}

func TestUpdateErrors(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.apply(createSession(0x1, 1000))
	for _, tc := range []struct {
		name    string
		entries []sm.Entry
		want    error
	}{
		{"index not increasing", []sm.Entry{{Index: 1, Cmd: EncodeCommand(create(0x1, "/x", 0))}}, ErrAppliedIndex},
		{"index going back in a batch", []sm.Entry{
			{Index: 2, Cmd: EncodeCommand(create(0x1, "/x", 0))},
			{Index: 2, Cmd: EncodeCommand(create(0x1, "/y", 0))},
		}, ErrAppliedIndex},
		{"garbage", []sm.Entry{{Index: 2, Cmd: []byte{1, 2, 3}}}, ErrBadCommand},
		{"bad version", []sm.Entry{{Index: 2, Cmd: append([]byte{0, 0, 0, 9}, EncodeCommand(create(0x1, "/x", 0))[4:]...)}}, ErrBadCommand},
		{"bad kind", []sm.Entry{{Index: 2, Cmd: EncodeCommand(&Command{Kind: 99})}}, ErrBadCommand},
		{"bad body", []sm.Entry{{Index: 2, Cmd: EncodeCommand(&Command{Kind: KindRequest, Session: 0x1, Op: jute.OpCreate, Body: []byte{0, 0}})}}, ErrBadCommand},
		{"bad multi body", []sm.Entry{{Index: 2, Cmd: EncodeCommand(&Command{Kind: KindRequest, Session: 0x1, Op: jute.OpMulti, Body: []byte{0, 0, 0, 99}})}}, ErrBadCommand},
		{"read op", []sm.Entry{{Index: 2, Cmd: EncodeCommand(request(0x1, jute.OpGetData, &jute.GetDataRequest{Path: "/"}))}}, ErrBadCommand},
		{"good entry then bad", []sm.Entry{
			{Index: 2, Cmd: EncodeCommand(create(0x1, "/x", 0))},
			{Index: 3, Cmd: []byte{0}},
		}, ErrBadCommand},
	} {
		dump := h.dump()
		h.sink.reset()
		_, err := h.sm.Update(tc.entries)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Update = %v, want %v", tc.name, err, tc.want)
		}
		if !reflect.DeepEqual(h.dump(), dump) {
			t.Errorf("%s: failed Update changed the store", tc.name)
		}
		if len(h.sink.batches) != 0 {
			t.Errorf("%s: failed Update delivered events", tc.name)
		}
		if h.sm.mu.applied != 1 || h.zxid() != 1 {
			t.Errorf("%s: applied %d zxid %d after failure", tc.name, h.sm.mu.applied, h.zxid())
		}
	}
}

func TestCommandRoundTrip(t *testing.T) {
	for _, c := range []*Command{
		{Kind: KindRequest, Session: -5, Time: 1 << 40, Op: jute.OpCreate, Auth: []jute.ID{{Scheme: "digest", ID: "a:b"}, {Scheme: "ip", ID: "1.2.3.4"}}, Sessions: []int64{}, Body: []byte("body")},
		{Kind: KindCreateSession, Session: 7, Timeout: 30000, Auth: []jute.ID{}, Sessions: []int64{}},
		{Kind: KindExpireSessions, Sessions: []int64{1, 2, -3}, Auth: []jute.ID{}},
		{Kind: KindKeepAlive, Sessions: []int64{}, Auth: []jute.ID{}, Body: []byte{}},
		{Kind: KindExpireSessions, Sessions: []int64{4, 5}, Seen: []int64{9, 10}, Auth: []jute.ID{}, Owner: 1 << 50},
	} {
		b := EncodeCommand(c)
		if len(b) != cap(b) || !bytes.Equal(b, jute.Marshal(c)) {
			// EncodeCommand sizes its buffer exactly, and writes what
			// Encode writes.
			t.Errorf("%s: EncodeCommand wrote %d bytes in a buffer of %d, or not what Marshal writes", c.Kind, len(b), cap(b))
		}
		// AppendCommand writes the same after what dst holds, in dst's
		// buffer when it has room.
		dst := make([]byte, 3, 3+len(b))
		copy(dst, "pre")
		if a := AppendCommand(dst, c); string(a[:3]) != "pre" || !bytes.Equal(a[3:], b) || &a[0] != &dst[0] {
			t.Errorf("%s: AppendCommand wrote %x, want pre%x in dst's buffer", c.Kind, a, b)
		}
		if a := AppendCommand(append(make([]byte, 0, 1), 'p'), c); string(a[:1]) != "p" || !bytes.Equal(a[1:], b) {
			t.Errorf("%s: AppendCommand into a full buffer wrote %x", c.Kind, a)
		}
		got, err := DecodeCommand(b)
		if err != nil {
			t.Fatalf("DecodeCommand(%v): %v", c.Kind, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("round trip %s\n got %+v\nwant %+v", c.Kind, got, c)
		}
	}
	// Every truncation of a command is an error, never a panic.
	b := EncodeCommand(&Command{Kind: KindRequest, Session: 1, Op: jute.OpCreate, Auth: []jute.ID{{Scheme: "digest", ID: "x:y"}}, Sessions: []int64{1}, Body: []byte("abc")})
	for i := 0; i < len(b); i++ {
		if _, err := DecodeCommand(b[:i]); err == nil {
			t.Errorf("truncated command (%d of %d bytes) decoded", i, len(b))
		}
	}
	// Absurd counts are rejected without allocating.
	huge := jute.NewWriter(64)
	huge.Int(commandVersion)
	huge.Int(int32(KindRequest))
	huge.Long(1)
	huge.Long(1)
	huge.Int(1)
	huge.Int(1 << 30)
	if _, err := DecodeCommand(huge.Bytes()); err == nil {
		t.Errorf("command with 2^30 auth ids decoded")
	}
	for _, k := range []Kind{KindRequest, KindCreateSession, KindCloseSession, KindExpireSessions, KindKeepAlive, 42} {
		if k.String() == "" {
			t.Errorf("Kind(%d) has no name", k)
		}
	}
}

func TestLookupErrors(t *testing.T) {
	h := newHarness(t, t.TempDir())
	if _, err := h.sm.Lookup("not a ReadFunc"); !errors.Is(err, ErrUnknownQuery) {
		t.Errorf("Lookup(string) = %v", err)
	}
	if err := h.sm.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sm.Lookup(ReadFunc(func(View) (any, error) { return nil, nil })); !errors.Is(err, ErrClosed) {
		t.Errorf("Lookup after Close = %v", err)
	}
	if err := h.sm.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close = %v", err)
	}
	if _, err := h.sm.PrepareSnapshot(); !errors.Is(err, ErrClosed) {
		t.Errorf("PrepareSnapshot after Close = %v", err)
	}
	if err := h.sm.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// eventsWithoutACL drops the ACLs and indexes of watch events so tables can
// list type and path; TestWatchEventACL checks the ACLs.
func eventsWithoutACL(evs []Event) []Event {
	if evs == nil {
		return nil
	}
	out := make([]Event, len(evs))
	for i, e := range evs {
		e.ACL = nil
		e.Index = 0
		out[i] = e
	}
	return out
}

// TestWatchEventACL: a watch event carries the ACL of the node it is about
// (the parent for NodeChildrenChanged), so a member can withhold it from a
// watcher without READ, as ZooKeeper 3.9 does.
func TestWatchEventACL(t *testing.T) {
	h := newHarness(t, t.TempDir())
	const s1 = 7
	h.apply(createSession(s1, 30000))
	secret := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "digest", ID: "u:x"}}}
	h.sink.reset()
	h.apply(request(s1, jute.OpCreate, &jute.CreateRequest{Path: "/s", ACL: secret}))
	evs := h.sink.all()
	if len(evs) != 2 || !reflect.DeepEqual(evs[0].ACL, secret) || !reflect.DeepEqual(evs[1].ACL, znode.OpenACL) {
		t.Fatalf("events %+v: want the node's ACL on NodeCreated and the root's on NodeChildrenChanged", evs)
	}
}

// TestExpireSkipsSessionsKeptAliveSinceTheLeaderLooked: an expiry carries,
// per session, the index of the last keep-alive the deciding leader had
// seen; a session kept alive after that (say, through a new leader while
// the old one was paused) stays.
func TestExpireSkipsSessionsKeptAliveSinceTheLeaderLooked(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.apply(createSession(7, 30000), createSession(8, 30000))
	seenIndex := int64(h.index) // the leader's view
	h.apply(&Command{Kind: KindKeepAlive, Sessions: []int64{7}})
	h.apply(&Command{Kind: KindExpireSessions, Sessions: []int64{7, 8}, Seen: []int64{seenIndex, seenIndex}})
	h.view(func(v View) (any, error) {
		if _, ok, _ := v.Session(7); !ok {
			t.Error("session 7 was kept alive after the leader's view but expired")
		}
		if _, ok, _ := v.Session(8); ok {
			t.Error("session 8 was not kept alive but survived")
		}
		return nil, nil
	})
}

// TestCheckImport: replicas compare the ensemble's import record with
// their own; equal marks it checked, different (or none) stops the replica.
func TestCheckImport(t *testing.T) {
	h := newHarness(t, t.TempDir())
	record := make([]byte, 32)
	record[7] = 1
	if err := h.sm.mu.db.Set(keyImport, record, pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	h.apply(&Command{Kind: KindCheckImport, Body: record})
	h.view(func(v View) (any, error) {
		if _, checked, _ := v.ImportRecord(); !checked {
			t.Error("matching import record not marked checked")
		}
		return nil, nil
	})
	other := append([]byte(nil), record...)
	other[7] = 2
	h.index++
	_, err := h.sm.Update([]sm.Entry{{Index: h.index, Cmd: EncodeCommand(&Command{Kind: KindCheckImport, Body: other})}})
	if !errors.Is(err, ErrImportMismatch) {
		t.Fatalf("different import record: %v, want ErrImportMismatch", err)
	}
}
