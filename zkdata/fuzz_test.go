package zkdata

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/zkraft/zkraft/znode"
)

func addFixtureSeeds(f *testing.F, glob string) {
	m, _ := filepath.Glob(filepath.Join("testdata", "zk", "*", "*", "version-2", glob))
	for _, p := range m {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
}

// FuzzReadSnapshot: no input makes the snapshot reader (plain, gzip or
// snappy-java) panic or run away; a snapshot that reads also writes back
// to the same tree.
func FuzzReadSnapshot(f *testing.F) {
	f.Add(zkSnapshot0())
	addFixtureSeeds(f, "snapshot.*")
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range []Compression{CompressionNone, CompressionGzip, CompressionSnappy} {
			s, err := openSnapshotStream(bytes.NewReader(b), c)
			if err != nil {
				continue
			}
			tr, _, err := ReadSnapshot(s)
			if err != nil {
				continue
			}
			if tr.resolveACLs() != nil {
				continue
			}
			var out bytes.Buffer
			if err := WriteSnapshot(&out, tr, CompressionNone); err != nil {
				t.Fatalf("a snapshot that reads does not write: %v", err)
			}
			back, _, err := ReadSnapshot(&out)
			if err != nil {
				t.Fatalf("a written snapshot does not read: %v", err)
			}
			if err := back.resolveACLs(); err != nil {
				t.Fatal(err)
			}
			if d := Compare(tr, back, 5); len(d) > 0 {
				t.Fatalf("write/read changed the tree: %v", d)
			}
		}
	})
}

// FuzzReadLog: no input makes the log reader or the replay panic; every
// transaction that decodes is applied to a small tree.
func FuzzReadLog(f *testing.F) {
	f.Add(logBytes(sampleTxns()...))
	addFixtureSeeds(f, "log.*")
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := NewLogReader(bytes.NewReader(b), "fuzz")
		if err != nil {
			return
		}
		tr := emptyTree(t)
		r := &restorer{res: &Restored{}, t: tr}
		for i := 0; i < 10000; i++ {
			x, _, err := l.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return
			}
			if err := r.apply(x); err != nil {
				return
			}
		}
		if tr.Digest() != tr.computeDigest() {
			t.Fatalf("running digest %d, recomputed %d", tr.Digest(), tr.computeDigest())
		}
	})
}

// FuzzApplyTxn decodes one log entry's bytes (past the checksum that keeps
// FuzzReadLog's mutations shallow) and replays it onto a tree that has
// ephemerals, a quota and a session.
func FuzzApplyTxn(f *testing.F) {
	for _, x := range sampleTxns() {
		f.Add(encodeTxn(x))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := decodeTxn(b)
		if err != nil {
			return
		}
		tr := fuzzTree(t)
		r := &restorer{res: &Restored{}, t: tr}
		if err := r.apply(x); err != nil {
			return
		}
		if tr.Digest() != tr.computeDigest() {
			t.Fatalf("running digest %d, recomputed %d", tr.Digest(), tr.computeDigest())
		}
		if err := tr.Walk(func(string, *Node) error { return nil }); err != nil {
			t.Fatal(err)
		}
	})
}

func fuzzTree(t *testing.T) *Tree {
	tr := emptyTree(t)
	tr.Sessions[sessA] = 30000
	add(t, tr, "/a", &znode.Node{Data: []byte("a")})
	add(t, tr, "/a/e", &znode.Node{EphemeralOwner: sessA})
	add(t, tr, "/zookeeper/quota/a", &znode.Node{})
	add(t, tr, "/zookeeper/quota/a/zookeeper_limits", &znode.Node{Data: []byte("count=10,bytes=100")})
	add(t, tr, "/zookeeper/quota/a/zookeeper_stats", &znode.Node{Data: []byte("count=2,bytes=1")})
	tr.setupQuota()
	return tr
}
