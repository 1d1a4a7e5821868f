package jute

import "testing"

func TestSharedReaderAliases(t *testing.T) {
	w := NewWriter(0)
	w.Buffer([]byte("abc"))
	w.Buffer(nil)
	w.Buffer([]byte{})
	w.Buffer([]byte("de"))
	b := w.Bytes()
	for _, shared := range []bool{false, true} {
		r := NewReader(b)
		if shared {
			r = NewSharedReader(b)
		}
		first, null, empty, last := r.Buffer(), r.Buffer(), r.Buffer(), r.Buffer()
		if r.Err() != nil || string(first) != "abc" || null != nil || empty == nil || len(empty) != 0 || string(last) != "de" {
			t.Fatalf("shared=%v: %q %v %v %q %v", shared, first, null, empty, last, r.Err())
		}
		aliased := &first[0] == &b[4]
		if aliased != shared {
			t.Fatalf("shared=%v: buffer aliases the input: %v", shared, aliased)
		}
		if shared {
			// An append must not write over the bytes that follow.
			_ = append(first, 'X')
			if r2 := NewReader(b); string(r2.Buffer()) != "abc" || r2.Buffer() != nil || string(append(r2.Buffer(), r2.Buffer()...)) != "de" {
				t.Fatal("an append to a shared buffer changed the input")
			}
		}
	}
}

// Strings never alias the input, in any mode: a decoded string can outlive
// the buffer (a watch trigger keeps a node's ACL), and the common ACL
// schemes and ids come from constants without a copy.
func TestStringsDoNotAliasTheInput(t *testing.T) {
	acl := []ACL{
		{Perms: PermAll, ID: ID{Scheme: "world", ID: "anyone"}},
		{Perms: PermRead, ID: ID{Scheme: "digest", ID: "bob:x1Y2z3"}},
		{Perms: PermRead, ID: ID{Scheme: "ip", ID: "10.0.0.0/8"}},
	}
	w := NewWriter(0)
	w.ACLs(acl)
	w.String("/a/path")
	for _, mode := range []string{"copy", "shared", "shared value"} {
		b := append([]byte(nil), w.Bytes()...)
		var r *Reader
		switch mode {
		case "copy":
			r = NewReader(b)
		case "shared":
			r = NewSharedReader(b)
		default:
			v := SharedReaderOf(b)
			r = &v
		}
		got, path := r.ACLs(), r.String()
		if r.Err() != nil {
			t.Fatalf("%s: %v", mode, r.Err())
		}
		for i := range b {
			b[i] = 'X'
		}
		if len(got) != len(acl) || path != "/a/path" {
			t.Fatalf("%s: %+v %q", mode, got, path)
		}
		for i := range acl {
			if got[i] != acl[i] {
				t.Fatalf("%s: changing the input changed the decoded ACL %d: %+v", mode, i, got[i])
			}
		}
	}
}

// An open ACL decodes from a Reader on the stack into one heap object,
// its slice: the Reader, "world" and "anyone" cost none.
func TestOpenACLDecodesInOneAllocation(t *testing.T) {
	w := NewWriter(0)
	w.ACLs([]ACL{{Perms: PermAll, ID: ID{Scheme: "world", ID: "anyone"}}})
	b := w.Bytes()
	var got []ACL
	allocs := testing.AllocsPerRun(100, func() {
		r := SharedReaderOf(b)
		got = r.ACLs()
	})
	if allocs != 1 || len(got) != 1 || got[0].ID.Scheme != "world" || got[0].ID.ID != "anyone" {
		t.Fatalf("%v allocations, %+v", allocs, got)
	}
}
