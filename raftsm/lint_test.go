package raftsm

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestApplyIsDeterministicByConstruction fails the build when the packages
// that apply log entries (raftsm and znode) reach for a clock, a random
// source or a goroutine. Time and random bytes must arrive in the command.
func TestApplyIsDeterministicByConstruction(t *testing.T) {
	banned := map[string]string{
		"time":         "the clock (time travels in the command)",
		"math/rand":    "randomness",
		"math/rand/v2": "randomness",
		"crypto/rand":  "randomness",
		"os/exec":      "processes",
		"net":          "the network",
	}
	for _, dir := range []string{".", "../znode"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range file.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if why, bad := banned[p]; bad {
					t.Errorf("%s imports %s: apply must not depend on %s", f, p, why)
				}
			}
			full, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(full, func(n ast.Node) bool {
				// verify.go is Open's whole-store check, never on the
				// apply path: it may walk the store's spaces at once.
				if g, ok := n.(*ast.GoStmt); ok && filepath.Base(f) != "verify.go" {
					t.Errorf("%s: go statement at offset %d: apply must not start goroutines", f, g.Pos())
				}
				return true
			})
		}
	}
}
