package main

import (
	"testing"
	"time"
)

// TestDamagedStateMachineManifest is the part of TestDamagedDataFiles that
// the state machine's tree digest makes pass: the newest MANIFEST of the
// state machine's store cut short or damaged so that Pebble reads it up to
// a record and takes that record for its end (tornManifest). Pebble then
// opens an older version of the store without an error (the tables the
// lost records added are not in it, and Pebble deletes them as obsolete),
// and the Raft log, compacted below the applied index that version holds,
// cannot bring the lost writes back. The digest kept with the applied index
// refuses the store at Open, and the error names the MANIFEST record the
// check saw cut before Pebble rewrote the file.
//
// Before the digest (raftsm, 6f5b019) "truncated to half" and "8 bytes
// flipped mid-file" served a tree without about a thousand acknowledged
// writes on these seeds; whether "last 8 bytes cut" was silent depended on
// what the last record was (here Pebble fails on a table it no longer has).
func TestDamagedStateMachineManifest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts zkraft a few times; skipped with -short")
	}
	for _, s := range damageSeeds(t) {
		manifest := damageTargets(t, s.Dir)["state MANIFEST"]
		for _, d := range damages {
			if !tornManifest[d.name] {
				continue
			}
			t.Run(s.Name+"/"+d.name, func(t *testing.T) {
				start := time.Now()
				o := startDamaged(t, s, manifest, d)
				t.Logf("state MANIFEST (%s) %s: %v (%v)", manifest, d.name, o, time.Since(start).Round(time.Millisecond))
				if o.problem != "" {
					t.Errorf("%s %s: %v", manifest, d.name, o)
				}
			})
		}
	}
}
