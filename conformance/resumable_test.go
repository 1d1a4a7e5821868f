package conformance

// zkraft's resumable-watch extension, checked the way etcd's robustness
// tests check watches: a workload of single writes and multis runs while a
// watchFrom stream is cut and resumed, and one validator per guarantee
// reads the recorded stream (ordered, unique, atomic per transaction,
// reliable, resumable).
//
// Against a server without the extension (Apache ZooKeeper) the suite
// checks the other half of the contract: the feature node is absent and a
// watchFrom is refused as unsupported, so clients can tell.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/resumable"
	"github.com/zkraft/zkraft/internal/tcpproxy"
	"github.com/zkraft/zkraft/jute"
)

// hasWatchFrom reports whether the server announces the extension.
func hasWatchFrom(t *testing.T) bool {
	t.Helper()
	data, _, err := admin.Get("/zookeeper/zkraft")
	if errors.Is(err, zk.ErrNoNode) {
		return false
	}
	if err != nil {
		t.Fatalf("get /zookeeper/zkraft: %v", err)
	}
	return string(data) == "watchFrom=1\n"
}

func TestResumableWatchDiscovery(t *testing.T) {
	supported := hasWatchFrom(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	w, err := resumable.WatchFrom(ctx, []string{serverAddr}, "/", 0, true, resumable.Options{})
	switch {
	case supported && err != nil:
		// From zxid 0 the history may have been trimmed; that is the one
		// refusal a supporting server may give.
		var c *resumable.ErrCompacted
		if !errors.As(err, &c) {
			t.Fatalf("server announces watchFrom but refused it: %v", err)
		}
	case supported:
		w.Close()
	case !errors.Is(err, resumable.ErrUnsupported):
		t.Fatalf("server without the feature node: watchFrom = %v, want ErrUnsupported", err)
	}
}

// expectedChange is a change the workload knows it made.
type expectedChange struct {
	zxid int64 // 0 when the client cannot learn it (a delete)
	typ  jute.EventType
	path string
	txn  string // the multi it belongs to, "" for a single write
}

func TestResumableWatchGuarantees(t *testing.T) {
	if !hasWatchFrom(t) {
		t.Log("server does not offer watchFrom (checked by TestResumableWatchDiscovery); nothing to validate")
		return
	}
	base := uniquePath(t)
	_, st, err := admin.Exists(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.New(t, serverAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	w, err := resumable.WatchFrom(ctx, []string{proxy.Addr()}, base, st.Czxid, true, resumable.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	// Workload: 3 writers, each on its own nodes, single writes and multis;
	// the stream is cut twice while they run.
	var mu sync.Mutex
	var expected []expectedChange
	record := func(e ...expectedChange) {
		mu.Lock()
		expected = append(expected, e...)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for wr := 0; wr < 3; wr++ {
		wg.Add(1)
		go func(wr int) {
			defer wg.Done()
			c, _ := connect(t)
			for i := 0; i < 40; i++ {
				p := fmt.Sprintf("%s/w%d-%02d", base, wr, i)
				if _, err := c.Create(p, []byte("a"), 0, zk.WorldACL(zk.PermAll)); err != nil {
					t.Error(err)
					return
				}
				_, st, err := c.Exists(p)
				if err != nil {
					t.Error(err)
					return
				}
				record(expectedChange{zxid: st.Czxid, typ: jute.EventNodeCreated, path: p})
				st, err = c.Set(p, []byte("b"), -1)
				if err != nil {
					t.Error(err)
					return
				}
				record(expectedChange{zxid: st.Mzxid, typ: jute.EventNodeDataChanged, path: p})
				if wr == 0 && (i == 10 || i == 25) {
					// Cut the stream mid-workload: the resume must neither
					// lose nor repeat anything.
					proxy.Cut()
				}
				if i%4 == 3 {
					// A multi: create a sibling and delete p in one transaction.
					q := p + "-m"
					txn := fmt.Sprintf("multi %d/%d", wr, i)
					if _, err := c.Multi(&zk.CreateRequest{Path: q, Acl: zk.WorldACL(zk.PermAll)},
						&zk.DeleteRequest{Path: p, Version: -1}); err != nil {
						t.Error(err)
						return
					}
					_, st, err := c.Exists(q)
					if err != nil {
						t.Error(err)
						return
					}
					record(expectedChange{zxid: st.Czxid, typ: jute.EventNodeCreated, path: q, txn: txn},
						expectedChange{zxid: st.Czxid, typ: jute.EventNodeDeleted, path: p, txn: txn})
				}
			}
		}(wr)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	mu.Lock()
	want := len(expected)
	var lastZxid int64
	for _, e := range expected {
		if e.zxid > lastZxid {
			lastZxid = e.zxid
		}
	}
	mu.Unlock()

	var got []resumable.Txn
	deadline := time.After(30 * time.Second)
	for len(got) == 0 || got[len(got)-1].Zxid < lastZxid {
		select {
		case tx, ok := <-w.Txns:
			if !ok {
				t.Fatalf("stream ended: %v", w.Err())
			}
			got = append(got, tx)
		case <-deadline:
			t.Fatalf("stream stopped at %d txns", len(got))
		}
	}

	t.Run("ordered", func(t *testing.T) {
		for i := 1; i < len(got); i++ {
			if got[i].Zxid <= got[i-1].Zxid {
				t.Fatalf("txn %d zxid 0x%x after 0x%x", i, got[i].Zxid, got[i-1].Zxid)
			}
		}
	})
	t.Run("unique", func(t *testing.T) {
		seen := map[string]bool{}
		for _, tx := range got {
			for _, ch := range tx.Changes {
				k := fmt.Sprintf("%x %v %s", tx.Zxid, ch.Type, ch.Path)
				if seen[k] {
					t.Fatalf("change delivered twice: %s", k)
				}
				seen[k] = true
			}
		}
	})
	byZxid := map[int64]resumable.Txn{}
	for _, tx := range got {
		byZxid[tx.Zxid] = tx
	}
	has := func(tx resumable.Txn, typ jute.EventType, path string) bool {
		for _, ch := range tx.Changes {
			if ch.Type == typ && ch.Path == path {
				return true
			}
		}
		return false
	}
	t.Run("atomic", func(t *testing.T) {
		for _, e := range expected {
			if e.txn == "" {
				continue
			}
			tx, ok := byZxid[e.zxid]
			if !ok || !has(tx, e.typ, e.path) {
				t.Fatalf("%s: %v %s missing from its transaction at 0x%x (%+v)", e.txn, e.typ, e.path, e.zxid, tx)
			}
		}
	})
	t.Run("reliable", func(t *testing.T) {
		for _, e := range expected {
			tx, ok := byZxid[e.zxid]
			if !ok || !has(tx, e.typ, e.path) {
				t.Fatalf("%v %s at 0x%x never delivered", e.typ, e.path, e.zxid)
			}
		}
		// Nothing outside the subtree, nothing the workload did not do.
		known := map[string]bool{}
		for _, e := range expected {
			known[fmt.Sprintf("%x %v %s", e.zxid, e.typ, e.path)] = true
		}
		var extra []string
		for _, tx := range got {
			for _, ch := range tx.Changes {
				if !known[fmt.Sprintf("%x %v %s", tx.Zxid, ch.Type, ch.Path)] {
					extra = append(extra, fmt.Sprintf("%x %v %s", tx.Zxid, ch.Type, ch.Path))
				}
			}
		}
		sort.Strings(extra)
		if len(extra) > 0 {
			t.Fatalf("%d changes the workload did not make: %v", len(extra), extra)
		}
	})
	t.Run("resumable", func(t *testing.T) {
		if w.Resumes() == 0 {
			t.Fatal("the stream was never cut: the test did not exercise resumption")
		}
	})
	t.Logf("%d changes in %d transactions, %d resumes", want, len(got), w.Resumes())
}

// TestResumableWatchBadInput: an unknown mode, an invalid path and a zxid
// from the future are BADARGUMENTS; one connection may hold 64 resumable
// watches and the next is THROTTLEDOP; unwatchFrom of an unknown watch is
// NOWATCHER. A path that does not exist yet may be watched.
func TestResumableWatchBadInput(t *testing.T) {
	if !hasWatchFrom(t) {
		t.Log("server does not offer watchFrom (checked by TestResumableWatchDiscovery)")
		return
	}
	const opWatchFrom, opUnwatchFrom = 1000, 1001
	c := rawSession(t, 10000)
	base := uniquePath(t)
	zxid := c.callOK(opCreate, createReq(base+"/x", nil, 0)).Zxid
	req := func(path string, from int64, mode int32) []byte {
		return new(jw).str(path).i64(from).i32(mode).bytes()
	}
	for _, tc := range []struct {
		name string
		body []byte
		want int32
	}{
		{"unknown mode", req(base, zxid, 7), errBadArguments},
		{"invalid path", req("nope", zxid, 1), errBadArguments},
		{"future zxid", req(base, zxid+1000000, 1), errBadArguments},
		{"missing path is fine", req(base+"/no/such/node/yet", zxid, 0), errOK},
	} {
		if rep := c.call(opWatchFrom, tc.body); rep.Err != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, rep, errName(tc.want))
		}
	}
	// A storm from one connection is capped (the watches are on this
	// test's own subtree, which nothing else changes).
	d := rawSession(t, 10000)
	for i := 0; i < 64; i++ {
		if rep := d.call(opWatchFrom, req(base, zxid, 1)); rep.Err != errOK {
			t.Fatalf("watch %d: %v", i+1, rep)
		}
	}
	if rep := d.call(opWatchFrom, req(base, zxid, 1)); rep.Err != -127 {
		t.Fatalf("65th watch on one connection: %v, want THROTTLEDOP (-127)", rep)
	}
	if rep := d.call(opUnwatchFrom, new(jw).i64(1<<40).bytes()); rep.Err != errNoWatcher {
		t.Fatalf("unwatchFrom of an unknown watch: %v, want NOWATCHER", rep)
	}
}
