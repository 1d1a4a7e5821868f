package zkdata

import (
	"path/filepath"
	"strings"
	"testing"

	zkgo "github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/zktest"
)

// TestExportLoadsInZooKeeper restores each fixture, writes it back as a
// ZooKeeper data directory (in the fixture's compression) and starts a real
// Apache ZooKeeper 3.8 on it: the tree and every Stat a client reads must
// be the fixture's, and ZooKeeper must find the snapshot's digest right.
func TestExportLoadsInZooKeeper(t *testing.T) {
	zktest.Require(t)
	comps := map[string]Compression{"plain": CompressionNone, "gz": CompressionGzip, "snappy": CompressionSnappy}
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := loadFixture(t, name)
			res, err := Restore(f.dataDir, f.logDir)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			dataDir, logDir := filepath.Join(dir, "data"), ""
			if f.logDir != "" {
				logDir = filepath.Join(dir, "datalog")
			}
			ex, err := WriteDataDir(dataDir, logDir, res.Tree, comps[name])
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s and %s", ex.Snapshot, ex.Log)
			if _, err := WriteDataDir(dataDir, logDir, res.Tree, comps[name]); err == nil {
				t.Errorf("a second export into the same directory was not refused")
			}

			// Our own reader must take it back unchanged.
			back, err := Restore(dataDir, logDir)
			if err != nil {
				t.Fatal(err)
			}
			if d := Compare(res.Tree, back.Tree, 10); len(d) > 0 {
				t.Errorf("export then restore differs: %v", d)
			}
			if back.DigestChecks != 1 || len(back.DigestMismatches) > 0 {
				t.Errorf("snapshot digest: %d checks, mismatches %v", back.DigestChecks, back.DigestMismatches)
			}

			zk := zktest.Start(t, zktest.Config{DataDir: dataDir, DataLogDir: logDir})
			c := zktest.Connect(t, zk.Addr)
			got, err := zktest.DumpTree(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range zktest.Compare(f.want.Nodes, got, nil, 20) {
				t.Error(d)
			}
			mntr, err := zktest.FourLetter(zk.Addr, "mntr")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(mntr, "zk_digest_mismatches_count\t0") {
				t.Errorf("ZooKeeper counted digest mismatches:\n%s", grepLines(mntr, "digest"))
			}
			if zk.LogContains("Digests are not matching") || zk.LogContains("problem reading snap file") {
				t.Errorf("ZooKeeper complained about the snapshot:\n%s", zk.Log(40))
			}
			// ZooKeeper carries on above the exported zxid, and its first
			// log (named like the empty one we wrote) survives a restart.
			if _, err := c.Create("/after-export", []byte("x"), 0, zkOpenACL); err != nil {
				t.Fatal(err)
			}
			_, st, err := c.Get("/after-export")
			if err != nil {
				t.Fatal(err)
			}
			if st.Czxid <= res.Tree.Zxid {
				t.Errorf("czxid %#x after export of zxid %#x", st.Czxid, res.Tree.Zxid)
			}
			if name != "plain" {
				return
			}
			c.Close()
			zk.Stop()
			zk = zktest.Start(t, zktest.Config{DataDir: dataDir, DataLogDir: logDir})
			c = zktest.Connect(t, zk.Addr)
			if _, st2, err := c.Get("/after-export"); err != nil || st2.Czxid != st.Czxid {
				t.Errorf("after a restart: %v, %+v", err, st2)
			}
		})
	}
}

var zkOpenACL = zkgo.WorldACL(zkgo.PermAll)

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
