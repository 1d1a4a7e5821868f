package znode

import (
	"reflect"
	"testing"

	"github.com/zkraft/zkraft/jute"
)

// TestCreateModes creates one node of every CreateMode and checks the
// stored owner, the returned path and the client-visible ephemeralOwner.
func TestCreateModes(t *testing.T) {
	const session = 0x100
	for _, tc := range []struct {
		flags      int32
		ttl        int64
		wantPath   string
		wantOwner  int64
		wantKind   OwnerKind
		wantStatEO int64
	}{
		{jute.FlagPersistent, -1, "/p", 0, OwnerNone, 0},
		{jute.FlagEphemeral, -1, "/p", session, OwnerSession, session},
		{jute.FlagPersistentSequential, -1, "/p0000000000", 0, OwnerNone, 0},
		{jute.FlagEphemeralSequential, -1, "/p0000000000", session, OwnerSession, session},
		{jute.FlagContainer, -1, "/p", ContainerOwner, OwnerContainer, 0},
		{jute.FlagPersistentTTL, 5000, "/p", TTLOwner(5000), OwnerTTL, 0},
		{jute.FlagPersistentSequentialTTL, 5000, "/p0000000000", TTLOwner(5000), OwnerTTL, 0},
	} {
		kv := newTree()
		tx := txn(kv, 7)
		path, n, err := tx.Create("/p", []byte("x"), OpenACL, tc.flags, tc.ttl)
		if err != nil {
			t.Errorf("flags %d: %v", tc.flags, err)
			continue
		}
		if path != tc.wantPath {
			t.Errorf("flags %d: path %q, want %q", tc.flags, path, tc.wantPath)
		}
		stored := kv.nodes[path]
		if stored == nil {
			t.Fatalf("flags %d: %s not stored", tc.flags, path)
		}
		if stored.EphemeralOwner != tc.wantOwner || KindOf(stored.EphemeralOwner) != tc.wantKind {
			t.Errorf("flags %d: owner %#x (%v), want %#x (%v)", tc.flags, stored.EphemeralOwner,
				KindOf(stored.EphemeralOwner), tc.wantOwner, tc.wantKind)
		}
		if got := n.Stat().EphemeralOwner; got != tc.wantStatEO {
			t.Errorf("flags %d: client ephemeralOwner %#x, want %#x", tc.flags, got, tc.wantStatEO)
		}
		eph, _ := kv.Ephemerals(session)
		wantEph := []string(nil)
		if tc.wantKind == OwnerSession {
			wantEph = []string{path}
		}
		if !reflect.DeepEqual(eph, wantEph) {
			t.Errorf("flags %d: ephemerals %v, want %v", tc.flags, eph, wantEph)
		}
	}
}

func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		owner int64
		want  OwnerKind
	}{
		{0, OwnerNone},
		{1, OwnerSession},
		{0x0100000000000001, OwnerSession},
		{-0x8000000000000000, OwnerContainer},
		{TTLOwner(1), OwnerTTL},
		{TTLOwner(MaxTTL), OwnerTTL},
		{-0x00ff000000000000 - 1, OwnerSession}, // 0xff00ffffffffffff: feature bits set
		{-1, OwnerSession},                      // 0xffffffffffffffff
		{0x7f00000000000000, OwnerSession},
	} {
		if got := KindOf(tc.owner); got != tc.want {
			t.Errorf("KindOf(%#x) = %v, want %v", uint64(tc.owner), got, tc.want)
		}
	}
	if got := TTLOf(TTLOwner(0x36ee80)); got != 0x36ee80 {
		t.Errorf("TTLOf = %#x", got)
	}
	if uint64(TTLOwner(0x36ee80)) != 0xff000000_0036ee80 {
		t.Errorf("TTLOwner(0x36ee80) = %#x", uint64(TTLOwner(0x36ee80)))
	}
}

