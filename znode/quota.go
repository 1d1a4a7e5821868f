package znode

import (
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/zkraft/zkraft/jute"
)

// Quotas as ZooKeeper keeps them: a quota on path P is the node
// /zookeeper/quota/P/zookeeper_limits, whose data is a StatsTrack string
// ("count=N,bytes=M", 3.7+ appends "=;byteHardLimit=X;countHardLimit=Y"),
// and its usage is /zookeeper/quota/P/zookeeper_stats. ZooKeeper updates
// the stats node's data in memory on every create, delete and setData under
// P without logging it; zkraft updates it in the same transaction, which
// keeps every replica identical. The stats node's Stat does not change.
const (
	quotaLimitNode = "zookeeper_limits"
	quotaStatNode  = "zookeeper_stats"
)

// StatsTrack is ZooKeeper's StatsTrack: "count=N,bytes=M", and since 3.7
// "...=;byteHardLimit=X;countHardLimit=Y". Absent keys read as -1.
type StatsTrack map[string]int64

var statsSeparator = regexp.MustCompile(`[,;]+`)

// ParseStatsTrack parses a StatsTrack string as the Java constructor does;
// a pair it cannot parse is skipped (Java would throw and leave the quota
// unusable).
func ParseStatsTrack(data []byte) StatsTrack {
	s := StatsTrack{}
	if len(data) == 0 {
		return s
	}
	for _, pair := range statsSeparator.Split(string(data), -1) {
		parts := strings.Split(pair, "=")
		for len(parts) > 0 && parts[len(parts)-1] == "" { // Java's split drops trailing empties
			parts = parts[:len(parts)-1]
		}
		if len(parts) == 0 {
			continue
		}
		v := int64(-1)
		if len(parts) > 1 && parts[1] != "" {
			n, err := strconv.ParseInt(parts[1], 10, 64)
			if err != nil {
				continue
			}
			v = n
		}
		s[parts[0]] = v
	}
	return s
}

// Get returns the value of key k, -1 when absent.
func (s StatsTrack) Get(k string) int64 {
	if v, ok := s[k]; ok {
		return v
	}
	return -1
}

// String formats s as StatsTrack.toString does.
func (s StatsTrack) String() string {
	var b strings.Builder
	b.WriteString("count=" + strconv.FormatInt(s.Get("count"), 10))
	b.WriteString(",bytes=" + strconv.FormatInt(s.Get("bytes"), 10))
	var keys []string
	for k := range s {
		if k != "count" && k != "bytes" {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		sort.Strings(keys)
		b.WriteString("=")
		for _, k := range keys {
			b.WriteString(";" + k + "=" + strconv.FormatInt(s[k], 10))
		}
	}
	return b.String()
}

// quotaPrefix returns the deepest path at or above path that has a quota,
// or "" when none does (a quota on "/" is not kept, as in ZooKeeper).
func (tx *Txn) quotaPrefix(path string) (string, error) {
	if tx.noQuotas {
		return "", nil
	}
	quotas, err := numChildren(tx.KV, QuotaPath)
	if err != nil {
		return "", err
	}
	if quotas == 0 {
		// Only a create under QuotaPath changes that (Create clears it):
		// the ops after this one in a multi need not read it again.
		tx.noQuotas = true
		return "", nil
	}
	for p := path; p != "/" && p != ""; {
		n, err := tx.KV.Get(QuotaPath + p + "/" + quotaLimitNode)
		if err != nil {
			return "", err
		}
		if n != nil {
			return p, nil
		}
		var ok bool
		if p, ok = Parent(p); !ok {
			break
		}
	}
	return "", nil
}

// updateQuotaStat adds to the usage recorded for the quota on prefix.
func (tx *Txn) updateQuotaStat(prefix string, bytesDiff int64, countDiff int64) error {
	statPath := QuotaPath + prefix + "/" + quotaStatNode
	n, err := tx.KV.Get(statPath)
	if err != nil || n == nil {
		return err // a missing stats node is only logged by ZooKeeper
	}
	s := ParseStatsTrack(n.Data)
	s["count"] = s.Get("count") + countDiff
	s["bytes"] = s.Get("bytes") + bytesDiff
	c := n.Clone()
	c.Data = []byte(s.String())
	return tx.KV.Put(statPath, c)
}

// quotaAfterCreate maintains quota usage after a create (DataTree.createNode).
func (tx *Txn) quotaAfterCreate(parentPath, path string, dataLen int) error {
	if strings.HasPrefix(parentPath, QuotaPath) && Base(path) == quotaStatNode {
		if err := tx.recountQuota(parentPath[len(QuotaPath):]); err != nil {
			return err
		}
	}
	prefix, err := tx.quotaPrefix(path)
	if err != nil || prefix == "" {
		return err
	}
	return tx.updateQuotaStat(prefix, int64(dataLen), 1)
}

// recountQuota sets the stats node of the quota on real to the current
// node count and bytes of its subtree (DataTree.updateQuotaForPath).
func (tx *Txn) recountQuota(real string) error {
	var count, bytes int64
	var walk func(p string) error
	walk = func(p string) error {
		n, err := tx.KV.Get(p)
		if err != nil || n == nil {
			return err
		}
		count++
		bytes += int64(len(n.Data))
		names, err := tx.KV.Children(p)
		if err != nil {
			return err
		}
		for _, name := range names {
			if err := walk(Join(p, name)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(real); err != nil {
		return err
	}
	statPath := QuotaPath + real + "/" + quotaStatNode
	n, err := tx.KV.Get(statPath)
	if err != nil || n == nil {
		return err
	}
	c := n.Clone()
	c.Data = []byte(StatsTrack{"count": count, "bytes": bytes}.String())
	return tx.KV.Put(statPath, c)
}

// checkQuota fails a create or setData that would take a quota with a hard
// limit over it, when quotas are enforced (ZooKeeperServer.checkQuota).
// Soft limits are only logged by ZooKeeper and never fail a write.
func (tx *Txn) checkQuota(path string, bytesDiff, countDiff int64) error {
	if !tx.Options.EnforceQuota {
		return nil
	}
	prefix, err := tx.quotaPrefix(path)
	if err != nil || prefix == "" {
		return err
	}
	limitNode, err := tx.KV.Get(QuotaPath + prefix + "/" + quotaLimitNode)
	if err != nil || limitNode == nil {
		return err
	}
	limits := ParseStatsTrack(limitNode.Data)
	checkCount := countDiff != 0 && (limits.Get("count") > -1 || limits.Get("countHardLimit") > -1)
	checkBytes := bytesDiff != 0 && (limits.Get("bytes") > -1 || limits.Get("byteHardLimit") > -1)
	if !checkCount && !checkBytes {
		return nil
	}
	statNode, err := tx.KV.Get(QuotaPath + prefix + "/" + quotaStatNode)
	if err != nil || statNode == nil {
		return err
	}
	current := ParseStatsTrack(statNode.Data)
	if checkCount {
		if hard := limits.Get("countHardLimit"); hard > -1 && current.Get("count")+countDiff > hard {
			return jute.ErrQuotaExceeded
		}
	}
	if checkBytes {
		if hard := limits.Get("byteHardLimit"); hard > -1 && current.Get("bytes")+bytesDiff > hard {
			return jute.ErrQuotaExceeded
		}
	}
	return nil
}
