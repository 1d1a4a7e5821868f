package zkdata

import (
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/zktest"
)

// clientView is what a client would read from t: the dump format.
func clientView(t *Tree) []zktest.Node {
	var out []zktest.Node
	_ = t.Walk(func(path string, n *Node) error {
		zn := n.ZNode()
		st := zn.Stat()
		acl := make([]zk.ACL, len(n.ACL))
		for i, a := range n.ACL {
			acl[i] = zk.ACL{Perms: a.Perms, Scheme: a.ID.Scheme, ID: a.ID.ID}
		}
		out = append(out, zktest.Node{
			Path: path,
			Data: n.Data,
			Stat: zk.Stat{
				Czxid: st.Czxid, Mzxid: st.Mzxid, Ctime: st.Ctime, Mtime: st.Mtime,
				Version: st.Version, Cversion: st.Cversion, Aversion: st.Aversion,
				EphemeralOwner: st.EphemeralOwner, DataLength: st.DataLength,
				NumChildren: st.NumChildren, Pzxid: st.Pzxid,
			},
			ACL: acl,
		})
		return nil
	})
	return out
}

func TestRestoreFixtures(t *testing.T) {
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			f := loadFixture(t, name)
			res, err := Restore(f.dataDir, f.logDir)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("snapshot %s (zxid %#x, %d nodes), %d txns replayed (%d ignored), %d digests checked, zxid %#x; %v",
				res.Snapshot.File, res.Snapshot.Zxid, res.Snapshot.Nodes, res.Applied, res.Ignored, res.DigestChecks, res.Tree.Zxid, res.Tree.Counts())
			for _, w := range res.Warnings {
				t.Logf("warning: %s", w)
			}
			if len(res.DigestMismatches) > 0 {
				t.Errorf("digest mismatches: %+v", res.DigestMismatches)
			}
			if res.DigestChecks == 0 {
				t.Errorf("no digest was checked")
			}
			if diffs := zktest.Compare(f.want.Nodes, clientView(res.Tree), nil, 20); len(diffs) > 0 {
				for _, d := range diffs {
					t.Error(d)
				}
			}
			for _, s := range f.want.Sessions {
				if _, ok := res.Tree.Sessions[s.ID]; !ok {
					t.Errorf("session %#x missing", s.ID)
				}
			}
			if got := res.Tree.computeDigest(); got != res.Tree.Digest() {
				t.Errorf("running digest %d, recomputed %d", res.Tree.Digest(), got)
			}
		})
	}
}

// TestFuzzySnapshotDigestForgiven: a mismatch of the snapshot's own digest
// becomes a warning only when the snapshot was fuzzy and a later recorded
// digest matched the replayed tree.
func TestFuzzySnapshotDigestForgiven(t *testing.T) {
	snap := &SnapshotInfo{Zxid: 0xff, Digest: &ZxidDigest{Zxid: 0xff, Version: DigestVersion, Digest: 1}}
	mismatch := DigestCheck{Zxid: 0xff, Recorded: 1, Computed: 2}
	for _, c := range []struct {
		name    string
		ignored int
		last    DigestCheck
		forgive bool
	}{
		{"fuzzy, later digest matches", 1, DigestCheck{Zxid: 0x13e, Recorded: 7, Computed: 7}, true},
		{"not fuzzy", 0, DigestCheck{Zxid: 0x13e, Recorded: 7, Computed: 7}, false},
		{"later digest differs too", 1, DigestCheck{Zxid: 0x13e, Recorded: 7, Computed: 8}, false},
		{"no later digest", 1, mismatch, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			last := c.last
			res := &Restored{Ignored: c.ignored, DigestMismatches: []DigestCheck{mismatch}, LastDigestCheck: &last}
			if last.Recorded != last.Computed && last.Zxid != mismatch.Zxid {
				res.DigestMismatches = append(res.DigestMismatches, last)
			}
			r := &restorer{res: res}
			r.forgiveFuzzySnapshotDigest(snap)
			forgiven := len(res.DigestMismatches) == 0 || res.DigestMismatches[0] != mismatch
			if forgiven != c.forgive {
				t.Fatalf("forgiven %v, want %v (mismatches %v, warnings %q)", forgiven, c.forgive, res.DigestMismatches, res.Warnings)
			}
			if forgiven && len(res.Warnings) != 1 {
				t.Fatalf("forgiven without a warning: %q", res.Warnings)
			}
		})
	}
}
