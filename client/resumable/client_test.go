package resumable_test

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
	"github.com/zkraft/zkraft/internal/testserver"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/server"
)

func startServer(t testing.TB, historyMax int64) string {
	return testserver.Start(t, func(c *server.Config) { c.HistoryMax = historyMax })
}

func connect(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func collect(t *testing.T, w *resumable.Watch, until func([]resumable.Txn) bool) []resumable.Txn {
	t.Helper()
	var got []resumable.Txn
	deadline := time.After(20 * time.Second)
	for !until(got) {
		select {
		case tx, ok := <-w.Txns:
			if !ok {
				t.Fatalf("watch ended: %v (after %d txns)", w.Err(), len(got))
			}
			got = append(got, tx)
		case <-deadline:
			t.Fatalf("timed out after %d txns", len(got))
		}
	}
	return got
}

func TestWatchFromReplaysThenStreamsLive(t *testing.T) {
	addr := startServer(t, 0)
	c := connect(t, addr)
	if _, err := c.Create("/app", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, st, _ := c.Exists("/app")
	from := st.Czxid
	if _, err := c.Create("/app/a", []byte("1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set("/app/a", []byte("2"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("/other", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	// A multi is one transaction: its changes arrive together.
	if _, err := c.Multi(&zk.CreateRequest{Path: "/app/b", Acl: zk.WorldACL(zk.PermAll)},
		&zk.DeleteRequest{Path: "/app/a", Version: -1}); err != nil {
		t.Fatal(err)
	}
	w, err := resumable.WatchFrom(context.Background(), []string{addr}, "/app", from, true, resumable.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got := collect(t, w, func(g []resumable.Txn) bool { return len(g) >= 3 })
	want := []string{
		"NodeCreated:/app/a",
		"NodeDataChanged:/app/a",
		"NodeCreated:/app/b,NodeDeleted:/app/a",
	}
	for i, tx := range got[:3] {
		var s []string
		for _, ch := range tx.Changes {
			s = append(s, fmt.Sprintf("%s:%s", ch.Type, ch.Path))
		}
		if fmt.Sprint(s) != fmt.Sprint([]string{want[i]}) && joinComma(s) != want[i] {
			t.Errorf("txn %d = %v, want %s", i, s, want[i])
		}
		if i > 0 && tx.Zxid <= got[i-1].Zxid {
			t.Errorf("zxids not increasing: %x after %x", tx.Zxid, got[i-1].Zxid)
		}
	}
	// Live: a new change arrives with its zxid.
	if _, err := c.Set("/app/b", []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	_, st, _ = c.Exists("/app/b")
	live := collect(t, w, func(g []resumable.Txn) bool { return len(g) >= 1 })
	if live[0].Zxid != st.Mzxid || live[0].Changes[0].Type != jute.EventNodeDataChanged {
		t.Fatalf("live txn %+v, want NodeDataChanged at 0x%x", live[0], st.Mzxid)
	}
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// TestWatchFromResumesWithoutLossOrDuplicates cuts the watch's connection
// in the middle of a stream of writes: the watch resumes on the other
// address from the last zxid it delivered, and the client sees every write
// exactly once, in order.
func TestWatchFromResumesWithoutLossOrDuplicates(t *testing.T) {
	addr := startServer(t, 0)
	c := connect(t, addr)
	if _, err := c.Create("/s", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, st, _ := c.Exists("/s")
	p := tcpproxy.New(t, addr)
	w, err := resumable.WatchFrom(context.Background(), []string{p.Addr(), addr}, "/s", st.Czxid, true, resumable.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const n = 300
	var mu sync.Mutex
	var written []int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			_, err := c.Create(fmt.Sprintf("/s/n%04d", i), nil, 0, zk.WorldACL(zk.PermAll))
			if err != nil {
				t.Error(err)
				return
			}
			_, st, _ := c.Exists(fmt.Sprintf("/s/n%04d", i))
			mu.Lock()
			written = append(written, st.Czxid)
			mu.Unlock()
			if i == n/3 {
				p.Close() // mid-stream
			}
		}
	}()
	got := collect(t, w, func(g []resumable.Txn) bool { return len(g) >= n })
	wg.Wait()
	if w.Resumes() == 0 {
		t.Fatal("the watch never had to resume: the test did not cut it")
	}
	seen := map[int64]bool{}
	for i, tx := range got {
		if i > 0 && tx.Zxid <= got[i-1].Zxid {
			t.Fatalf("txn %d zxid 0x%x not after 0x%x", i, tx.Zxid, got[i-1].Zxid)
		}
		if seen[tx.Zxid] {
			t.Fatalf("zxid 0x%x delivered twice", tx.Zxid)
		}
		seen[tx.Zxid] = true
	}
	sort.Slice(written, func(i, j int) bool { return written[i] < written[j] })
	for _, z := range written {
		if !seen[z] {
			t.Fatalf("write at zxid 0x%x never delivered", z)
		}
	}
	t.Logf("%d txns delivered in order across %d resume(s)", len(got), w.Resumes())
}

func TestWatchFromCompactedAndFuture(t *testing.T) {
	addr := startServer(t, 20)
	c := connect(t, addr)
	for i := 0; i < 40; i++ {
		if _, err := c.Create(fmt.Sprintf("/n%d", i), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := resumable.WatchFrom(context.Background(), []string{addr}, "/", 0, true, resumable.Options{})
	var compacted *resumable.ErrCompacted
	if !errors.As(err, &compacted) || compacted.Oldest == 0 {
		t.Fatalf("watch from 0 with a trimmed history: %v, want ErrCompacted", err)
	}
	// From the oldest available zxid it works.
	w, err := resumable.WatchFrom(context.Background(), []string{addr}, "/", compacted.Oldest, true, resumable.Options{})
	if err != nil {
		t.Fatalf("watch from the oldest available zxid 0x%x: %v", compacted.Oldest, err)
	}
	w.Close()
	// A zxid from the future is refused.
	_, st, _ := c.Exists("/n39")
	if _, err := resumable.WatchFrom(context.Background(), []string{addr}, "/", st.Czxid+1000, true, resumable.Options{}); err == nil {
		t.Fatal("watch from a future zxid accepted")
	}
}
