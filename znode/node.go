package znode

import (
	"fmt"

	"github.com/zkraft/zkraft/jute"
)

// Special ephemeralOwner values (ZooKeeper's EphemeralType).
const (
	ContainerOwner int64 = -0x8000000000000000 // Long.MIN_VALUE
	ttlMask        int64 = -0x0100000000000000 // 0xFF00000000000000
	MaxTTL         int64 = 1<<40 - 1
)

// TTLOwner is the ephemeralOwner that marks a TTL node.
func TTLOwner(ttl int64) int64 { return ttlMask | ttl }

// OwnerKind classifies an ephemeralOwner value.
type OwnerKind int

const (
	OwnerNone OwnerKind = iota
	OwnerSession
	OwnerContainer
	OwnerTTL
)

// KindOf decodes an ephemeralOwner as ZooKeeper does with extended types on.
func KindOf(owner int64) OwnerKind {
	switch {
	case owner == 0:
		return OwnerNone
	case owner == ContainerOwner:
		return OwnerContainer
	case uint64(owner)>>56 == 0xff && (uint64(owner)>>40)&0xffff == 0:
		return OwnerTTL
	default:
		return OwnerSession
	}
}

// TTLOf returns the TTL in ms of a TTL owner.
func TTLOf(owner int64) int64 { return owner & MaxTTL }

// Node is a znode as stored. Cversion is ZooKeeper's stored value: the number
// of child creates ever made under the node; clients see 2*Cversion -
// NumChildren (DataNode.copyStat).
type Node struct {
	Data           []byte
	ACL            []jute.ACL
	Czxid          int64
	Mzxid          int64
	Pzxid          int64
	Ctime          int64
	Mtime          int64
	Version        int32
	Cversion       int32
	Aversion       int32
	EphemeralOwner int64
	NumChildren    int32
}

// Stat is the client-visible Stat of n.
func (n *Node) Stat() jute.Stat {
	owner := n.EphemeralOwner
	if KindOf(owner) != OwnerSession {
		owner = 0
	}
	return jute.Stat{
		Czxid:          n.Czxid,
		Mzxid:          n.Mzxid,
		Ctime:          n.Ctime,
		Mtime:          n.Mtime,
		Version:        n.Version,
		Cversion:       n.Cversion*2 - n.NumChildren,
		Aversion:       n.Aversion,
		EphemeralOwner: owner,
		DataLength:     int32(len(n.Data)),
		NumChildren:    n.NumChildren,
		Pzxid:          n.Pzxid,
	}
}

// Encode writes the stored form of n.
func (n *Node) Encode(w *jute.Writer) {
	w.Int(1) // record version
	w.Buffer(n.Data)
	w.ACLs(n.ACL)
	w.Long(n.Czxid)
	w.Long(n.Mzxid)
	w.Long(n.Pzxid)
	w.Long(n.Ctime)
	w.Long(n.Mtime)
	w.Int(n.Version)
	w.Int(n.Cversion)
	w.Int(n.Aversion)
	w.Long(n.EphemeralOwner)
	w.Int(n.NumChildren)
}

// Decode reads the stored form written by Encode.
func (n *Node) Decode(r *jute.Reader) {
	r.Int() // record version; checked by DecodeNode
	n.Data = r.Buffer()
	n.ACL = r.ACLs()
	n.Czxid = r.Long()
	n.Mzxid = r.Long()
	n.Pzxid = r.Long()
	n.Ctime = r.Long()
	n.Mtime = r.Long()
	n.Version = r.Int()
	n.Cversion = r.Int()
	n.Aversion = r.Int()
	n.EphemeralOwner = r.Long()
	n.NumChildren = r.Int()
}

var _ jute.Record = (*Node)(nil)

// DecodeNode decodes a stored node and checks its record version.
func DecodeNode(b []byte) (*Node, error) { return decodeNode(b, jute.Unmarshal) }

// DecodeNodeShared is DecodeNode with the node's Data aliasing b, which
// must not change while the node is in use (an immutable stored value:
// the state machine's node cache, or a copy read from the store). It
// makes two heap objects, the node and its ACL slice, when the ACL holds
// only the common schemes and ids (jute interns them).
func DecodeNodeShared(b []byte) (*Node, error) {
	if err := checkNodeVersion(b); err != nil {
		return nil, err
	}
	n := new(Node)
	r := jute.SharedReaderOf(b) // on the stack: Decode is called on the concrete type
	n.Decode(&r)
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptNode, err)
	}
	return n, nil
}

func checkNodeVersion(b []byte) error {
	if len(b) < 4 || b[0] != 0 || b[1] != 0 || b[2] != 0 || b[3] != 1 {
		return ErrCorruptNode
	}
	return nil
}

func decodeNode(b []byte, unmarshal func([]byte, jute.Record) error) (*Node, error) {
	if err := checkNodeVersion(b); err != nil {
		return nil, err
	}
	n := new(Node)
	if err := unmarshal(b, n); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptNode, err)
	}
	return n, nil
}

// Clone returns a copy of n, so a caller can modify its fields without
// touching a node another reader holds. Data and ACL are shared: a node's
// data and ACL are never changed in place, only replaced (the ACL was
// copied on every write, for no caller).
func (n *Node) Clone() *Node {
	c := *n
	return &c
}
