package zkdata

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// Counts summarizes a tree.
type Counts struct {
	Nodes      int // the root included
	Ephemerals int
	Containers int
	TTLs       int
	Sessions   int
	Quotas     int   // zookeeper_limits nodes
	ACLs       int   // distinct ACL lists
	DataBytes  int64 // sum of data lengths
}

func (c Counts) String() string {
	return fmt.Sprintf("%d znodes (%d ephemeral, %d container, %d TTL), %d sessions, %d quotas, %d distinct ACLs, %d data bytes",
		c.Nodes, c.Ephemerals, c.Containers, c.TTLs, c.Sessions, c.Quotas, c.ACLs, c.DataBytes)
}

// Counts counts t's nodes by kind.
func (t *Tree) Counts() Counts {
	c := Counts{Nodes: len(t.nodes), Sessions: len(t.Sessions)}
	acls := map[string]bool{}
	for p, n := range t.nodes {
		switch znode.KindOf(n.Stat.EphemeralOwner) {
		case znode.OwnerSession:
			c.Ephemerals++
		case znode.OwnerContainer:
			c.Containers++
		case znode.OwnerTTL:
			c.TTLs++
		}
		if strings.HasPrefix(p, znode.QuotaPath+"/") && strings.HasSuffix(p, "/"+quotaLimitNode) {
			c.Quotas++
		}
		c.DataBytes += int64(len(n.Data))
		acls[aclString(n.ACL)] = true
	}
	c.ACLs = len(acls)
	return c
}

// Compare lists the differences between two trees: nodes only in one,
// and per node the stored Stat, the child count, the data (null and empty
// differ) and the ACL; then the sessions. The zxids are not compared (an
// import moves zxid to a new epoch). limit bounds the list (0: no bound).
func Compare(want, got *Tree, limit int) []string {
	var out []string
	add := func(format string, args ...any) bool {
		if limit > 0 && len(out) >= limit {
			return false
		}
		out = append(out, fmt.Sprintf(format, args...))
		return true
	}
	paths := make([]string, 0, len(want.nodes))
	for p := range want.nodes {
		paths = append(paths, p)
	}
	for p := range got.nodes {
		if want.nodes[p] == nil {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		w, g := want.nodes[p], got.nodes[p]
		var ok bool
		switch {
		case g == nil:
			ok = add("%s: missing", p)
		case w == nil:
			ok = add("%s: not in the source", p)
		default:
			ok = compareNode(p, w, g, add)
		}
		if !ok {
			return out
		}
	}
	ids := make([]int64, 0, len(want.Sessions))
	for id := range want.Sessions {
		ids = append(ids, id)
	}
	for id := range got.Sessions {
		if _, ok := want.Sessions[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		w, wok := want.Sessions[id]
		g, gok := got.Sessions[id]
		var ok = true
		switch {
		case !gok:
			ok = add("session %#x: missing", id)
		case !wok:
			ok = add("session %#x: not in the source", id)
		case w != g:
			ok = add("session %#x: timeout %d, want %d", id, g, w)
		}
		if !ok {
			break
		}
	}
	return out
}

func compareNode(p string, w, g *Node, add func(string, ...any) bool) bool {
	if w.Stat != g.Stat {
		if !add("%s: stat %+v, want %+v", p, g.Stat, w.Stat) {
			return false
		}
	}
	if len(w.children) != len(g.children) {
		if !add("%s: %d children, want %d", p, len(g.children), len(w.children)) {
			return false
		}
	}
	if !bytes.Equal(w.Data, g.Data) || (w.Data == nil) != (g.Data == nil) {
		if !add("%s: data %s, want %s", p, showData(g.Data), showData(w.Data)) {
			return false
		}
	}
	if aclString(w.ACL) != aclString(g.ACL) {
		if !add("%s: ACL %s, want %s", p, showACL(g.ACL), showACL(w.ACL)) {
			return false
		}
	}
	return true
}

func showData(b []byte) string {
	if b == nil {
		return "null"
	}
	if len(b) > 32 {
		return fmt.Sprintf("%q... (%d bytes)", b[:32], len(b))
	}
	return fmt.Sprintf("%q", b)
}

func showACL(acl []jute.ACL) string {
	if acl == nil {
		return "null"
	}
	parts := make([]string, len(acl))
	for i, a := range acl {
		parts[i] = fmt.Sprintf("%s:%s:%d", a.ID.Scheme, a.ID.ID, a.Perms)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
