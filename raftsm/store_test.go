package raftsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// maxKeyLen is the longest key format 2 writes: a child-index key.
const maxKeyLen = 1 + 2*32

// TestKeysDoNotGrowWithPaths: whatever the depth of a node or the length of
// its name, every key of the store stays within maxKeyLen.
func TestKeysDoNotGrowWithPaths(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.apply(createSession(1, 30000))
	long := strings.Repeat("x", 100000)
	p := ""
	for i := 0; i < 300; i++ { // a chain 300 deep of 100-byte names
		p += "/" + strings.Repeat(string(rune('a'+i%26)), 100)
		if r := h.apply1(create(1, p, 0)); r.Err != jute.ErrOK {
			t.Fatalf("create at depth %d: %v", i, r.Err)
		}
	}
	for _, c := range []*Command{
		create(1, p+"/"+long, jute.FlagEphemeral),
		create(1, "/"+long, jute.FlagContainer),
		create(1, "/"+long+"/c", 0),
		create(1, p+"/seq-", jute.FlagEphemeralSequential),
	} {
		if r := h.apply1(c); r.Err != jute.ErrOK {
			t.Fatalf("create: %v", r.Err)
		}
	}
	h.sm.mu.RLock()
	it := h.sm.mu.db.NewIter(&pebble.IterOptions{})
	keys := 0
	for it.First(); it.Valid(); it.Next() {
		keys++
		if n := len(it.Key()); n > maxKeyLen {
			t.Errorf("key of %d bytes (%.40q...)", n, it.Key())
		}
	}
	it.Close()
	h.sm.mu.RUnlock()
	if keys < 600 {
		t.Fatalf("only %d keys in the store", keys)
	}
	// The tree reads back, and the walk that counts needs no paths.
	n := h.view(func(v View) (any, error) {
		return znode.Reader{KV: v.Tree()}.CountDescendants("/")
	}).(int32)
	if want := int32(300 + 4 + 4); n != want { // chain, 4 new nodes, the /zookeeper nodes
		t.Fatalf("CountDescendants(/) = %d, want %d", n, want)
	}
	if got := h.node("/" + long + "/c"); got == nil {
		t.Fatal("node under a long name not found")
	}
}

// TestLookupDoesNotHoldUpUpdate: a read that takes its time does not keep
// Update from applying, and it sees the state it started on.
func TestLookupDoesNotHoldUpUpdate(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.apply(createSession(1, 30000), create(1, "/a", 0))
	started, release := make(chan struct{}), make(chan struct{})
	type seen struct {
		zxid int64
		b    *znode.Node
		kids []string
	}
	out := make(chan seen, 1)
	go func() {
		v, err := h.sm.Lookup(ReadFunc(func(v View) (any, error) {
			close(started)
			<-release
			b, err := v.Tree().Get("/b")
			if err != nil {
				return nil, err
			}
			kids, err := v.Tree().Children("/")
			return seen{v.Zxid(), b, kids}, err
		}))
		if err != nil {
			t.Error(err)
		}
		out <- v.(seen)
	}()
	<-started
	before := h.zxid()
	for i := 0; i < 10; i++ { // would wait for the read if it held the lock
		h.apply(create(1, fmt.Sprintf("/b%d", i), 0))
	}
	h.apply(create(1, "/b", 0))
	close(release)
	s := <-out
	if s.zxid != before || s.b != nil || slices.Contains(s.kids, "b") {
		t.Fatalf("the read saw zxid %#x, /b %v, children %v: not its snapshot at %#x", s.zxid, s.b, s.kids, before)
	}
	if h.node("/b") == nil {
		t.Fatal("a new read does not see /b")
	}
}

