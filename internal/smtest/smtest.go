// Package smtest holds the test helpers the two Dragonboat on-disk state
// machines (raftsm's cell and fleet's cell map) share: taking a snapshot
// and listing a Pebble store. It is imported by their tests only.
package smtest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble"
	sm "github.com/lni/dragonboat/v4/statemachine"
)

// Save takes a snapshot of s as Dragonboat does (PrepareSnapshot, then
// SaveSnapshot) and returns its bytes; it fails the test on an error.
func Save(t testing.TB, s sm.IOnDiskStateMachine) []byte {
	t.Helper()
	ctx, err := s.PrepareSnapshot()
	if err != nil {
		t.Fatalf("PrepareSnapshot: %v", err)
	}
	var buf bytes.Buffer
	if err := s.SaveSnapshot(ctx, &buf, make(chan struct{})); err != nil {
		t.Fatalf("SaveSnapshot: %v", err)
	}
	return buf.Bytes()
}

// Dump returns every key and value in db, in key order, one "key=hex"
// string each; the caller holds whatever lock keeps db open.
func Dump(t testing.TB, db *pebble.DB) []string {
	t.Helper()
	it := db.NewIter(&pebble.IterOptions{})
	var out []string
	for it.First(); it.Valid(); it.Next() {
		out = append(out, fmt.Sprintf("%q=%x", it.Key(), it.Value()))
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}