// TestCreateErrors covers the failures of create and the order of its
// checks (PrepRequestProcessor.pRequest2TxnCreate).
func TestCreateErrors(t *testing.T) {
	type setup func(t *testing.T, kv *memKV)
	none := func(*testing.T, *memKV) {}
	withA := func(t *testing.T, kv *memKV) { mustCreate(t, kv, 2, "/a", jute.FlagPersistent) }
	withEph := func(t *testing.T, kv *memKV) { mustCreate(t, kv, 2, "/e", jute.FlagEphemeral) }
	for _, tc := range []struct {
		name     string
		setup    setup
		path     string
		acl      []jute.ACL
		flags    int32
		ttl      int64
		ext      bool
		session  int64
		auth     []jute.ID
		rawTTL   bool // pass ttl as is; otherwise 0 means -1 for non-TTL flags
		want     jute.ErrCode
		wantPath string
	}{
		{name: "flag -1", path: "/x", flags: -1, want: jute.ErrBadArguments},
		{name: "flag 7", path: "/x", flags: 7, want: jute.ErrBadArguments},
		{name: "flag 7 before bad path", path: "x", flags: 7, want: jute.ErrBadArguments},
		{name: "ttl without extended types", path: "/x", flags: jute.FlagPersistentTTL, ttl: 10, want: jute.ErrUnimplemented},
		{name: "seq ttl without extended types", path: "/x", flags: jute.FlagPersistentSequentialTTL, ttl: 10, want: jute.ErrUnimplemented},
		{name: "unimplemented before bad ttl", path: "/x", flags: jute.FlagPersistentTTL, ttl: 0, want: jute.ErrUnimplemented},
		{name: "ttl 0", path: "/x", flags: jute.FlagPersistentTTL, ttl: 0, ext: true, want: jute.ErrBadArguments},
		{name: "ttl -1", path: "/x", flags: jute.FlagPersistentTTL, ttl: -1, ext: true, want: jute.ErrBadArguments},
		{name: "ttl too big", path: "/x", flags: jute.FlagPersistentTTL, ttl: MaxTTL + 1, ext: true, want: jute.ErrBadArguments},
		{name: "ttl max", path: "/x", flags: jute.FlagPersistentTTL, ttl: MaxTTL, ext: true, wantPath: "/x"},
		{name: "ttl on persistent", path: "/x", flags: jute.FlagPersistent, ttl: 0, rawTTL: true, want: jute.ErrBadArguments},
		{name: "ttl on container", path: "/x", flags: jute.FlagContainer, ttl: 5, ext: true, want: jute.ErrBadArguments},
		{name: "no slash", path: "x", want: jute.ErrBadArguments},
		{name: "empty path", path: "", want: jute.ErrBadArguments},
		{name: "NUL", path: "/a\x00b", want: jute.ErrBadArguments},
		{name: "NUL before missing parent", path: "/nope/a\x00", want: jute.ErrBadArguments},
		{name: "no parent", path: "/nope/x", want: jute.ErrNoNode},
		{name: "no parent, relative", path: "nope/x", want: jute.ErrNoNode},
		{name: "trailing slash, no parent", path: "/a/", want: jute.ErrNoNode},
		{name: "trailing slash", setup: withA, path: "/a/", want: jute.ErrBadArguments},
		{name: "trailing slash sequential", setup: withA, path: "/a/", flags: jute.FlagPersistentSequential, wantPath: "/a/0000000000"},
		{name: "root sequential", path: "/", flags: jute.FlagPersistentSequential, wantPath: "/0000000000"},
		{name: "root", path: "/", want: jute.ErrNodeExists},
		{name: "double slash", path: "//a", want: jute.ErrBadArguments},
		{name: "dot", path: "/.", want: jute.ErrBadArguments},
		{name: "dot sequential is fine", path: "/.", flags: jute.FlagPersistentSequential, wantPath: "/.0000000000"},
		{name: "dotdot", setup: withA, path: "/a/..", want: jute.ErrBadArguments},
		{name: "bad char", path: "/\x01", want: jute.ErrBadArguments},
		{name: "exists", setup: withA, path: "/a", want: jute.ErrNodeExists},
		{name: "reserved exists", path: "/zookeeper", want: jute.ErrNodeExists},
		{name: "child of ephemeral", setup: withEph, path: "/e/c", want: jute.ErrNoChildrenForEphemerals},
		{name: "child of ephemeral, sequential", setup: withEph, path: "/e/c", flags: jute.FlagEphemeralSequential, want: jute.ErrNoChildrenForEphemerals},
		{name: "exists before ephemeral parent", setup: withEph, path: "/e", want: jute.ErrNodeExists},
		{name: "child of container", setup: func(t *testing.T, kv *memKV) { mustCreate(t, kv, 2, "/c", jute.FlagContainer) }, path: "/c/x", wantPath: "/c/x"},
		{name: "child of ttl", setup: func(t *testing.T, kv *memKV) { mustCreate(t, kv, 2, "/t", jute.FlagPersistentTTL) }, path: "/t/x", ext: true, wantPath: "/t/x"},
		{name: "empty acl", path: "/x", acl: []jute.ACL{}, want: jute.ErrInvalidACL},
		{name: "invalid acl before no parent", path: "/nope/x", acl: []jute.ACL{}, want: jute.ErrInvalidACL},
		{name: "bad path before invalid acl", path: "x", acl: []jute.ACL{}, want: jute.ErrBadArguments},
		{name: "auth without ids", path: "/x", acl: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "auth"}}}, want: jute.ErrInvalidACL},
		{name: "auth with ip only", path: "/x", acl: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "auth"}}},
			auth: []jute.ID{{Scheme: "ip", ID: "127.0.0.1"}}, want: jute.ErrInvalidACL},
		{name: "bad digest", path: "/x", acl: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "digest", ID: "alice"}}}, want: jute.ErrInvalidACL},
		{name: "bad ip", path: "/x", acl: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "ip", ID: "1.2.3"}}}, want: jute.ErrInvalidACL},
		{name: "bad ip bits", path: "/x", acl: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "ip", ID: "1.2.3.4/33"}}}, want: jute.ErrInvalidACL},
		{name: "world other", path: "/x", acl: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "someone"}}}, want: jute.ErrInvalidACL},
		{name: "unknown scheme", path: "/x", acl: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "kerberos", ID: "x"}}}, want: jute.ErrInvalidACL},
		{name: "parent denies create", setup: func(t *testing.T, kv *memKV) {
			if _, _, err := txn(kv, 2).Create("/ro", nil, []jute.ACL{{Perms: jute.PermAll &^ jute.PermCreate, ID: jute.ID{Scheme: "world", ID: "anyone"}}}, 0, -1); err != nil {
				t.Fatal(err)
			}
		}, path: "/ro/x", want: jute.ErrNoAuth},
		{name: "noauth before node exists", setup: func(t *testing.T, kv *memKV) {
			tx := txn(kv, 2)
			if _, _, err := tx.Create("/ro", nil, []jute.ACL{{Perms: jute.PermRead, ID: jute.ID{Scheme: "world", ID: "anyone"}}}, 0, -1); err != nil {
				t.Fatal(err)
			}
			kv.nodes["/ro/x"] = &Node{ACL: OpenACL}
		}, path: "/ro/x", want: jute.ErrNoAuth},
		{name: "ephemeral without session", path: "/x", flags: jute.FlagEphemeral, session: -1, want: jute.ErrBadArguments},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := newTree()
			if tc.setup != nil {
				tc.setup(t, kv)
			} else {
				none(t, kv)
			}
			acl := tc.acl
			if acl == nil {
				acl = OpenACL
			}
			ttl := tc.ttl
			if ttl == 0 && !tc.rawTTL && tc.flags != jute.FlagPersistentTTL && tc.flags != jute.FlagPersistentSequentialTTL {
				ttl = -1
			}
			tx := txn(kv, 10)
			tx.Options.ExtendedTypes = tc.ext
			tx.Auth = tc.auth
			if tc.session == -1 {
				tx.Session = 0
			}
			before := kv.snapshot()
			writes := kv.writes
			path, _, err := tx.Create(tc.path, []byte("d"), acl, tc.flags, ttl)
			if got := code(err); got != tc.want {
				t.Fatalf("Create(%q, flags %d, ttl %d) = %v, want %v", tc.path, tc.flags, ttl, err, tc.want)
			}
			if tc.want != jute.ErrOK {
				if kv.writes != writes || !sameNodes(kv.nodes, before) {
					t.Errorf("failed create wrote to the store")
				}
				if len(tx.Triggers) != 0 {
					t.Errorf("failed create triggered %v", tx.Triggers)
				}
				return
			}
			if path != tc.wantPath {
				t.Errorf("path %q, want %q", path, tc.wantPath)
			}
		})
	}
}

