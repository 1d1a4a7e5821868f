package znode

import (
	"fmt"
	"math"
	"strings"

	"github.com/zkraft/zkraft/jute"
)

// KV is the store the tree rules run over. Get returns (nil, nil) for a
// missing node. Children returns child names in ascending byte order and
// Ephemerals returns paths in ascending order, so that everything computed
// from them is deterministic. A returned *Node must not be modified; Put a
// modified Clone instead.
type KV interface {
	ReadKV
	Put(path string, n *Node) error
	Delete(path string) error
	SetEphemeral(owner int64, path string, present bool) error
}

// ReadKV is the read half of KV: what a read view offers. A returned
// slice must not be modified either.
type ReadKV interface {
	Get(path string) (*Node, error)
	Children(path string) ([]string, error)
	Ephemerals(owner int64) ([]string, error)
}

// ChildCounter is what a KV may offer to read a node's child count
// without decoding the node: every write asks it of the quota root.
// exists is false for a missing node.
type ChildCounter interface {
	NumChildren(path string) (n int32, exists bool, err error)
}

// numChildren is path's child count (0 for a missing node), through
// ChildCounter when kv offers it.
func numChildren(kv KV, path string) (int32, error) {
	if cc, ok := kv.(ChildCounter); ok {
		n, _, err := cc.NumChildren(path)
		return n, err
	}
	n, err := kv.Get(path)
	if err != nil || n == nil {
		return 0, err
	}
	return n.NumChildren, nil
}

// DescendantCounter is what a ReadKV may offer to count the nodes below a
// path faster than by listing children level by level (a store that can
// walk its child index without building paths).
type DescendantCounter interface {
	CountDescendants(path string) (int32, error)
}

// Options are the tree rules that a server configures. Every replica of a
// shard must use the same Options.
type Options struct {
	// ExtendedTypes enables TTL nodes (zookeeper.extendedTypesEnabled).
	ExtendedTypes bool
	// EnforceQuota fails writes over hard quota limits
	// (zookeeper.enforceQuota).
	EnforceQuota bool
}

// Trigger is a watch event that a change causes. NodeCreated and
// NodeDataChanged go to data watches on Path, NodeChildrenChanged to child
// watches on Path, NodeDeleted to both.
type Trigger struct {
	Type jute.EventType
	Path string
	// ACL is the ACL of the node the event is about (the parent for
	// NodeChildrenChanged): a watcher without READ on it gets no event.
	ACL []jute.ACL
}

// Txn is one transaction: the store it changes, the zxid and time it
// carries, and who asks. Operations append the watch triggers they cause to
// Triggers. The caller discards the store's writes when an operation fails.
type Txn struct {
	KV       KV
	Zxid     int64
	Time     int64 // wall-clock ms chosen by the proposer
	Session  int64
	Auth     []jute.ID
	Options  Options
	Triggers []Trigger
	// Overlay, if set, is one Multi may use for its ops' writes (Reset
	// onto KV first) instead of making one: a state machine reuses one
	// for every multi. It must not be KV or under it.
	Overlay *Overlay
	// noQuotas: this transaction saw QuotaPath without children and has
	// created nothing under it since (quotaPrefix).
	noQuotas bool
}

func (tx *Txn) trigger(t jute.EventType, path string, acl []jute.ACL) {
	tx.Triggers = append(tx.Triggers, Trigger{Type: t, Path: path, ACL: acl})
}

func (tx *Txn) get(path string) (*Node, error) {
	n, err := tx.KV.Get(path)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, jute.ErrNoNode
	}
	return n, nil
}

func checkVersion(expected, actual int32) error {
	if expected != -1 && expected != actual {
		return jute.ErrBadVersion
	}
	return nil
}

// SequenceSuffix formats a parent's stored cversion as ZooKeeper's
// String.format("%010d", int) does ("-000000001" for a negative one, which
// ZooKeeper never stores but a hand-made snapshot could hold).
func SequenceSuffix(cversion int32) string {
	return fmt.Sprintf("%010d", cversion)
}

