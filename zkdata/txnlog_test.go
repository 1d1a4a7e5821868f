package zkdata

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

const (
	sessA = 0x0100000960cd0000
	sessB = 0x0100000960cd0001
)

var openACL = []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}

func hdr(zxid int64, typ jute.OpCode, session int64) TxnHeader {
	return TxnHeader{ClientID: session, Cxid: int32(zxid), Zxid: zxid, Time: 1700000000000 + zxid, Type: typ}
}

func txn(zxid int64, typ jute.OpCode, session int64, rec jute.Record) *Txn {
	return &Txn{Header: hdr(zxid, typ, session), Record: rec}
}

func logBytes(txns ...*Txn) []byte {
	b := logHeader()
	for _, t := range txns {
		b = appendLogEntry(b, t)
	}
	return b
}

func readAll(t *testing.T, b []byte) ([]*Txn, LogEnd, error) {
	t.Helper()
	l, err := NewLogReader(bytes.NewReader(b), "log.test")
	if err != nil {
		return nil, 0, err
	}
	var out []*Txn
	for {
		x, _, err := l.Next()
		if err == io.EOF {
			return out, l.End(), nil
		}
		if err != nil {
			return out, 0, err
		}
		out = append(out, x)
	}
}

func sampleTxns() []*Txn {
	return []*Txn{
		txn(1, jute.OpCreateSession, sessA, &CreateSessionTxn{TimeOut: 30000}),
		{Header: hdr(2, jute.OpCreate, sessA), Record: &CreateTxn{Path: "/a", Data: []byte("x"), ACL: openACL, ParentCVersion: 1}, Digest: &TxnDigest{Version: 2, TreeDigest: 42}},
		txn(3, jute.OpMulti, sessA, &MultiTxn{Txns: []SubTxn{
			{Type: jute.OpCreate, Record: &CreateTxn{Path: "/a/b", ACL: openACL, ParentCVersion: 1}},
			{Type: jute.OpSetData, Record: &SetDataTxn{Path: "/a", Data: []byte("y"), Version: 1}},
			{Type: jute.OpCheck, Record: &CheckVersionTxn{Path: "/a", Version: 2}},
		}}),
		txn(4, jute.OpError, sessA, &ErrorTxn{Err: jute.ErrNoNode}),
		txn(5, jute.OpCloseSession, sessA, &CloseSessionTxn{Paths: []string{"/a/e"}}),
	}
}

