package fleet

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// bannedImports are what apply must not depend on: time travels in the
// command, and nothing random, external or concurrent may decide a result.
var bannedImports = map[string]string{
	"time":         "the clock (time travels in the command)",
	"math/rand":    "randomness",
	"math/rand/v2": "randomness",
	"crypto/rand":  "randomness",
	"os/exec":      "processes",
	"net":          "the network",
	"net/http":     "the network",
	"unsafe":       "memory layout",
}

// lint returns one line per rule a file breaks: a banned import, a go
// statement, or a map type. The package has no map at all (every
// collection is a slice kept sorted), so no result, record, event or
// snapshot can depend on map iteration order; a lookup by name or id is a
// binary search.
func lint(fset *token.FileSet, f *ast.File) []string {
	var out []string
	at := func(p token.Pos) string {
		pos := fset.Position(p)
		return fmt.Sprintf("%s:%d", filepath.Base(pos.Filename), pos.Line)
	}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if why, bad := bannedImports[p]; bad {
			out = append(out, fmt.Sprintf("%s: imports %s: apply must not depend on %s", at(imp.Pos()), p, why))
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			out = append(out, fmt.Sprintf("%s: go statement: the state machine starts no goroutine", at(n.Pos())))
		case *ast.MapType:
			out = append(out, fmt.Sprintf("%s: map type: keep a sorted slice, so that no output follows map order", at(n.Pos())))
		}
		return true
	})
	return out
}

// TestApplyIsDeterministicByConstruction fails the build when the
// package's own files reach for a clock, randomness, a goroutine or a map.
func TestApplyIsDeterministicByConstruction(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range lint(fset, f) {
			t.Error(v)
		}
		checked++
	}
	if checked < 5 {
		t.Fatalf("checked %d files: the glob did not find the package", checked)
	}
}

// TestLintRefuses shows that lint finds each kind of violation.
func TestLintRefuses(t *testing.T) {
	const src = `package fleet

import (
	"math/rand"
	"sort"
	"time"
)

func bad(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	go sort.Strings(out)
	_ = time.Now()
	_ = rand.Int()
	return out
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "bad.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(lint(fset, f), "\n")
	for _, want := range []string{"bad.go:4: imports math/rand", "bad.go:6: imports time", "bad.go:9: map type", "bad.go:14: go statement"} {
		if !strings.Contains(got, want) {
			t.Errorf("lint did not report %q; it said:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != 4 {
		t.Errorf("lint reported %d violations, want 4:\n%s", n, got)
	}
}