// Past 2^31-1: the sequence counter of a parent is its stored cversion, an
// int32 that counts every create under it (sequential or not), so it runs
// out after 2^31-1 creates. ZooKeeper 3.8 and 3.9 (PrepRequestProcessor
// and DataTree.createNode, unchanged up to master) do not wrap it either:
// the create at cversion MaxInt32 gets the suffix 2147483647 and carries
// parentCVersion MinInt32, which DataTree ignores because it is not larger,
// so the counter stays at MaxInt32 (and the parent's pzxid stops moving on
// creates). Every later sequential create under the parent gets the same
// suffix: NODEEXISTS while that child exists, and the name handed out again
// once it is deleted (seen on ZooKeeper 3.8 loaded with a snapshot whose
// parent stood at 2^31-3). A create pipelined behind the one at MaxInt32
// can still see the in-flight MinInt32 and get "-2147483648", a name that
// sorts first.
//
// zkraft keeps the counter at MaxInt32 too, so the stored cversion and the
// client's 2*cversion-numChildren stay ZooKeeper's, and non-sequential
// creates go on (and move pzxid, as every other create does). A sequential
// create at MaxInt32 always fails with NODEEXISTS: a name that sorted before
// its older siblings would hand a lock or a leadership to a newcomer, and a
// name given twice could make a client that remembers its node take
// another's for its own. So names run from 0000000000 to 2147483646, each
// given at most once and each sorting after every earlier one; ZooKeeper
// gives 2147483647 as well, and again after it is deleted. Recreating the
// parent starts a new counter.
const seqExhausted = math.MaxInt32