func TestLogReader(t *testing.T) {
	txns := sampleTxns()
	b := logBytes(txns...)
	got, end, err := readAll(t, b)
	if err != nil || end != LogEndEOF || len(got) != len(txns) {
		t.Fatalf("%d txns, end %v, err %v", len(got), end, err)
	}
	for i := range txns {
		if !bytes.Equal(encodeTxn(got[i]), encodeTxn(txns[i])) {
			t.Errorf("txn %d: %+v, want %+v", i, got[i], txns[i])
		}
	}
	if got[1].Digest == nil || got[1].Digest.TreeDigest != 42 || got[0].Digest != nil {
		t.Errorf("digests: %+v %+v", got[0].Digest, got[1].Digest)
	}
	m := got[2].Record.(*MultiTxn)
	if len(m.Txns) != 3 || m.Txns[1].Record.(*SetDataTxn).Version != 1 {
		t.Errorf("multi %+v", m)
	}

	// Preallocated zeros end the log.
	padded := append(append([]byte{}, b...), make([]byte, 65536)...)
	if got, end, err := readAll(t, padded); err != nil || end != LogEndPadding || len(got) != len(txns) {
		t.Errorf("padded: %d txns, end %v, err %v", len(got), end, err)
	}
	// A partial last entry ends the log too (it was never acknowledged),
	// at any cut.
	last := len(logBytes(txns[:4]...))
	for cut := last + 1; cut < len(b); cut++ {
		got, end, err := readAll(t, b[:cut])
		if err != nil || len(got) != 4 || end != LogEndPartial && cut >= last+8 {
			t.Fatalf("cut at %d: %d txns, end %v, err %v", cut, len(got), end, err)
		}
	}
	noB := append([]byte{}, b...)
	noB[len(noB)-1] = 'X'
	if got, end, err := readAll(t, noB); err != nil || end != LogEndPartial || len(got) != 4 {
		t.Errorf("missing 'B': %d txns, end %v, err %v", len(got), end, err)
	}
	// A checksum mismatch is an error naming the entry's offset.
	bad := append([]byte{}, b...)
	second := len(logBytes(txns[:1]...))
	bad[second+20] ^= 1
	_, _, err = readAll(t, bad)
	var fe *FileError
	if !errors.Is(err, ErrChecksum) || !errors.As(err, &fe) || fe.Offset != int64(second) || fe.File != "log.test" {
		t.Errorf("flipped byte: %v", err)
	}
	for name, in := range map[string][]byte{
		"empty":        nil,
		"short header": b[:10],
		"bad magic":    append([]byte("ZKSN"), b[4:]...),
		"bad version":  append(append(append([]byte{}, b[:4]...), 0, 0, 0, 9), b[8:]...),
	} {
		if _, _, err := readAll(t, in); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	huge := append(append([]byte{}, logHeader()...), 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff)
	if _, _, err := readAll(t, huge); !errors.Is(err, ErrCorrupt) {
		t.Errorf("huge entry: %v", err)
	}
	unknown := logBytes(txn(9, jute.OpGetData, sessA, &DeleteTxn{Path: "/x"}))
	if _, _, err := readAll(t, unknown); !errors.Is(err, ErrCorrupt) {
		t.Errorf("unknown type: %v", err)
	}
}

func TestLogOldFormats(t *testing.T) {
	// A CreateTxn from before parentCVersion, and a closeSession without
	// its paths (logs older than 3.6).
	w := jute.NewWriter(64)
	h := hdr(2, jute.OpCreate, sessA)
	h.Encode(w)
	w.String("/old")
	w.Buffer([]byte("v0"))
	w.ACLs(openACL)
	w.Bool(false)
	v0 := append([]byte{}, w.Bytes()...)
	w.Reset()
	h = hdr(3, jute.OpCloseSession, sessA)
	h.Encode(w)
	closeOld := append([]byte{}, w.Bytes()...)
	for _, c := range []struct {
		b     []byte
		check func(x *Txn) bool
	}{
		{v0, func(x *Txn) bool {
			c, ok := x.Record.(*CreateTxn)
			return ok && c.ParentCVersion == -1 && c.Path == "/old"
		}},
		{closeOld, func(x *Txn) bool { return x.Record == nil && x.Digest == nil }},
	} {
		x, err := decodeTxn(c.b)
		if err != nil || !c.check(x) {
			t.Errorf("%+v %v", x, err)
		}
	}
}

// writeDataDir writes a snapshot of tr (named after tr.Zxid) and logs of
// txns into a fresh dataDir.
func writeDataDir(t *testing.T, tr *Tree, logs ...[]*Txn) string {
	t.Helper()
	dir := t.TempDir()
	v := filepath.Join(dir, "version-2")
	os.MkdirAll(v, 0o755)
	var snap bytes.Buffer
	if err := WriteSnapshot(&snap, tr, CompressionNone); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(v, "snapshot."+strconv.FormatInt(tr.Zxid, 16)), snap.Bytes(), 0o644)
	for _, l := range logs {
		os.WriteFile(filepath.Join(v, "log."+strconv.FormatInt(l[0].Header.Zxid, 16)), logBytes(l...), 0o644)
	}
	return dir
}

func add(t *testing.T, tr *Tree, path string, n *znode.Node) {
	t.Helper()
	if n.ACL == nil {
		n.ACL = znode.OpenACL
	}
	if err := tr.Add(path, n); err != nil {
		t.Fatal(err)
	}
}

