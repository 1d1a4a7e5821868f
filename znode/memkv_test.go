package znode

import (
	"reflect"
	"sort"
	"testing"

	"github.com/zkraft/zkraft/jute"
)

// memKV is the simplest KV the rules can run over: a map of nodes and a map
// of ephemeral sets. Children and Ephemerals sort, as the KV contract asks.
// writes counts Put, Delete and SetEphemeral calls, so a test can assert that
// a failed operation wrote nothing.
type memKV struct {
	nodes  map[string]*Node
	eph    map[int64]map[string]bool
	writes int
}

var _ KV = (*memKV)(nil)

func newMemKV() *memKV {
	return &memKV{nodes: map[string]*Node{}, eph: map[int64]map[string]bool{}}
}

func (m *memKV) Get(path string) (*Node, error) { return m.nodes[path], nil }

func (m *memKV) Put(path string, n *Node) error {
	m.writes++
	m.nodes[path] = n
	return nil
}

func (m *memKV) Delete(path string) error {
	m.writes++
	delete(m.nodes, path)
	return nil
}

func (m *memKV) Children(path string) ([]string, error) {
	var out []string
	for p := range m.nodes {
		if p == "/" {
			continue
		}
		if parent, ok := Parent(p); ok && parent == path {
			out = append(out, Base(p))
		}
	}
	sort.Strings(out)
	return out, nil
}

func (m *memKV) SetEphemeral(owner int64, path string, present bool) error {
	m.writes++
	if present {
		if m.eph[owner] == nil {
			m.eph[owner] = map[string]bool{}
		}
		m.eph[owner][path] = true
		return nil
	}
	delete(m.eph[owner], path)
	if len(m.eph[owner]) == 0 {
		delete(m.eph, owner)
	}
	return nil
}

func (m *memKV) Ephemerals(owner int64) ([]string, error) {
	var out []string
	for p := range m.eph[owner] {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// snapshot returns a deep copy of the stored nodes, for before/after
// comparisons.
func (m *memKV) snapshot() map[string]*Node {
	out := make(map[string]*Node, len(m.nodes))
	for p, n := range m.nodes {
		out[p] = n.Clone()
	}
	return out
}

// newTree returns the tree every ZooKeeper starts with (DataTree's
// constructor): /, /zookeeper, /zookeeper/quota and /zookeeper/config.
func newTree() *memKV {
	m := newMemKV()
	m.nodes["/"] = &Node{Data: []byte{}, ACL: OpenACL, NumChildren: 1}
	m.nodes[ZooKeeperPath] = &Node{Data: []byte{}, ACL: OpenACL, NumChildren: 2}
	m.nodes[QuotaPath] = &Node{Data: []byte{}, ACL: OpenACL}
	m.nodes[ConfigPath] = &Node{Data: []byte{}, ACL: ReadACLUnsafe, Aversion: -1}
	return m
}

// txn returns a transaction at zxid with time zxid*1000 for session 0x100.
func txn(kv KV, zxid int64) *Txn {
	return &Txn{KV: kv, Zxid: zxid, Time: zxid * 1000, Session: 0x100, Options: Options{ExtendedTypes: true}}
}

// mustCreate creates a node or fails the test.
func mustCreate(t *testing.T, kv KV, zxid int64, path string, flags int32) string {
	t.Helper()
	ttl := int64(-1)
	if flags == jute.FlagPersistentTTL || flags == jute.FlagPersistentSequentialTTL {
		ttl = 1000
	}
	got, _, err := txn(kv, zxid).Create(path, []byte("d"), OpenACL, flags, ttl)
	if err != nil {
		t.Fatalf("create %s flags %d: %v", path, flags, err)
	}
	return got
}

func code(err error) jute.ErrCode { return jute.CodeOf(err) }

func digestACL(perms int32, userPassword string) jute.ACL {
	return jute.ACL{Perms: perms, ID: jute.ID{Scheme: "digest", ID: DigestID(userPassword)}}
}

func digestAuth(userPassword string) jute.ID {
	return jute.ID{Scheme: "digest", ID: DigestID(userPassword)}
}

// sameNodes reports whether two node maps hold equal nodes, telling nil data
// from empty data as the wire does.
func sameNodes(a, b map[string]*Node) bool {
	if len(a) != len(b) {
		return false
	}
	for p, n := range a {
		m, ok := b[p]
		if !ok || !reflect.DeepEqual(n, m) || (n.Data == nil) != (m.Data == nil) {
			return false
		}
	}
	return true
}