// TestChildCacheMatchesSnapshots: readers on snapshots of many ages, while
// Updates change the same parents, always get the child list their own
// snapshot holds, cached or not.
func TestChildCacheMatchesSnapshots(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.apply(createSession(1, 30000))
	parents := []string{"/p0", "/p1", "/p2"}
	for _, p := range parents {
		h.apply(create(1, p, 0))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var mismatch sync.Once
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(seed))
			for {
				select {
				case <-stop:
					return
				default:
				}
				p := parents[rnd.Intn(len(parents))]
				_, err := h.sm.Lookup(ReadFunc(func(v View) (any, error) {
					got, err := v.Tree().Children(p)
					if err != nil {
						return nil, err
					}
					plain, err := treeReader{r: v.tree.r}.Children(p) // no cache
					if err != nil {
						return nil, err
					}
					if !slices.Equal(got, plain) {
						mismatch.Do(func() { t.Errorf("children of %s at %#x: %v, the snapshot holds %v", p, v.Zxid(), got, plain) })
					}
					return nil, nil
				}))
				if err != nil {
					t.Error(err)
					return
				}
			}
		}(int64(r))
	}
	rnd := rand.New(rand.NewSource(99))
	live := map[string]bool{}
	for i := 0; i < 1500; i++ {
		var cmds []*Command
		for j := 0; j < 1+rnd.Intn(3); j++ {
			path := fmt.Sprintf("%s/c%d", parents[rnd.Intn(len(parents))], rnd.Intn(20))
			if live[path] {
				cmds = append(cmds, deleteNode(1, path, -1))
			} else {
				cmds = append(cmds, create(1, path, 0))
			}
			live[path] = !live[path]
		}
		for _, r := range h.apply(cmds...) {
			if r.Err != jute.ErrOK && r.Err != jute.ErrNodeExists && r.Err != jute.ErrNoNode {
				t.Fatalf("apply: %v", r.Err)
			}
		}
	}
	close(stop)
	wg.Wait()
}

// writeFormat1 writes a format 1 store (the layout before format 2) at dir
// with the given nodes (path, record), ephemerals (owner, path), one
// session and the applied index and zxid.
func writeFormat1(t *testing.T, dir string, nodes map[string]*znode.Node, eph map[string]int64, applied uint64, zxid int64) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := db.NewBatch()
	for path, n := range nodes {
		var k []byte
		if path == "/" {
			k = []byte{v1Node, 0}
		} else {
			parent, _ := znode.Parent(path)
			k = append(append(append([]byte{v1Node}, parent...), 0), znode.Base(path)...)
		}
		if err := b.Set(k, marshal(n), nil); err != nil {
			t.Fatal(err)
		}
		if k := znode.KindOf(n.EphemeralOwner); k == znode.OwnerContainer || k == znode.OwnerTTL {
			b.Set(append([]byte{v1Sweep}, path...), nil, nil)
		}
	}
	for path, owner := range eph {
		k := make([]byte, 9, 9+len(path))
		k[0] = v1Ephemeral
		binary.BigEndian.PutUint64(k[1:], uint64(owner))
		b.Set(append(k, path...), nil, nil)
	}
	var v [4]byte
	binary.BigEndian.PutUint32(v[:], 30000)
	b.Set(sessionKey(7), v[:], nil)
	if err := putMeta(b, applied, zxid); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// TestFormat1StoreConverted: a store in the old layout opens, is converted