// TestCreateStats checks the new node's stat, its parent's stored and
// client-visible stat, and the triggers.
func TestCreateStats(t *testing.T) {
	kv := newTree()
	mustCreate(t, kv, 2, "/a", jute.FlagPersistent)
	tx := &Txn{KV: kv, Zxid: 5, Time: 12345, Session: 0x100}
	path, n, err := tx.Create("/a/b", []byte("hello"), OpenACL, jute.FlagEphemeral, -1)
	if err != nil {
		t.Fatal(err)
	}
	want := jute.Stat{Czxid: 5, Mzxid: 5, Pzxid: 5, Ctime: 12345, Mtime: 12345, EphemeralOwner: 0x100, DataLength: 5}
	if got := n.Stat(); got != want {
		t.Errorf("new node stat\n got %+v\nwant %+v", got, want)
	}
	if got := kv.nodes[path].Stat(); got != want {
		t.Errorf("stored node stat\n got %+v\nwant %+v", got, want)
	}
	p := kv.nodes["/a"]
	if p.Cversion != 1 || p.Pzxid != 5 || p.NumChildren != 1 || p.Mzxid != 2 || p.Version != 0 {
		t.Errorf("parent after create: %+v", p)
	}
	if got := p.Stat().Cversion; got != 1 {
		t.Errorf("parent client cversion %d, want 1", got)
	}
	wantTrig := []Trigger{{Type: jute.EventNodeCreated, Path: "/a/b"}, {Type: jute.EventNodeChildrenChanged, Path: "/a"}}
	if !reflect.DeepEqual(withoutACL(tx.Triggers), wantTrig) {
		t.Errorf("triggers %v, want %v", tx.Triggers, wantTrig)
	}
	// Root: one child (/zookeeper) in a fresh tree, so clients see cversion -1,
	// as a fresh ZooKeeper shows for "/"; /zookeeper shows -2.
	if got := newTree().nodes["/"].Stat().Cversion; got != -1 {
		t.Errorf("fresh root cversion %d, want -1", got)
	}
	if got := newTree().nodes[ZooKeeperPath].Stat().Cversion; got != -2 {
		t.Errorf("fresh /zookeeper cversion %d, want -2", got)
	}
}