// TestReplayRules replays a log onto a fuzzy snapshot: the snapshot
// already holds some of the logged effects, and the replay must converge
// to the same tree as ZooKeeper does.
func TestReplayRules(t *testing.T) {
	tr := emptyTree(t)
	tr.Zxid = 10
	tr.Sessions[sessA] = 30000
	// /app had children created up to cversion 3; /app/x was created at
	// zxid 11 but is already in the (fuzzy) snapshot; /app/gone was
	// deleted at 12, also already reflected.
	add(t, tr, "/app", &znode.Node{Czxid: 2, Mzxid: 2, Pzxid: 11, Cversion: 3})
	add(t, tr, "/app/x", &znode.Node{Czxid: 11, Mzxid: 11, Pzxid: 11})
	add(t, tr, "/app/eph", &znode.Node{Czxid: 5, Mzxid: 5, Pzxid: 5, EphemeralOwner: sessA})
	add(t, tr, "/app/orphan", &znode.Node{Czxid: 6, Mzxid: 6, Pzxid: 6, EphemeralOwner: sessB})
	add(t, tr, "/zookeeper/quota/app", &znode.Node{})
	add(t, tr, "/zookeeper/quota/app/zookeeper_limits", &znode.Node{Data: []byte("count=10,bytes=100")})
	add(t, tr, "/zookeeper/quota/app/zookeeper_stats", &znode.Node{Data: []byte("count=999,bytes=999")})
	var zxid int64 = 10
	next := func() int64 { zxid++; return zxid }
	txns := []*Txn{
		txn(next(), jute.OpCreate, sessA, &CreateTxn{Path: "/app/x", Data: []byte("x"), ACL: openACL, ParentCVersion: 4}), // 11: NODEEXISTS
		txn(next(), jute.OpDelete, sessA, &DeleteTxn{Path: "/app/gone"}),                                                  // 12: NONODE, pzxid moves
		txn(next(), jute.OpSetData, sessA, &SetDataTxn{Path: "/app/x", Data: []byte("abc"), Version: 7}),                  // 13
		txn(next(), jute.OpMulti, sessA, &MultiTxn{Txns: []SubTxn{ // 14: failed, nothing applies
			{Type: jute.OpCreate, Record: &CreateTxn{Path: "/app/m", ACL: openACL, ParentCVersion: 5}},
			{Type: jute.OpError, Record: &ErrorTxn{Err: jute.ErrNoNode}},
		}}),
		txn(next(), jute.OpCreateSession, sessB+1, &CreateSessionTxn{TimeOut: 4000}),                                       // 15
		txn(next(), jute.OpCreate, sessB+1, &CreateTxn{Path: "/app/e2", ACL: openACL, Ephemeral: true, ParentCVersion: 5}), // 16
		txn(next(), jute.OpSetACL, sessA, &SetACLTxn{Path: "/app/x", ACL: znode.ReadACLUnsafe, Version: 3}),                // 17
		txn(next(), jute.OpCreateTTL, sessA, &CreateTTLTxn{Path: "/app/ttl", ACL: openACL, ParentCVersion: 6, TTL: 5000}),  // 18
		txn(next(), jute.OpCreateContainer, sessA, &CreateContainerTxn{Path: "/app/c", ACL: openACL, ParentCVersion: 7}),   // 19
		txn(next(), jute.OpCloseSession, sessA, &CloseSessionTxn{Paths: []string{"/app/eph", "/app/never"}}),               // 20
		txn(next(), jute.OpCloseSession, sessB+1, nil),                                                                     // 21: old format: its own ephemerals
		txn(next(), jute.OpDeleteContainer, 0, &DeleteTxn{Path: "/app/c"}),                                                 // 22
		txn(next(), jute.OpReconfig, 0, &SetDataTxn{Path: "/zookeeper/config", Data: []byte("server.1=..."), Version: 1}),  // 23
	}
	// The first txns are at or below the snapshot's zxid in an older log:
	// skipped, as ZooKeeper fast-forwards past them.
	old := []*Txn{txn(9, jute.OpCreate, sessA, &CreateTxn{Path: "/app/old", ACL: openACL, ParentCVersion: 2}), txn(10, jute.OpSetData, sessA, &SetDataTxn{Path: "/app", Data: []byte("old"), Version: 1})}
	dir := writeDataDir(t, tr, append(old, txns...))
	res, err := Restore(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	got := res.Tree
	if res.Applied != len(txns) || got.Zxid != zxid {
		t.Errorf("applied %d, zxid %d", res.Applied, got.Zxid)
	}
	app := got.Get("/app")
	// cversion: max of the logged parentCVersions that were applied (7,
	// from createContainer); pzxid: the last change of children, the
	// orphan ephemeral deleted at load with the last zxid (23).
	if app.Stat.Cversion != 7 || app.Stat.Pzxid != 23 || app.Data != nil {
		t.Errorf("/app %+v data %q", app.Stat, app.Data)
	}
	x := got.Get("/app/x")
	if string(x.Data) != "abc" || x.Stat.Version != 7 || x.Stat.Mzxid != 13 || x.Stat.Aversion != 3 || aclString(x.ACL) != aclString(znode.ReadACLUnsafe) {
		t.Errorf("/app/x %+v %q %v", x.Stat, x.Data, x.ACL)
	}
	for _, p := range []string{"/app/m", "/app/eph", "/app/e2", "/app/c", "/app/old", "/app/orphan"} {
		if got.Get(p) != nil {
			t.Errorf("%s should be gone", p)
		}
	}
	if n := got.Get("/app/ttl"); n == nil || znode.KindOf(n.Stat.EphemeralOwner) != znode.OwnerTTL || znode.TTLOf(n.Stat.EphemeralOwner) != 5000 {
		t.Errorf("/app/ttl %+v", n)
	}
	if len(got.Sessions) != 0 {
		t.Errorf("sessions %v", got.Sessions)
	}
	if len(res.DeadSessions) != 1 || res.DeadSessions[0] != sessB {
		t.Errorf("dead sessions %v", res.DeadSessions)
	}
	if c := got.Get("/zookeeper/config"); string(c.Data) != "server.1=..." || c.Stat.Version != 1 {
		t.Errorf("/zookeeper/config %+v", c)
	}
	// Quota: recounted at load, then kept up to date: /app, /app/x, /app/ttl.
	if s := string(got.Get("/zookeeper/quota/app/zookeeper_stats").Data); s != "count=3,bytes=3" {
		t.Errorf("quota stats %q", s)
	}
	if res.Ignored != 2 {
		t.Errorf("%d ignored results, want 2 (NODEEXISTS, NONODE)", res.Ignored)
	}
	if got.Digest() != got.computeDigest() {
		t.Errorf("running digest drifted")
	}
}

// TestDigestChecks: the digest in the snapshot is checked when the replay
// reaches its zxid, and every later transaction digest after that.
func TestDigestChecks(t *testing.T) {
	tr := emptyTree(t)
	tr.Zxid = 5
	add(t, tr, "/a", &znode.Node{Czxid: 5, Mzxid: 5, Pzxid: 5})
	// The tree after txn 6 and 7, to know the right digests.
	after7 := emptyTree(t)
	add(t, after7, "/a", &znode.Node{Czxid: 5, Mzxid: 7, Pzxid: 5, Data: []byte("7"), Version: 2, Mtime: 1700000000007})
	for _, c := range []struct {
		name       string
		digest7    int64
		mismatches int
	}{
		{"right", after7.Digest(), 0},
		{"wrong", after7.Digest() + 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t6 := txn(6, jute.OpSetData, sessA, &SetDataTxn{Path: "/a", Data: []byte("6"), Version: 1})
			t6.Digest = &TxnDigest{Version: 2, TreeDigest: 12345} // fuzzy: not compared
			t7 := txn(7, jute.OpSetData, sessA, &SetDataTxn{Path: "/a", Data: []byte("7"), Version: 2})
			t7.Digest = &TxnDigest{Version: 2, TreeDigest: c.digest7}
			// The snapshot's digest section is for zxid 7, taken after
			// the tree was written: until the replay reaches 7 the tree
			// is fuzzy and the digest of 6 is not compared.
			dir := writeDataDir(t, tr, []*Txn{t6, t7})
			p := filepath.Join(dir, "version-2", "snapshot.5")
			snap := rewriteDigest(t, p, &ZxidDigest{Zxid: 7, Version: 2, Digest: after7.Digest()})
			os.WriteFile(p, snap, 0o644)
			res, err := Restore(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			if res.DigestChecks != 2 || len(res.DigestMismatches) != c.mismatches {
				t.Errorf("%d checks, mismatches %+v", res.DigestChecks, res.DigestMismatches)
			}
		})
	}
}

// rewriteDigest replaces the digest section of a plain snapshot file.
func rewriteDigest(t *testing.T, path string, d *ZxidDigest) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body := b[:len(b)-20-13]
	w := jute.NewWriter(64)
	w.Long(d.Zxid)
	w.Int(d.Version)
	w.Long(d.Digest)
	out := append(append([]byte{}, body...), w.Bytes()...)
	sum := adler32Of(out)
	w.Reset()
	w.Long(int64(sum))
	w.String("/")
	return append(out, w.Bytes()...)
}
