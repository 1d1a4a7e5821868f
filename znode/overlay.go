package znode

import (
	"slices"
	"sort"
	"strings"
)

// Overlay is a KV that buffers writes over a base KV until Commit, so that a
// multi can be rolled back by dropping it. Reads see the buffered writes.
type Overlay struct {
	base  KV
	nodes map[string]*Node // nil value: deleted
	eph   map[ephKey]bool
	paths []string // Commit's, kept for the next
}

type ephKey struct {
	owner int64
	path  string
}

var _ KV = (*Overlay)(nil)

// NewOverlay returns an empty overlay on base. The ephemeral index map is
// made by the first SetEphemeral: most transactions never touch it, and
// the overlay is made for every write.
func NewOverlay(base KV) *Overlay {
	return &Overlay{base: base, nodes: map[string]*Node{}}
}

// Reset drops every buffered change and puts the overlay on base, keeping
// its maps' memory: a state machine applying many writes reuses one.
func (o *Overlay) Reset(base KV) {
	o.base = base
	clear(o.nodes)
	clear(o.eph)
}

func (o *Overlay) Get(path string) (*Node, error) {
	if n, ok := o.nodes[path]; ok {
		return n, nil
	}
	return o.base.Get(path)
}

// NumChildren is ChildCounter's, from the buffered node or the base.
func (o *Overlay) NumChildren(path string) (int32, bool, error) {
	if n, ok := o.nodes[path]; ok {
		if n == nil {
			return 0, false, nil
		}
		return n.NumChildren, true, nil
	}
	if cc, ok := o.base.(ChildCounter); ok {
		return cc.NumChildren(path)
	}
	n, err := o.base.Get(path)
	if err != nil || n == nil {
		return 0, false, err
	}
	return n.NumChildren, true, nil
}

var _ ChildCounter = (*Overlay)(nil)

func (o *Overlay) Put(path string, n *Node) error {
	o.nodes[path] = n
	return nil
}

func (o *Overlay) Delete(path string) error {
	o.nodes[path] = nil
	return nil
}

func (o *Overlay) Children(path string) ([]string, error) {
	base, err := o.base.Children(path)
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(base))
	for _, c := range base {
		set[c] = true
	}
	for p, n := range o.nodes {
		parent, ok := Parent(p)
		if !ok || parent != path || p == "/" {
			continue
		}
		set[Base(p)] = n != nil
	}
	out := make([]string, 0, len(set))
	for c, live := range set {
		if live {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (o *Overlay) SetEphemeral(owner int64, path string, present bool) error {
	if o.eph == nil {
		o.eph = map[ephKey]bool{}
	}
	o.eph[ephKey{owner, path}] = present
	return nil
}

func (o *Overlay) Ephemerals(owner int64) ([]string, error) {
	base, err := o.base.Ephemerals(owner)
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(base))
	for _, p := range base {
		set[p] = true
	}
	for k, present := range o.eph {
		if k.owner == owner {
			set[k.path] = present
		}
	}
	out := make([]string, 0, len(set))
	for p, live := range set {
		if live {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Commit writes the buffered changes to the base in a deterministic order
// (ascending path; within the ephemeral index, ascending owner then path).
func (o *Overlay) Commit() error {
	paths := o.paths[:0]
	for p := range o.nodes {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	defer func() { clear(paths); o.paths = paths[:0] }()
	for _, p := range paths {
		var err error
		if n := o.nodes[p]; n != nil {
			err = o.base.Put(p, n)
		} else {
			err = o.base.Delete(p)
		}
		if err != nil {
			return err
		}
	}
	if len(o.eph) > 0 {
		keys := make([]ephKey, 0, len(o.eph))
		for k := range o.eph {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].owner != keys[j].owner {
				return keys[i].owner < keys[j].owner
			}
			return strings.Compare(keys[i].path, keys[j].path) < 0
		})
		for _, k := range keys {
			if err := o.base.SetEphemeral(k.owner, k.path, o.eph[k]); err != nil {
				return err
			}
		}
	}
	// Emptied in place: the maps are not made again for an overlay that
	// is usually dropped now.
	clear(o.nodes)
	clear(o.eph)
	return nil
}
