package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestUsageNamesEveryCommand keeps the command list of the usage text and
// of the unknown-command error in step with the commands main dispatches.
func TestUsageNamesEveryCommand(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "main" {
			return true
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			sw, ok := n.(*ast.SwitchStmt)
			if !ok {
				return true
			}
			if id, ok := sw.Tag.(*ast.Ident); !ok || id.Name != "cmd" {
				return true
			}
			for _, s := range sw.Body.List {
				for _, e := range s.(*ast.CaseClause).List {
					if lit, ok := e.(*ast.BasicLit); ok {
						name, _ := strconv.Unquote(lit.Value)
						cmds = append(cmds, name)
					}
				}
			}
			return false
		})
		return false
	})
	if len(cmds) < 2 {
		t.Fatalf("found the commands %q in main's switch: the test no longer reads it", cmds)
	}
	listed := strings.Split(commandNames, ", ")
	if !sameSet(listed, cmds) {
		t.Errorf("commandNames lists %q, main dispatches %q", listed, cmds)
	}
	for _, c := range cmds {
		want := "zkraft " + c
		if c == "serve" {
			want = "zkraft [serve]"
		}
		if !strings.Contains(usageServe, want) {
			t.Errorf("the usage text does not show %q", want)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
