package conformance

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"
)

// Single operations: delete, setData, getData, getChildren, exists, sync,
// getACL/setACL, the reserved /zookeeper nodes, ping.

func TestDelete(t *testing.T) {
	base := uniquePath(t)
	c, _ := connect(t)
	n := mustCreate(t, c, base+"/n", nil, 0)

	if err := c.Delete(n, 5); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("delete version 5 of a version-0 node: %v, want BADVERSION", err)
	}
	if _, err := c.Set(n, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(n, 0); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("delete version 0 of a version-1 node: %v, want BADVERSION", err)
	}
	mustStat(t, c, n) // still there
	if err := c.Delete(n, 1); err != nil {
		t.Fatalf("delete with the right version: %v", err)
	}
	mustNotExist(t, c, n)

	// -1 matches any version.
	m := mustCreate(t, c, base+"/m", nil, 0)
	for i := int32(0); i < 3; i++ {
		if _, err := c.Set(m, nil, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Delete(m, -1); err != nil {
		t.Fatalf("delete version -1: %v", err)
	}

	// NOTEMPTY, and the node and child survive.
	p := mustCreate(t, c, base+"/p", nil, 0)
	mustCreate(t, c, p+"/child", nil, 0)
	if err := c.Delete(p, -1); !errors.Is(err, zk.ErrNotEmpty) {
		t.Fatalf("delete non-empty: %v, want NOTEMPTY", err)
	}
	mustStat(t, c, p+"/child")

	// NONODE for a missing node and for a missing parent. The existence check
	// comes before the version check.
	for _, missing := range []string{base + "/missing", base + "/missing/child"} {
		if err := c.Delete(missing, -1); !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("delete %s: %v, want NONODE", missing, err)
		}
		if err := c.Delete(missing, 3); !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("delete %s version 3: %v, want NONODE", missing, err)
		}
	}
	// The version check comes before the children check.
	if err := c.Delete(p, 9); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("delete non-empty with a wrong version: %v, want BADVERSION", err)
	}
}

func TestDeleteReservedNodes(t *testing.T) {
	c, _ := connect(t)
	for _, p := range []string{"/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"} {
		if err := c.Delete(p, -1); !errors.Is(err, zk.ErrBadArguments) {
			t.Errorf("delete %s: %v, want BADARGUMENTS", p, err)
		}
		mustStat(t, c, p)
	}
}

func TestSetData(t *testing.T) {
	base := uniquePath(t)
	c, _ := connect(t)
	n := mustCreate(t, c, base+"/n", []byte("v0"), 0)

	st, err := c.Set(n, []byte("v1"), 0)
	if err != nil || st.Version != 1 || st.DataLength != 2 {
		t.Fatalf("set version 0: %+v, %v; want version 1", st, err)
	}
	if _, err := c.Set(n, []byte("bad"), 0); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("set with a stale version: %v, want BADVERSION", err)
	}
	if _, err := c.Set(n, []byte("bad"), 7); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("set with a future version: %v, want BADVERSION", err)
	}
	st, err = c.Set(n, []byte("v2"), -1)
	if err != nil || st.Version != 2 {
		t.Fatalf("set version -1: %+v, %v; want version 2", st, err)
	}
	data, gst, err := c.Get(n)
	if err != nil || string(data) != "v2" || *gst != *st {
		t.Fatalf("get = %q %+v %v; want \"v2\" and the set Stat %+v", data, gst, err, st)
	}
	if _, err := c.Set(base+"/missing", nil, -1); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("set missing: %v, want NONODE", err)
	}

	// Large values round-trip byte for byte (half of jute.maxbuffer).
	big := make([]byte, 512<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	if st, err = c.Set(n, big, 2); err != nil || st.DataLength != int32(len(big)) {
		t.Fatalf("set 512 KiB: %+v, %v", st, err)
	}
	data, _, err = c.Get(n)
	if err != nil || !bytes.Equal(data, big) {
		t.Fatalf("get 512 KiB: %d bytes, %v", len(data), err)
	}
}