// TestSequentialCounter: the suffix is the parent's stored cversion, counts
// every create of every type, and is not reduced by deletes; clients see
// creates+deletes.
func TestSequentialCounter(t *testing.T) {
	kv := newTree()
	mustCreate(t, kv, 1, "/app", jute.FlagPersistent)
	zxid := int64(2)
	next := func() int64 { zxid++; return zxid }
	var got []string
	got = append(got, mustCreate(t, kv, next(), "/app/s-", jute.FlagPersistentSequential))
	mustCreate(t, kv, next(), "/app/plain", jute.FlagPersistent)
	got = append(got, mustCreate(t, kv, next(), "/app/e-", jute.FlagEphemeralSequential))
	mustCreate(t, kv, next(), "/app/c", jute.FlagContainer)
	got = append(got, mustCreate(t, kv, next(), "/app/t-", jute.FlagPersistentSequentialTTL))
	if err := txn(kv, next()).Delete("/app/plain", -1); err != nil {
		t.Fatal(err)
	}
	if err := txn(kv, next()).Delete("/app/s-0000000000", -1); err != nil {
		t.Fatal(err)
	}
	got = append(got, mustCreate(t, kv, next(), "/app/s-", jute.FlagPersistentSequential))
	want := []string{"/app/s-0000000000", "/app/e-0000000002", "/app/t-0000000004", "/app/s-0000000005"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sequential names %v, want %v", got, want)
	}
	app := kv.nodes["/app"]
	if app.Cversion != 6 || app.NumChildren != 4 {
		t.Errorf("stored cversion %d numChildren %d, want 6 and 4", app.Cversion, app.NumChildren)
	}
	// 6 creates + 2 deletes.
	if c := app.Stat().Cversion; c != 8 {
		t.Errorf("client cversion %d, want 8", c)
	}
	// Other parents have their own counters.
	if p := mustCreate(t, kv, next(), "/s-", jute.FlagPersistentSequential); p != "/s-0000000001" {
		t.Errorf("root sequential %q, want /s-0000000001", p)
	}
}

