package znode

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/zkraft/zkraft/jute"
)

// setCversion stores path's node with the given stored cversion, as a tree
// that has had that many creates under it.
func setCversion(kv *memKV, path string, cversion int32) {
	n := kv.nodes[path].Clone()
	n.Cversion = cversion
	kv.nodes[path] = n
}

// TestSequentialCounterEdge drives a parent's counter to 2^31-1 and past
// it: the names are ZooKeeper's up to 2147483646, then every sequential
// create, of any mode, fails with NODEEXISTS and changes nothing, while the
// counter stays at MaxInt32 (ZooKeeper's stored value) and plain creates
// and deletes go on. See seqExhausted.
func TestSequentialCounterEdge(t *testing.T) {
	kv := newTree()
	mustCreate(t, kv, 1, "/q", jute.FlagPersistent)
	setCversion(kv, "/q", math.MaxInt32-2)
	zxid := int64(1)
	type step struct {
		op       string // "seq", "eseq", "tseq", "plain", "delete"
		path     string
		wantPath string
		wantErr  jute.ErrCode
		// the parent afterwards
		cversion, numChildren, clientCversion int32
		pzxidMoved                            bool
	}
	for i, s := range []step{
		{"seq", "/q/n-", "/q/n-2147483645", jute.ErrOK, math.MaxInt32 - 1, 1, -4 - 1, true},
		{"seq", "/q/n-", "/q/n-2147483646", jute.ErrOK, math.MaxInt32, 2, -2 - 2, true},
		{"seq", "/q/n-", "", jute.ErrNodeExists, math.MaxInt32, 2, -2 - 2, false},
		{"eseq", "/q/n-", "", jute.ErrNodeExists, math.MaxInt32, 2, -2 - 2, false},
		{"tseq", "/q/t-", "", jute.ErrNodeExists, math.MaxInt32, 2, -2 - 2, false},
		{"plain", "/q/plain", "/q/plain", jute.ErrOK, math.MaxInt32, 3, -2 - 3, true},
		{"delete", "/q/n-2147483646", "", jute.ErrOK, math.MaxInt32, 2, -2 - 2, true},
		{"seq", "/q/n-", "", jute.ErrNodeExists, math.MaxInt32, 2, -2 - 2, false},
		{"delete", "/q/plain", "", jute.ErrOK, math.MaxInt32, 1, -2 - 1, true},
		{"plain", "/q/n-2147483647", "/q/n-2147483647", jute.ErrOK, math.MaxInt32, 2, -2 - 2, true},
		{"seq", "/q/n-", "", jute.ErrNodeExists, math.MaxInt32, 2, -2 - 2, false},
	} {
		zxid++
		before := kv.snapshot()
		tx := txn(kv, zxid)
		var got string
		var err error
		switch s.op {
		case "seq":
			got, _, err = tx.Create(s.path, nil, OpenACL, jute.FlagPersistentSequential, -1)
		case "eseq":
			got, _, err = tx.Create(s.path, nil, OpenACL, jute.FlagEphemeralSequential, -1)
		case "tseq":
			got, _, err = tx.Create(s.path, nil, OpenACL, jute.FlagPersistentSequentialTTL, 1000)
		case "plain":
			got, _, err = tx.Create(s.path, nil, OpenACL, jute.FlagPersistent, -1)
		case "delete":
			err = tx.Delete(s.path, -1)
		}
		what := fmt.Sprintf("step %d (%s %s)", i, s.op, s.path)
		if code(err) != s.wantErr || got != s.wantPath {
			t.Fatalf("%s: %q %v, want %q %v", what, got, err, s.wantPath, s.wantErr)
		}
		if err != nil {
			if !sameNodes(before, kv.snapshot()) || len(tx.Triggers) != 0 {
				t.Fatalf("%s: a refused create changed the tree or fired %v", what, tx.Triggers)
			}
		}
		q := kv.nodes["/q"]
		if q.Cversion != s.cversion || q.NumChildren != s.numChildren {
			t.Errorf("%s: stored cversion %d numChildren %d, want %d and %d", what, q.Cversion, q.NumChildren, s.cversion, s.numChildren)
		}
		// The client's cversion wraps as Java's int arithmetic does.
		if c := q.Stat().Cversion; c != s.clientCversion {
			t.Errorf("%s: client cversion %d, want %d", what, c, s.clientCversion)
		}
		if moved := q.Pzxid == zxid; moved != s.pzxidMoved {
			t.Errorf("%s: pzxid %d at zxid %d, want moved=%v", what, q.Pzxid, zxid, s.pzxidMoved)
		}
	}
	// Another parent's counter is its own.
	if p := mustCreate(t, kv, zxid+1, "/q2-", jute.FlagPersistentSequential); !strings.HasSuffix(p, "-0000000001") {
		t.Errorf("root sequential %q", p)
	}
}

