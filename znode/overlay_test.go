package znode

import (
	"reflect"
	"testing"

	"github.com/zkraft/zkraft/jute"
)

func TestOverlay(t *testing.T) {
	base := newTree()
	mustCreate(t, base, 2, "/a", jute.FlagPersistent)
	mustCreate(t, base, 3, "/a/x", jute.FlagPersistent)
	mustCreate(t, base, 4, "/a/y", jute.FlagEphemeral)
	mustCreate(t, base, 5, "/b", jute.FlagEphemeral)
	writes := base.writes

	ov := NewOverlay(base)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ov.Put("/a/z", &Node{}))
	must(ov.Delete("/a/x"))
	must(ov.Put("/a/w", &Node{}))
	must(ov.Delete("/a/w")) // put then delete: gone
	must(ov.Delete("/a/y"))
	must(ov.Put("/a/y", &Node{Data: []byte("again")})) // delete then put: present
	must(ov.Put("/a/z/deep", &Node{}))
	must(ov.SetEphemeral(0x100, "/a/y", false))
	must(ov.SetEphemeral(0x100, "/c", true))
	must(ov.SetEphemeral(0x200, "/d", true))
	must(ov.SetEphemeral(0x200, "/d", false))

	if base.writes != writes {
		t.Fatalf("overlay wrote through before Commit")
	}
	if n, _ := ov.Get("/a/x"); n != nil {
		t.Errorf("deleted node visible: %+v", n)
	}
	if n, _ := ov.Get("/a/y"); n == nil || string(n.Data) != "again" {
		t.Errorf("re-put node %+v", n)
	}
	if n, _ := ov.Get("/b"); n == nil {
		t.Errorf("base node not visible through overlay")
	}
	if c, _ := ov.Children("/a"); !reflect.DeepEqual(c, []string{"y", "z"}) {
		t.Errorf("Children(/a) = %v, want [y z]", c)
	}
	if c, _ := ov.Children("/a/z"); !reflect.DeepEqual(c, []string{"deep"}) {
		t.Errorf("Children(/a/z) = %v", c)
	}
	if c, _ := ov.Children("/"); !reflect.DeepEqual(c, []string{"a", "b", "zookeeper"}) {
		t.Errorf("Children(/) = %v", c)
	}
	if c, _ := ov.Children("/nope"); len(c) != 0 {
		t.Errorf("Children(/nope) = %v", c)
	}
	if e, _ := ov.Ephemerals(0x100); !reflect.DeepEqual(e, []string{"/b", "/c"}) {
		t.Errorf("Ephemerals(0x100) = %v, want [/b /c]", e)
	}
	if e, _ := ov.Ephemerals(0x200); len(e) != 0 {
		t.Errorf("Ephemerals(0x200) = %v", e)
	}

	must(ov.Commit())
	if c, _ := base.Children("/a"); !reflect.DeepEqual(c, []string{"y", "z"}) {
		t.Errorf("base Children(/a) after commit = %v", c)
	}
	if base.nodes["/a/w"] != nil || base.nodes["/a/x"] != nil || base.nodes["/a/z/deep"] == nil {
		t.Errorf("base after commit wrong")
	}
	if e, _ := base.Ephemerals(0x100); !reflect.DeepEqual(e, []string{"/b", "/c"}) {
		t.Errorf("base Ephemerals after commit = %v", e)
	}
	// Commit empties the overlay: a second commit writes nothing.
	writes = base.writes
	must(ov.Commit())
	if base.writes != writes {
		t.Errorf("second commit wrote %d times", base.writes-writes)
	}
}

// recordKV records the order of writes, to check that Commit is
// deterministic.
type recordKV struct {
	*memKV
	log []string
}

func (r *recordKV) Put(p string, n *Node) error {
	r.log = append(r.log, "put "+p)
	return r.memKV.Put(p, n)
}

func (r *recordKV) Delete(p string) error {
	r.log = append(r.log, "del "+p)
	return r.memKV.Delete(p)
}

func (r *recordKV) SetEphemeral(owner int64, p string, present bool) error {
	r.log = append(r.log, "eph "+p)
	return r.memKV.SetEphemeral(owner, p, present)
}

