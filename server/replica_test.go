package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplicaIsTheOnlyWayToTheShard: outside raft.go no file of the
// package proposes to, reads from or changes the membership of a
// Dragonboat shard; everything goes through the replica interface.
func TestReplicaIsTheOnlyWayToTheShard(t *testing.T) {
	shardCalls := map[string]bool{
		"Propose": true, "SyncPropose": true, "ProposeSession": true,
		"StaleRead": true, "SyncRead": true, "ReadIndex": true, "ReadLocalNode": true,
		"SyncGetShardMembership": true, "SyncRequestAddReplica": true, "SyncRequestAddNonVoting": true,
		"SyncRequestDeleteReplica": true, "RequestAddReplica": true, "RequestDeleteReplica": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "raft.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && shardCalls[sel.Sel.Name] {
				t.Errorf("%s: %s on the shard; go through the cell's replica (replica.go)", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