// TestSequentialNegative: a negative stored cversion, which ZooKeeper never
// stores (its counter stops at 2^31-1, see TestSequentialCounterEdge) but a
// hand-made snapshot could hold, formats as Java does and counts up.
func TestSequentialNegative(t *testing.T) {
	kv := newTree()
	mustCreate(t, kv, 1, "/w", jute.FlagPersistent)
	w := kv.nodes["/w"].Clone()
	w.Cversion = -1
	kv.nodes["/w"] = w
	if p := mustCreate(t, kv, 2, "/w/n", jute.FlagPersistentSequential); p != "/w/n-000000001" {
		t.Errorf("path %q, want /w/n-000000001", p)
	}
	if c := kv.nodes["/w"].Cversion; c != 0 {
		t.Errorf("cversion after wrap %d, want 0", c)
	}
	w = kv.nodes["/w"].Clone()
	w.Cversion = -2147483648
	kv.nodes["/w"] = w
	if p := mustCreate(t, kv, 3, "/w/m", jute.FlagPersistentSequential); p != "/w/m-2147483648" {
		t.Errorf("path %q, want /w/m-2147483648", p)
	}
}

func TestDelete(t *testing.T) {
	build := func(t *testing.T) *memKV {
		kv := newTree()
		mustCreate(t, kv, 2, "/a", jute.FlagPersistent)
		mustCreate(t, kv, 3, "/a/b", jute.FlagPersistent)
		mustCreate(t, kv, 4, "/leaf", jute.FlagPersistent)
		if _, err := txn(kv, 5).SetData("/leaf", []byte("v1"), -1); err != nil {
			t.Fatal(err)
		}
		if _, _, err := txn(kv, 6).Create("/locked", nil, []jute.ACL{{Perms: jute.PermAll &^ jute.PermDelete, ID: jute.ID{Scheme: "world", ID: "anyone"}}}, 0, -1); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, kv, 7, "/locked/x", jute.FlagPersistent)
		return kv
	}
	for _, tc := range []struct {
		path    string
		version int32
		want    jute.ErrCode
	}{
		{"/", -1, jute.ErrBadArguments},
		{"/zookeeper", -1, jute.ErrBadArguments},
		{"/zookeeper/quota", -1, jute.ErrBadArguments},
		{"/zookeeper/config", -1, jute.ErrBadArguments},
		{"", -1, jute.ErrBadArguments},
		{"a", -1, jute.ErrBadArguments},
		{"/a\x00", -1, jute.ErrBadArguments},
		{"/nope", -1, jute.ErrNoNode},
		{"/nope/x", -1, jute.ErrNoNode},
		{"/a/", -1, jute.ErrNoNode},
		{"/a", -1, jute.ErrNotEmpty},
		{"/a", 5, jute.ErrBadVersion}, // version before children
		{"/leaf", 0, jute.ErrBadVersion},
		{"/leaf", 2, jute.ErrBadVersion},
		{"/leaf", 1, jute.ErrOK},
		{"/leaf", -1, jute.ErrOK},
		{"/a/b", -1, jute.ErrOK},
		{"/locked/x", -1, jute.ErrNoAuth},
		{"/locked/nope", -1, jute.ErrNoAuth}, // parent's DELETE before the node
	} {
		kv := build(t)
		before := kv.snapshot()
		tx := txn(kv, 20)
		err := tx.Delete(tc.path, tc.version)
		if got := code(err); got != tc.want {
			t.Errorf("Delete(%q, %d) = %v, want %v", tc.path, tc.version, err, tc.want)
			continue
		}
		if tc.want != jute.ErrOK {
			if !sameNodes(kv.nodes, before) || len(tx.Triggers) != 0 {
				t.Errorf("Delete(%q, %d) failed but changed the tree or triggered %v", tc.path, tc.version, tx.Triggers)
			}
			continue
		}
		if kv.nodes[tc.path] != nil {
			t.Errorf("Delete(%q): still stored", tc.path)
		}
		parentPath, _ := Parent(tc.path)
		p, old := kv.nodes[parentPath], before[parentPath]
		if p.Cversion != old.Cversion {
			t.Errorf("Delete(%q) changed stored cversion %d -> %d", tc.path, old.Cversion, p.Cversion)
		}
		if p.Pzxid != 20 || p.NumChildren != old.NumChildren-1 {
			t.Errorf("Delete(%q) parent pzxid %d numChildren %d", tc.path, p.Pzxid, p.NumChildren)
		}
		if p.Stat().Cversion != old.Stat().Cversion+1 {
			t.Errorf("Delete(%q) client cversion %d -> %d, want +1", tc.path, old.Stat().Cversion, p.Stat().Cversion)
		}
		want := []Trigger{{Type: jute.EventNodeDeleted, Path: tc.path}, {Type: jute.EventNodeChildrenChanged, Path: parentPath}}
		if !reflect.DeepEqual(withoutACL(tx.Triggers), want) {
			t.Errorf("Delete(%q) triggers %v, want %v", tc.path, tx.Triggers, want)
		}
	}
}

