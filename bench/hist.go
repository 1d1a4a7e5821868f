package bench

import (
	"math"
	"math/bits"
	"sync"
	"time"
)

// Histogram records durations (nanoseconds) in log-linear buckets: values
// below 256 ns exactly, larger ones with 128 buckets per power of two, so a
// reported percentile is at most 1/128 (0.8 %) above the true value. The
// minimum, maximum, sum and count are exact. Values above maxTrackable
// (about 73 minutes) land in the last bucket; the maximum stays exact.
//
// A Histogram is not safe for concurrent use; see SyncHistogram. The zero
// value is empty and ready; buckets are allocated on the first Record.
type Histogram struct {
	counts []uint64
	n      uint64
	sum    float64
	min    int64
	max    int64
}

const (
	subBits      = 7
	subCount     = 1 << subBits // buckets per power of two
	trackBits    = 42           // values below 2^42 ns are bucketed apart
	maxTrackable = int64(1)<<trackBits - 1
	// numBuckets is bucketOf(maxTrackable)+1.
	numBuckets = (trackBits - subBits + 1) << subBits
)

// bucketOf returns the bucket index of v (v >= 0).
func bucketOf(v int64) int {
	if v < 2*subCount {
		return int(v)
	}
	if v > maxTrackable {
		v = maxTrackable
	}
	shift := bits.Len64(uint64(v)) - 1 - subBits
	return (shift+1)<<subBits + int(v>>uint(shift)) - subCount
}

// bucketHigh returns the largest value that falls into bucket i.
func bucketHigh(i int) int64 {
	if i < 2*subCount {
		return int64(i)
	}
	shift := i>>subBits - 1
	sub := int64(i&(subCount-1)) + subCount
	return (sub+1)<<uint(shift) - 1
}

// Record adds one value; negative values count as 0.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	if h.counts == nil {
		h.counts = make([]uint64, numBuckets)
	}
	h.counts[bucketOf(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// RecordDuration adds one duration.
func (h *Histogram) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// Merge adds every value recorded in o.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, numBuckets)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// Count returns the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest recorded value (0 if empty).
func (h *Histogram) Max() int64 { return h.max }

// Min returns the smallest recorded value (0 if empty).
func (h *Histogram) Min() int64 { return h.min }

// Mean returns the mean of the recorded values (0 if empty).
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Quantile returns the value at quantile q in [0, 1]: the smallest bucket
// bound such that at least ceil(q*n) values are at or below it, clamped to
// the exact minimum and maximum. Quantile(1) is the maximum. An empty
// histogram returns 0.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := bucketHigh(i)
			if v > h.max {
				v = h.max
			}
			if v < h.min {
				v = h.min
			}
			return v
		}
	}
	return h.max
}

// SyncHistogram is a Histogram guarded by a mutex, for low-rate recording
// from many goroutines (pings, connects, notifications).
type SyncHistogram struct {
	mu sync.Mutex
	h  Histogram
}

// Record adds one value.
func (s *SyncHistogram) Record(v int64) {
	s.mu.Lock()
	s.h.Record(v)
	s.mu.Unlock()
}

// Snapshot returns a copy of the histogram.
func (s *SyncHistogram) Snapshot() *Histogram {
	s.mu.Lock()
	defer s.mu.Unlock()
	var h Histogram
	h.Merge(&s.h)
	return &h
}

// Latency is the summary printed for a histogram of durations, in
// microseconds.
type Latency struct {
	Count  uint64  `json:"count"`
	MeanUs float64 `json:"mean_us"`
	MinUs  float64 `json:"min_us"`
	P50Us  float64 `json:"p50_us"`
	P90Us  float64 `json:"p90_us"`
	P99Us  float64 `json:"p99_us"`
	P999Us float64 `json:"p99_9_us"`
	MaxUs  float64 `json:"max_us"`
}

// Summary returns the percentiles of h.
func (h *Histogram) Summary() Latency {
	us := func(ns int64) float64 { return math.Round(float64(ns)/10) / 100 }
	return Latency{
		Count:  h.n,
		MeanUs: math.Round(h.Mean()/10) / 100,
		MinUs:  us(h.Min()),
		P50Us:  us(h.Quantile(0.5)),
		P90Us:  us(h.Quantile(0.9)),
		P99Us:  us(h.Quantile(0.99)),
		P999Us: us(h.Quantile(0.999)),
		MaxUs:  us(h.Max()),
	}
}
