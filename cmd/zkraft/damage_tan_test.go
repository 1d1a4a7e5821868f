package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// tanKind names the kind of a file of the Raft log store tan
// (raft/HOST/DEPLOYMENT/tandb/ or raft-wal/...); "" for its LOCK.
func tanKind(rel string) string {
	base := filepath.Base(rel)
	switch {
	case base == "LOCK":
		return ""
	case strings.HasPrefix(base, "BOOTSTRAP-"):
		return "tan bootstrap"
	case base == "CURRENT":
		return "tan CURRENT"
	case strings.HasPrefix(base, "MANIFEST-"):
		return "tan MANIFEST"
	case strings.HasSuffix(base, ".log"):
		return "tan log"
	case strings.HasSuffix(base, ".index"):
		return "tan index"
	}
	return "unknown " + rel
}

// tanTargets picks the files of each kind of tan's to damage, in the
// replica whose log is the largest (the default cell's): its newest log
// ("tan log": after SIGKILL the one without an index, whose tail a crash
// may tear), its oldest ("tan older log", when it has two), and that
// replica's index, MANIFEST and CURRENT.
func tanTargets(t *testing.T, dir string, killed bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, f := range pickTargets(t, dir) {
		if k == "tan bootstrap" || k == "raft/zkraft-raft-log" {
			out[k] = f
		}
	}
	nodes, _ := filepath.Glob(filepath.Join(dir, "raft*", "*", "*", "tandb", "node-*"))
	var node string
	var most int64
	for _, n := range nodes {
		var sum int64
		logs, _ := filepath.Glob(filepath.Join(n, "*.log"))
		for _, l := range logs {
			if st, err := os.Stat(l); err == nil {
				sum += st.Size()
			}
		}
		if sum > most {
			node, most = n, sum
		}
	}
	if node == "" {
		t.Fatalf("no tan replica with a log under %s (%v)", dir, nodes)
	}
	rel := func(p string) string { r, _ := filepath.Rel(dir, p); return r }
	nonEmpty := func(pattern string) []string {
		m, _ := filepath.Glob(filepath.Join(node, pattern))
		sort.Strings(m)
		var out []string
		for _, f := range m {
			if st, err := os.Stat(f); err == nil && st.Size() > 0 {
				out = append(out, f)
			}
		}
		return out
	}
	logs := nonEmpty("*.log")
	out["tan log"] = rel(logs[len(logs)-1])
	if len(logs) > 1 {
		out["tan older log"] = rel(logs[0])
	}
	for k, pattern := range map[string]string{"tan index": "*.index", "tan MANIFEST": "MANIFEST-*", "tan CURRENT": "CURRENT"} {
		if f := nonEmpty(pattern); len(f) > 0 {
			out[k] = rel(f[len(f)-1])
		}
	}
	need := []string{"tan bootstrap", "tan log", "tan MANIFEST", "tan CURRENT"}
	if !killed {
		// After the clean stop the newest log has its index; after the
		// kill the older logs (and their indexes) may all have been
		// compacted away behind the snapshots.
		need = append(need, "tan index")
	}
	for _, k := range need {
		if out[k] == "" {
			t.Fatalf("the tan seed has no %s file in %s: the test would not cover it", k, node)
		}
	}
	return out
}

// tornTails are what a crash in the middle of a write leaves at the end
// of tan's newest log: the file extended but the data not yet written
// (zeroes), or a record cut short. Nothing in them was synced, so no
// client was told of it: the member must serve every acknowledged write.
var tornTails = []damage{
	{"torn tail: 4 KiB of zeroes appended", func(b []byte) []byte { return append(bytes.Clone(b), make([]byte, 4096)...) }},
	{"torn tail: a record cut short appended", func(b []byte) []byte {
		out := bytes.Clone(b)
		if left := 32*1024 - len(out)%(32*1024); left < 7+200 {
			out = append(out, make([]byte, left)...) // as tan pads a block
		}
		var h [7]byte
		binary.LittleEndian.PutUint32(h[:], 0x5eed1e55) // the checksum of the whole chunk
		binary.LittleEndian.PutUint16(h[4:], 200)       // its length
		h[6] = 1                                        // a full record
		out = append(out, h[:]...)
		return append(out, bytes.Repeat([]byte{0xab}, 90)...) // 90 of its 200 bytes
	}},
}

// TestDamagedTanFiles is TestDamagedDataFiles over the files of the Raft
// log store tan (--raft-log-store=tan): each kind of tan file damaged in
// each way, after a clean stop and after SIGKILL, must leave a member that
// serves every acknowledged write or exits with one line naming the file;
// a torn tail of the newest log after SIGKILL must be served, with every
// acknowledged write.
func TestDamagedTanFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts zkraft about 60 times; skipped with -short")
	}
	for _, s := range damageSeedsOn(t, "tan") {
		targets := tanTargets(t, s.Dir, strings.HasSuffix(s.Name, "killed"))
		kinds := make([]string, 0, len(targets))
		for k := range targets {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			ds := damages
			if k == "tan log" && strings.HasSuffix(s.Name, "killed") {
				if _, err := os.Stat(strings.TrimSuffix(filepath.Join(s.Dir, targets[k]), ".log") + ".index"); err == nil {
					t.Fatalf("the killed seed's newest log %s has an index: it is not the log a crash left", targets[k])
				}
				ds = append(append([]damage{}, damages...), tornTails...)
			}
			for _, d := range ds {
				t.Run(s.Name+"/"+k+"/"+d.name, func(t *testing.T) {
					start := time.Now()
					o := startDamaged(t, s, targets[k], d)
					if o.problem == "the error does not name "+targets[k] && strings.HasSuffix(k, "log") &&
						strings.Contains(o.line, filepath.Dir(targets[k])+":") && strings.Contains(o.line, "lost records") {
						// A log cut where a crash could have cut it reads
						// as a torn tail; the loss shows only when the log
						// ends below the applied mark, after tan opened the
						// replica (and wrote a new log), so the refusal
						// names the replica's tan directory.
						o.problem = ""
					}
					t.Logf("%s (%s) %s: %v (%v)", k, targets[k], d.name, o, time.Since(start).Round(time.Millisecond))
					if o.problem != "" {
						t.Errorf("%s %s: %v", targets[k], d.name, o)
					}
					if strings.HasPrefix(d.name, "torn tail") && !o.served {
						t.Errorf("%s %s: %v; want it served with every acknowledged write", targets[k], d.name, o)
					}
				})
			}
		}
	}
}
