package fence_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/zkraft/zkraft/client/fence"
)

func TestDoRefusesLowerTokensPerObject(t *testing.T) {
	g := fence.NewGuard(nil)
	for _, c := range []struct {
		obj   string
		token int64
		ok    bool
	}{
		{"a", 5, true}, {"a", 5, true}, {"a", 4, false}, {"b", 4, true}, {"a", 9, true}, {"a", 6, false}, {"b", 3, false},
	} {
		ran := false
		err := g.Do(c.obj, c.token, func() error { ran = true; return nil })
		if (err == nil) != c.ok || ran != c.ok {
			t.Fatalf("Do(%s, %d) = %v (ran %v), want ok=%v", c.obj, c.token, err, ran, c.ok)
		}
		if !c.ok && !errors.Is(err, fence.ErrStale) {
			t.Fatalf("Do(%s, %d) = %v, want ErrStale", c.obj, c.token, err)
		}
	}
	if h, _ := g.Highest("a"); h != 9 {
		t.Fatalf("highest %d", h)
	}
	// apply's error comes back, and the token stays accepted.
	boom := errors.New("boom")
	if err := g.Do("a", 10, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if err := g.Do("a", 9, nil); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("9 after 10: %v", err)
	}
}

// No request with a lower token runs after one with a higher token has
// run, whatever the interleaving: the check and the effect are one step.
func TestDoIsAtomicWithItsEffect(t *testing.T) {
	g := fence.NewGuard(nil)
	var mu sync.Mutex
	var applied []int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				tok := int64(i*8 + w)
				g.Do("x", tok, func() error {
					mu.Lock()
					applied = append(applied, tok)
					mu.Unlock()
					return nil
				})
			}
		}(w)
	}
	wg.Wait()
	for i := 1; i < len(applied); i++ {
		if applied[i] < applied[i-1] {
			t.Fatalf("token %d applied after %d", applied[i], applied[i-1])
		}
	}
	if len(applied) == 0 {
		t.Fatal("nothing applied")
	}
}

func TestDirStorePersistsAndNamesSafely(t *testing.T) {
	dir := t.TempDir()
	s, err := fence.NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"plain", "with/slash", "../escape", "with%25;", "with%", "ünï"}
	g := fence.NewGuard(s)
	for i, n := range names {
		if err := g.Do(n, int64(100+i), nil); err != nil {
			t.Fatal(err)
		}
	}
	g2 := fence.NewGuard(s)
	for i, n := range names {
		if h, err := g2.Highest(n); err != nil || h != int64(100+i) {
			t.Fatalf("%q after reopen: %d %v", n, h, err)
		}
		if err := g2.Do(n, int64(99+i), nil); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("%q: stale token accepted after reopen: %v", n, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(names) {
		t.Fatalf("%d files for %d objects", len(entries), len(names))
	}
	for _, e := range entries {
		if filepath.Base(e.Name()) != e.Name() {
			t.Fatalf("file %q", e.Name())
		}
	}
}

type failing struct{ *fence.MemStore }

func (f *failing) Save(string, int64) error { return errors.New("disk full") }

// A token that cannot be stored is not acted on.
func TestDoDoesNotApplyWhatItCannotStore(t *testing.T) {
	g := fence.NewGuard(&failing{fence.NewMemStore()})
	ran := false
	if err := g.Do("x", 1, func() error { ran = true; return nil }); err == nil || ran {
		t.Fatalf("err %v ran %v", err, ran)
	}
}