// TestSequentialNamesOrdered is the property lock, queue and election
// recipes stand on, checked over random creates and deletes of every
// sequential mode, with several name prefixes and plain children in
// between, on parents whose counter starts near the edge: a sequential
// create either fails or makes a name that was never made under the parent
// before and whose number (and ten-digit suffix, which recipes also sort
// by) is above that of every sequential sibling it has.
func TestSequentialNamesOrdered(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		kv := newTree()
		mustCreate(t, kv, 1, "/r", jute.FlagPersistent)
		start := math.MaxInt32 - int32(rng.IntN(60))
		setCversion(kv, "/r", start)
		suffixes := map[string]string{} // every sequential name made: its counter as printed
		made, refused := 0, 0
		zxid := int64(1)
		for step := 0; step < 200; step++ {
			zxid++
			tx := txn(kv, zxid)
			kids, _ := kv.Children("/r")
			switch op := rng.IntN(10); {
			case op < 6:
				flags := []int32{jute.FlagPersistentSequential, jute.FlagEphemeralSequential, jute.FlagPersistentSequentialTTL}[rng.IntN(3)]
				ttl := int64(-1)
				if flags == jute.FlagPersistentSequentialTTL {
					ttl = 1000
				}
				prefix := []string{"lock-", "qn-", "n_", ""}[rng.IntN(4)]
				p, _, err := tx.Create("/r/"+prefix, nil, OpenACL, flags, ttl)
				if err != nil {
					if code(err) != jute.ErrNodeExists {
						t.Fatalf("seed %d step %d: sequential create: %v", seed, step, err)
					}
					refused++
					continue
				}
				made++
				name := p[len("/r/"):]
				if _, twice := suffixes[name]; twice {
					t.Fatalf("seed %d step %d: %s made twice", seed, step, name)
				}
				suffix := name[len(prefix):]
				num, err := strconv.ParseInt(suffix, 10, 64)
				if err != nil || len(suffix) < 10 {
					t.Fatalf("seed %d step %d: %s has no counter of at least ten characters", seed, step, name)
				}
				suffixes[name] = suffix
				for _, k := range kids {
					ks, sequential := suffixes[k]
					if !sequential {
						continue
					}
					if kn, _ := strconv.ParseInt(ks, 10, 64); kn >= num || ks >= suffix {
						t.Fatalf("seed %d step %d: %s does not sort after its sibling %s", seed, step, name, k)
					}
				}
			case op < 8:
				if _, _, err := tx.Create(fmt.Sprintf("/r/plain%d", step), nil, OpenACL, jute.FlagPersistent, -1); err != nil {
					t.Fatalf("seed %d step %d: plain create: %v", seed, step, err)
				}
			default:
				if len(kids) > 0 {
					if err := tx.Delete("/r/"+kids[rng.IntN(len(kids))], -1); err != nil {
						t.Fatalf("seed %d step %d: delete: %v", seed, step, err)
					}
				}
			}
		}
		r := kv.nodes["/r"]
		if r.Cversion != math.MaxInt32 || refused == 0 {
			t.Errorf("seed %d: the counter did not run out (cversion %d, %d made, %d refused): the test shows nothing", seed, r.Cversion, made, refused)
		}
		// Plain creates use up numbers too, so fewer names may be made
		// than numbers were left, never more.
		if left := int(math.MaxInt32 - start); made > left {
			t.Errorf("seed %d: %d names made from %d numbers left", seed, made, left)
		}
	}
}