// in place (the old keys gone), and answers the same tree, ephemerals and
// sweep candidates; a conversion cut short and started again (new keys
// already there beside the old ones) gives the same store.
func TestFormat1StoreConverted(t *testing.T) {
	open := &znode.Node{Data: []byte{}, ACL: znode.OpenACL}
	nodes := map[string]*znode.Node{
		"/":                             {Data: []byte{}, ACL: znode.OpenACL, NumChildren: 4, Cversion: 4, Pzxid: 9},
		"/zookeeper":                    {Data: []byte{}, ACL: znode.OpenACL, NumChildren: 3},
		"/zookeeper/quota":              open,
		"/zookeeper/config":             {Data: []byte{}, ACL: znode.ReadACLUnsafe, Aversion: -1},
		znode.FeaturesPath:              {Data: []byte(znode.Features), ACL: znode.ReadACLUnsafe},
		"/a":                            {Data: []byte("va"), ACL: znode.OpenACL, Czxid: 2, Mzxid: 2, Pzxid: 3, NumChildren: 1, Cversion: 1},
		"/a/e":                          {Data: []byte("ve"), ACL: znode.OpenACL, Czxid: 3, Mzxid: 3, Pzxid: 3, EphemeralOwner: 7},
		"/box":                          {Data: []byte{}, ACL: znode.OpenACL, Czxid: 4, Mzxid: 4, Pzxid: 5, Cversion: 1, EphemeralOwner: znode.ContainerOwner},
		"/" + strings.Repeat("L", 5000): {Data: []byte("long"), ACL: znode.OpenACL, Czxid: 6, Mzxid: 6, Pzxid: 6},
	}
	nodes["/zookeeper"].NumChildren = 3
	for _, partial := range []bool{false, true} {
		t.Run(fmt.Sprintf("partial=%v", partial), func(t *testing.T) {
			dir := t.TempDir()
			store := StoreDir(dir, 1, 1)
			writeFormat1(t, store, nodes, map[string]int64{"/a/e": 7}, 40, 9)
			if partial {
				// Some format 2 keys written by a conversion that crashed.
				db, err := pebble.Open(store, &pebble.Options{})
				if err != nil {
					t.Fatal(err)
				}
				b := db.NewBatch()
				if err := (storeKV{w: b}).Put("/a", nodes["/a"]); err != nil {
					t.Fatal(err)
				}
				b.Commit(pebble.Sync)
				db.Close()
			}
			h := newHarness(t, dir)
			if h.index != 40 || h.zxid() != 9 {
				t.Fatalf("applied %d zxid %d, want 40 and 9", h.index, h.zxid())
			}
			for _, line := range h.dump() {
				if c := line[1]; c == v1Node || c == v1Ephemeral || c == v1Sweep {
					t.Fatalf("format 1 key left: %.60s", line)
				}
			}
			for path, want := range nodes {
				got := h.node(path)
				if got == nil || fmt.Sprint(got.Stat(), got.Data) != fmt.Sprint(want.Stat(), want.Data) {
					t.Fatalf("%.40s: %+v, want %+v", path, got, want)
				}
			}
			kids := h.view(func(v View) (any, error) { return v.Tree().Children("/") }).([]string)
			if want := []string{strings.Repeat("L", 5000), "a", "box", "zookeeper"}; !slices.Equal(kids, want) {
				t.Fatalf("children of /: %.60v", kids)
			}
			eph := h.view(func(v View) (any, error) { return v.Tree().Ephemerals(7) }).([]string)
			if !slices.Equal(eph, []string{"/a/e"}) {
				t.Fatalf("ephemerals of 7: %v", eph)
			}
			sweep := h.view(func(v View) (any, error) { return v.SweepCandidates(1<<40, 10) }).([]string)
			if !slices.Equal(sweep, []string{"/box"}) {
				t.Fatalf("sweep candidates: %v", sweep)
			}
			// Writes go on in the new layout; closing the session deletes
			// the converted ephemeral.
			if r := h.apply1(closeSession(7)); r.Err != jute.ErrOK {
				t.Fatalf("close session: %v", r.Err)
			}
			if h.node("/a/e") != nil {
				t.Fatal("the converted ephemeral outlived its session")
			}
			h.reopen()
			if h.node("/box") == nil || h.node("/a/e") != nil {
				t.Fatal("the converted store did not survive a reopen")
			}
		})
	}
}

// TestDigestKeptByEveryWrite: after every Update of a random workload that
// touches every kind of key (nodes, children, ephemerals, containers and
// TTL nodes, sessions, owners, keep-alives, multis that fail and that
// delete and create the same path), the digest the state machine kept
// equals the one its keys give; a reopen checks it again.
func TestDigestKeptByEveryWrite(t *testing.T) {
	h := newHarness(t, t.TempDir())
	rnd := rand.New(rand.NewSource(1))
	sessions := []int64{11, 12, 13}
	for _, id := range sessions {
		h.apply(createSession(id, 30000))
	}
	paths := []string{"/a", "/a/b", "/a/c", "/d", "/d/e", "/box", "/box/x", "/ttl"}
	check := func(step int) {
		t.Helper()
		h.sm.mu.RLock()
		got, st, err := computeDigest(h.sm.mu.db)
		kept, keptStats := h.sm.mu.digest, h.sm.mu.stats
		h.sm.mu.RUnlock()
		if err != nil || got != kept {
			t.Fatalf("step %d: kept digest %016x, the store's keys give %016x (%v)", step, kept, got, err)
		}
		if st != keptStats {
			t.Fatalf("step %d: kept tree figures %+v, the store gives %+v", step, keptStats, st)
		}
	}
	for step := 0; step < 400; step++ {
		s := sessions[rnd.Intn(len(sessions))]
		p := paths[rnd.Intn(len(paths))]
		var cmd *Command
		switch rnd.Intn(10) {
		case 0:
			cmd = create(s, p, jute.FlagEphemeral)
		case 1:
			cmd = create(s, p, jute.FlagContainer)
		case 2:
			cmd = request(s, jute.OpCreateTTL, &jute.CreateTTLRequest{Path: p, Data: []byte("t"), ACL: znode.OpenACL, Flags: jute.FlagPersistentTTL, TTL: 1000})
		case 3:
			cmd = setData(s, p, fmt.Sprint(step), -1)
		case 4:
			cmd = deleteNode(s, p, -1)
		case 5: // delete and create the same path in one transaction
			cmd = multi(s,
				jute.MultiOp{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: p, Version: -1}},
				jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: p, Data: []byte("again"), ACL: znode.OpenACL, Flags: int32(rnd.Intn(2))}})
		case 6:
			cmd = &Command{Kind: KindAttach, Session: s, Owner: uint64(rnd.Intn(3) + 1), Time: 9000}
		case 7:
			cmd = keepAlive(sessions...)
		case 8:
			cmd = create(s, p, 0)
		case 9:
			if rnd.Intn(4) == 0 {
				cmd = closeSession(s)
				h.apply1(cmd)
				check(step)
				cmd = createSession(s, 20000)
			} else {
				cmd = create(s, p+"/seq-", jute.FlagEphemeralSequential)
			}
		}
		h.apply1(cmd)
		check(step)
	}
	h.reopen()
	check(-1)
}