// Create applies a create of any mode (create, create2, createContainer,
// createTTL). ttl is -1 unless the request was a createTTL. It returns the
// created path and node.
func (tx *Txn) Create(path string, data []byte, acl []jute.ACL, flags int32, ttl int64) (string, *Node, error) {
	// Order of checks follows PrepRequestProcessor.pRequest2TxnCreate.
	if flags < jute.FlagPersistent || flags > jute.FlagPersistentSequentialTTL {
		return "", nil, jute.ErrBadArguments
	}
	isTTL := flags == jute.FlagPersistentTTL || flags == jute.FlagPersistentSequentialTTL
	if isTTL && !tx.Options.ExtendedTypes {
		return "", nil, jute.ErrUnimplemented
	}
	if isTTL {
		if ttl <= 0 || ttl > MaxTTL {
			return "", nil, jute.ErrBadArguments
		}
	} else if ttl >= 0 {
		return "", nil, jute.ErrBadArguments
	}
	ephemeral := flags == jute.FlagEphemeral || flags == jute.FlagEphemeralSequential
	sequential := flags == jute.FlagPersistentSequential || flags == jute.FlagEphemeralSequential ||
		flags == jute.FlagPersistentSequentialTTL
	if ephemeral && tx.Session == 0 {
		return "", nil, jute.ErrBadArguments
	}
	parentPath, ok := Parent(path)
	if !ok || containsNUL(path) {
		return "", nil, jute.ErrBadArguments
	}
	acl, err := FixupACL(acl, tx.Auth)
	if err != nil {
		return "", nil, err
	}
	parent, err := tx.get(parentPath)
	if err != nil {
		return "", nil, err
	}
	if err := CheckACL(parent.ACL, jute.PermCreate, tx.Auth); err != nil {
		return "", nil, err
	}
	if sequential {
		path += SequenceSuffix(parent.Cversion)
	}
	if err := ValidatePath(path); err != nil {
		return "", nil, err
	}
	existing, err := tx.KV.Get(path)
	if err != nil {
		return "", nil, err
	}
	if existing != nil || sequential && parent.Cversion == seqExhausted {
		return "", nil, jute.ErrNodeExists
	}
	if KindOf(parent.EphemeralOwner) == OwnerSession {
		return "", nil, jute.ErrNoChildrenForEphemerals
	}
	if err := tx.checkQuota(path, int64(len(data)), 1); err != nil {
		return "", nil, err
	}

	var owner int64
	switch {
	case ephemeral:
		owner = tx.Session
	case flags == jute.FlagContainer:
		owner = ContainerOwner
	case isTTL:
		owner = TTLOwner(ttl)
	}
	n := &Node{
		Data: data, ACL: acl,
		Czxid: tx.Zxid, Mzxid: tx.Zxid, Pzxid: tx.Zxid,
		Ctime: tx.Time, Mtime: tx.Time,
		EphemeralOwner: owner,
	}
	p := parent.Clone()
	if p.Cversion < seqExhausted {
		p.Cversion++ // and never wraps: see seqExhausted
	}
	p.Pzxid = tx.Zxid
	p.NumChildren++
	if err := tx.KV.Put(parentPath, p); err != nil {
		return "", nil, err
	}
	if err := tx.KV.Put(path, n); err != nil {
		return "", nil, err
	}
	if strings.HasPrefix(path, QuotaPath+"/") {
		tx.noQuotas = false
	}
	if ephemeral {
		if err := tx.KV.SetEphemeral(owner, path, true); err != nil {
			return "", nil, err
		}
	}
	if err := tx.quotaAfterCreate(parentPath, path, len(data)); err != nil {
		return "", nil, err
	}
	tx.trigger(jute.EventNodeCreated, path, n.ACL)
	tx.trigger(jute.EventNodeChildrenChanged, parentPath, p.ACL)
	return path, n, nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// Delete applies a delete (PrepRequestProcessor's checks, in its order: the
// parent and its DELETE permission come before the node itself).
func (tx *Txn) Delete(path string, version int32) error {
	parentPath, ok := Parent(path)
	if !ok || containsNUL(path) || IsSpecial(path) {
		return jute.ErrBadArguments
	}
	parent, err := tx.get(parentPath)
	if err != nil {
		return err
	}
	if err := CheckACL(parent.ACL, jute.PermDelete, tx.Auth); err != nil {
		return err
	}
	n, err := tx.get(path)
	if err != nil {
		return err
	}
	if err := checkVersion(version, n.Version); err != nil {
		return err
	}
	if n.NumChildren > 0 {
		return jute.ErrNotEmpty
	}
	return tx.remove(parentPath, parent, path, n)
}

// remove deletes a checked node and updates its parent.
func (tx *Txn) remove(parentPath string, parent *Node, path string, n *Node) error {
	p := parent.Clone()
	p.NumChildren--
	if tx.Zxid > p.Pzxid {
		p.Pzxid = tx.Zxid
	}
	if err := tx.KV.Put(parentPath, p); err != nil {
		return err
	}
	if err := tx.KV.Delete(path); err != nil {
		return err
	}
	if prefix, err := tx.quotaPrefix(path); err != nil {
		return err
	} else if prefix != "" {
		if err := tx.updateQuotaStat(prefix, -int64(len(n.Data)), -1); err != nil {
			return err
		}
	}
	if KindOf(n.EphemeralOwner) == OwnerSession {
		if err := tx.KV.SetEphemeral(n.EphemeralOwner, path, false); err != nil {
			return err
		}
	}
	tx.trigger(jute.EventNodeDeleted, path, n.ACL)
	tx.trigger(jute.EventNodeChildrenChanged, parentPath, p.ACL)
	return nil
}

// DeleteContainer applies the server's deleteContainer (op 20) for an
// empty container or an expired TTL node, with ZooKeeper's checks: NOTEMPTY
// if children appeared, BADVERSION if the node is a session's ephemeral.
// zkraft also re-checks, at the transaction's time, that a TTL node is still
// expired (a setData may have renewed it since the leader looked), and that a
// container has had a child; either failing is BADVERSION.
func (tx *Txn) DeleteContainer(path string) error {
	parentPath, ok := Parent(path)
	if !ok || containsNUL(path) || IsSpecial(path) {
		return jute.ErrBadArguments
	}
	n, err := tx.get(path)
	if err != nil {
		return err
	}
	if n.NumChildren > 0 {
		return jute.ErrNotEmpty
	}
	switch KindOf(n.EphemeralOwner) {
	case OwnerSession:
		return jute.ErrBadVersion
	case OwnerTTL:
		if tx.Time-n.Mtime <= TTLOf(n.EphemeralOwner) {
			return jute.ErrBadVersion
		}
	case OwnerContainer:
		if n.Cversion == 0 {
			return jute.ErrBadVersion
		}
	}
	parent, err := tx.get(parentPath)
	if err != nil {
		return err
	}
	return tx.remove(parentPath, parent, path, n)
}

// SetData applies a setData.
func (tx *Txn) SetData(path string, data []byte, version int32) (*Node, error) {
	if err := ValidatePath(path); err != nil {
		return nil, err
	}
	n, err := tx.get(path)
	if err != nil {
		return nil, err
	}
	if err := CheckACL(n.ACL, jute.PermWrite, tx.Auth); err != nil {
		return nil, err
	}
	bytesDiff := int64(len(data)) - int64(len(n.Data))
	if err := tx.checkQuota(path, bytesDiff, 0); err != nil {
		return nil, err
	}
	if err := checkVersion(version, n.Version); err != nil {
		return nil, err
	}
	c := n.Clone()
	c.Data = data
	c.Version++
	c.Mzxid = tx.Zxid
	c.Mtime = tx.Time
	if err := tx.KV.Put(path, c); err != nil {
		return nil, err
	}
	if prefix, err := tx.quotaPrefix(path); err != nil {
		return nil, err
	} else if prefix != "" {
		if err := tx.updateQuotaStat(prefix, bytesDiff, 0); err != nil {
			return nil, err
		}
	}
	tx.trigger(jute.EventNodeDataChanged, path, c.ACL)
	return c, nil
}

// SetACL applies a setACL. It fires no watch.
func (tx *Txn) SetACL(path string, acl []jute.ACL, version int32) (*Node, error) {
	if err := ValidatePath(path); err != nil {
		return nil, err
	}
	acl, err := FixupACL(acl, tx.Auth)
	if err != nil {
		return nil, err
	}
	n, err := tx.get(path)
	if err != nil {
		return nil, err
	}
	if err := CheckACL(n.ACL, jute.PermAdmin, tx.Auth); err != nil {
		return nil, err
	}
	if err := checkVersion(version, n.Aversion); err != nil {
		return nil, err
	}
	c := n.Clone()
	c.ACL = acl
	c.Aversion++
	if err := tx.KV.Put(path, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Check applies a version check (op 13). It changes nothing.
func (tx *Txn) Check(path string, version int32) error {
	if err := ValidatePath(path); err != nil {
		return err
	}
	n, err := tx.get(path)
	if err != nil {
		return err
	}
	if err := CheckACL(n.ACL, jute.PermRead, tx.Auth); err != nil {
		return err
	}
	return checkVersion(version, n.Version)
}

// CloseSession deletes every ephemeral of owner, in ascending path order.
// Paths that are already gone are skipped, as ZooKeeper does.
func (tx *Txn) CloseSession(owner int64) error {
	paths, err := tx.KV.Ephemerals(owner)
	if err != nil {
		return err
	}
	for _, path := range paths {
		n, err := tx.KV.Get(path)
		if err != nil {
			return err
		}
		if n == nil || n.EphemeralOwner != owner {
			if err := tx.KV.SetEphemeral(owner, path, false); err != nil {
				return err
			}
			continue
		}
		parentPath, _ := Parent(path)
		parent, err := tx.get(parentPath)
		if err != nil {
			return fmt.Errorf("znode: ephemeral %s has no parent: %w", path, err)
		}
		if err := tx.remove(parentPath, parent, path, n); err != nil {
			return err
		}
	}
	return nil
}
