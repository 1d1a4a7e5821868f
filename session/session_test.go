package session

import (
	"encoding/hex"
	"math"
	"slices"
	"sync"
	"testing"
	"time"
)

// Expected passwords were printed by Java 17:
//
//	new java.util.Random(id ^ 0xB3415C00L).nextBytes(new byte[16])
func TestPasswordMatchesJava(t *testing.T) {
	tests := []struct {
		id   int64
		want string
	}{
		{0, "f22acd4a97e69d6d20a49bb638eadb38"},
		{1, "054cc74a37327db215e702e20c73f005"},
		{-1, "20f62cb5648dc2d771471c8a2486a9ee"},
		{0x100000960cd0000, "29fc1db40265b271af998d311bf25356"},
		{0x100000960cd0001, "3c1d18b4a2b091b6a4dcf45cef7a6823"},
		{0x100000960cd0002, "03ba29b4c2cdf3e7c513bfda74e02abc"},
		{math.MinInt64, "f22acd4a97e69d6d20a49bb638eadb38"},
		{math.MaxInt64, "20f62cb5648dc2d771471c8a2486a9ee"},
		{-0x123456789abcdef, "2e74d8745b2bd34212094b504c02322e"},
		{0xB3415C00, "60b420bb3851d9d47acb933dbe70399b"},
		{0x2ff0000000a0005, "c36922114122ba8bac565f21f45b386f"},
	}
	for _, tt := range tests {
		got := Password(tt.id)
		if hex.EncodeToString(got) != tt.want {
			t.Errorf("Password(%#x) = %x, want %s", tt.id, got, tt.want)
		}
		if len(got) != PasswordLen {
			t.Errorf("Password(%#x) has %d bytes, want %d", tt.id, len(got), PasswordLen)
		}
	}
}

func TestCheckPassword(t *testing.T) {
	const id = 0x100000960cd0000
	good := Password(id)
	tests := []struct {
		name   string
		id     int64
		passwd []byte
		want   bool
	}{
		{"match", id, good, true},
		{"other session", id + 1, good, false},
		{"one bit off", id, flipBit(good, 77), false},
		{"short", id, good[:15], false},
		{"long", id, append(slices.Clone(good), 0), false},
		{"empty", id, nil, false},
		{"zero password of new session", id, make([]byte, PasswordLen), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CheckPassword(tt.id, tt.passwd); got != tt.want {
				t.Errorf("CheckPassword(%#x, %x) = %v, want %v", tt.id, tt.passwd, got, tt.want)
			}
		})
	}
}

func flipBit(b []byte, bit int) []byte {
	c := slices.Clone(b)
	c[bit/8] ^= 1 << (bit % 8)
	return c
}

func TestIDGeneratorLayout(t *testing.T) {
	tests := []struct {
		name     string
		member   uint8
		millis   int64
		wantNext []int64
	}{
		{"observed standalone", 1, 0x960cd, []int64{0x100000960cd0000, 0x100000960cd0001, 0x100000960cd0002}},
		{"millis above 40 bits dropped", 1, 0x960cd | 7<<40, []int64{0x100000960cd0000, 0x100000960cd0001}},
		{"member in top byte", 0x2f, 0xff_ffff_ffff, []int64{0x2fffffffffff0000, 0x2fffffffffff0001}},
		{"member 0 skips 0", 0, 0, []int64{1, 2}},
		{"skips MinInt64", 0x80, 0, []int64{math.MinInt64 + 1, math.MinInt64 + 2}},
		{"member 0xff", 0xff, 0x1234567890, []int64{-0x00edcba987700000, -0x00edcba987700000 + 1}}, // 0xff12345678900000, 0xff12345678900001
		{"negative millis", 1, -1, []int64{0x01ffffffffff0000, 0x01ffffffffff0001}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewIDGenerator(tt.member, tt.millis)
			for i, want := range tt.wantNext {
				got := g.Next()
				if got != want {
					t.Fatalf("Next #%d = %#x, want %#x", i, uint64(got), uint64(want))
				}
				if top := uint8(uint64(got) >> 56); top != tt.member {
					t.Errorf("Next #%d = %#x: top byte %#x, want member %#x", i, uint64(got), top, tt.member)
				}
			}
		})
	}
}

func TestIDGeneratorConcurrent(t *testing.T) {
	const (
		workers = 8
		each    = 1000
	)
	g := NewIDGenerator(3, 0x960cd)
	base := int64(0x300000960cd0000)
	ids := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				ids[w] = append(ids[w], g.Next())
			}
		})
	}
	wg.Wait()
	all := slices.Concat(ids...)
	slices.Sort(all)
	for i, id := range all {
		if want := base + int64(i); id != want {
			t.Fatalf("sorted id #%d = %#x, want %#x (duplicate or gap)", i, id, want)
		}
	}
}

