package server

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkWatchMemory reports the registry's heap per watch for 100,000
// data watches, set the two ways a ZooKeeper workload sets many: on one
// znode from 100,000 connections (one each: ZooKeeper keeps one data watch
// per connection and path), and on 100 znodes from 1,000 connections.
// The connections are allocated before the first measurement, so only the
// registry's tables count.
func BenchmarkWatchMemory(b *testing.B) {
	for _, shape := range []struct {
		name         string
		conns, paths int
	}{
		{"one-znode-100k-conns", 100_000, 1},
		{"100-znodes-1k-conns", 1_000, 100},
	} {
		b.Run(shape.name, func(b *testing.B) {
			conns := make([]*conn, shape.conns)
			for i := range conns {
				conns[i] = new(conn)
			}
			paths := make([]string, shape.paths)
			for i := range paths {
				paths[i] = fmt.Sprintf("/app/config/%d", i)
			}
			var perWatch float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				r := newRegistry()
				for _, c := range conns {
					for _, p := range paths {
						r.add(tableData, p, c, modeStandard)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perWatch = float64(after.HeapAlloc-before.HeapAlloc) / float64(len(conns)*len(paths))
				runtime.KeepAlive(r)
			}
			b.ReportMetric(perWatch, "bytes/watch")
		})
	}
}

func TestKeySet(t *testing.T) {
	var s keySet
	key := func(i int) watchKey { return watchKey{tableData, fmt.Sprint("/", i)} }
	want := map[watchKey]bool{}
	check := func() {
		t.Helper()
		got := map[watchKey]bool{}
		for _, k := range s.keys() {
			if got[k] {
				t.Fatalf("%v listed twice", k)
			}
			got[k] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("keys %v, want %v", got, want)
		}
	}
	for i := range 5 {
		s.add(key(i))
		s.add(key(i)) // twice: kept once
		want[key(i)] = true
	}
	check()
	s.remove(key(2))
	delete(want, key(2))
	check()
	for i := 10; i < 30; i++ { // past fewKeys: becomes a map
		s.add(key(i))
		want[key(i)] = true
	}
	check()
	if s.many == nil {
		t.Fatal("still a slice with 24 keys")
	}
	for k := range want {
		s.remove(k)
		delete(want, k)
	}
	check()
	s.remove(key(99)) // absent: no-op
}
