package fence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// ErrStale is returned for a token lower than one the Guard has already
// accepted for the object.
var ErrStale = errors.New("fence: token superseded by a later holder's")

// Store keeps the highest accepted token of each object.
type Store interface {
	// Load returns the object's token, 0 if none was stored.
	Load(object string) (int64, error)
	// Save stores the object's token durably before it returns.
	Save(object string, token int64) error
}

// Guard accepts a token for an object unless it has accepted a higher
// one. It is safe for concurrent use.
type Guard struct {
	store Store

	mu struct {
		sync.Mutex
		objects map[string]*object
	}
}

// object is one protected object; its RWMutex serializes Do (write) and
// lets Check (read) run together.
type object struct {
	rw      sync.RWMutex
	loaded  bool
	highest int64 // guarded by rw (written under the write lock)
}

// NewGuard returns a guard over store (a MemStore if nil).
func NewGuard(store Store) *Guard {
	if store == nil {
		store = NewMemStore()
	}
	g := &Guard{store: store}
	g.mu.objects = map[string]*object{}
	return g
}

func (g *Guard) object(name string) *object {
	g.mu.Lock()
	defer g.mu.Unlock()
	o := g.mu.objects[name]
	if o == nil {
		o = &object{}
		g.mu.objects[name] = o
	}
	return o
}

// loadLocked reads the stored token once; the caller holds o.rw for
// writing.
func (g *Guard) loadLocked(name string, o *object) error {
	if o.loaded {
		return nil
	}
	t, err := g.store.Load(name)
	if err != nil {
		return fmt.Errorf("fence: load %q: %w", name, err)
	}
	o.highest, o.loaded = t, true
	return nil
}

// Do runs apply for the holder of token if no higher token was accepted
// for object: it records token (durably, before apply runs) and runs
// apply while no other request on the object can. A token equal to the
// highest is the same holder again and is accepted. It returns ErrStale
// (wrapped, with both tokens) without running apply for a lower token,
// and apply's error otherwise.
func (g *Guard) Do(object string, token int64, apply func() error) error {
	o := g.object(object)
	o.rw.Lock()
	defer o.rw.Unlock()
	if err := g.loadLocked(object, o); err != nil {
		return err
	}
	if token < o.highest {
		return fmt.Errorf("%w: %q: token 0x%x < 0x%x", ErrStale, object, token, o.highest)
	}
	if token > o.highest {
		if err := g.store.Save(object, token); err != nil {
			return fmt.Errorf("fence: save %q: %w", object, err)
		}
		o.highest = token
	}
	if apply == nil {
		return nil
	}
	return apply()
}

// Check runs read for the holder of a shared lease (a read lock) if no
// higher token was accepted by Do: readers are checked, not recorded, so
// they do not refuse each other. Reads run together; a Do on the object
// waits for them.
func (g *Guard) Check(object string, token int64, read func() error) error {
	o := g.object(object)
	o.rw.Lock()
	err := g.loadLocked(object, o)
	o.rw.Unlock()
	if err != nil {
		return err
	}
	o.rw.RLock()
	defer o.rw.RUnlock()
	if token < o.highest {
		return fmt.Errorf("%w: %q: token 0x%x < 0x%x", ErrStale, object, token, o.highest)
	}
	if read == nil {
		return nil
	}
	return read()
}

// Highest is the highest token accepted for object.
func (g *Guard) Highest(object string) (int64, error) {
	o := g.object(object)
	o.rw.Lock()
	defer o.rw.Unlock()
	if err := g.loadLocked(object, o); err != nil {
		return 0, err
	}
	return o.highest, nil
}

// MemStore keeps tokens in memory.
type MemStore struct {
	mu sync.Mutex
	m  map[string]int64
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{m: map[string]int64{}} }

func (s *MemStore) Load(object string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[object], nil
}

func (s *MemStore) Save(object string, token int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[object] = token
	return nil
}

// DirStore keeps each object's token in a file of its own in a
// directory, replaced atomically (write, fsync, rename, fsync the
// directory), so a crash leaves the old token or the new, never neither.
type DirStore struct{ dir string }

var (
	_ Store = (*MemStore)(nil)
	_ Store = DirStore{}
)

// NewDirStore returns the store in dir, creating it.
func NewDirStore(dir string) (DirStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return DirStore{}, err
	}
	return DirStore{dir: dir}, nil
}

// fileFor names an object's file: letters, digits and -_. stay, any
// other rune is escaped, so every object name maps to its own file.
func (s DirStore) fileFor(object string) string {
	var b strings.Builder
	for _, r := range object {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "%%%x;", r)
		}
	}
	return filepath.Join(s.dir, "token-"+b.String())
}

func (s DirStore) Load(object string) (int64, error) {
	b, err := os.ReadFile(s.fileFor(object))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 16, 64)
}

func (s DirStore) Save(object string, token int64) error {
	name := s.fileFor(object)
	tmp, err := os.CreateTemp(s.dir, ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := fmt.Fprintf(tmp, "%x\n", token); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	d, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