func TestNegotiateTimeout(t *testing.T) {
	tests := []struct {
		requested, min, max, want int32
	}{
		{1000, 4000, 40000, 4000}, // observed: tick 2000, request 1000 -> 4000
		{4000, 4000, 40000, 4000},
		{10000, 4000, 40000, 10000},
		{40000, 4000, 40000, 40000},
		{90000, 4000, 40000, 40000},
		{0, 4000, 40000, 4000},
		{-5, 4000, 40000, 4000},
		{5000, 6000, 3000, 3000}, // min > max: max wins, as in ZooKeeper
	}
	for _, tt := range tests {
		if got := NegotiateTimeout(tt.requested, tt.min, tt.max); got != tt.want {
			t.Errorf("NegotiateTimeout(%d, %d, %d) = %d, want %d", tt.requested, tt.min, tt.max, got, tt.want)
		}
	}
}

func TestKeepAlivesDrain(t *testing.T) {
	var k KeepAlives
	if got := k.Drain(); len(got) != 0 {
		t.Fatalf("Drain of empty set = %v", got)
	}
	for _, id := range []int64{5, -3, 0x100000960cd0001, 5, 2, -3} {
		k.Record(id)
	}
	if got, want := k.Drain(), []int64{-3, 2, 5, 0x100000960cd0001}; !slices.Equal(got, want) {
		t.Fatalf("Drain = %v, want %v", got, want)
	}
	if got := k.Drain(); len(got) != 0 {
		t.Fatalf("second Drain = %v, want empty", got)
	}
	k.Record(9)
	if got := k.Drain(); !slices.Equal(got, []int64{9}) {
		t.Fatalf("Drain after refill = %v, want [9]", got)
	}
}

func TestKeepAlivesConcurrent(t *testing.T) {
	var k KeepAlives
	var wg sync.WaitGroup
	seen := make(map[int64]int)
	var mu sync.Mutex
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				k.Record(int64(w*1000 + i))
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			ids := k.Drain()
			mu.Lock()
			for _, id := range ids {
				seen[id]++
			}
			mu.Unlock()
		}
	})
	wg.Wait()
	for _, id := range k.Drain() {
		seen[id]++
	}
	if len(seen) != 2000 {
		t.Fatalf("saw %d distinct ids, want 2000", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("id %d drained %d times", id, n)
		}
	}
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

var _ Clock = (*fakeClock)(nil)

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = epoch.Add(d)
}

// epoch is a multiple of every tick used below.
var epoch = time.Unix(1_700_000_000, 0)