// TestDeletePzxidNeverDecreases: a delete at a lower zxid than the parent's
// pzxid (replaying into a fuzzy snapshot) leaves pzxid alone.
func TestDeletePzxidNeverDecreases(t *testing.T) {
	kv := newTree()
	mustCreate(t, kv, 2, "/a", jute.FlagPersistent)
	mustCreate(t, kv, 3, "/a/b", jute.FlagPersistent)
	a := kv.nodes["/a"].Clone()
	a.Pzxid = 100
	kv.nodes["/a"] = a
	if err := txn(kv, 50).Delete("/a/b", -1); err != nil {
		t.Fatal(err)
	}
	if kv.nodes["/a"].Pzxid != 100 {
		t.Errorf("pzxid %d, want 100", kv.nodes["/a"].Pzxid)
	}
}

func TestDeleteEphemeral(t *testing.T) {
	kv := newTree()
	mustCreate(t, kv, 2, "/e", jute.FlagEphemeral)
	if eph, _ := kv.Ephemerals(0x100); len(eph) != 1 {
		t.Fatalf("ephemerals %v", eph)
	}
	// Another session may delete it.
	tx := txn(kv, 3)
	tx.Session = 0x200
	if err := tx.Delete("/e", -1); err != nil {
		t.Fatal(err)
	}
	if eph, _ := kv.Ephemerals(0x100); len(eph) != 0 {
		t.Errorf("ephemeral index not cleaned: %v", eph)
	}
}

func TestSetData(t *testing.T) {
	kv := newTree()
	mustCreate(t, kv, 2, "/a", jute.FlagPersistent)
	tx := &Txn{KV: kv, Zxid: 9, Time: 777}
	n, err := tx.SetData("/a", []byte("new"), 0)
	if err != nil {
		t.Fatal(err)
	}
	s := n.Stat()
	if s.Version != 1 || s.Mzxid != 9 || s.Mtime != 777 || s.Czxid != 2 || s.Ctime != 2000 || s.DataLength != 3 || s.Pzxid != 2 {
		t.Errorf("stat after setData %+v", s)
	}
	if !reflect.DeepEqual(withoutACL(tx.Triggers), []Trigger{{Type: jute.EventNodeDataChanged, Path: "/a"}}) {
		t.Errorf("triggers %v", tx.Triggers)
	}
	if string(kv.nodes["/a"].Data) != "new" {
		t.Errorf("data %q", kv.nodes["/a"].Data)
	}
	if _, err := txn(kv, 10).SetData("/a", nil, -1); err != nil {
		t.Fatal(err)
	}
	if kv.nodes["/a"].Data != nil || kv.nodes["/a"].Version != 2 {
		t.Errorf("setData nil: %+v", kv.nodes["/a"])
	}
	for _, tc := range []struct {
		path    string
		version int32
		want    jute.ErrCode
	}{
		{"/a", 1, jute.ErrBadVersion},
		{"/a", 3, jute.ErrBadVersion},
		{"/nope", -1, jute.ErrNoNode},
		{"/a/", -1, jute.ErrBadArguments},
		{"a", -1, jute.ErrBadArguments},
		{"/zookeeper/config", -1, jute.ErrNoAuth}, // READ-only ACL
		{"/a", 2, jute.ErrOK},
	} {
		tx := txn(kv, 11)
		if _, err := tx.SetData(tc.path, []byte("x"), tc.version); code(err) != tc.want {
			t.Errorf("SetData(%q, %d) = %v, want %v", tc.path, tc.version, err, tc.want)
		}
	}
}

