package zktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"

	"github.com/go-zookeeper/zk"
)

// Node is a znode as a client sees it.
type Node struct {
	Path string   `json:"path"`
	Data []byte   `json:"data"` // null stays null, empty stays ""
	Stat zk.Stat  `json:"stat"`
	ACL  []zk.ACL `json:"acl"`
}

// Session is a session the fixture left open, with the ephemerals it owns.
type Session struct {
	ID         int64    `json:"id"`
	Ephemerals []string `json:"ephemerals"`
}

// Dump is what expected.json in a fixture holds.
type Dump struct {
	Nodes    []Node    `json:"nodes"`
	Sessions []Session `json:"sessions"`
}

// ReadDump reads a dump written by WriteDump.
func ReadDump(path string) (*Dump, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := new(Dump)
	if err := json.Unmarshal(b, d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// WriteDump writes d as JSON, one node per line.
func WriteDump(path string, d *Dump) error {
	var b bytes.Buffer
	b.WriteString("{\"nodes\": [\n")
	for i, n := range d.Nodes {
		line, err := json.Marshal(n)
		if err != nil {
			return err
		}
		b.Write(line)
		if i < len(d.Nodes)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	s, err := json.Marshal(d.Sessions)
	if err != nil {
		return err
	}
	b.WriteString("],\n\"sessions\": ")
	b.Write(s)
	b.WriteString("}\n")
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// DumpTree reads every node through c (which should be authenticated as
// the super user so that no ACL hides anything), in path order.
func DumpTree(c *zk.Conn) ([]Node, error) {
	var out []Node
	var walk func(p string) error
	walk = func(p string) error {
		data, stat, err := c.Get(p)
		if err != nil {
			return fmt.Errorf("get %s: %w", p, err)
		}
		acl, _, err := c.GetACL(p)
		if err != nil {
			return fmt.Errorf("getACL %s: %w", p, err)
		}
		out = append(out, Node{Path: p, Data: data, Stat: *stat, ACL: acl})
		kids, _, err := c.Children(p)
		if err != nil {
			return fmt.Errorf("children %s: %w", p, err)
		}
		sort.Strings(kids)
		for _, k := range kids {
			child := p + "/" + k
			if p == "/" {
				child = "/" + k
			}
			if err := walk(child); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk("/"); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Compare lists the differences between two dumps (at most limit).
func Compare(want, got []Node, skip func(path string) bool, limit int) []string {
	var out []string
	w := map[string]Node{}
	g := map[string]Node{}
	var paths []string
	for _, n := range want {
		if skip == nil || !skip(n.Path) {
			w[n.Path] = n
			paths = append(paths, n.Path)
		}
	}
	for _, n := range got {
		if skip == nil || !skip(n.Path) {
			g[n.Path] = n
			if _, ok := w[n.Path]; !ok {
				paths = append(paths, n.Path)
			}
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		if limit > 0 && len(out) >= limit {
			break
		}
		wn, wok := w[p]
		gn, gok := g[p]
		switch {
		case !gok:
			out = append(out, p+": missing")
		case !wok:
			out = append(out, p+": unexpected")
		default:
			if wn.Stat != gn.Stat {
				out = append(out, fmt.Sprintf("%s: stat %+v, want %+v", p, gn.Stat, wn.Stat))
			}
			if !bytes.Equal(wn.Data, gn.Data) || (wn.Data == nil) != (gn.Data == nil) {
				out = append(out, fmt.Sprintf("%s: data %q (nil %v), want %q (nil %v)", p, gn.Data, gn.Data == nil, wn.Data, wn.Data == nil))
			}
			if !reflect.DeepEqual(wn.ACL, gn.ACL) {
				out = append(out, fmt.Sprintf("%s: acl %v, want %v", p, gn.ACL, wn.ACL))
			}
		}
	}
	return out
}
