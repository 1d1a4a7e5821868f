package raftsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"reflect"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/internal/smtest"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// save takes a snapshot of h's current state.
func (h *harness) save() []byte {
	h.t.Helper()
	return smtest.Save(h.t, h.sm)
}

func TestSnapshotRoundTrip(t *testing.T) {
	src := newHarness(t, t.TempDir())
	src.apply(createSession(0x1, 1000), createSession(0x2, 2000))
	src.apply(create(0x1, "/a", 0), create(0x1, "/a/e", jute.FlagEphemeral), create(0x2, "/a/s", jute.FlagEphemeralSequential),
		setData(0x1, "/a", "data", -1), create(0x1, "/a", 0))
	// Prepare pins the state: what is applied after it is not in the
	// snapshot.
	ctx, err := src.sm.PrepareSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	wantDump, wantTree, wantZxid, wantIndex := src.dump(), src.tree(), src.zxid(), src.index
	src.apply(create(0x1, "/later", 0), closeSession(0x2))
	var buf bytes.Buffer
	if err := src.sm.SaveSnapshot(ctx, &buf, make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	snap := buf.Bytes()

	dst := newHarness(t, t.TempDir())
	// State the snapshot must replace entirely.
	dst.apply(createSession(0x9, 1000), create(0x9, "/old", jute.FlagEphemeral), create(0x9, "/zz", 0))
	if err := dst.sm.RecoverFromSnapshot(bytes.NewReader(snap), make(chan struct{})); err != nil {
		t.Fatalf("RecoverFromSnapshot: %v", err)
	}
	if got := dst.dump(); !reflect.DeepEqual(got, wantDump) {
		t.Errorf("recovered store differs\n got %v\nwant %v", got, wantDump)
	}
	if dst.tree() != wantTree || dst.zxid() != wantZxid || dst.sm.mu.applied != wantIndex {
		t.Errorf("recovered tree/zxid/applied differ: zxid %d applied %d", dst.zxid(), dst.sm.mu.applied)
	}
	sessions := dst.view(func(v View) (any, error) { return v.Sessions() }).([]SessionInfo)
	if want := []SessionInfo{{ID: 1, Timeout: 1000}, {ID: 2, Timeout: 2000}}; !reflect.DeepEqual(sessions, want) {
		t.Errorf("recovered sessions %v", sessions)
	}
	// Durable: a reopen reports the snapshot's index and state.
	if idx := dst.reopen(); idx != wantIndex {
		t.Errorf("reopen after recover = %d, want %d", idx, wantIndex)
	}
	if !reflect.DeepEqual(dst.dump(), wantDump) {
		t.Errorf("store changed across reopen after recover")
	}
	// The ephemeral index came along: closing session 2 deletes its node.
	dst.index = wantIndex
	if r := dst.apply1(closeSession(0x2)); r.Err != 0 || dst.node("/a/s0000000001") != nil {
		t.Errorf("close after recover: %+v", r)
	}
	// A second snapshot of the recovered replica is the same bytes, minus
	// what was applied since: recover it again and compare with src.
	src2 := newHarness(t, t.TempDir())
	if err := src2.sm.RecoverFromSnapshot(bytes.NewReader(snap), make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	if again := src2.save(); !bytes.Equal(again, snap) {
		t.Errorf("snapshot of a recovered replica differs from the original")
	}
}

func TestSnapshotCorrupt(t *testing.T) {
	src := newHarness(t, t.TempDir())
	src.apply(createSession(0x1, 1000), create(0x1, "/a", 0), create(0x1, "/a/b", 0))
	snap := src.save()

	cases := map[string][]byte{
		"empty":            nil,
		"bad magic":        append([]byte("ZKRAFTS0"), snap[8:]...),
		"no terminator":    snap[:len(snap)-1],
		"huge length":      append(append([]byte{}, snapshotMagic...), 0xff, 0xff, 0xff, 0xff, 0x03),
		"over limit":       append(append([]byte{}, snapshotMagic...), 0x80, 0x80, 0x80, 0x80, 0x10),
		"bad varint":       append(append([]byte{}, snapshotMagic...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"no applied index": append(append([]byte{}, snapshotMagic...), 2, 'n', 0, 0, 0),
		"short applied index": append(append([]byte{}, snapshotMagic...),
			byte(len(keyApplied)), 'm', ':', 'a', 'p', 'p', 'l', 'i', 'e', 'd', 1, 7,
			byte(len(keyZxid)), 'm', ':', 'z', 'x', 'i', 'd', 8, 0, 0, 0, 0, 0, 0, 0, 1, 0),
	}
	for _, cut := range []int{1, 7, 8, 9, 10, len(snap) / 3, len(snap) / 2, len(snap) - 2} {
		cases[fmt.Sprintf("truncated at %d", cut)] = snap[:cut]
	}
	for name, b := range cases {
		dst := newHarness(t, t.TempDir())
		err := dst.sm.RecoverFromSnapshot(bytes.NewReader(b), make(chan struct{}))
		if !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: RecoverFromSnapshot = %v, want ErrBadSnapshot", name, err)
		}
		if dst.sm.mu.applied != 0 {
			t.Errorf("%s: applied index %d after a failed recovery", name, dst.sm.mu.applied)
		}
	}
}

// failingReader returns err after n bytes.
type failingReader struct {
	r   io.Reader
	n   int
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	if len(p) > f.n {
		p = p[:f.n]
	}
	n, err := f.r.Read(p)
	f.n -= n
	return n, err
}

// TestSnapshotRecoverInterrupted: a recovery that fails after some batches
// were committed must not leave the snapshot's applied index over a partial
// tree, or a restart would report the snapshot as applied.
func TestSnapshotRecoverInterrupted(t *testing.T) {
	defer func(old int) { recoverBatchBytes = old }(recoverBatchBytes)
	recoverBatchBytes = 1 // commit after every key

	src := newHarness(t, t.TempDir())
	src.apply(createSession(0x1, 1000))
	for i := 0; i < 20; i++ {
		src.apply(create(0x1, fmt.Sprintf("/n%02d", i), 0))
	}
	snap := src.save()

	dst := newHarness(t, t.TempDir())
	dst.apply(create(0, "/x", 0), create(0, "/y", 0))
	// Cut in the node keys, after the meta keys ('m' < 'n') were read.
	err := dst.sm.RecoverFromSnapshot(&failingReader{r: bytes.NewReader(snap), n: len(snap) * 2 / 3, err: io.ErrUnexpectedEOF}, make(chan struct{}))
	if err == nil {
		t.Fatal("interrupted recovery succeeded")
	}
	if idx := dst.reopen(); idx == src.index {
		t.Errorf("after an interrupted recovery Open reports the snapshot's index %d over a partial tree", idx)
	}
	// A full recovery afterwards is exact.
	if err := dst.sm.RecoverFromSnapshot(bytes.NewReader(snap), make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dst.dump(), src.dump()) {
		t.Errorf("recovery after an interrupted one differs")
	}
	if idx := dst.reopen(); idx != src.index {
		t.Errorf("reopen = %d, want %d", idx, src.index)
	}
}

// TestSnapshotStopped: closing done aborts with Dragonboat's own sentinel,
// unwrapped (Dragonboat compares with ==, anything else is fatal).
func TestSnapshotStopped(t *testing.T) {
	src := newHarness(t, t.TempDir())
	src.apply(createSession(0x1, 1000), create(0x1, "/a", 0))
	snap := src.save()
	done := make(chan struct{})
	close(done)

	ctx, err := src.sm.PrepareSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := src.sm.SaveSnapshot(ctx, io.Discard, done); err != sm.ErrSnapshotStopped {
		t.Errorf("SaveSnapshot with done closed = %v, want sm.ErrSnapshotStopped", err)
	}
	dst := newHarness(t, t.TempDir())
	if err := dst.sm.RecoverFromSnapshot(bytes.NewReader(snap), done); err != sm.ErrSnapshotStopped {
		t.Errorf("RecoverFromSnapshot with done closed = %v, want sm.ErrSnapshotStopped", err)
	}
	if err := src.sm.SaveSnapshot("not a snapshot", io.Discard, make(chan struct{})); !errors.Is(err, ErrBadSnapshot) {
		t.Errorf("SaveSnapshot(bad ctx) = %v", err)
	}
	// A failing writer is reported.
	ctx, _ = src.sm.PrepareSnapshot()
	if err := src.sm.SaveSnapshot(ctx, &failingWriter{}, make(chan struct{})); err == nil {
		t.Errorf("SaveSnapshot to a failing writer succeeded")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// workload returns a deterministic pseudo-random mix of every command kind.
func workload(seed int64, n int) []*Command {
	r := rand.New(rand.NewSource(seed))
	sessions := []int64{0x11, 0x22, 0x33, 0x44}
	paths := []string{"/", "/a", "/b", "/a/x", "/a/y", "/b/z", "/c"}
	pick := func(s []string) string { return s[r.Intn(len(s))] }
	name := func() string { return []string{"p", "q", "r", "s-"}[r.Intn(4)] }
	var out []*Command
	for _, s := range sessions {
		out = append(out, createSession(s, 1000))
	}
	for i := 0; i < n; i++ {
		s := sessions[r.Intn(len(sessions))]
		var c *Command
		switch k := r.Intn(20); {
		case k < 7:
			c = create(s, znode.Join(pick(paths), name()), int32(r.Intn(5)))
			if r.Intn(4) == 0 {
				c = create(s, pick(paths[1:]), 0)
			}
		case k < 10:
			c = deleteNode(s, pick(paths[1:]), -1)
		case k < 12:
			c = setData(s, pick(paths), fmt.Sprint(i), int32(r.Intn(3)-1))
		case k < 15:
			c = multi(s,
				jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: znode.Join(pick(paths), name()), ACL: znode.OpenACL, Flags: int32(r.Intn(4))}},
				jute.MultiOp{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: pick(paths), Data: []byte("m"), Version: -1}},
				jute.MultiOp{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: pick(paths[1:]), Version: -1}},
			)
		case k < 16:
			c = expire(sessions[r.Intn(len(sessions))], sessions[r.Intn(len(sessions))])
		case k < 17:
			c = closeSession(s)
		case k < 18:
			c = createSession(s, int32(1000+i))
		case k < 19:
			c = keepAlive(sessions...)
		default:
			c = request(s, jute.OpSetACL, &jute.SetACLRequest{Path: pick(paths), ACL: znode.OpenACL, Version: -1})
		}
		c.Time = int64(1000 + i)
		out = append(out, c)
	}
	return out
}

// TestDeterminism: the same entries give byte-identical stores, replies and
// events, whether they come in one Update or one at a time.
func TestDeterminism(t *testing.T) {
	cmds := workload(42, 600)
	one := newHarness(t, t.TempDir())
	many := newHarness(t, t.TempDir())
	var r1, r2 []*Reply
	for i := 0; i < len(cmds); i += 50 {
		end := min(i+50, len(cmds))
		r1 = append(r1, one.apply(cmds[i:end]...)...)
	}
	for _, c := range cmds {
		r2 = append(r2, many.apply1(c))
	}
	if !reflect.DeepEqual(r1, r2) {
		for i := range r1 {
			if !reflect.DeepEqual(r1[i], r2[i]) {
				t.Fatalf("reply %d differs: %+v vs %+v", i, r1[i], r2[i])
			}
		}
	}
	d1, d2 := one.dump(), many.dump()
	if !reflect.DeepEqual(d1, d2) {
		t.Fatalf("stores differ (%d vs %d keys)", len(d1), len(d2))
	}
	if !reflect.DeepEqual(one.sink.all(), many.sink.all()) {
		t.Errorf("events differ")
	}
	// The workload exercises success and failure alike.
	var ok, failed int
	for _, r := range r1 {
		if r.Err == 0 {
			ok++
		} else {
			failed++
		}
	}
	if ok < 100 || failed < 50 {
		t.Errorf("workload too one-sided: %d ok, %d failed", ok, failed)
	}
	t.Logf("%d commands, %d ok, %d failed, %d keys, zxid %d", len(cmds), ok, failed, len(d1), one.zxid())

	// The tree obeys the invariants the rules keep: numChildren is the
	// number of children, every ephemeral is indexed under its owner, and
	// every indexed path is an ephemeral of that owner.
	one.view(func(v View) (any, error) {
		var walk func(p string)
		walk = func(p string) {
			n, _ := v.Tree().Get(p)
			kids, _ := v.Tree().Children(p)
			if int(n.NumChildren) != len(kids) {
				t.Errorf("%s numChildren %d, has %d", p, n.NumChildren, len(kids))
			}
			if znode.KindOf(n.EphemeralOwner) == znode.OwnerSession {
				eph, _ := v.Tree().Ephemerals(n.EphemeralOwner)
				found := false
				for _, e := range eph {
					found = found || e == p
				}
				if !found {
					t.Errorf("%s not in the ephemeral index of %#x", p, n.EphemeralOwner)
				}
				if _, ok, _ := v.Session(n.EphemeralOwner); !ok {
					t.Errorf("%s owned by dead session %#x", p, n.EphemeralOwner)
				}
			}
			for _, k := range kids {
				walk(znode.Join(p, k))
			}
		}
		walk("/")
		for _, s := range []int64{0x11, 0x22, 0x33, 0x44} {
			eph, _ := v.Tree().Ephemerals(s)
			for _, p := range eph {
				n, _ := v.Tree().Get(p)
				if n == nil || n.EphemeralOwner != s {
					t.Errorf("index lists %s for %#x, node %+v", p, s, n)
				}
			}
		}
		return nil, nil
	})

	// A replica recovered from a snapshot of one, fed the same tail, ends
	// byte-identical too.
	snap := one.save()
	tail := workload(7, 100)
	rec := newHarness(t, t.TempDir())
	if err := rec.sm.RecoverFromSnapshot(bytes.NewReader(snap), make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	rec.index = one.index
	for _, c := range tail {
		one.apply1(c)
		rec.apply1(c)
	}
	if !reflect.DeepEqual(one.dump(), rec.dump()) {
		t.Errorf("recovered replica diverged")
	}
}
