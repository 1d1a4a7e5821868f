package conformance

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

// Quotas as zkCli drives them (setquota / listquota / delquota in 3.8, with
// the 3.7+ hard limits -N and -B), and their enforcement with
// zookeeper.enforceQuota=true / EnforceQuota (zookeeper-facts.md §3.6).
//
// A quota is nothing but znodes the client writes under /zookeeper/quota:
// <path>/zookeeper_limits holds the limits and <path>/zookeeper_stats the
// usage, both as StatsTrack text. The server recognises them by name, keeps
// the stats node's data up to date (in memory, not as a write), and with
// enforcement on refuses a create or setData that would pass a hard limit
// with QUOTAEXCEEDED. The helpers below do exactly what zkCli's
// SetQuotaCommand, ListQuotaCommand and DelQuotaCommand do.

const (
	quotaRoot  = "/zookeeper/quota"
	limitsNode = "zookeeper_limits"
	statsNode  = "zookeeper_stats"
)

// statsTrack is ZooKeeper's StatsTrack: a map of counters, written as
// "count=C,bytes=B" followed, if there are other keys, by "=" and
// ";key=value" for each of them in sorted order (the extra "=" makes old
// parsers ignore the new keys).
type statsTrack map[string]int64

var statsSeparators = regexp.MustCompile(`[,;]+`)

func parseStatsTrack(t *testing.T, s string) statsTrack {
	t.Helper()
	st := statsTrack{}
	if s == "" {
		return st
	}
	for _, kv := range statsSeparators.Split(s, -1) {
		parts := strings.Split(kv, "=")
		if len(parts) < 2 {
			t.Fatalf("StatsTrack %q: bad pair %q", s, kv)
		}
		v := int64(-1)
		if parts[1] != "" {
			n, err := strconv.ParseInt(parts[1], 10, 64)
			if err != nil {
				t.Fatalf("StatsTrack %q: %v", s, err)
			}
			v = n
		}
		st[parts[0]] = v
	}
	return st
}

func (s statsTrack) get(k string) int64 {
	if v, ok := s[k]; ok {
		return v
	}
	return -1
}

func (s statsTrack) String() string {
	out := fmt.Sprintf("count=%d,bytes=%d", s.get("count"), s.get("bytes"))
	var keys []string
	for k := range s {
		if k != "count" && k != "bytes" {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		slices.Sort(keys)
		out += "="
		for _, k := range keys {
			out += fmt.Sprintf(";%s=%d", k, s[k])
		}
	}
	return out
}

// quota is the option set of setquota/delquota: -n count, -b bytes (soft),
// -N count, -B bytes (hard). -1 means "not given".
type quota struct{ n, b, N, B int64 }

var noQuota = quota{-1, -1, -1, -1}

// setQuota is zkCli's "setquota [-n|-b|-N|-B val] path"
// (SetQuotaCommand.createQuota).
func setQuota(t *testing.T, c *zk.Conn, path string, q quota) {
	t.Helper()
	if ok, _, err := c.Exists(path); err != nil || !ok {
		t.Fatalf("setquota %s: the node does not exist (%v)", path, err)
	}
	// zkCli refuses a quota under or above another quota.
	checkNoQuotaBelow(t, c, quotaRoot+path, quotaRoot+path)
	segs := strings.Split(path, "/")[1:]
	for i := 1; i < len(segs); i++ {
		qp := quotaRoot + "/" + strings.Join(segs[:i], "/")
		children, _, err := c.Children(qp)
		if errors.Is(err, zk.ErrNoNode) {
			break
		}
		if err != nil {
			t.Fatalf("setquota: children %s: %v", qp, err)
		}
		if slices.Contains(children, limitsNode) {
			t.Fatalf("setquota %s: a parent already has a quota (%s)", path, qp)
		}
	}
	// Create the quota path node by node (open ACL, null data).
	qp := quotaRoot
	for _, s := range segs {
		qp += "/" + s
		if ok, _, err := c.Exists(qp); err != nil {
			t.Fatal(err)
		} else if !ok {
			if _, err := c.Create(qp, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				t.Fatalf("setquota: create %s: %v", qp, err)
			}
		}
	}
	limits, stats := qp+"/"+limitsNode, qp+"/"+statsNode
	ok, _, err := c.Exists(limits)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		lim := statsTrack{"count": q.n, "bytes": q.b, "countHardLimit": q.N, "byteHardLimit": q.B}
		if _, err := c.Create(limits, []byte(lim.String()), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("setquota: create %s: %v", limits, err)
		}
		st := statsTrack{"count": 0, "bytes": 0}
		if _, err := c.Create(stats, []byte(st.String()), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("setquota: create %s: %v", stats, err)
		}
		return
	}
	data, _, err := c.Get(limits)
	if err != nil {
		t.Fatal(err)
	}
	lim := parseStatsTrack(t, string(data))
	for k, v := range map[string]int64{"count": q.n, "bytes": q.b, "countHardLimit": q.N, "byteHardLimit": q.B} {
		if v > -1 {
			lim[k] = v
		}
	}
	if _, _, err := c.Get(stats); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(limits, []byte(lim.String()), -1); err != nil {
		t.Fatalf("setquota: set %s: %v", limits, err)
	}
}

