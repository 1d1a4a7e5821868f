package bench

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
)

func TestBucketsAreMonotonicAndTight(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 2, 127, 128, 255, 256, 257, 511, 512, 1000, 1 << 20, 1<<20 + 1, 123456789, maxTrackable} {
		i := bucketOf(v)
		if i < prev {
			t.Fatalf("bucketOf(%d) = %d < %d", v, i, prev)
		}
		prev = i
		if i >= numBuckets {
			t.Fatalf("bucketOf(%d) = %d, only %d buckets", v, i, numBuckets)
		}
		hi := bucketHigh(i)
		if hi < v {
			t.Fatalf("bucketHigh(bucketOf(%d)) = %d < value", v, hi)
		}
		if v >= 256 && float64(hi-v) > float64(v)/subCount {
			t.Fatalf("bucket of %d reaches %d: more than 1/%d above", v, hi, subCount)
		}
		if v < 256 && hi != v {
			t.Fatalf("small value %d not exact (%d)", v, hi)
		}
	}
	if bucketOf(maxTrackable) != numBuckets-1 {
		t.Fatalf("last bucket %d, want %d", bucketOf(maxTrackable), numBuckets-1)
	}
	if bucketOf(math.MaxInt64) != numBuckets-1 {
		t.Fatalf("huge values must clamp to the last bucket")
	}
	// Every bucket's upper bound maps back to it, and the next value to the next.
	for i := 0; i < numBuckets-1; i++ {
		hi := bucketHigh(i)
		if bucketOf(hi) != i || bucketOf(hi+1) != i+1 {
			t.Fatalf("bucket %d: high %d maps to %d, high+1 to %d", i, hi, bucketOf(hi), bucketOf(hi+1))
		}
	}
}

func TestQuantilesOfUniform(t *testing.T) {
	var h Histogram
	// 1..100000 microseconds, shuffled.
	vals := make([]int64, 100000)
	for i := range vals {
		vals[i] = int64(i+1) * 1000
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
	for _, v := range vals {
		h.Record(v)
	}
	if h.Count() != 100000 || h.Min() != 1000 || h.Max() != 100000*1000 {
		t.Fatalf("count %d min %d max %d", h.Count(), h.Min(), h.Max())
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := float64(int64(math.Ceil(q*100000))) * 1000
		got := float64(h.Quantile(q))
		if got < want || got > want*(1+1.0/subCount) {
			t.Errorf("q%v = %v, want %v (at most 1/%d above)", q, got, want, subCount)
		}
	}
	if h.Quantile(1) != h.Max() || h.Quantile(0) != h.Min() {
		t.Errorf("q0/q1 must be min/max")
	}
	if m := h.Mean(); math.Abs(m-50000.5*1000) > 1 {
		t.Errorf("mean %v", m)
	}
}

func TestQuantilesAgainstSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h Histogram
	vals := make([]int64, 20000)
	for i := range vals {
		vals[i] = int64(rng.ExpFloat64() * 2e6) // exponential, mean 2 ms
		h.Record(vals[i])
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := vals[int(math.Ceil(q*float64(len(vals))))-1]
		got := h.Quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/subCount+1 {
			t.Errorf("q%v = %d, exact %d", q, got, exact)
		}
	}
}

func TestHistogramEdges(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Max() != 0 || h.Mean() != 0 || h.Summary().Count != 0 {
		t.Fatal("empty histogram must report zeros")
	}
	h.Record(-5) // counts as 0
	if h.Count() != 1 || h.Max() != 0 || h.Quantile(0.99) != 0 {
		t.Fatalf("negative value: count %d max %d", h.Count(), h.Max())
	}
	var one Histogram
	one.Record(1234567)
	for _, q := range []float64{0, 0.5, 0.99, 1} {
		if one.Quantile(q) != 1234567 {
			t.Errorf("single value: q%v = %d", q, one.Quantile(q))
		}
	}
	var huge Histogram
	huge.Record(math.MaxInt64 / 2)
	if huge.Quantile(0.5) != math.MaxInt64/2 || huge.Max() != math.MaxInt64/2 {
		t.Errorf("huge value: q50 %d max %d", huge.Quantile(0.5), huge.Max())
	}
}

func TestMerge(t *testing.T) {
	var a, b, all Histogram
	for i := int64(1); i <= 1000; i++ {
		v := i * 997
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	var m Histogram
	m.Merge(&a)
	m.Merge(&b)
	m.Merge(nil)
	m.Merge(&Histogram{})
	if m.Count() != all.Count() || m.Min() != all.Min() || m.Max() != all.Max() || m.Mean() != all.Mean() {
		t.Fatalf("merged count/min/max/mean differ")
	}
	for _, q := range []float64{0.1, 0.5, 0.9, 0.99} {
		if m.Quantile(q) != all.Quantile(q) {
			t.Errorf("q%v: merged %d, direct %d", q, m.Quantile(q), all.Quantile(q))
		}
	}
}

func TestSyncHistogram(t *testing.T) {
	var s SyncHistogram
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				s.Record(int64(i))
			}
		}()
	}
	wg.Wait()
	if n := s.Snapshot().Count(); n != 8000 {
		t.Fatalf("count %d", n)
	}
}

func TestSummaryUnits(t *testing.T) {
	var h Histogram
	h.Record(1_500_000) // 1.5 ms
	l := h.Summary()
	if l.P50Us != 1500 || l.MaxUs != 1500 || l.MeanUs != 1500 || l.Count != 1 {
		t.Fatalf("summary %+v", l)
	}
	if s := latLine(l); !strings.Contains(s, "p99 1.500 ms") {
		t.Fatalf("text %q", s)
	}
}

func TestParseVmRSS(t *testing.T) {
	in := "Name:\tjava\nVmPeak:\t  100 kB\nVmRSS:\t  245380 kB\nThreads: 4\n"
	kb, err := parseVmRSS(strings.NewReader(in))
	if err != nil || kb != 245380 {
		t.Fatalf("got %d, %v", kb, err)
	}
	if _, err := parseVmRSS(strings.NewReader("Name: x\n")); err == nil {
		t.Fatal("missing VmRSS must fail")
	}
	if _, err := parseVmRSS(strings.NewReader("VmRSS: 12 MB\n")); err == nil {
		t.Fatal("unknown unit must fail")
	}
}