// TestTracker drives one tracker through a script of steps; each step moves
// the fake clock to at (relative to epoch), runs op and checks Expired.
func TestTracker(t *testing.T) {
	const tick = 2 * time.Second
	type step struct {
		at      time.Duration
		op      func(*Tracker)
		expired []int64
		length  int
	}
	add := func(id int64, d time.Duration) func(*Tracker) { return func(tr *Tracker) { tr.Add(id, d) } }
	touch := func(ids ...int64) func(*Tracker) { return func(tr *Tracker) { tr.Touch(ids...) } }
	tests := []struct {
		name  string
		steps []step
	}{
		{"rounds up to tick, expires at bucket", []step{
			{0, add(1, 5*time.Second), nil, 1}, // deadline 5s -> 6s
			{5 * time.Second, nil, nil, 1},
			{6*time.Second - 1, nil, nil, 1},
			{6 * time.Second, nil, []int64{1}, 1},
			{60 * time.Second, nil, []int64{1}, 1}, // not removed by Expired
		}},
		{"boundary moves to next tick", []step{
			{500 * time.Millisecond, add(1, 5500*time.Millisecond), nil, 1}, // 6s on boundary -> 8s
			{7999 * time.Millisecond, nil, nil, 1},
			{8 * time.Second, nil, []int64{1}, 1},
		}},
		{"touch extends, unknown ignored", []step{
			{0, add(1, 4*time.Second), nil, 1},      // -> 6s
			{0, add(2, 4*time.Second), nil, 2},      // -> 6s
			{5 * time.Second, touch(1, 99), nil, 2}, // 1 -> 10s
			{6 * time.Second, nil, []int64{2}, 2},
			{9 * time.Second, touch(), []int64{2}, 2},
			{10 * time.Second, nil, []int64{1, 2}, 2},
		}},
		{"sorted, remove", []step{
			{0, add(30, time.Second), nil, 1},
			{0, add(-4, time.Second), nil, 2},
			{0, add(7, time.Second), nil, 3},
			{2 * time.Second, nil, []int64{-4, 7, 30}, 3},
			{2 * time.Second, func(tr *Tracker) { tr.Remove(7); tr.Remove(12345) }, []int64{-4, 30}, 2},
		}},
		{"mark closing, touch clears", []step{
			{0, add(1, time.Second), nil, 1},
			{0, add(2, time.Second), nil, 2},
			{2 * time.Second, nil, []int64{1, 2}, 2},
			{2 * time.Second, func(tr *Tracker) {
				if !tr.MarkClosing(1) || !tr.MarkClosing(2) {
					t.Error("MarkClosing of known session returned false")
				}
				if tr.MarkClosing(3) {
					t.Error("MarkClosing(3) of unknown session returned true")
				}
			}, nil, 2},
			{10 * time.Second, nil, nil, 2},
			{10 * time.Second, touch(2), nil, 2}, // 2 -> 12s, no longer closing
			{12 * time.Second, nil, []int64{2}, 2},
			{12 * time.Second, func(tr *Tracker) { tr.Remove(1) }, []int64{2}, 1},
		}},
		{"re-add replaces timeout", []step{
			{0, add(1, time.Second), nil, 1},
			{0, add(1, 9*time.Second), nil, 1}, // -> 10s
			{9 * time.Second, nil, nil, 1},
			{10 * time.Second, nil, []int64{1}, 1},
		}},
		{"extend all on becoming leader", []step{
			{0, add(1, 3*time.Second), nil, 1}, // -> 4s
			{0, add(2, 9*time.Second), nil, 2}, // -> 10s
			{20 * time.Second, func(tr *Tracker) { tr.MarkClosing(1) }, []int64{2}, 2},
			{20 * time.Second, (*Tracker).ExtendAll, nil, 2}, // 1 -> 24s, 2 -> 30s; closing cleared
			{23 * time.Second, nil, nil, 2},
			{24 * time.Second, nil, []int64{1}, 2},
			{30 * time.Second, nil, []int64{1, 2}, 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{}
			clock.set(0)
			tr := NewTracker(clock, tick)
			for i, s := range tt.steps {
				clock.set(s.at)
				if s.op != nil {
					s.op(tr)
				}
				if got := tr.Expired(); !slices.Equal(got, s.expired) {
					t.Fatalf("step %d at %v: Expired = %v, want %v", i, s.at, got, s.expired)
				}
				if got := tr.Len(); got != s.length {
					t.Fatalf("step %d at %v: Len = %d, want %d", i, s.at, got, s.length)
				}
			}
		})
	}
}

func TestTrackerTimeout(t *testing.T) {
	clock := &fakeClock{}
	clock.set(0)
	tr := NewTracker(clock, time.Second)
	tr.Add(1, 30*time.Second)
	if d, ok := tr.Timeout(1); !ok || d != 30*time.Second {
		t.Errorf("Timeout(1) = %v, %v; want 30s, true", d, ok)
	}
	if d, ok := tr.Timeout(2); ok || d != 0 {
		t.Errorf("Timeout(2) = %v, %v; want 0, false", d, ok)
	}
	tr.Remove(1)
	if _, ok := tr.Timeout(1); ok {
		t.Error("Timeout(1) after Remove reported known")
	}
}

func TestTrackerConcurrent(t *testing.T) {
	clock := &fakeClock{}
	clock.set(0)
	tr := NewTracker(clock, time.Second)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				id := int64(w*1000 + i)
				tr.Add(id, time.Second)
				tr.Touch(id)
				tr.MarkClosing(id)
				_ = tr.Expired()
				tr.ExtendAll()
				tr.Remove(id)
			}
		})
	}
	wg.Go(func() {
		for i := range 100 {
			clock.set(time.Duration(i) * 100 * time.Millisecond)
		}
	})
	wg.Wait()
	if n := tr.Len(); n != 0 {
		t.Fatalf("Len = %d after removing everything", n)
	}
}

func TestSystemClock(t *testing.T) {
	before := time.Now()
	got := SystemClock{}.Now()
	if got.Before(before) || time.Since(got) < 0 {
		t.Fatalf("SystemClock.Now() = %v, not between %v and now", got, before)
	}
}

func TestKeepAlivesRecordAll(t *testing.T) {
	var k KeepAlives
	k.RecordAll(nil)
	if got := k.Drain(); len(got) != 0 {
		t.Fatalf("Drain after RecordAll(nil) = %v", got)
	}
	k.Record(4)
	k.RecordAll([]int64{7, 4, 1})
	if got, want := k.Drain(), []int64{1, 4, 7}; !slices.Equal(got, want) {
		t.Fatalf("Drain = %v, want %v", got, want)
	}
}
