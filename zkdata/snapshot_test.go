package zkdata

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// zkSnapshot0 is snapshot.0 as ZooKeeper 3.8.0 writes it for an empty
// standalone tree (the annotated dump in the reference fact sheet).
func zkSnapshot0() []byte {
	zeros60 := strings.Repeat("00", 60)
	configStat := strings.Repeat("00", 40) + "ffffffff" + strings.Repeat("00", 16)
	str := func(s string) string { return hex.EncodeToString(append([]byte{0, 0, 0, byte(len(s))}, s...)) }
	h := "5a4b534e" + "00000002" + "ffffffffffffffff" +
		"00000000" +
		"00000001" + "0000000000000001" + "00000001" + "00000001" + str("world") + str("anyone") +
		"00000000" + "00000000" + "ffffffffffffffff" + zeros60 +
		str("/zookeeper") + "00000000" + "ffffffffffffffff" + zeros60 +
		str("/zookeeper/config") + "00000000" + "0000000000000001" + configStat +
		str("/zookeeper/quota") + "00000000" + "ffffffffffffffff" + zeros60 +
		str("/") +
		"00000000b8a23b49" + str("/") +
		"0000000000000000" + "00000002" + "0000000000000000" +
		"0000000095b93d59" + str("/")
	b, err := hex.DecodeString(h)
	if err != nil {
		panic(err)
	}
	return b
}

// emptyTree is the tree ZooKeeper's DataTree constructor builds.
func emptyTree(t testing.TB) *Tree {
	tr := NewTree()
	for _, n := range []struct {
		path string
		n    *znode.Node
	}{
		{"/", &znode.Node{Data: []byte{}, ACL: znode.OpenACL}},
		{"/zookeeper", &znode.Node{Data: []byte{}, ACL: znode.OpenACL}},
		{"/zookeeper/config", &znode.Node{Data: []byte{}, ACL: znode.ReadACLUnsafe, Aversion: -1}},
		{"/zookeeper/quota", &znode.Node{Data: []byte{}, ACL: znode.OpenACL}},
	} {
		if err := tr.Add(n.path, n.n); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

func TestWriteSnapshotMatchesZooKeeper(t *testing.T) {
	want := zkSnapshot0()
	if len(want) != 457 {
		t.Fatalf("reference snapshot is %d bytes", len(want))
	}
	var got bytes.Buffer
	if err := WriteSnapshot(&got, emptyTree(t), CompressionNone); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("snapshot.0 differs from ZooKeeper's:\n got %x\nwant %x", got.Bytes(), want)
	}
}

func TestReadSnapshotZooKeeper(t *testing.T) {
	tr, info, err := ReadSnapshot(bytes.NewReader(zkSnapshot0()))
	if err != nil {
		t.Fatal(err)
	}
	if info.Nodes != 4 || info.Sessions != 0 || info.ACLs != 1 || info.Digest == nil || info.Digest.Zxid != 0 {
		t.Errorf("info %+v digest %+v", info, info.Digest)
	}
	if err := tr.resolveACLs(); err != nil {
		t.Fatal(err)
	}
	if d := Compare(emptyTree(t), tr, 10); len(d) > 0 {
		t.Errorf("read back: %v", d)
	}
	if n := tr.Get("/zookeeper/config"); n.Stat.Aversion != -1 || aclString(n.ACL) != aclString(znode.ReadACLUnsafe) {
		t.Errorf("/zookeeper/config: %+v", n)
	}
}

func TestReadSnapshotBadInput(t *testing.T) {
	good := zkSnapshot0()
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte{}, good...)) }
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"magic", mutate(func(b []byte) []byte { b[0] = 'X'; return b }), ErrBadMagic},
		{"version", mutate(func(b []byte) []byte { b[7] = 3; return b }), ErrUnsupported},
		{"truncated in the tree", good[:200], ErrTruncated},
		{"truncated in a seal", good[:len(good)-30], ErrTruncated},
		{"data flipped", mutate(func(b []byte) []byte { b[100] ^= 1; return b }), ErrChecksum},
		{"seal flipped", mutate(func(b []byte) []byte { b[len(good)-40] ^= 1; return b }), ErrChecksum},
		{"digest flipped", mutate(func(b []byte) []byte { b[len(good)-14] ^= 1; return b }), ErrChecksum},
		{"negative session count", mutate(func(b []byte) []byte { copy(b[16:], []byte{0xff, 0xff, 0xff, 0xfe}); return b }), ErrCorrupt},
		{"huge length", mutate(func(b []byte) []byte { copy(b[59:], []byte{0x7f, 0xff, 0xff, 0xff}); return b }), ErrCorrupt},
		{"orphan node", mutate(func(b []byte) []byte {
			i := bytes.Index(b, []byte("/zookeeper/config"))
			copy(b[i:], "/zookeepeX/config")
			return b
		}), ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ReadSnapshot(bytes.NewReader(c.in))
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Errorf("%v does not give an offset", err)
			}
		})
	}
	// Without the digest section (ZooKeeper before 3.6): still valid.
	old := good[:len(good)-20-13]
	if _, info, err := ReadSnapshot(bytes.NewReader(old)); err != nil || info.Digest != nil {
		t.Errorf("snapshot without digest: %v, %+v", err, info)
	}
	// With 3.9's lastProcessedZxid section.
	w := jute.NewWriter(32)
	w.Long(0x1234)
	b := append(append([]byte{}, good...), w.Bytes()...)
	sum := adler32Of(b)
	w.Reset()
	w.Long(int64(sum))
	w.String("/")
	b = append(b, w.Bytes()...)
	if _, info, err := ReadSnapshot(bytes.NewReader(b)); err != nil || info.LastZxid != 0x1234 {
		t.Errorf("3.9 snapshot: %v, %+v", err, info)
	}
}