func TestOverlayCommitOrder(t *testing.T) {
	var first []string
	for i := 0; i < 20; i++ {
		base := &recordKV{memKV: newTree()}
		ov := NewOverlay(base)
		for _, p := range []string{"/q", "/b", "/z", "/a", "/m"} {
			_ = ov.Put(p, &Node{})
			_ = ov.SetEphemeral(0x300, p, true)
			_ = ov.SetEphemeral(0x100, p, true)
		}
		_ = ov.Delete("/c")
		if err := ov.Commit(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = base.log
			want := []string{"put /a", "put /b", "del /c", "put /m", "put /q", "put /z"}
			if !reflect.DeepEqual(first[:6], want) {
				t.Fatalf("commit order %v", first)
			}
			continue
		}
		if !reflect.DeepEqual(base.log, first) {
			t.Fatalf("commit order differs between runs:\n%v\n%v", first, base.log)
		}
	}
}

func TestReader(t *testing.T) {
	kv := newTree()
	alice := digestAuth("alice:secret")
	tx := txn(kv, 2)
	tx.Auth = []jute.ID{alice}
	secret := []jute.ACL{{Perms: jute.PermAll, ID: alice}}
	readOnly := []jute.ACL{digestACL(jute.PermAdmin, "bob:pw"), {Perms: jute.PermRead, ID: jute.ID{Scheme: "world", ID: "anyone"}}}
	for _, c := range []struct {
		path string
		acl  []jute.ACL
	}{
		{"/pub", OpenACL}, {"/pub/a", OpenACL}, {"/pub/a/b", OpenACL}, {"/pub/c", OpenACL},
		{"/secret", secret}, {"/secret/x", OpenACL}, {"/ro", readOnly},
	} {
		if _, _, err := tx.Create(c.path, []byte(c.path), c.acl, 0, -1); err != nil {
			t.Fatal(err)
		}
	}
	anon := Reader{KV: kv}
	asAlice := Reader{KV: kv, Auth: []jute.ID{alice}}

	n, err := anon.GetData("/pub/a")
	if err != nil || string(n.Data) != "/pub/a" {
		t.Errorf("GetData(/pub/a) = %v, %v", n, err)
	}
	for _, tc := range []struct {
		name string
		fn   func() error
		want jute.ErrCode
	}{
		{"getData missing", func() error { _, err := anon.GetData("/nope"); return err }, jute.ErrNoNode},
		// Reads do not validate paths: a path that cannot exist is NONODE,
		// except that exists rejects a NUL (FinalRequestProcessor).
		{"getData bad path", func() error { _, err := anon.GetData("/pub/"); return err }, jute.ErrNoNode},
		{"getChildren bad path", func() error { _, _, err := anon.GetChildren("/pub/../pub"); return err }, jute.ErrNoNode},
		{"exists bad path", func() error { _, err := anon.Exists("//pub"); return err }, jute.ErrNoNode},
		{"exists NUL", func() error { _, err := anon.Exists("/pub\x00"); return err }, jute.ErrBadArguments},
		{"getData noauth", func() error { _, err := anon.GetData("/secret"); return err }, jute.ErrNoAuth},
		{"getData alice", func() error { _, err := asAlice.GetData("/secret"); return err }, jute.ErrOK},
		{"exists missing", func() error { _, err := anon.Exists("/nope"); return err }, jute.ErrNoNode},
		{"exists ok", func() error { _, err := anon.Exists("/pub"); return err }, jute.ErrOK},
		{"getChildren noauth", func() error { _, _, err := anon.GetChildren("/secret"); return err }, jute.ErrNoAuth},
		{"getChildren missing", func() error { _, _, err := anon.GetChildren("/nope"); return err }, jute.ErrNoNode},
		{"getACL noauth", func() error { _, _, err := anon.GetACL("/secret"); return err }, jute.ErrNoAuth},
		{"getACL missing", func() error { _, _, err := anon.GetACL("/nope"); return err }, jute.ErrNoNode},
		{"count noauth", func() error { _, err := anon.CountDescendants("/secret"); return err }, jute.ErrNoAuth},
		{"count missing", func() error { _, err := anon.CountDescendants("/nope"); return err }, jute.ErrNoNode},
	} {
		if got := code(tc.fn()); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}

	_, names, err := anon.GetChildren("/pub")
	if err != nil || !reflect.DeepEqual(names, []string{"a", "c"}) {
		t.Errorf("GetChildren(/pub) = %v, %v", names, err)
	}
	_, names, err = anon.GetChildren("/pub/c")
	if err != nil || names == nil || len(names) != 0 {
		t.Errorf("GetChildren(leaf) = %#v, %v; want empty non-nil", names, err)
	}

	// getACL: ADMIN sees the digest; READ only sees it masked.
	_, acl, err := anon.GetACL("/ro")
	wantMasked := []jute.ACL{{Perms: jute.PermAdmin, ID: jute.ID{Scheme: "digest", ID: "bob:x"}}, readOnly[1]}
	if err != nil || !reflect.DeepEqual(acl, wantMasked) {
		t.Errorf("GetACL(/ro) anonymous = %v, %v; want %v", acl, err, wantMasked)
	}
	if kv.nodes["/ro"].ACL[0].ID.ID == "bob:x" {
		t.Errorf("masking modified the stored ACL")
	}
	asBob := Reader{KV: kv, Auth: []jute.ID{digestAuth("bob:pw")}}
	if _, acl, err := asBob.GetACL("/ro"); err != nil || !reflect.DeepEqual(acl, readOnly) {
		t.Errorf("GetACL(/ro) as admin = %v, %v", acl, err)
	}
	if _, acl, err := asAlice.GetACL("/secret"); err != nil || !reflect.DeepEqual(acl, secret) {
		t.Errorf("GetACL(/secret) as alice = %v, %v", acl, err)
	}
	super := Reader{KV: kv, Auth: []jute.ID{{Scheme: "super", ID: ""}}}
	if _, err := super.GetData("/secret"); err != nil {
		t.Errorf("super GetData: %v", err)
	}
	// ADMIN-only (no READ) still reads the ACL.
	adminOnly := []jute.ACL{digestACL(jute.PermAdmin, "alice:secret")}
	if _, _, err := tx.Create("/adm", nil, adminOnly, 0, -1); err != nil {
		t.Fatal(err)
	}
	if _, acl, err := asAlice.GetACL("/adm"); err != nil || !reflect.DeepEqual(acl, adminOnly) {
		t.Errorf("GetACL(/adm) = %v, %v", acl, err)
	}
	if _, err := asAlice.GetData("/adm"); code(err) != jute.ErrNoAuth {
		t.Errorf("GetData(/adm) without READ = %v", err)
	}

	// getAllChildrenNumber counts every descendant, not the node itself.
	for _, tc := range []struct {
		path string
		want int32
	}{{"/pub", 3}, {"/pub/a", 1}, {"/pub/c", 0}, {"/zookeeper", 2}, {"/", 11}} {
		got, err := super.CountDescendants(tc.path)
		if err != nil || got != tc.want {
			t.Errorf("CountDescendants(%s) = %d, %v; want %d", tc.path, got, err, tc.want)
		}
	}
	// The stat a reader returns is the client-visible one: one more
	// create and a delete under /pub make cversion 2*3-2 = 4.
	mustCreate(t, kv, 20, "/pub/d", jute.FlagPersistent)
	if err := txn(kv, 21).Delete("/pub/d", -1); err != nil {
		t.Fatal(err)
	}
	n, _ = anon.Exists("/pub")
	if s := n.Stat(); s.NumChildren != 2 || s.Cversion != 4 || s.Pzxid != 21 {
		t.Errorf("stat(/pub) %+v", s)
	}
}

