package znode

import (
	"reflect"
	"testing"

	"github.com/zkraft/zkraft/jute"
)

func TestDigestID(t *testing.T) {
	// Verified against ZooKeeper 3.8.0 (zookeeper-facts.md §1.7).
	if got := DigestID("alice:secret"); got != "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E=" {
		t.Errorf("DigestID(alice:secret) = %q", got)
	}
}

func TestCheckACL(t *testing.T) {
	world := func(perms int32) jute.ACL {
		return jute.ACL{Perms: perms, ID: jute.ID{Scheme: "world", ID: "anyone"}}
	}
	ip := func(perms int32, id string) jute.ACL {
		return jute.ACL{Perms: perms, ID: jute.ID{Scheme: "ip", ID: id}}
	}
	alice := digestAuth("alice:secret")
	bob := digestAuth("bob:secret")
	from := func(addr string) jute.ID { return jute.ID{Scheme: "ip", ID: addr} }
	super := jute.ID{Scheme: "super", ID: ""}
	for _, tc := range []struct {
		name string
		acl  []jute.ACL
		perm int32
		auth []jute.ID
		ok   bool
	}{
		{"empty acl allows all", nil, jute.PermAdmin, nil, true},
		{"world read", []jute.ACL{world(jute.PermRead)}, jute.PermRead, nil, true},
		{"world read, want write", []jute.ACL{world(jute.PermRead)}, jute.PermWrite, nil, false},
		{"world other id", []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "x"}}}, jute.PermRead, nil, false},
		{"digest match", []jute.ACL{digestACL(jute.PermAll, "alice:secret")}, jute.PermWrite, []jute.ID{alice}, true},
		{"digest other user", []jute.ACL{digestACL(jute.PermAll, "alice:secret")}, jute.PermWrite, []jute.ID{bob}, false},
		{"digest wrong password", []jute.ACL{digestACL(jute.PermAll, "alice:secret")}, jute.PermWrite, []jute.ID{digestAuth("alice:wrong")}, false},
		{"digest second of two ids", []jute.ACL{digestACL(jute.PermAll, "alice:secret")}, jute.PermWrite, []jute.ID{bob, alice}, true},
		{"digest without perm", []jute.ACL{digestACL(jute.PermRead, "alice:secret")}, jute.PermWrite, []jute.ID{alice}, false},
		{"perm from second entry", []jute.ACL{digestACL(jute.PermRead, "alice:secret"), world(jute.PermWrite)}, jute.PermWrite, []jute.ID{alice}, true},
		{"scheme must match", []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "digest", ID: "127.0.0.1"}}}, jute.PermRead, []jute.ID{from("127.0.0.1")}, false},
		{"ip exact", []jute.ACL{ip(jute.PermAll, "10.1.2.3")}, jute.PermRead, []jute.ID{from("10.1.2.3")}, true},
		{"ip exact other", []jute.ACL{ip(jute.PermAll, "10.1.2.3")}, jute.PermRead, []jute.ID{from("10.1.2.4")}, false},
		{"ip /24", []jute.ACL{ip(jute.PermAll, "10.1.2.0/24")}, jute.PermRead, []jute.ID{from("10.1.2.200")}, true},
		{"ip /24 unmasked acl", []jute.ACL{ip(jute.PermAll, "10.1.2.77/24")}, jute.PermRead, []jute.ID{from("10.1.2.200")}, true},
		{"ip /24 outside", []jute.ACL{ip(jute.PermAll, "10.1.2.0/24")}, jute.PermRead, []jute.ID{from("10.1.3.1")}, false},
		{"ip /0", []jute.ACL{ip(jute.PermAll, "0.0.0.0/0")}, jute.PermRead, []jute.ID{from("192.168.1.1")}, true},
		{"ip /32", []jute.ACL{ip(jute.PermAll, "10.1.2.3/32")}, jute.PermRead, []jute.ID{from("10.1.2.3")}, true},
		{"ip bad bits", []jute.ACL{ip(jute.PermAll, "10.1.2.3/33")}, jute.PermRead, []jute.ID{from("10.1.2.3")}, false},
		{"ip v6", []jute.ACL{ip(jute.PermAll, "fe80::/16")}, jute.PermRead, []jute.ID{from("fe80::1")}, true},
		{"ip bad remote", []jute.ACL{ip(jute.PermAll, "10.1.2.3")}, jute.PermRead, []jute.ID{from("nonsense")}, false},
		{"super bypasses", []jute.ACL{digestACL(jute.PermRead, "alice:secret")}, jute.PermAdmin, []jute.ID{super}, true},
		{"super in acl is not a match", []jute.ACL{{Perms: jute.PermAll, ID: super}}, jute.PermRead, []jute.ID{alice}, false},
		{"no perms", []jute.ACL{world(0)}, jute.PermRead, nil, false},
	} {
		err := CheckACL(tc.acl, tc.perm, tc.auth)
		if tc.ok && err != nil {
			t.Errorf("%s: CheckACL = %v, want ok", tc.name, err)
		}
		if !tc.ok && code(err) != jute.ErrNoAuth {
			t.Errorf("%s: CheckACL = %v, want NOAUTH", tc.name, err)
		}
	}
}