func TestCompressionRoundTrip(t *testing.T) {
	tr := emptyTree(t)
	big := bytes.Repeat([]byte("zkraft snappy block "), 10000) // several 32 KiB blocks
	if err := tr.Add("/big", &znode.Node{Data: big, ACL: znode.OpenACL, Czxid: 7, Mzxid: 7, Pzxid: 7}); err != nil {
		t.Fatal(err)
	}
	tr.Zxid = 7
	tr.Sessions[0x0100000960cd0000] = 30000
	for _, c := range []Compression{CompressionNone, CompressionGzip, CompressionSnappy} {
		t.Run(c.String(), func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteSnapshot(&buf, tr, c); err != nil {
				t.Fatal(err)
			}
			s, err := openSnapshotStream(&buf, c)
			if err != nil {
				t.Fatal(err)
			}
			back, info, err := ReadSnapshot(s)
			if err != nil {
				t.Fatal(err)
			}
			if err := back.resolveACLs(); err != nil {
				t.Fatal(err)
			}
			if d := Compare(tr, back, 10); len(d) > 0 {
				t.Errorf("%v", d)
			}
			if info.Digest == nil || info.Digest.Digest != tr.Digest() || info.Digest.Zxid != 7 {
				t.Errorf("digest %+v, tree digest %d", info.Digest, tr.Digest())
			}
		})
	}
}

func TestSnappyJavaFraming(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789"), 8000)
	var one, two bytes.Buffer
	for _, b := range []*bytes.Buffer{&one, &two} {
		w := newSnappyJavaWriter(b)
		w.Write(payload)
		w.Close()
	}
	if !bytes.HasPrefix(one.Bytes(), append(append([]byte{}, snappyMagic...), 0, 0, 0, 1, 0, 0, 0, 1)) {
		t.Fatalf("header %x", one.Bytes()[:16])
	}
	// Concatenated streams read as one, as snappy-java reads them.
	r, err := newSnappyJavaReader(io.MultiReader(bytes.NewReader(one.Bytes()), bytes.NewReader(two.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, append(append([]byte{}, payload...), payload...)) {
		t.Fatalf("read %d bytes, err %v", len(got), err)
	}
	for name, in := range map[string][]byte{
		"truncated": one.Bytes()[:one.Len()-3],
		"garbage":   append(one.Bytes()[:16:16], 0, 0, 0, 5, 1, 2, 3, 4, 5),
		"negative":  append(one.Bytes()[:16:16], 0xff, 0, 0, 0),
	} {
		r, err := newSnappyJavaReader(bytes.NewReader(in))
		if err == nil {
			_, err = io.ReadAll(r)
		}
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := newSnappyJavaReader(bytes.NewReader([]byte("not snappy at all"))); !errors.Is(err, ErrBadMagic) {
		t.Errorf("bad magic: %v", err)
	}
}

// TestSnapshotFallback: a damaged newest snapshot is skipped, as ZooKeeper
// skips it, and the older one plus the logs give the same tree.
func TestSnapshotFallback(t *testing.T) {
	f := loadFixture(t, "plain")
	want, err := Restore(f.dataDir, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, damage := range []string{"flip", "truncate"} {
		t.Run(damage, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "zk")
			if err := os.CopyFS(dir, os.DirFS(f.dataDir)); err != nil {
				t.Fatal(err)
			}
			newest := filepath.Base(want.Snapshot.File)
			p := filepath.Join(dir, "version-2", newest)
			b, _ := os.ReadFile(p)
			if damage == "flip" {
				b[len(b)/2] ^= 0x40
			} else {
				b = b[:len(b)/2]
			}
			os.WriteFile(p, b, 0o644)
			got, err := Restore(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Skipped) != 1 || !strings.Contains(got.Skipped[0], newest) {
				t.Errorf("skipped %v", got.Skipped)
			}
			t.Logf("skipped: %s; restored from %s with %d transactions", got.Skipped[0], filepath.Base(got.Snapshot.File), got.Applied)
			if got.Snapshot.Zxid >= want.Snapshot.Zxid {
				t.Errorf("restored from %s", got.Snapshot.File)
			}
			if d := Compare(want.Tree, got.Tree, 10); len(d) > 0 || got.Tree.Zxid != want.Tree.Zxid {
				t.Errorf("fallback restore differs: %v", d)
			}
			if len(got.DigestMismatches) > 0 {
				t.Errorf("digest mismatches %v", got.DigestMismatches)
			}
		})
	}
}

func adler32Of(b []byte) uint32 {
	d := newDataReader(bytes.NewReader(b))
	buf := make([]byte, len(b))
	d.read(buf, "all")
	return d.sum.Sum32()
}