// checkNoQuotaBelow fails if a node below top (other than top itself) has a
// limits child (SetQuotaCommand.checkIfChildQuota).
func checkNoQuotaBelow(t *testing.T, c *zk.Conn, p, top string) {
	t.Helper()
	children, _, err := c.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range children {
		if p != top && ch == limitsNode {
			t.Fatalf("setquota %s: %s already has a quota", top, p)
		}
		checkNoQuotaBelow(t, c, p+"/"+ch, top)
	}
}

// listQuota is zkCli's "listquota path": the limits and the usage.
func listQuota(t *testing.T, c *zk.Conn, path string) (limits, stats string) {
	t.Helper()
	l, _, err := c.Get(quotaRoot + path + "/" + limitsNode)
	if err != nil {
		t.Fatalf("listquota %s: %v", path, err)
	}
	s, _, err := c.Get(quotaRoot + path + "/" + statsNode)
	if err != nil {
		t.Fatalf("listquota %s: %v", path, err)
	}
	return string(l), string(s)
}

// delQuota is zkCli's "delquota [-n|-b|-N|-B] path": with flags it resets
// those limits to -1, without it removes the quota nodes and prunes the
// quota path up to /zookeeper/quota.
func delQuota(t testing.TB, c *zk.Conn, path string, all bool, q quota) error {
	parent := quotaRoot + path
	limits := parent + "/" + limitsNode
	data, _, err := c.Get(limits)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	if all {
		children, _, err := c.Children(parent)
		if err != nil {
			return err
		}
		for _, ch := range children {
			if err := c.Delete(parent+"/"+ch, -1); err != nil {
				return err
			}
		}
		for p := parent; p != quotaRoot; p = p[:strings.LastIndex(p, "/")] {
			children, _, err := c.Children(p)
			if err != nil {
				return err
			}
			if len(children) > 0 {
				break
			}
			if err := c.Delete(p, -1); err != nil {
				return err
			}
		}
		return nil
	}
	lim := statsTrack{}
	for _, kv := range statsSeparators.Split(string(data), -1) {
		parts := strings.Split(kv, "=")
		v := int64(-1)
		if len(parts) > 1 && parts[1] != "" {
			v, _ = strconv.ParseInt(parts[1], 10, 64)
		}
		lim[parts[0]] = v
	}
	for k, v := range map[string]int64{"count": q.n, "bytes": q.b, "countHardLimit": q.N, "byteHardLimit": q.B} {
		if v > -1 {
			lim[k] = -1
		}
	}
	_, err = c.Set(limits, []byte(lim.String()), -1)
	return err
}

// quotaCleanup removes path's quota at the end of the test (before
// uniquePath's cleanup, which is registered earlier).
func quotaCleanup(t *testing.T, path string) {
	t.Cleanup(func() {
		if err := delQuota(t, admin, path, true, noQuota); err != nil {
			t.Errorf("delquota %s: %v", path, err)
		}
	})
}

// wantStats requires the stats node's data (the usage) to be exactly want.
func wantStats(t *testing.T, path, want string) {
	t.Helper()
	data, st, err := admin.Get(quotaRoot + path + "/" + statsNode)
	if err != nil {
		t.Fatalf("get stats of %s: %v", path, err)
	}
	if string(data) != want {
		t.Fatalf("usage of %s = %q, want %q", path, data, want)
	}
	// The server updates the data in place: no setData, version stays 0.
	if st.Version != 0 || st.DataLength != int32(len(want)) {
		t.Fatalf("stats node Stat %+v, want version 0 and dataLength %d", st, len(want))
	}
}

func TestStatsTrackFormat(t *testing.T) {
	// The exact texts zkCli 3.8 writes (observed).
	if got := (statsTrack{"count": 2, "bytes": -1, "countHardLimit": -1, "byteHardLimit": -1}).String(); got != "count=2,bytes=-1=;byteHardLimit=-1;countHardLimit=-1" {
		t.Fatalf("limits text %q", got)
	}
	if got := (statsTrack{"count": 0, "bytes": 0}).String(); got != "count=0,bytes=0" {
		t.Fatalf("stats text %q", got)
	}
	if got := parseStatsTrack(t, "count=-1,bytes=10=;byteHardLimit=-1;countHardLimit=3"); got.get("bytes") != 10 || got.get("countHardLimit") != 3 || len(got) != 4 {
		t.Fatalf("parsed %v", got)
	}
}