func TestGetChildren(t *testing.T) {
	base := uniquePath(t)
	c, _ := connect(t)
	want := []string{"a", "b", "c-0000000002", "zz", "e"}
	mustCreate(t, c, base+"/a", nil, 0)
	mustCreate(t, c, base+"/b", []byte("bdata"), 0)
	mustCreate(t, c, base+"/c-", nil, zk.FlagSequence)
	mustCreate(t, c, base+"/zz", nil, 0)
	mustCreate(t, c, base+"/e", nil, zk.FlagEphemeral)
	mustCreate(t, c, base+"/a/grandchild", nil, 0) // not a child of base

	// getChildren2 (go-zookeeper's Children): names only, in no particular
	// order, plus the parent's Stat.
	got, st, err := c.Children(base)
	if err != nil {
		t.Fatal(err)
	}
	if !sameSet(got, want) {
		t.Fatalf("children = %v, want %v (as a set)", got, want)
	}
	if st.NumChildren != 5 || st.Cversion != 5 || *st != mustStat(t, c, base) {
		t.Fatalf("getChildren2 Stat = %+v", st)
	}

	// getChildren (op 8) has no Stat.
	rc := rawSession(t, 10000)
	rep := rc.callOK(opGetChildren, pathWatchReq(base, false))
	r := &jr{b: rep.Body}
	if names := r.strs(); !sameSet(names, want) || r.end() != nil {
		t.Fatalf("getChildren body = % x, want just the vector %v", rep.Body, want)
	}

	// A leaf has an empty (not null) list.
	rep = rc.callOK(opGetChildren, pathWatchReq(base+"/b", false))
	if !bytes.Equal(rep.Body, []byte{0, 0, 0, 0}) {
		t.Fatalf("getChildren of a leaf: body % x, want 00 00 00 00", rep.Body)
	}
	if names, _, err := c.Children(base + "/b"); err != nil || len(names) != 0 {
		t.Fatalf("children of a leaf: %v, %v", names, err)
	}

	// Missing node: NONODE for both.
	if _, _, err := c.Children(base + "/missing"); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("children of missing: %v, want NONODE", err)
	}
	if rep := rc.call(opGetChildren, pathWatchReq(base+"/missing", false)); rep.Err != errNoNode || rep.Len != 16 {
		t.Fatalf("getChildren missing: %v", rep)
	}

	// getData returns the data and the node's Stat.
	data, dst, err := c.Get(base + "/b")
	if err != nil || string(data) != "bdata" || *dst != mustStat(t, c, base+"/b") {
		t.Fatalf("get = %q %+v %v", data, dst, err)
	}
	if _, _, err := c.Get(base + "/missing"); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("get missing: %v, want NONODE", err)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestExists(t *testing.T) {
	base := uniquePath(t)
	c, _ := connect(t)
	ok, st, err := c.Exists(base + "/missing")
	if err != nil || ok {
		t.Fatalf("exists missing = %v, %v", ok, err)
	}
	_ = st
	mustCreate(t, c, base+"/n", []byte("abc"), 0)
	ok, st, err = c.Exists(base + "/n")
	if err != nil || !ok || st.DataLength != 3 {
		t.Fatalf("exists = %v %+v %v", ok, st, err)
	}

	// On the wire, a missing node is err NONODE with no body.
	rc := rawSession(t, 10000)
	rep := rc.call(opExists, pathWatchReq(base+"/missing", false))
	if rep.Err != errNoNode || rep.Len != 16 {
		t.Fatalf("exists missing: %v (%d bytes), want NONODE, header only", rep, rep.Len)
	}
	rep = rc.callOK(opExists, pathWatchReq(base+"/n", false))
	r := &jr{b: rep.Body}
	if rst := r.stat(); r.end() != nil || rst != *st {
		t.Fatalf("exists body = % x, want the 68-byte Stat %+v", rep.Body, st)
	}
}

func TestSync(t *testing.T) {
	base := uniquePath(t)
	c, _ := connect(t)
	for _, p := range []string{base, "/", base + "/missing"} {
		// sync answers with the path it was given; it does not look the node up.
		got, err := c.Sync(p)
		if err != nil || got != p {
			t.Fatalf("sync %s = %q, %v; want the same path", p, got, err)
		}
	}
}