// NumChildren (ChildCounter) sees the overlay's buffered nodes over the
// base's, and Reset drops them.
func TestOverlayNumChildrenAndReset(t *testing.T) {
	base := newTree()
	mustCreate(t, base, 2, "/a", jute.FlagPersistent)
	mustCreate(t, base, 3, "/a/x", jute.FlagPersistent)
	ov := NewOverlay(base)
	check := func(path string, want int32, wantExists bool) {
		t.Helper()
		n, exists, err := ov.NumChildren(path)
		if err != nil || n != want || exists != wantExists {
			t.Fatalf("NumChildren(%s) = %d, %v, %v; want %d, %v", path, n, exists, err, want, wantExists)
		}
		if got, err := numChildren(ov, path); err != nil || got != want {
			t.Fatalf("numChildren(%s) = %d, %v; want %d", path, got, err, want)
		}
	}
	check("/a", 1, true)
	check("/nope", 0, false)
	if err := ov.Put("/a", &Node{NumChildren: 7}); err != nil {
		t.Fatal(err)
	}
	if err := ov.Delete("/a/x"); err != nil {
		t.Fatal(err)
	}
	check("/a", 7, true)
	check("/a/x", 0, false)
	ov.Reset(base)
	check("/a", 1, true)
	check("/a/x", 0, true)
	if err := ov.Commit(); err != nil {
		t.Fatal(err)
	}
	if n, _ := base.Get("/a"); n == nil || n.NumChildren != 1 {
		t.Fatalf("a reset overlay wrote %+v", n)
	}
}