func TestQuotaAsZkCli(t *testing.T) {
	base := uniquePath(t)
	quotaCleanup(t, base)
	a := mustCreate(t, admin, base+"/a", nil, 0)

	// setquota -n 2 base: the quota znodes, their ACL and their exact texts.
	setQuota(t, admin, base, quota{n: 2, b: -1, N: -1, B: -1})
	children, _, err := admin.Children(quotaRoot + base)
	if err != nil || !sameSet(children, []string{limitsNode, statsNode}) {
		t.Fatalf("children of %s%s = %v, %v; want the limits and stats nodes", quotaRoot, base, children, err)
	}
	lim, stats := listQuota(t, admin, base)
	if lim != "count=2,bytes=-1=;byteHardLimit=-1;countHardLimit=-1" {
		t.Fatalf("limits = %q", lim)
	}
	// The server computes the usage as soon as the stats node exists: the
	// quota root counts itself, so base and base/a make 2.
	if stats != "count=2,bytes=0" {
		t.Fatalf("usage = %q, want count=2,bytes=0 (the root counts itself)", stats)
	}
	wantStats(t, base, "count=2,bytes=0")

	// Soft limits never refuse anything (they are only logged), and the
	// usage follows every create, delete and setData below the root.
	setQuota(t, admin, base, quota{n: -1, b: 5, N: -1, B: -1})
	if lim, _ := listQuota(t, admin, base); lim != "count=2,bytes=5=;byteHardLimit=-1;countHardLimit=-1" {
		t.Fatalf("limits after setquota -b 5 = %q", lim)
	}
	if _, err := admin.Set(a, []byte("hello"), -1); err != nil {
		t.Fatal(err)
	}
	wantStats(t, base, "count=2,bytes=5")
	if _, err := admin.Set(base, []byte("xy"), -1); err != nil {
		t.Fatalf("setData over the soft byte limit: %v", err)
	}
	wantStats(t, base, "count=2,bytes=7")
	mustCreate(t, admin, base+"/b", []byte("abc"), 0)
	mustCreate(t, admin, base+"/b/c", nil, zk.FlagEphemeral)
	wantStats(t, base, "count=4,bytes=10")
	if err := admin.Delete(base+"/b/c", -1); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(base+"/b", -1); err != nil {
		t.Fatal(err)
	}
	wantStats(t, base, "count=2,bytes=7")
	// Nodes beside the quota root do not count.
	mustCreate(t, admin, base+"-sibling", []byte("zz"), 0)
	if err := admin.Delete(base+"-sibling", -1); err != nil {
		t.Fatal(err)
	}
	wantStats(t, base, "count=2,bytes=7")

	// delquota -n: the count limit goes back to -1.
	if err := delQuota(t, admin, base, false, quota{n: 1, b: -1, N: -1, B: -1}); err != nil {
		t.Fatal(err)
	}
	if lim, _ := listQuota(t, admin, base); lim != "count=-1,bytes=5=;byteHardLimit=-1;countHardLimit=-1" {
		t.Fatalf("limits after delquota -n = %q", lim)
	}
	// delquota: the quota nodes and the quota path are gone.
	if err := delQuota(t, admin, base, true, noQuota); err != nil {
		t.Fatal(err)
	}
	mustNotExist(t, admin, quotaRoot+base)
}

