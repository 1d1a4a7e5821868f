package znode

import (
	"github.com/zkraft/zkraft/jute"
)

// Reader answers read ops over a KV with the caller's auth ids.
type Reader struct {
	KV   ReadKV
	Auth []jute.ID
}

// node looks path up. Reads do not validate paths: ZooKeeper answers
// NONODE for a path that cannot exist.
func (r Reader) node(path string, perm int32) (*Node, error) {
	n, err := r.KV.Get(path)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, jute.ErrNoNode
	}
	if perm != 0 {
		if err := CheckACL(n.ACL, perm, r.Auth); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// Exists returns the node's Stat. It needs READ on an existing node, as
// ZooKeeper 3.9 (and 3.8.4+) does.
// A NUL in the path is BADARGUMENTS for exists alone (FinalRequestProcessor).
func (r Reader) Exists(path string) (*Node, error) {
	if containsNUL(path) {
		return nil, jute.ErrBadArguments
	}
	return r.node(path, jute.PermRead)
}

// GetData returns the node; it needs READ.
func (r Reader) GetData(path string) (*Node, error) { return r.node(path, jute.PermRead) }

// GetChildren returns the node and its child names; it needs READ.
func (r Reader) GetChildren(path string) (*Node, []string, error) {
	n, err := r.node(path, jute.PermRead)
	if err != nil {
		return nil, nil, err
	}
	names, err := r.KV.Children(path)
	if err != nil {
		return nil, nil, err
	}
	if names == nil {
		names = []string{}
	}
	return n, names, nil
}

// GetACL returns the node's ACL. It needs READ or ADMIN; without ADMIN the
// digest ids are masked to "user:x".
func (r Reader) GetACL(path string) (*Node, []jute.ACL, error) {
	n, err := r.node(path, 0)
	if err != nil {
		return nil, nil, err
	}
	if CheckACL(n.ACL, jute.PermAdmin, r.Auth) == nil {
		return n, n.ACL, nil
	}
	if err := CheckACL(n.ACL, jute.PermRead, r.Auth); err != nil {
		return nil, nil, err
	}
	masked := make([]jute.ACL, len(n.ACL))
	for i, a := range n.ACL {
		masked[i] = a
		if a.ID.Scheme == "digest" {
			user := a.ID.ID
			for j := 0; j < len(user); j++ {
				if user[j] == ':' {
					user = user[:j]
					break
				}
			}
			masked[i].ID.ID = user + ":x"
		}
	}
	return n, masked, nil
}

// CountDescendants returns the number of nodes below path (getAllChildrenNumber).
func (r Reader) CountDescendants(path string) (int32, error) {
	if _, err := r.node(path, jute.PermRead); err != nil {
		return 0, err
	}
	if c, ok := r.KV.(DescendantCounter); ok {
		return c.CountDescendants(path)
	}
	var count int32
	var walk func(p string) error
	walk = func(p string) error {
		names, err := r.KV.Children(p)
		if err != nil {
			return err
		}
		for _, name := range names {
			count++
			if err := walk(Join(p, name)); err != nil {
				return err
			}
		}
		return nil
	}
	return count, walk(path)
}
