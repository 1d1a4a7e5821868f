package conformance

import (
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// ACLs and authentication: the auth packet, the world, auth, digest and ip
// schemes, the permission each op needs, masking in getACL, the super digest
// and invalid ACLs (zookeeper-facts.md §1.7, §2.7, §3.1).
//
// The server runs with the super digest of "super:secret"
// (zookeeper.DigestAuthenticationProvider.superDigest, see
// scripts/zk-differential.sh and embedded_test.go).

// digestID is the digest scheme's id for user:password:
// user:base64(sha1("user:password")).
func digestID(user, password string) string {
	sum := sha1.Sum([]byte(user + ":" + password))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

var aliceDigest = digestID("alice", "secret")

func TestDigestID(t *testing.T) {
	// The fact sheet's verified value, and the configured super digest.
	if aliceDigest != "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E=" || digestID("super", "secret") != "super:lK75jTNcA+U9vtVEw5vB51mj/w4=" {
		t.Fatalf("digestID is wrong: %s", aliceDigest)
	}
}

// superConn returns a go-zookeeper client authenticated as the super user,
// and makes sure base's subtree is deleted with it at the end of the test,
// whatever ACLs the test left on it (this cleanup runs before uniquePath's).
func superConn(t *testing.T, base string) *zk.Conn {
	t.Helper()
	su, _ := connect(t)
	addAuth(t, su, "super:secret")
	t.Cleanup(func() {
		if err := deleteTree(su, base); err != nil {
			t.Errorf("cleanup %s as super: %v", base, err)
		}
	})
	return su
}

// digestConn returns a go-zookeeper client authenticated as user:secret.
func digestConn(t *testing.T, user string) *zk.Conn {
	t.Helper()
	c, _ := connect(t)
	addAuth(t, c, user+":secret")
	return c
}

// addAuth adds digest credentials to a go-zookeeper client, bounded in time:
// when the server refuses them it closes the connection, and go-zookeeper
// would keep reconnecting and re-sending them.
func addAuth(t *testing.T, c *zk.Conn, cred string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.AddAuth("digest", []byte(cred)) }()
	select {
	case err := <-done:
		if err != nil {
			c.Close()
			t.Fatalf("addauth digest %s: %v", cred, err)
		}
	case <-time.After(5 * time.Second):
		c.Close()
		t.Fatalf("addauth digest %s: no answer within 5s", cred)
	}
}

func sameInfos(a, b []clientInfo) bool {
	less := func(x, y clientInfo) int {
		if x.Scheme != y.Scheme {
			if x.Scheme < y.Scheme {
				return -1
			}
			return 1
		}
		switch {
		case x.User < y.User:
			return -1
		case x.User > y.User:
			return 1
		}
		return 0
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, less)
	slices.SortFunc(b, less)
	return slices.Equal(a, b)
}

func sameACL(a, b []zk.ACL) bool {
	less := func(x, y zk.ACL) int {
		if x.Scheme+":"+x.ID < y.Scheme+":"+y.ID {
			return -1
		}
		if x.Scheme+":"+x.ID > y.Scheme+":"+y.ID {
			return 1
		}
		return int(x.Perms - y.Perms)
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, less)
	slices.SortFunc(b, less)
	return slices.Equal(a, b)
}

func TestAuthDigest(t *testing.T) {
	base := uniquePath(t)
	c := rawSession(t, 10000)
	// Every connection carries its ip id; whoAmI lists the ids in no
	// particular order.
	ip := clientInfo{"ip", "127.0.0.1"}
	if got := c.whoAmI(); !sameInfos(got, []clientInfo{ip}) {
		t.Fatalf("whoAmI before auth = %+v, want [{ip 127.0.0.1}]", got)
	}
	c.callOK(opCreate, createReq(base+"/n", nil, 0)) // the reply zxid below stays 0 regardless
	// Success: {xid -4, zxid 0, err 0}, header only.
	c.authOK("digest", []byte("alice:secret"))
	if got := c.whoAmI(); !sameInfos(got, []clientInfo{ip, {"digest", "alice"}}) {
		t.Fatalf("whoAmI after auth = %+v, want ip and {digest alice}", got)
	}
	// The same credentials again add nothing; other users add their id.
	c.authOK("digest", []byte("alice:secret"))
	c.authOK("digest", []byte("bob:pw"))
	if got := c.whoAmI(); !sameInfos(got, []clientInfo{ip, {"digest", "alice"}, {"digest", "bob"}}) {
		t.Fatalf("whoAmI = %+v, want ip, {digest alice}, {digest bob}", got)
	}
	// Any password is accepted: digest auth only computes the id. A
	// credential without ':' is accepted too (the whole string is the user).
	c.authOK("digest", []byte("nocolon"))
	// The ip scheme's auth always succeeds and adds the connection's own
	// address, which is already there.
	c.authOK("ip", []byte("10.1.2.3"))
	if got := c.whoAmI(); !sameInfos(got, []clientInfo{ip, {"digest", "alice"}, {"digest", "bob"}, {"digest", "nocolon"}}) {
		t.Fatalf("whoAmI = %+v, want ip, alice, bob, nocolon", got)
	}
	// The reply to auth echoes the request's xid.
	if err := c.sendXid(77, opAuth, authReq("digest", []byte("carol:pw"))); err != nil {
		t.Fatal(err)
	}
	if rep := c.await(77); rep.Err != errOK || rep.Zxid != 0 || rep.Len != 16 {
		t.Fatalf("auth with xid 77: %v, want {77, 0, 0}", rep)
	}

	// Through go-zookeeper.
	g, _ := connect(t)
	addAuth(t, g, "alice:secret")
}

func TestAuthFailureClosesConnection(t *testing.T) {
	base := uniquePath(t)
	sentinel := mustCreate(t, admin, base+"/sentinel", []byte("s"), 0)

	// An unknown scheme: {xid -4, zxid 0, err AUTHFAILED}, then the server
	// closes the connection.
	for _, scheme := range []string{"foo", "world", "super", ""} {
		c := rawSession(t, 10000)
		if err := c.sendXid(xidAuth, opAuth, authReq(scheme, []byte("x:y"))); err != nil {
			t.Fatal(err)
		}
		frames, err := c.readUntilClosed(rawIOTimeout)
		if err != nil {
			t.Fatalf("auth scheme %q: %v", scheme, err)
		}
		want := frameBody(xidAuth, 0, errAuthFailed)
		if len(frames) != 1 || string(frames[0]) != string(want) {
			t.Fatalf("auth scheme %q: frames % x, want one frame % x then close", scheme, frames, want)
		}
	}
	// A truncated auth packet cannot be decoded: closed without a reply.
	c := rawSession(t, 10000)
	if err := c.sendXid(xidAuth, opAuth, []byte{0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	c.expectClosedSilently(rawIOTimeout)
	checkServerHealthy(t, sentinel, []byte("s"))
}

func TestCreateWithAuthACL(t *testing.T) {
	// The nodes are ephemerals of their creators, gone with their sessions
	// (nobody else may delete them).
	base := uniquePath(t)

	// Without credentials the auth scheme has nothing to expand to (the ip id
	// does not count): INVALIDACL.
	anon, _ := connect(t)
	if _, err := anon.Create(base+"/a", nil, 0, zk.AuthACL(zk.PermAll)); !errors.Is(err, zk.ErrInvalidACL) {
		t.Fatalf("create with CREATOR_ALL_ACL, unauthenticated: %v, want INVALIDACL", err)
	}
	if _, err := anon.SetACL(base, zk.AuthACL(zk.PermAll), -1); !errors.Is(err, zk.ErrInvalidACL) {
		t.Fatalf("setACL with CREATOR_ALL_ACL, unauthenticated: %v, want INVALIDACL", err)
	}
	mustNotExist(t, admin, base+"/a")

	// With a digest identity it expands to that id.
	alice := digestConn(t, "alice")
	p := base + "/a"
	if _, err := alice.Create(p, nil, zk.FlagEphemeral, zk.AuthACL(zk.PermAll)); err != nil {
		t.Fatalf("create with CREATOR_ALL_ACL as alice: %v", err)
	}
	acl, _, err := alice.GetACL(p)
	if want := []zk.ACL{{Perms: permAll, Scheme: "digest", ID: aliceDigest}}; err != nil || !sameACL(acl, want) {
		t.Fatalf("getACL = %+v, %v; want %+v", acl, err, want)
	}
	// Only alice can use it.
	if _, _, err := anon.Get(p); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("get as anonymous: %v, want NOAUTH", err)
	}
	if _, _, err := alice.Get(p); err != nil {
		t.Fatalf("get as alice: %v", err)
	}

	// Two digest identities: one entry each (perms as given).
	both := digestConn(t, "alice")
	addAuth(t, both, "bob:secret")
	q := base + "/b"
	if _, err := both.Create(q, nil, zk.FlagEphemeral, zk.AuthACL(zk.PermRead|zk.PermAdmin)); err != nil {
		t.Fatalf("create as alice+bob: %v", err)
	}
	acl, _, _ = both.GetACL(q)
	want := []zk.ACL{
		{Perms: permRead | permAdmin, Scheme: "digest", ID: aliceDigest},
		{Perms: permRead | permAdmin, Scheme: "digest", ID: digestID("bob", "secret")},
	}
	if !sameACL(acl, want) {
		t.Fatalf("getACL = %+v, want %+v (in any order)", acl, want)
	}

	// setACL expands it the same way; an auth entry next to world:anyone.
	if _, err := alice.SetACL(p, append(zk.AuthACL(zk.PermAll), zk.WorldACL(zk.PermRead)...), -1); err != nil {
		t.Fatalf("setACL with auth + world: %v", err)
	}
	acl, st, _ := alice.GetACL(p)
	if want := []zk.ACL{{Perms: permAll, Scheme: "digest", ID: aliceDigest}, {Perms: permRead, Scheme: "world", ID: "anyone"}}; !sameACL(acl, want) || st.Aversion != 1 {
		t.Fatalf("getACL after setACL = %+v aversion %d, want %+v aversion 1", acl, st.Aversion, want)
	}
}

func TestACLPermissionPerOp(t *testing.T) {
	// Each op needs one permission. The ACLs here are world:anyone with every
	// permission but that one (NOAUTH), or with only that one, plus ADMIN so
	// that the test can open the node up again for the cleanup (allowed).
	// No credentials are needed.
	base := uniquePath(t)
	c := rawSession(t, 10000)
	all := permAll

	// node creates base/name with a child, then restricts it to perms.
	node := func(name string, perms int32) string {
		t.Helper()
		p := mustCreate(t, admin, base+"/"+name, []byte("d"), 0)
		mustCreate(t, admin, p+"/child", nil, 0)
		if _, err := admin.SetACL(p, zk.WorldACL(perms), -1); err != nil {
			t.Fatalf("setACL %s: %v", p, err)
		}
		if perms&permAdmin != 0 {
			t.Cleanup(func() { admin.SetACL(p, zk.WorldACL(zk.PermAll), -1) })
		} else if perms&(permRead|permDelete) != permRead|permDelete {
			t.Fatalf("test bug: %s with perms %d could not be cleaned up", p, perms)
		}
		return p
	}
	wantErr := func(what string, rep reply, code int32) {
		t.Helper()
		if rep.Err != code || (code != errOK && rep.Len != 16) {
			t.Fatalf("%s: %v, want %s", what, rep, errName(code))
		}
	}

	for _, tc := range []struct {
		name string
		perm int32
		op   func(p string) reply
	}{
		// create needs CREATE on the parent.
		{"create", permCreate, func(p string) reply { return c.call(opCreate, createReq(p+"/new", nil, 0)) }},
		// delete needs DELETE on the parent (the child's own ACL is open).
		{"delete", permDelete, func(p string) reply { return c.call(opDelete, deleteReq(p+"/child", -1)) }},
		{"setData", permWrite, func(p string) reply { return c.call(opSetData, setDataReq(p, []byte("w"), -1)) }},
		{"getData", permRead, func(p string) reply { return c.call(opGetData, pathWatchReq(p, false)) }},
		{"getChildren", permRead, func(p string) reply { return c.call(opGetChildren, pathWatchReq(p, false)) }},
		{"getChildren2", permRead, func(p string) reply { return c.call(opGetChildren2, pathWatchReq(p, false)) }},
		{"getAllChildrenNumber", permRead, func(p string) reply { return c.call(opGetAllChildrenNumber, pathReq(p)) }},
		{"setACL", permAdmin, func(p string) reply { return c.call(opSetACL, setACLReq(p, zk.WorldACL(all), -1)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			without := node(tc.name+"-without", all&^tc.perm)
			wantErr(tc.name+" without the permission", tc.op(without), errNoAuth)
			with := node(tc.name+"-with", tc.perm|permAdmin)
			wantErr(tc.name+" with the permission", tc.op(with), errOK)
		})
	}

	t.Run("getACL", func(t *testing.T) {
		// getACL needs READ or ADMIN. (The node that grants neither is an
		// ephemeral of owner, gone with its session.)
		owner, _ := connect(t)
		none, err := owner.Create(base+"/getacl-none", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermWrite|zk.PermCreate|zk.PermDelete))
		if err != nil {
			t.Fatal(err)
		}
		rep, _, _ := c.getACL(none)
		wantErr("getACL without READ and ADMIN", rep, errNoAuth)
		for _, perms := range []int32{permRead | permDelete, permAdmin} {
			p := node(fmt.Sprint("getacl-", perms), perms)
			rep, acl, _ := c.getACL(p)
			if rep.Err != errOK || !sameACL(acl, zk.WorldACL(perms)) {
				t.Fatalf("getACL with perms %d: %v %+v", perms, rep, acl)
			}
		}
	})

	t.Run("check", func(t *testing.T) {
		// check inside a multi needs READ.
		without := node("check-without", all&^permRead)
		rep := c.callOK(opMulti, multiReq(multiOp{opCheck, checkReq(without, -1)}))
		if res := decodeMultiResponse(t, rep.Body); len(res) != 1 || res[0] != (multiResult{Type: opError, Err: errNoAuth, Code: errNoAuth}) {
			t.Fatalf("multi check without READ: %+v, want one NOAUTH result", res)
		}
		with := node("check-with", permRead|permAdmin)
		rep = c.callOK(opMulti, multiReq(multiOp{opCheck, checkReq(with, 0)}))
		if res := decodeMultiResponse(t, rep.Body); len(res) != 1 || res[0] != (multiResult{Type: opCheck}) {
			t.Fatalf("multi check with READ: %+v, want one check result", res)
		}
	})

	t.Run("exists", func(t *testing.T) {
		// exists on an existing node without READ: ZooKeeper 3.8.0 answers
		// with the Stat (exists checks no ACL); 3.9 (ZOOKEEPER-2590) answers
		// NOAUTH. zkraft follows 3.9. On a missing node both say NONODE.
		p := node("exists-without", all&^permRead)
		rep := c.call(opExists, pathWatchReq(p, false))
		switch {
		case rep.Err == errOK && len(rep.Body) == 68:
			t.Logf("ZooKeeper 3.8.0 behaviour")
		case rep.Err == errNoAuth && rep.Len == 16:
			t.Logf("ZooKeeper 3.9 behaviour")
		default:
			t.Fatalf("exists without READ: %v, want OK with a Stat (3.8) or NOAUTH (3.9)", rep)
		}
		if rep := c.call(opExists, pathWatchReq(p+"/missing", false)); rep.Err != errNoNode {
			t.Fatalf("exists on a missing child of a node without READ: %v, want NONODE", rep)
		}
	})

	t.Run("multiRead", func(t *testing.T) {
		// multiRead's sub-ops fail on their own.
		without := node("multiread-without", all&^permRead)
		with := node("multiread-with", permRead|permAdmin)
		rep := c.callOK(opMultiRead, multiReq(
			multiOp{opGetData, pathWatchReq(without, false)},
			multiOp{opGetChildren, pathWatchReq(with, false)},
			multiOp{opGetChildren, pathWatchReq(without, false)},
		))
		want := new(jw).
			i32(opError).boolean(false).i32(errNoAuth).i32(errNoAuth).
			i32(opGetChildren).boolean(false).i32(0).strVec([]string{"child"}).
			i32(opError).boolean(false).i32(errNoAuth).i32(errNoAuth).
			i32(-1).boolean(true).i32(-1).bytes()
		if string(rep.Body) != string(want) {
			t.Fatalf("multiRead body\n got % x\nwant % x", rep.Body, want)
		}
	})
}

func TestACLDigestAndMasking(t *testing.T) {
	// The nodes are ephemerals of alice, gone with her session.
	base := uniquePath(t)
	alice := digestConn(t, "alice")
	bob := digestConn(t, "bob")
	anon, _ := connect(t)

	// alice may do everything, the world may read.
	p := base + "/p"
	acl := []zk.ACL{{Perms: permAll, Scheme: "digest", ID: aliceDigest}, {Perms: permRead, Scheme: "world", ID: "anyone"}}
	if _, err := alice.Create(p, []byte("v"), zk.FlagEphemeral, acl); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*zk.Conn{"anonymous": anon, "bob": bob} {
		if _, _, err := c.Get(p); err != nil {
			t.Fatalf("get as %s: %v", name, err)
		}
		if _, err := c.Set(p, []byte("w"), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("set as %s: %v, want NOAUTH", name, err)
		}
		if _, err := c.Create(p+"/c", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("create under it as %s: %v, want NOAUTH", name, err)
		}
		// READ without ADMIN: getACL masks digest ids as user:x.
		got, _, err := c.GetACL(p)
		masked := []zk.ACL{{Perms: permAll, Scheme: "digest", ID: "alice:x"}, {Perms: permRead, Scheme: "world", ID: "anyone"}}
		if err != nil || !sameACL(got, masked) {
			t.Fatalf("getACL as %s = %+v, %v; want %+v", name, got, err, masked)
		}
	}
	if _, err := alice.Set(p, []byte("w"), -1); err != nil {
		t.Fatalf("set as alice: %v", err)
	}
	// With ADMIN the ids are shown as they are.
	if got, _, err := alice.GetACL(p); err != nil || !sameACL(got, acl) {
		t.Fatalf("getACL as alice = %+v, %v; want %+v", got, err, acl)
	}
	q := base + "/q"
	qacl := []zk.ACL{{Perms: permAll, Scheme: "digest", ID: aliceDigest}, {Perms: permAdmin, Scheme: "world", ID: "anyone"}}
	if _, err := alice.Create(q, nil, zk.FlagEphemeral, qacl); err != nil {
		t.Fatal(err)
	}
	if got, _, err := anon.GetACL(q); err != nil || !sameACL(got, qacl) {
		t.Fatalf("getACL with world ADMIN = %+v, %v; want %+v unmasked", got, err, qacl)
	}
	if _, _, err := anon.Get(q); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("get with world ADMIN only: %v, want NOAUTH", err)
	}
	// A digest ACL entry for a password that was never used matches nobody
	// else: the id is compared, not the password.
	r := base + "/r"
	if _, err := alice.Create(r, nil, zk.FlagEphemeral, []zk.ACL{{Perms: permAll, Scheme: "digest", ID: digestID("alice", "other")}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := alice.Get(r); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("get with a digest of another password: %v, want NOAUTH", err)
	}
}

func TestSuperDigest(t *testing.T) {
	base := uniquePath(t)
	superConn(t, base)
	alice := digestConn(t, "alice")
	p := base + "/locked"
	acl := []zk.ACL{{Perms: permAll, Scheme: "digest", ID: aliceDigest}}
	if _, err := alice.Create(p, []byte("v"), 0, acl); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Create(p+"/child", nil, 0, acl); err != nil {
		t.Fatal(err)
	}

	// A wrong super password is just a digest user called "super".
	fake := rawSession(t, 10000)
	fake.authOK("digest", []byte("super:wrong"))
	if rep, _, _ := fake.getData(p, false); rep.Err != errNoAuth {
		t.Fatalf("getData as super:wrong: %v, want NOAUTH", rep)
	}

	// super:secret matches the configured superDigest: every ACL check
	// passes, and whoAmI shows the super id.
	su := rawSession(t, 10000)
	su.authOK("digest", []byte("super:secret"))
	want := []clientInfo{{"ip", "127.0.0.1"}, {"super", ""}, {"digest", "super"}}
	if got := su.whoAmI(); !sameInfos(got, want) {
		t.Fatalf("whoAmI as super = %+v, want %+v", got, want)
	}
	if rep, data, _ := su.getData(p, false); rep.Err != errOK || string(data) != "v" {
		t.Fatalf("getData as super: %v %q", rep, data)
	}
	if rep, names := su.strings(opGetChildren, pathWatchReq(p, false)); rep.Err != errOK || !slices.Equal(names, []string{"child"}) {
		t.Fatalf("getChildren as super: %v %v", rep, names)
	}
	if rep, got, _ := su.getACL(p); rep.Err != errOK || !sameACL(got, acl) {
		t.Fatalf("getACL as super: %v %+v, want %+v unmasked", rep, got, acl)
	}
	su.callOK(opSetData, setDataReq(p, []byte("w"), -1))
	su.callOK(opCreate, createReq(p+"/bysuper", nil, 0))
	su.callOK(opDelete, deleteReq(p+"/child", -1))
	su.callOK(opSetACL, setACLReq(p, acl, -1))
	// CREATOR_ALL_ACL as super expands to the digest id only (the super id
	// has no provider).
	rep, _, _ := su.create2ACL(p+"/creator", nil, zk.AuthACL(zk.PermAll), 0)
	if rep.Err != errOK {
		t.Fatalf("create with CREATOR_ALL_ACL as super: %v", rep)
	}
	if _, got, _ := su.getACL(p + "/creator"); !sameACL(got, []zk.ACL{{Perms: permAll, Scheme: "digest", ID: digestID("super", "secret")}}) {
		t.Fatalf("CREATOR_ALL_ACL as super expanded to %+v, want the digest of super:secret", got)
	}
	su.callOK(opDelete, deleteReq(p+"/bysuper", -1))
	su.callOK(opDelete, deleteReq(p+"/creator", -1))
	su.callOK(opDelete, deleteReq(p, -1))
}

func TestACLIP(t *testing.T) {
	// The suite reaches the server over 127.0.0.1. The nodes are ephemerals
	// of owner, so that they go with its session whoever may read them.
	base := uniquePath(t)
	owner, _ := connect(t)
	c, _ := connect(t)
	for _, tc := range []struct {
		id    string
		match bool
	}{
		{"127.0.0.1", true},
		{"127.0.0.1/32", true},
		{"127.0.0.0/8", true},
		{"127.1.2.3/8", true},
		{"0.0.0.0/0", true},
		{"127.0.0.2", false},
		{"10.0.0.0/8", false},
		{"128.0.0.1/1", false},
	} {
		p := base + "/ip-" + unsafeChars.ReplaceAllString(tc.id, "_")
		if _, err := owner.Create(p, []byte("v"), zk.FlagEphemeral, []zk.ACL{{Perms: permRead, Scheme: "ip", ID: tc.id}}); err != nil {
			t.Fatalf("create with ip:%s: %v", tc.id, err)
		}
		_, _, err := c.Get(p)
		if tc.match && err != nil {
			t.Errorf("get with ip:%s READ: %v, want it to match 127.0.0.1", tc.id, err)
		}
		if !tc.match && !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("get with ip:%s READ: %v, want NOAUTH", tc.id, err)
		}
	}
}

func TestInvalidACL(t *testing.T) {
	base := uniquePath(t)
	c := rawSession(t, 10000)
	n := base + "/n"
	c.callOK(opCreate, createReq(n, nil, 0))
	for _, tc := range []struct {
		name string
		acl  []zk.ACL
	}{
		{"EmptyList", []zk.ACL{}},
		{"WorldNotAnyone", []zk.ACL{{Perms: permAll, Scheme: "world", ID: "someone"}}},
		{"UnknownScheme", []zk.ACL{{Perms: permAll, Scheme: "foo", ID: "bar"}}},
		{"SuperScheme", []zk.ACL{{Perms: permAll, Scheme: "super", ID: ""}}},
		{"DigestWithoutColon", []zk.ACL{{Perms: permAll, Scheme: "digest", ID: "alice"}}},
		{"DigestTwoColons", []zk.ACL{{Perms: permAll, Scheme: "digest", ID: "a:b:c"}}},
		{"DigestEmptyHash", []zk.ACL{{Perms: permAll, Scheme: "digest", ID: "alice:"}}},
		{"IPThreeParts", []zk.ACL{{Perms: permAll, Scheme: "ip", ID: "1.2.3"}}},
		{"IPBadOctet", []zk.ACL{{Perms: permAll, Scheme: "ip", ID: "300.0.0.1"}}},
		{"IPPrefixTooLong", []zk.ACL{{Perms: permAll, Scheme: "ip", ID: "127.0.0.1/33"}}},
		{"IPPrefixNotANumber", []zk.ACL{{Perms: permAll, Scheme: "ip", ID: "127.0.0.1/x"}}},
		{"IPHostname", []zk.ACL{{Perms: permAll, Scheme: "ip", ID: "localhost"}}},
		{"AuthUnauthenticated", []zk.ACL{{Perms: permAll, Scheme: "auth", ID: ""}}},
		{"OneBadEntry", []zk.ACL{{Perms: permAll, Scheme: "world", ID: "anyone"}, {Perms: permRead, Scheme: "ip", ID: "1.2.3"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// create: INVALIDACL, header only; a failed write consumes a zxid.
			before := c.callOK(opSetData, setDataReq(n, nil, -1)).Zxid
			rep, _, _ := c.create2ACL(n+"/child", nil, tc.acl, 0)
			if rep.Err != errInvalidACL || rep.Zxid != before+1 {
				t.Fatalf("create with %+v: %v, want INVALIDACL at zxid %#x", tc.acl, rep, before+1)
			}
			if rep := c.call(opSetACL, setACLReq(n, tc.acl, -1)); rep.Err != errInvalidACL || rep.Len != 16 {
				t.Fatalf("setACL with %+v: %v, want INVALIDACL", tc.acl, rep)
			}
		})
	}
	if rep := c.call(opExists, pathWatchReq(n+"/child", false)); rep.Err != errNoNode {
		t.Fatalf("a create with an invalid ACL left a node: %v", rep)
	}
	if _, acl, st := c.getACL(n); !sameACL(acl, openACL) || st.Aversion != 0 {
		t.Fatalf("a setACL with an invalid ACL changed the node: %+v aversion %d", acl, st.Aversion)
	}

	// Accepted, perhaps surprisingly: perms 0, a digest id with an empty
	// user, and duplicates (which are removed). (Ephemerals, so that they go
	// with the session although nobody may read them.)
	for _, tc := range []struct {
		name string
		acl  []zk.ACL
		want []zk.ACL
	}{
		{"NoPerms", []zk.ACL{{Perms: 0, Scheme: "world", ID: "anyone"}}, nil},
		{"DigestEmptyUser", []zk.ACL{{Perms: permAll, Scheme: "digest", ID: ":x"}}, nil},
		{"Duplicates", []zk.ACL{{Perms: permAll, Scheme: "world", ID: "anyone"}, {Perms: permAll, Scheme: "world", ID: "anyone"}},
			[]zk.ACL{{Perms: permAll, Scheme: "world", ID: "anyone"}}},
	} {
		p := n + "/" + tc.name
		if rep, _, _ := c.create2ACL(p, nil, tc.acl, flagEphemeral); rep.Err != errOK {
			t.Fatalf("create %s with %+v: %v, want OK", tc.name, tc.acl, rep)
		}
		if tc.want != nil {
			if _, got, _ := c.getACL(p); !slices.Equal(got, tc.want) {
				t.Fatalf("getACL %s = %+v, want %+v", tc.name, got, tc.want)
			}
		}
	}
}
