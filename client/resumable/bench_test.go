package resumable_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/resumable"
)

// BenchmarkReplay measures how fast a resumable watch replays retained
// history: b.N changes are written first, then one watch from before them
// receives them all. Reported as events/s.
func BenchmarkReplay(b *testing.B) {
	addr := startServer(b, 2*int64(b.N)+1000)
	c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create("/r", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		b.Fatal(err)
	}
	_, st, _ := c.Exists("/r")
	// Pipeline the writes from several goroutines.
	done := make(chan error, 16)
	per := (b.N + 15) / 16
	for g := 0; g < 16; g++ {
		go func(g int) {
			for i := 0; i < per; i++ {
				if _, err := c.Create(fmt.Sprintf("/r/g%02d-%07d", g, i), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}(g)
	}
	for g := 0; g < 16; g++ {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	total := per * 16
	b.ResetTimer()
	start := time.Now()
	w, err := resumable.WatchFrom(context.Background(), []string{addr}, "/r", st.Czxid, true, resumable.Options{Buffer: 65536})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for n < total {
		tx := <-w.Txns
		n += len(tx.Changes)
	}
	el := time.Since(start)
	w.Close()
	b.ReportMetric(float64(total)/el.Seconds(), "events/s")
}

// BenchmarkLiveFanOut compares the time from a write's reply to each
// watcher's event, for W resumable watches and W standard one-shot data
// watches on one znode (each on its own connection). Reports p50/p99 in µs.
func BenchmarkLiveFanOut(b *testing.B) {
	const watchers = 50
	addr := startServer(b, 0)
	c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create("/f", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		b.Fatal(err)
	}
	_, st, _ := c.Exists("/f")
	var ws []*resumable.Watch
	for i := 0; i < watchers; i++ {
		w, err := resumable.WatchFrom(context.Background(), []string{addr}, "/f", st.Mzxid, false, resumable.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		ws = append(ws, w)
	}
	var std []*zk.Conn
	for i := 0; i < watchers; i++ {
		sc, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
		if err != nil {
			b.Fatal(err)
		}
		defer sc.Close()
		std = append(std, sc)
	}
	var resLat, stdLat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var chans []<-chan zk.Event
		for _, sc := range std {
			_, _, ch, err := sc.GetW("/f")
			if err != nil {
				b.Fatal(err)
			}
			chans = append(chans, ch)
		}
		// Both kinds are read concurrently, each latency measured from the
		// moment the write's reply arrived.
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan time.Time, 2*watchers)
		for _, w := range ws {
			wg.Add(1)
			go func(w *resumable.Watch) {
				defer wg.Done()
				<-w.Txns
				t0 := <-start
				mu.Lock()
				resLat = append(resLat, time.Since(t0))
				mu.Unlock()
			}(w)
		}
		for _, ch := range chans {
			wg.Add(1)
			go func(ch <-chan zk.Event) {
				defer wg.Done()
				<-ch
				t0 := <-start
				mu.Lock()
				stdLat = append(stdLat, time.Since(t0))
				mu.Unlock()
			}(ch)
		}
		if _, err := c.Set("/f", []byte{byte(i)}, -1); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		for j := 0; j < 2*watchers; j++ {
			start <- t0
		}
		wg.Wait()
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[int(p*float64(len(d)-1))].Microseconds())
	}
	b.ReportMetric(pct(resLat, 0.5), "resumable-p50-µs")
	b.ReportMetric(pct(resLat, 0.99), "resumable-p99-µs")
	b.ReportMetric(pct(stdLat, 0.5), "standard-p50-µs")
	b.ReportMetric(pct(stdLat, 0.99), "standard-p99-µs")
}
