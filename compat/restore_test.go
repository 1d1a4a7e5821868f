package compat

import (
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/compat/zktest"
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