func TestSetACL(t *testing.T) {
	kv := newTree()
	mustCreate(t, kv, 2, "/a", jute.FlagPersistent)
	alice := digestAuth("alice:secret")
	tx := &Txn{KV: kv, Zxid: 9, Time: 777, Auth: []jute.ID{alice}}
	acl := []jute.ACL{{Perms: jute.PermRead | jute.PermAdmin, ID: jute.ID{Scheme: "auth"}}}
	n, err := tx.SetACL("/a", acl, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n.Aversion != 1 || n.Mzxid != 2 || n.Version != 0 || n.Mtime != 2000 {
		t.Errorf("setACL changed more than aversion: %+v", n)
	}
	wantACL := []jute.ACL{{Perms: jute.PermRead | jute.PermAdmin, ID: alice}}
	if !reflect.DeepEqual(kv.nodes["/a"].ACL, wantACL) {
		t.Errorf("acl %v, want %v", kv.nodes["/a"].ACL, wantACL)
	}
	if len(tx.Triggers) != 0 {
		t.Errorf("setACL triggered %v", tx.Triggers)
	}
	for _, tc := range []struct {
		path    string
		acl     []jute.ACL
		version int32
		auth    []jute.ID
		want    jute.ErrCode
	}{
		{"/a", OpenACL, 0, []jute.ID{alice}, jute.ErrBadVersion},
		{"/a", OpenACL, -1, nil, jute.ErrNoAuth},
		{"/a", nil, -1, []jute.ID{alice}, jute.ErrInvalidACL},
		{"/nope", nil, -1, nil, jute.ErrInvalidACL}, // fixupACL before the node
		{"/nope", OpenACL, -1, nil, jute.ErrNoNode},
		{"/a/", OpenACL, -1, nil, jute.ErrBadArguments},
		{"/zookeeper/config", OpenACL, -1, nil, jute.ErrNoAuth},
		{"/zookeeper/config", OpenACL, 0, []jute.ID{{Scheme: "super", ID: ""}}, jute.ErrBadVersion}, // aversion is -1
		{"/a", OpenACL, 1, []jute.ID{alice}, jute.ErrOK},
	} {
		tx := txn(kv, 12)
		tx.Auth = tc.auth
		if _, err := tx.SetACL(tc.path, tc.acl, tc.version); code(err) != tc.want {
			t.Errorf("SetACL(%q, %v, %d) = %v, want %v", tc.path, tc.acl, tc.version, err, tc.want)
		}
	}
	// /zookeeper/config's aversion -1 is matched by -1 only as "any".
	super := []jute.ID{{Scheme: "super", ID: ""}}
	tx = txn(kv, 13)
	tx.Auth = super
	if n, err := tx.SetACL(ConfigPath, ReadACLUnsafe, -1); err != nil || n.Aversion != 0 {
		t.Errorf("SetACL config = %v, %v; want aversion 0", n, err)
	}
}

func TestCheck(t *testing.T) {
	kv := newTree()
	mustCreate(t, kv, 2, "/a", jute.FlagPersistent)
	if _, _, err := txn(kv, 3).Create("/w", nil, []jute.ACL{{Perms: jute.PermWrite, ID: jute.ID{Scheme: "world", ID: "anyone"}}}, 0, -1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path    string
		version int32
		want    jute.ErrCode
	}{
		{"/a", 0, jute.ErrOK},
		{"/a", -1, jute.ErrOK},
		{"/a", 1, jute.ErrBadVersion},
		{"/nope", -1, jute.ErrNoNode},
		{"/a/", -1, jute.ErrBadArguments},
		{"/w", -1, jute.ErrNoAuth},
	} {
		before := kv.snapshot()
		tx := txn(kv, 4)
		if err := tx.Check(tc.path, tc.version); code(err) != tc.want {
			t.Errorf("Check(%q, %d) = %v, want %v", tc.path, tc.version, err, tc.want)
		}
		if !sameNodes(before, kv.nodes) || len(tx.Triggers) != 0 {
			t.Errorf("Check(%q) changed the tree or triggered", tc.path)
		}
	}
}

// TestCloseSession deletes every ephemeral of the owner, in path order, with
// triggers, and leaves the other sessions' nodes alone.
func TestCloseSession(t *testing.T) {
	kv := newTree()
	mustCreate(t, kv, 2, "/a", jute.FlagPersistent)
	mustCreate(t, kv, 3, "/a/e2", jute.FlagEphemeral)
	mustCreate(t, kv, 4, "/e1", jute.FlagEphemeral)
	mustCreate(t, kv, 5, "/a/s", jute.FlagEphemeralSequential)
	other := txn(kv, 6)
	other.Session = 0x200
	if _, _, err := other.Create("/o", nil, OpenACL, jute.FlagEphemeral, -1); err != nil {
		t.Fatal(err)
	}
	// A stale index entry (node gone) is skipped and cleaned.
	kv.eph[0x100]["/gone"] = true

	tx := txn(kv, 10)
	if err := tx.CloseSession(0x100); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a/e2", "/e1", "/a/s0000000001"} {
		if kv.nodes[p] != nil {
			t.Errorf("%s survived its session", p)
		}
	}
	if kv.nodes["/o"] == nil || kv.nodes["/a"] == nil {
		t.Errorf("other nodes deleted")
	}
	if eph, _ := kv.Ephemerals(0x100); len(eph) != 0 {
		t.Errorf("ephemerals left %v", eph)
	}
	if eph, _ := kv.Ephemerals(0x200); !reflect.DeepEqual(eph, []string{"/o"}) {
		t.Errorf("other session's ephemerals %v", eph)
	}
	want := []Trigger{
		{Type: jute.EventNodeDeleted, Path: "/a/e2"}, {Type: jute.EventNodeChildrenChanged, Path: "/a"},
		{Type: jute.EventNodeDeleted, Path: "/a/s0000000001"}, {Type: jute.EventNodeChildrenChanged, Path: "/a"},
		{Type: jute.EventNodeDeleted, Path: "/e1"}, {Type: jute.EventNodeChildrenChanged, Path: "/"},
	}
	if !reflect.DeepEqual(withoutACL(tx.Triggers), want) {
		t.Errorf("triggers\n got %v\nwant %v", tx.Triggers, want)
	}
	a := kv.nodes["/a"]
	if a.NumChildren != 0 || a.Pzxid != 10 || a.Cversion != 2 {
		t.Errorf("/a after close %+v", a)
	}
	// Closing a session with nothing is a no-op.
	tx = txn(kv, 11)
	if err := tx.CloseSession(0x999); err != nil || len(tx.Triggers) != 0 {
		t.Errorf("empty close: %v %v", err, tx.Triggers)
	}
}