func TestQuotaHardCountLimit(t *testing.T) {
	base := uniquePath(t)
	sub := mustCreate(t, admin, base+"/sub", nil, 0)
	quotaCleanup(t, sub)

	// setquota -N 3 on a nested path: the intermediate quota node has no data.
	setQuota(t, admin, sub, quota{n: -1, b: -1, N: 3, B: -1})
	if data, st, err := admin.Get(quotaRoot + base); err != nil || len(data) != 0 || st.DataLength != 0 {
		t.Fatalf("intermediate quota node %s%s = %q %+v, %v", quotaRoot, base, data, st, err)
	}
	if children, _, _ := admin.Children(quotaRoot + base); !slices.Equal(children, []string{"sub"}) {
		t.Fatalf("children of %s%s = %v, want [sub]", quotaRoot, base, children)
	}
	if lim, stats := listQuota(t, admin, sub); lim != "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=3" || stats != "count=1,bytes=0" {
		t.Fatalf("listquota = %q, %q", lim, stats)
	}

	c := rawSession(t, 10000)
	c.callOK(opCreate, createReq(sub+"/a", nil, 0))
	c.callOK(opCreate, createReq(sub+"/b", []byte("b"), 0))
	wantStats(t, sub, "count=3,bytes=1")
	// Every kind of create that would make 4 nodes is refused with
	// QUOTAEXCEEDED, header only; like any failed write it consumes a zxid.
	before := c.callOK(opSetData, setDataReq(sub+"/b", []byte("bb"), -1)).Zxid // setData does not count
	for i, tc := range []struct {
		op   int32
		body []byte
	}{
		{opCreate, createReq(sub+"/c", nil, 0)},
		{opCreate2, createReq(sub+"/c", nil, 0)},
		{opCreate, createReq(sub+"/c", nil, flagEphemeral)},
		{opCreate, createReq(sub+"/s-", nil, flagPersistentSequential)},
		{opCreate, createReq(sub+"/a/deep", nil, 0)},
		{opCreateContainer, createReq(sub+"/c", nil, flagContainer)},
		{opCreateTTL, createTTLReq(sub+"/c", nil, flagTTL, 60000)},
	} {
		rep := c.call(tc.op, tc.body)
		if want := before + int64(i) + 1; rep.Err != errQuotaExceeded || rep.Len != 16 || rep.Zxid != want {
			t.Fatalf("create %d over the hard count limit: %v, want QUOTAEXCEEDED at zxid %#x, header only", i, rep, want)
		}
	}
	// In a multi the op fails like any other.
	rep := c.callOK(opMulti, multiReq(multiOp{opCreate, createReq(sub+"/c", nil, 0)}))
	if res := decodeMultiResponse(t, rep.Body); len(res) != 1 || res[0] != (multiResult{Type: opError, Err: errQuotaExceeded, Code: errQuotaExceeded}) {
		t.Fatalf("multi create over the limit: %+v, want one QUOTAEXCEEDED result", res)
	}
	wantStats(t, sub, "count=3,bytes=2")
	// Outside the quota root nothing is limited.
	c.callOK(opCreate, createReq(base+"/outside", nil, 0))
	// A delete makes room.
	c.callOK(opDelete, deleteReq(sub+"/a", -1))
	c.callOK(opCreate, createReq(sub+"/c", nil, 0))
	wantStats(t, sub, "count=3,bytes=2")
	// delquota -N lifts the limit.
	if err := delQuota(t, admin, sub, false, quota{n: -1, b: -1, N: 1, B: -1}); err != nil {
		t.Fatal(err)
	}
	c.callOK(opCreate, createReq(sub+"/d", nil, 0))
	wantStats(t, sub, "count=4,bytes=2")
}

func TestQuotaHardBytesLimit(t *testing.T) {
	base := uniquePath(t)
	quotaCleanup(t, base)
	if _, err := admin.Set(base, []byte("abc"), -1); err != nil {
		t.Fatal(err)
	}
	setQuota(t, admin, base, quota{n: -1, b: -1, N: -1, B: 5})
	if lim, stats := listQuota(t, admin, base); lim != "count=-1,bytes=-1=;byteHardLimit=5;countHardLimit=-1" || stats != "count=1,bytes=3" {
		t.Fatalf("listquota = %q, %q", lim, stats)
	}
	c := rawSession(t, 10000)
	exceeded := func(what string, rep reply) {
		t.Helper()
		if rep.Err != errQuotaExceeded || rep.Len != 16 {
			t.Fatalf("%s: %v, want QUOTAEXCEEDED, header only", what, rep)
		}
	}
	// The new total counts, not the size of the write.
	exceeded("setData to 6 bytes", c.call(opSetData, setDataReq(base, []byte("abcdef"), -1)))
	if _, data, st := c.getData(base, false); string(data) != "abc" || st.Version != 1 {
		t.Fatalf("a refused setData changed the node: %q version %d", data, st.Version)
	}
	c.callOK(opSetData, setDataReq(base, []byte("abcde"), -1))
	wantStats(t, base, "count=1,bytes=5")
	exceeded("create with 1 byte", c.call(opCreate, createReq(base+"/x", []byte("y"), 0)))
	// A node without data adds no bytes, and there is no count limit.
	c.callOK(opCreate, createReq(base+"/x", nil, 0))
	c.callOK(opCreate, createReq(base+"/x/y", []byte{}, 0))
	wantStats(t, base, "count=3,bytes=5")
	// Shrinking is always allowed and makes room.
	c.callOK(opSetData, setDataReq(base, []byte("ab"), -1))
	c.callOK(opSetData, setDataReq(base+"/x", []byte("zzz"), -1))
	wantStats(t, base, "count=3,bytes=5")
	exceeded("setData growing a child", c.call(opSetData, setDataReq(base+"/x/y", []byte("1"), -1)))
	// delquota -B lifts the limit.
	if err := delQuota(t, admin, base, false, quota{n: -1, b: -1, N: -1, B: 1}); err != nil {
		t.Fatal(err)
	}
	c.callOK(opSetData, setDataReq(base+"/x/y", []byte("1234567890"), -1))
	wantStats(t, base, "count=3,bytes=15")
}
