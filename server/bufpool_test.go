package server

import "testing"

func TestBufPoolClasses(t *testing.T) {
	for _, c := range []struct{ n, class int }{
		{0, 0}, {1, 0}, {512, 0}, {513, 1}, {1024, 1}, {1025, 2}, {4300, 4}, {1 << 16, 7}, {1<<16 + 1, -1},
	} {
		if got := bufClass(c.n); got != c.class {
			t.Errorf("bufClass(%d) = %d, want %d", c.n, got, c.class)
		}
	}
	var p bufPool
	for _, n := range []int{0, 100, 1100, 4300, 70000} {
		b := p.get(n)
		if len(*b) != n {
			t.Fatalf("get(%d): len %d", n, len(*b))
		}
		if c := bufClass(n); c >= 0 && cap(*b) != 1<<(minBufShift+c) {
			t.Fatalf("get(%d): cap %d, not its class's", n, cap(*b))
		}
		p.put(b)
	}
	// A buffer that is not a class's size is never handed out again.
	odd := make([]byte, 1000)
	p.put(&odd)
	for i := 0; i < 100; i++ {
		if b := p.get(600); cap(*b) != 1024 {
			t.Fatalf("get(600) handed out a buffer of cap %d", cap(*b))
		}
	}
}