func TestNodeEncodeDecode(t *testing.T) {
	for _, n := range []*Node{
		{},
		{Data: []byte{}, ACL: OpenACL},
		{Data: []byte("x"), ACL: []jute.ACL{digestACL(jute.PermAll, "a:b")}, Czxid: 1, Mzxid: 2, Pzxid: 3,
			Ctime: 4, Mtime: 5, Version: 6, Cversion: -7, Aversion: -1, EphemeralOwner: ContainerOwner, NumChildren: 9},
	} {
		b := jute.Marshal(n)
		got, err := DecodeNode(b)
		if err != nil {
			t.Fatalf("DecodeNode: %v", err)
		}
		if !reflect.DeepEqual(got, n) {
			t.Errorf("round trip\n got %+v\nwant %+v", got, n)
		}
		if _, err := DecodeNode(b[:len(b)-1]); err == nil {
			t.Errorf("truncated node decoded")
		}
	}
	if _, err := DecodeNode([]byte{0, 0, 0, 2}); err == nil {
		t.Errorf("record version 2 decoded")
	}
	if _, err := DecodeNode(nil); err == nil {
		t.Errorf("empty node decoded")
	}
	// Clone copies the fields and shares the data and the ACL (both only
	// ever replaced, never changed in place).
	n := &Node{Data: []byte("ab"), ACL: OpenACL, Version: 3}
	c := n.Clone()
	c.Version++
	c.ACL = []jute.ACL{{Perms: jute.PermRead, ID: jute.ID{Scheme: "world", ID: "anyone"}}}
	if n.Version != 3 || len(n.ACL) != 1 || n.ACL[0].Perms != jute.PermAll {
		t.Errorf("changing the clone changed the original: %+v", n)
	}
	c.Data = []byte("z")
	if string(n.Data) != "ab" {
		t.Errorf("replacing the clone's data changed the original's")
	}
	if e := (&Node{Data: []byte{}}).Clone(); e.Data == nil {
		t.Errorf("Clone made empty data null")
	}
}

// withoutACL drops the ACLs from triggers so tables can list type and path.
func withoutACL(ts []Trigger) []Trigger {
	out := make([]Trigger, len(ts))
	for i, t := range ts {
		out[i] = Trigger{Type: t.Type, Path: t.Path}
	}
	return out
}
