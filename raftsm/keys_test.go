package raftsm

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// TestNodeValueSizedExactly: nodeValue writes the path length and the
// node's record into one buffer of exactly their size, and the record is
// the one jute.Marshal writes.
func TestNodeValueSizedExactly(t *testing.T) {
	for _, n := range []*znode.Node{
		{},
		{Data: []byte{}, ACL: znode.OpenACL},
		{Data: make([]byte, 1024), ACL: []jute.ACL{{Perms: 31, ID: jute.ID{Scheme: "digest", ID: "user:abcdefghijklmnop"}}, {Perms: 1, ID: jute.ID{Scheme: "ip", ID: "10.0.0.0/8"}}},
			Czxid: 1, Mzxid: 2, Pzxid: 3, Ctime: 4, Mtime: 5, Version: 6, Cversion: 7, Aversion: 8, EphemeralOwner: 9, NumChildren: 10},
	} {
		path := "/a/some/path"
		v := nodeValue(path, n)
		want := binary.AppendUvarint(nil, uint64(len(path)))
		want = append(want, jute.Marshal(n)...)
		if !bytes.Equal(v, want) {
			t.Fatalf("nodeValue(%+v) = %x, want %x", n, v, want)
		}
		if slack := cap(v) - len(v); slack < 0 || slack > binary.MaxVarintLen64 {
			t.Errorf("nodeValue of %d bytes in a buffer of %d: the size estimate is off", len(v), cap(v))
		}
	}
}

// TestNodeTail: nodeTail reads the same fixed fields as a full decode.
func TestNodeTail(t *testing.T) {
	n := &znode.Node{Data: []byte("data"), ACL: znode.OpenACL, Czxid: 1, Mzxid: 2, Pzxid: 3, Ctime: 4, Mtime: 5,
		Version: 6, Cversion: 7, Aversion: 8, EphemeralOwner: -9, NumChildren: 10}
	got, dlen, err := nodeTail(nodeValue("/p", n))
	if err != nil {
		t.Fatal(err)
	}
	if dlen != int64(len(n.Data)) {
		t.Fatalf("nodeTail data length %d, want %d", dlen, len(n.Data))
	}
	want := *n
	want.Data, want.ACL = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("nodeTail = %+v, want %+v", got, want)
	}
	if _, _, err := nodeTail(nodeValue("/p", n)[:20]); err == nil {
		t.Fatal("a short value read without error")
	}
}