func TestACL(t *testing.T) {
	base := uniquePath(t)
	c, _ := connect(t)
	n := mustCreate(t, c, base+"/n", nil, 0)

	acl, st, err := c.GetACL(n)
	if err != nil || !reflect.DeepEqual(acl, zk.WorldACL(zk.PermAll)) || st.Aversion != 0 {
		t.Fatalf("getACL = %v %+v %v; want [31 world anyone], aversion 0", acl, st, err)
	}
	if *st != mustStat(t, c, n) {
		t.Fatalf("getACL Stat %+v differs from exists Stat", st)
	}

	rwa := zk.WorldACL(zk.PermRead | zk.PermWrite | zk.PermAdmin)
	st, err = c.SetACL(n, rwa, 0)
	if err != nil || st.Aversion != 1 || st.Version != 0 || st.Mzxid != st.Czxid {
		t.Fatalf("setACL version 0: %+v %v; want aversion 1, data version and mzxid unchanged", st, err)
	}
	if acl, _, _ := c.GetACL(n); !reflect.DeepEqual(acl, rwa) {
		t.Fatalf("getACL after setACL = %v, want %v", acl, rwa)
	}
	if _, err := c.SetACL(n, zk.WorldACL(zk.PermAll), 0); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("setACL with a stale aversion: %v, want BADVERSION", err)
	}
	readWrite := zk.WorldACL(zk.PermRead | zk.PermWrite)
	if st, err = c.SetACL(n, readWrite, 1); err != nil || st.Aversion != 2 {
		t.Fatalf("setACL version 1: %+v, %v; want aversion 2", st, err)
	}
	// Without ADMIN, setACL is NOAUTH; ADMIN is checked before the version.
	for _, v := range []int32{-1, 0, 2} {
		if _, err := c.SetACL(n, zk.WorldACL(zk.PermAll), v); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("setACL version %d on a node without ADMIN: %v, want NOAUTH", v, err)
		}
	}
	// The ACL is enforced: no CREATE, so no child; WRITE allows setData.
	if _, err := c.Create(n+"/child", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("create under a node without CREATE: %v, want NOAUTH", err)
	}
	if _, err := c.Set(n, []byte("w"), -1); err != nil {
		t.Fatalf("set with WRITE: %v", err)
	}

	a := mustCreate(t, c, base+"/a", nil, 0)
	if st, err = c.SetACL(a, zk.WorldACL(zk.PermAll), -1); err != nil || st.Aversion != 1 {
		t.Fatalf("setACL version -1: %+v %v", st, err)
	}
	if st, err = c.SetACL(a, zk.WorldACL(zk.PermAll), 1); err != nil || st.Aversion != 2 {
		t.Fatalf("setACL version 1: %+v %v", st, err)
	}
	if _, err := c.SetACL(base+"/missing", zk.WorldACL(zk.PermAll), -1); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("setACL missing: %v, want NONODE", err)
	}
	if _, _, err := c.GetACL(base + "/missing"); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("getACL missing: %v, want NONODE", err)
	}
	if _, err := c.SetACL(a, []zk.ACL{}, -1); !errors.Is(err, zk.ErrInvalidACL) {
		t.Fatalf("setACL with an empty list: %v, want INVALIDACL", err)
	}
}

func TestReservedNodes(t *testing.T) {
	c, _ := connect(t)
	for _, p := range []string{"/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"} {
		st := mustStat(t, c, p)
		if st.Czxid != 0 || st.Mzxid != 0 || st.Ctime != 0 || st.Mtime != 0 || st.EphemeralOwner != 0 || st.Version != 0 {
			t.Errorf("%s Stat = %+v, want zero czxid, mzxid, ctime, mtime, version and owner", p, st)
		}
	}
	children, _, err := c.Children("/zookeeper")
	if err != nil || !slices.Contains(children, "config") || !slices.Contains(children, "quota") {
		t.Fatalf("children of /zookeeper = %v, %v; want config and quota", children, err)
	}
	// /zookeeper's client-visible cversion is 2*0 - 2 = -2: its two children
	// were never "created" through the counter (fact sheet §3.2 formula).
	if st := mustStat(t, c, "/zookeeper"); len(children) == 2 && (st.Cversion != -2 || st.NumChildren != 2 || st.Pzxid != 0) {
		t.Errorf("/zookeeper Stat = %+v, want cversion -2, numChildren 2, pzxid 0", st)
	}
	// /zookeeper/config is read-only for the world and has aversion -1.
	acl, st, err := c.GetACL("/zookeeper/config")
	if err != nil || !reflect.DeepEqual(acl, zk.WorldACL(zk.PermRead)) || st.Aversion != -1 {
		t.Fatalf("getACL /zookeeper/config = %v %+v %v; want [1 world anyone], aversion -1", acl, st, err)
	}
	if acl, _, err := c.GetACL("/zookeeper"); err != nil || !reflect.DeepEqual(acl, zk.WorldACL(zk.PermAll)) {
		t.Fatalf("getACL /zookeeper = %v %v; want [31 world anyone]", acl, err)
	}
	if data, _, err := c.Get("/zookeeper/config"); err != nil || len(data) != 0 {
		t.Fatalf("standalone /zookeeper/config data = %q, %v; want empty", data, err)
	}
	if _, err := c.Set("/zookeeper/config", []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("set /zookeeper/config: %v, want NOAUTH", err)
	}
}

func TestPing(t *testing.T) {
	c := rawSession(t, 10000)
	for _, xid := range []int32{xidPing, 42} {
		// ZooKeeper 3.8 answers every ping with xid -2, whatever xid it carried.
		if err := c.sendXid(xid, opPing, nil); err != nil {
			t.Fatal(err)
		}
		rep, err := c.readReply(rawIOTimeout)
		if err != nil || rep.Xid != xidPing || rep.Err != errOK || rep.Len != 16 || rep.Zxid <= 0 {
			t.Fatalf("ping with xid %d: %v, %v; want {xid -2, last zxid, err 0}, header only", xid, rep, err)
		}
	}
}
