package zkdata

import (
	"strings"

	"github.com/zkraft/zkraft/znode"
)

// Quotas as ZooKeeper keeps them: the quota on P is the node
// /zookeeper/quota/P/zookeeper_limits, and its usage is the data of
// /zookeeper/quota/P/zookeeper_stats. ZooKeeper updates that data in memory
// on every create, delete and setData under P without logging it, and
// recounts it from the tree when it loads a snapshot; a restore does the
// same, so the result is what ZooKeeper itself would serve after a restart.
const (
	quotaLimitNode = "zookeeper_limits"
	quotaStatNode  = "zookeeper_stats"
)

// pathTrie is ZooKeeper's PathTrie of the paths that have a quota.
type pathTrie struct{ root *trieNode }

type trieNode struct {
	name     string
	parent   *trieNode
	children map[string]*trieNode
	property bool
}

func newPathTrie() *pathTrie { return &pathTrie{root: &trieNode{}} }

// trieSplit splits a path into its non-blank components.
func trieSplit(path string) []string {
	var out []string
	for _, c := range strings.Split(path, "/") {
		if strings.TrimSpace(c) != "" {
			out = append(out, c)
		}
	}
	return out
}

func (t *pathTrie) add(path string) {
	if path == "" {
		return // ZooKeeper throws here; a quota on the root is never kept
	}
	n := t.root
	for _, c := range trieSplit(path) {
		child := n.children[c]
		if child == nil {
			child = &trieNode{name: c, parent: n}
			if n.children == nil {
				n.children = map[string]*trieNode{}
			}
			n.children[c] = child
		}
		n = child
	}
	n.property = true
}

// remove deletes the trie node of path and everything under it, as
// PathTrie.deletePath does.
func (t *pathTrie) remove(path string) {
	if path == "" {
		return
	}
	n := t.root
	for _, c := range trieSplit(path) {
		if n.children[c] == nil {
			return
		}
		n = n.children[c]
	}
	if n.parent != nil {
		delete(n.parent.children, n.name)
	}
}

// maxPrefix is PathTrie.findMaxPrefix: the deepest path at or above path
// that has a quota, or "/".
func (t *pathTrie) maxPrefix(path string) string {
	n := t.root
	var deepest *trieNode
	for _, c := range trieSplit(path) {
		n = n.children[c]
		if n == nil {
			break
		}
		if n.property {
			deepest = n
		}
	}
	if deepest == nil {
		return "/"
	}
	var parts []string
	for x := deepest; x != t.root; x = x.parent {
		parts = append(parts, x.name)
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return "/" + strings.Join(parts, "/")
}

// maxPrefixWithQuota is DataTree.getMaxPrefixWithQuota. A prefix of "/"
// means none in effect: its stats path does not exist.
func (t *Tree) maxPrefixWithQuota(path string) (string, bool) {
	p := t.quotas.maxPrefix(path)
	if p == znode.ZooKeeperPath || p == "" {
		return "", false
	}
	return p, true
}

func quotaStatPath(real string) string { return znode.QuotaPath + real + "/" + quotaStatNode }

// updateQuotaStat adds to the usage recorded for the quota on prefix.
func (t *Tree) updateQuotaStat(prefix string, bytesDiff, countDiff int64) {
	p := quotaStatPath(prefix)
	n := t.lookup(p)
	if n == nil {
		return // ZooKeeper logs "Missing node for stat"
	}
	s := znode.ParseStatsTrack(n.Data)
	s["count"] = s.Get("count") + countDiff
	s["bytes"] = s.Get("bytes") + bytesDiff
	t.change(p, n, func() { n.Data = []byte(s.String()) })
}

// updateQuotaForPath recounts the nodes and bytes under real into its
// stats node.
func (t *Tree) updateQuotaForPath(real string) {
	var count, bytes int64
	var walk func(p string)
	walk = func(p string) {
		n := t.lookup(p)
		if n == nil {
			return
		}
		count++
		bytes += int64(len(n.Data))
		for c := range n.children {
			walk(strings.TrimSuffix(normalize(p), "/") + "/" + c)
		}
	}
	walk(real)
	p := quotaStatPath(real)
	n := t.lookup(p)
	if n == nil {
		return
	}
	data := znode.StatsTrack{"count": count, "bytes": bytes}.String()
	t.change(p, n, func() { n.Data = []byte(data) })
}

// setupQuota is what ZooKeeper does after loading a snapshot: every leaf
// named zookeeper_limits under /zookeeper/quota gets its quota recounted and
// registered.
func (t *Tree) setupQuota() {
	if t.lookup(znode.QuotaPath) == nil {
		return
	}
	const end = "/" + quotaLimitNode
	var traverse func(p string)
	traverse = func(p string) {
		n := t.lookup(p)
		if n == nil {
			return
		}
		if len(n.children) == 0 {
			if strings.HasSuffix(p, end) {
				real := p[len(znode.QuotaPath):strings.Index(p, end)]
				t.updateQuotaForPath(real)
				t.quotas.add(real)
			}
			return
		}
		for _, c := range t.Children(p) {
			traverse(p + "/" + c)
		}
	}
	traverse(znode.QuotaPath)
}