func TestFixupACL(t *testing.T) {
	alice := digestAuth("alice:secret")
	bob := digestAuth("bob:secret")
	auth := func(perms int32) jute.ACL { return jute.ACL{Perms: perms, ID: jute.ID{Scheme: "auth", ID: ""}} }
	world := jute.ACL{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}
	for _, tc := range []struct {
		name string
		acl  []jute.ACL
		ids  []jute.ID
		want []jute.ACL // nil: INVALIDACL
	}{
		{"nil", nil, nil, nil},
		{"empty", []jute.ACL{}, nil, nil},
		{"world", []jute.ACL{world}, nil, []jute.ACL{world}},
		{"duplicates removed", []jute.ACL{world, world}, nil, []jute.ACL{world}},
		// removeDuplicates runs on the request's list, before "auth" is
		// expanded, so an expanded id may repeat an explicit one.
		{"expansion may duplicate", []jute.ACL{digestACL(1, "alice:secret"), auth(1)}, []jute.ID{alice},
			[]jute.ACL{{Perms: 1, ID: alice}, {Perms: 1, ID: alice}}},
		{"auth expands to every authenticated id", []jute.ACL{auth(jute.PermRead)}, []jute.ID{alice, {Scheme: "ip", ID: "1.2.3.4"}, bob},
			[]jute.ACL{{Perms: jute.PermRead, ID: alice}, {Perms: jute.PermRead, ID: bob}}},
		{"auth id is ignored", []jute.ACL{{Perms: 1, ID: jute.ID{Scheme: "auth", ID: "whatever"}}}, []jute.ID{alice},
			[]jute.ACL{{Perms: 1, ID: alice}}},
		{"auth with no ids", []jute.ACL{auth(1)}, nil, nil},
		{"auth with ip only", []jute.ACL{auth(1)}, []jute.ID{{Scheme: "ip", ID: "1.2.3.4"}}, nil},
		// ZooKeeper has no "super" auth provider: a super id is not expanded
		// (the super user's digest id is).
		{"auth skips super", []jute.ACL{auth(1)}, []jute.ID{{Scheme: "super", ID: ""}, alice}, []jute.ACL{{Perms: 1, ID: alice}}},
		{"auth with super only", []jute.ACL{auth(1)}, []jute.ID{{Scheme: "super", ID: ""}}, nil},
		{"digest ok", []jute.ACL{digestACL(1, "alice:secret")}, nil, []jute.ACL{digestACL(1, "alice:secret")}},
		{"digest no colon", []jute.ACL{{Perms: 1, ID: jute.ID{Scheme: "digest", ID: "alice"}}}, nil, nil},
		{"digest two colons", []jute.ACL{{Perms: 1, ID: jute.ID{Scheme: "digest", ID: "a:b:c"}}}, nil, nil},
		// Java's String.split drops trailing empty strings.
		{"digest trailing colon", []jute.ACL{{Perms: 1, ID: jute.ID{Scheme: "digest", ID: "alice:"}}}, nil, nil},
		{"digest trailing colons after two parts", []jute.ACL{{Perms: 1, ID: jute.ID{Scheme: "digest", ID: "a:b::"}}}, nil,
			[]jute.ACL{{Perms: 1, ID: jute.ID{Scheme: "digest", ID: "a:b::"}}}},
		{"digest empty user", []jute.ACL{{Perms: 1, ID: jute.ID{Scheme: "digest", ID: ":b"}}}, nil,
			[]jute.ACL{{Perms: 1, ID: jute.ID{Scheme: "digest", ID: ":b"}}}},
		{"ip ok", []jute.ACL{{Perms: 1, ID: jute.ID{Scheme: "ip", ID: "10.0.0.0/8"}}}, nil, []jute.ACL{{Perms: 1, ID: jute.ID{Scheme: "ip", ID: "10.0.0.0/8"}}}},
		{"ip bad", []jute.ACL{{Perms: 1, ID: jute.ID{Scheme: "ip", ID: "10.0.0/8"}}}, nil, nil},
		{"ip bad bits", []jute.ACL{{Perms: 1, ID: jute.ID{Scheme: "ip", ID: "10.0.0.0/x"}}}, nil, nil},
		{"one bad entry fails all", []jute.ACL{world, {Perms: 1, ID: jute.ID{Scheme: "nope", ID: "x"}}}, nil, nil},
		{"super scheme in acl", []jute.ACL{{Perms: 1, ID: jute.ID{Scheme: "super", ID: ""}}}, nil, nil},
	} {
		got, err := FixupACL(tc.acl, tc.ids)
		if tc.want == nil {
			if code(err) != jute.ErrInvalidACL {
				t.Errorf("%s: FixupACL = %v, %v; want INVALIDACL", tc.name, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: FixupACL = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestNoAuthOnWrites runs each write against nodes guarded by ACLs, with and
// without the right ids.
func TestNoAuthOnWrites(t *testing.T) {
	alice := digestAuth("alice:secret")
	kv := newTree()
	tx := txn(kv, 2)
	tx.Auth = []jute.ID{alice}
	// /p: alice may do everything; the world may only read.
	acl := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "auth"}}, {Perms: jute.PermRead, ID: jute.ID{Scheme: "world", ID: "anyone"}}}
	if _, _, err := tx.Create("/p", nil, acl, 0, -1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tx.Create("/p/c", nil, acl, 0, -1); err != nil {
		t.Fatal(err)
	}
	for _, who := range []struct {
		name string
		auth []jute.ID
		want jute.ErrCode
	}{
		{"anonymous", nil, jute.ErrNoAuth},
		{"ip", []jute.ID{{Scheme: "ip", ID: "127.0.0.1"}}, jute.ErrNoAuth},
		{"bob", []jute.ID{digestAuth("bob:secret")}, jute.ErrNoAuth},
		{"alice", []jute.ID{alice}, jute.ErrOK},
		{"super", []jute.ID{{Scheme: "super", ID: ""}}, jute.ErrOK},
	} {
		ops := []struct {
			name string
			run  func(tx *Txn) error
		}{
			{"create", func(tx *Txn) error { _, _, err := tx.Create("/p/new", nil, OpenACL, 0, -1); return err }},
			{"setData", func(tx *Txn) error { _, err := tx.SetData("/p/c", nil, -1); return err }},
			{"setACL", func(tx *Txn) error { _, err := tx.SetACL("/p/c", OpenACL, -1); return err }},
			{"delete", func(tx *Txn) error { return tx.Delete("/p/c", -1) }},
		}
		for _, op := range ops {
			kv2 := newMemKV()
			for p, n := range kv.nodes {
				kv2.nodes[p] = n.Clone()
			}
			tx := txn(kv2, 10)
			tx.Auth = who.auth
			if got := code(op.run(tx)); got != who.want {
				t.Errorf("%s by %s: %v, want %v", op.name, who.name, got, who.want)
			}
		}
		// Check needs only READ, which the world has.
		tx := txn(kv, 10)
		tx.Auth = who.auth
		if err := tx.Check("/p/c", -1); err != nil {
			t.Errorf("check by %s: %v", who.name, err)
		}
	}
}