// TestDamagedStoreRefused: a store that lost a key, or whose value
// changed, since it was written is refused at Open with ErrDamaged naming
// it, never served.
func TestDamagedStoreRefused(t *testing.T) {
	for _, damage := range []string{"lost node", "lost child entry", "changed node", "lost session"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			h := newHarness(t, dir)
			h.apply(createSession(5, 30000), create(5, "/a", 0), create(5, "/a/b", 0))
			if err := h.sm.Close(); err != nil {
				t.Fatal(err)
			}
			store := StoreDir(dir, 1, 1)
			db, err := pebble.Open(store, &pebble.Options{})
			if err != nil {
				t.Fatal(err)
			}
			parent, self := hashes("/a/b")
			switch damage {
			case "lost node":
				err = db.Delete(nodeKeyOf(&parent, &self, "b"), pebble.Sync)
			case "lost child entry":
				err = db.Delete(childKeyOf(&parent, &self), pebble.Sync)
			case "changed node":
				n := &znode.Node{Data: []byte("forged"), ACL: znode.OpenACL}
				err = db.Set(nodeKeyOf(&parent, &self, "b"), nodeValue("/a/b", n), pebble.Sync)
			case "lost session":
				err = db.Delete(sessionKey(5), pebble.Sync)
			}
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			sm := New(Config{Dir: dir}, 1, 1)
			_, err = sm.Open(nil)
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), store) {
				t.Fatalf("Open of a store with a %s: %v, want ErrDamaged naming %s", damage, err, store)
			}
			sm.Close()
		})
	}
}

// TestDigestCheckThroughTheLog: two replicas apply the same entries; a
// KindCheckDigest carrying one's digest after an entry passes on both,
// fails (ErrDigestMismatch) on a replica whose state diverged, and is
// passed over by a replica that no longer remembers that entry.
func TestDigestCheckThroughTheLog(t *testing.T) {
	a, b := newHarness(t, t.TempDir()), newHarness(t, t.TempDir())
	both := func(cmds ...*Command) {
		a.apply(cmds...)
		b.apply(cmds...)
	}
	both(createSession(1, 30000), create(1, "/x", 0), setData(1, "/x", "v", -1))
	at := func(h *harness) (uint64, uint64) {
		type id struct{ index, digest uint64 }
		r := h.view(func(v View) (any, error) { return id{v.Applied(), v.Digest()}, nil }).(id)
		return r.index, r.digest
	}
	index, digest := at(a)
	check := &Command{Kind: KindCheckDigest, Body: DigestCheck(index, digest)}
	both(check, create(1, "/y", 0))
	if r := a.apply1(check); r.Err != jute.ErrOK { // still remembered, still equal
		t.Fatalf("check on the proposer: %v", r.Err)
	}
	b.index = a.index
	// b diverges: the same entry applied to a state that differs.
	b.sm.mu.Lock()
	b.sm.mu.digest ^= 1
	b.sm.mu.Unlock()
	a.apply(setData(1, "/y", "w", -1))
	b.apply(setData(1, "/y", "w", -1))
	index, digest = at(a)
	check = &Command{Kind: KindCheckDigest, Body: DigestCheck(index, digest)}
	a.apply(check)
	b.index++
	_, err := b.sm.Update([]sm.Entry{{Index: b.index, Cmd: EncodeCommand(check)}})
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("check on a diverged replica: %v, want ErrDigestMismatch", err)
	}
	// An index it no longer remembers is not compared.
	old := &Command{Kind: KindCheckDigest, Body: DigestCheck(1, 12345)}
	for i := 0; i < maxRecentDigests+10; i++ {
		a.apply(keepAlive(1))
	}
	if r := a.apply1(old); r.Err != jute.ErrOK {
		t.Fatalf("check of a forgotten index: %v", r.Err)
	}
}
