package zkdata

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash"
	"hash/adler32"
	"io"
	"os"
	"sort"
	"strconv"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// File magic numbers and the one format version ZooKeeper 3.x writes.
const (
	snapMagic     = 0x5A4B534E // "ZKSN"
	logMagic      = 0x5A4B4C47 // "ZKLG"
	formatVersion = 2
	snapDBID      = -1
	logDBID       = 0
)

// ZxidDigest is the digest section of a snapshot (3.6+): the tree digest
// after transaction Zxid. Zxid 0 means an empty digest.
type ZxidDigest struct {
	Zxid    int64
	Version int32
	Digest  int64
}

// SnapshotInfo describes a snapshot that was read.
type SnapshotInfo struct {
	File        string
	Compression Compression
	// Zxid is the zxid in the file name: ZooKeeper's lastProcessedZxid
	// when the (fuzzy) snapshot started.
	Zxid int64
	// Digest is the digest section, or nil when the snapshot has none.
	Digest *ZxidDigest
	// LastZxid is the lastProcessedZxid section 3.9 appends, or 0.
	LastZxid int64
	Sessions int
	ACLs     int
	Nodes    int
}

// ReadSnapshot decodes an uncompressed snapshot stream into a tree. The
// tree's Zxid is left 0 (the caller knows it from the file name); its ACLs
// are still keys into the snapshot's ACL cache, resolved by Restore.
func ReadSnapshot(r io.Reader) (*Tree, *SnapshotInfo, error) {
	d := newDataReader(r)
	t, info := readSnapshot(d)
	if d.err != nil {
		return nil, nil, d.err
	}
	return t, info, nil
}

func readSnapshot(d *dataReader) (*Tree, *SnapshotInfo) {
	info := &SnapshotInfo{}
	if magic := d.Int("magic"); d.err == nil && magic != snapMagic {
		d.fail(&FileError{Offset: 0, Err: fmt.Errorf("%w: %#08x is not a snapshot (want %#08x \"ZKSN\")", ErrBadMagic, uint32(magic), snapMagic)})
	}
	if v := d.Int("version"); d.err == nil && v != formatVersion {
		d.fail(&FileError{Offset: 4, Err: fmt.Errorf("%w: snapshot version %d (want %d)", ErrUnsupported, v, formatVersion)})
	}
	d.Long("dbid")
	t := NewTree()

	off := d.off
	count := d.Int("session count")
	if d.err == nil && count < 0 {
		d.errorf(off, "session count %d", count)
	}
	for i := int32(0); i < count && d.err == nil; i++ {
		id := d.Long("session id")
		to := d.Int("session timeout")
		t.Sessions[id] = to
	}
	info.Sessions = len(t.Sessions)

	off = d.off
	count = d.Int("ACL cache size")
	if d.err == nil && count < 0 {
		d.errorf(off, "ACL cache size %d", count)
	}
	for i := int32(0); i < count && d.err == nil; i++ {
		key := d.Long("ACL key")
		off := d.off
		n := d.Int("ACL count")
		if d.err == nil && n < 0 {
			d.errorf(off, "ACL list of key %d has count %d", key, n)
		}
		acl := make([]jute.ACL, 0, min(int(max(n, 0)), 64))
		for j := int32(0); j < n && d.err == nil; j++ {
			var a jute.ACL
			a.Perms = d.Int("ACL perms")
			a.ID.Scheme = d.String("ACL scheme")
			a.ID.ID = d.String("ACL id")
			acl = append(acl, a)
		}
		if d.err == nil {
			t.acls.load(key, acl)
		}
	}
	info.ACLs = len(t.acls.lists)

	for d.err == nil {
		off := d.off
		path := d.String("node path")
		if d.err != nil || path == "/" {
			break
		}
		n := &Node{Data: d.Buffer("node data"), aclKey: d.Long("node ACL")}
		readStat(d, &n.Stat)
		if d.err != nil {
			break
		}
		if path != "" && path[0] != '/' {
			d.errorf(off, "node path %q", path)
			break
		}
		if path == "" && t.lookup("/") != nil {
			d.errorf(off, "a second root")
			break
		}
		if err := t.insert(path, n); err != nil {
			d.fail(&FileError{Offset: off, Err: err})
			break
		}
		t.acls.addUsage(n.aclKey)
	}
	if d.err == nil && t.lookup("/") == nil {
		d.errorf(d.off, "the tree has no root")
	}
	info.Nodes = t.Len()

	checkSeal(d, "seal")
	if d.err == nil && !d.atEOF() {
		dg := &ZxidDigest{Zxid: d.Long("digest zxid"), Version: d.Int("digest version")}
		if dg.Version < 2 {
			off := d.off
			s := d.String("digest")
			if s != "" {
				v, err := strconv.ParseUint(s, 16, 64)
				if err != nil {
					d.errorf(off, "digest %q", s)
				}
				dg.Digest = int64(v)
			}
		} else {
			dg.Digest = d.Long("digest")
		}
		checkSeal(d, "digest seal")
		info.Digest = dg
	}
	if d.err == nil && !d.atEOF() {
		// ZooKeeper 3.9 adds lastProcessedZxid and a third seal.
		info.LastZxid = d.Long("last zxid")
		checkSeal(d, "last zxid seal")
	}
	if d.err != nil {
		return nil, nil
	}
	t.setupQuota()
	t.acls.purgeUnused()
	return t, info
}

func readStat(d *dataReader, s *Stat) {
	s.Czxid = d.Long("czxid")
	s.Mzxid = d.Long("mzxid")
	s.Ctime = d.Long("ctime")
	s.Mtime = d.Long("mtime")
	s.Version = d.Int("version")
	s.Cversion = d.Int("cversion")
	s.Aversion = d.Int("aversion")
	s.EphemeralOwner = d.Long("ephemeralOwner")
	s.Pzxid = d.Long("pzxid")
}

// checkSeal reads a seal (SnapStream.sealStream): the Adler32 of everything
// before it, then the string "/".
func checkSeal(d *dataReader, what string) {
	if d.err != nil {
		return
	}
	want := int64(d.sum.Sum32())
	off := d.off
	got := d.Long(what)
	d.String(what)
	if d.err == nil && got != want {
		d.fail(&FileError{Offset: off, Err: fmt.Errorf("%w: %s is %#x, the bytes before it sum to %#x", ErrChecksum, what, got, want)})
	}
}

// ReadSnapshotFile reads a snapshot file, choosing the decompression from
// its name as ZooKeeper does. The tree's Zxid is the name's zxid.
func ReadSnapshotFile(path string) (*Tree, *SnapshotInfo, error) {
	zxid, ok := zxidFromName(baseName(path), "snapshot")
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s is not named snapshot.<hex zxid>", ErrNotDataDir, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	c := compressionOf(baseName(path))
	if err := quickCheck(f, c); err != nil {
		return nil, nil, &FileError{File: path, Err: err}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, nil, err
	}
	s, err := openSnapshotStream(bufio.NewReaderSize(f, 256<<10), c)
	if err != nil {
		return nil, nil, &FileError{File: path, Err: err}
	}
	t, info, err := ReadSnapshot(s)
	if err != nil {
		var fe *FileError
		if errors.As(err, &fe) {
			fe.File = path
			if c != CompressionNone {
				fe.File = path + " (uncompressed)"
			}
			return nil, nil, fe
		}
		return nil, nil, &FileError{File: path, Err: err}
	}
	t.Zxid = zxid
	info.File, info.Compression, info.Zxid = path, c, zxid
	return t, info, nil
}

// quickCheck is SnapStream.isValidSnapshot: a plain snapshot is at least
// 10 bytes and ends with the string "/"; a compressed one starts with its
// format's magic.
func quickCheck(f *os.File, c Compression) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	switch c {
	case CompressionGzip:
		var m [2]byte
		if _, err := io.ReadFull(f, m[:]); err != nil || m != [2]byte{0x1f, 0x8b} {
			return fmt.Errorf("%w: not a gzip file", ErrBadMagic)
		}
	case CompressionSnappy:
		var m [8]byte
		if _, err := io.ReadFull(f, m[:]); err != nil || !bytes.Equal(m[:], snappyMagic) {
			return fmt.Errorf("%w: not a snappy-java stream", ErrBadMagic)
		}
	default:
		if st.Size() < 10 {
			return fmt.Errorf("%w: %d bytes is too short for a snapshot", ErrTruncated, st.Size())
		}
		var tail [5]byte
		if _, err := f.ReadAt(tail[:], st.Size()-5); err != nil {
			return err
		}
		if tail != [5]byte{0, 0, 0, 1, '/'} {
			return fmt.Errorf("%w: the snapshot does not end with its seal (a partial write?)", ErrTruncated)
		}
	}
	return nil
}

// checkedWriter keeps the Adler32 of everything written through it.
type checkedWriter struct {
	w   *bufio.Writer
	sum hash.Hash32
	err error
	jw  *jute.Writer
}

func (c *checkedWriter) flushRecord() {
	if c.err != nil {
		c.jw.Reset()
		return
	}
	c.sum.Write(c.jw.Bytes())
	_, c.err = c.w.Write(c.jw.Bytes())
	c.jw.Reset()
}

func (c *checkedWriter) seal() {
	c.jw.Long(int64(c.sum.Sum32()))
	c.jw.String("/")
	c.flushRecord()
}

// WriteSnapshot writes t as ZooKeeper 3.8 writes a snapshot: the header
// (dbid -1), the sessions, the ACL cache, the nodes parents first with the
// root as "", the "/" end marker, seal 1, the digest section (t.Zxid,
// version 2, t's digest) and seal 2, wrapped in compression c.
func WriteSnapshot(w io.Writer, t *Tree, c Compression) error {
	if t.lookup("/") == nil {
		return fmt.Errorf("zkdata: the tree has no root")
	}
	zw := newSnapshotStream(w, c)
	cw := &checkedWriter{w: bufio.NewWriterSize(zw, 256<<10), sum: adler32.New(), jw: jute.NewWriter(4096)}
	jw := cw.jw
	jw.Int(snapMagic)
	jw.Int(formatVersion)
	jw.Long(snapDBID)

	ids := make([]int64, 0, len(t.Sessions))
	for id := range t.Sessions {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	jw.Int(int32(len(ids)))
	for _, id := range ids {
		jw.Long(id)
		jw.Int(t.Sessions[id])
	}

	// ACL keys 1, 2, 3... in first-use order. The nodes ZooKeeper creates
	// with a null ACL (the root, /zookeeper, /zookeeper/quota) keep -1.
	keys := map[string]int64{}
	var lists [][]jute.ACL
	nodeKey := map[*Node]int64{}
	openACL := aclString(znode.OpenACL)
	_ = t.Walk(func(path string, n *Node) error {
		s := aclString(n.ACL)
		if n.ACL == nil || s == openACL && (path == "/" || path == znode.ZooKeeperPath || path == znode.QuotaPath) {
			nodeKey[n] = openACLKey
			return nil
		}
		k, ok := keys[s]
		if !ok {
			lists = append(lists, n.ACL)
			k = int64(len(lists))
			keys[s] = k
		}
		nodeKey[n] = k
		return nil
	})
	jw.Int(int32(len(lists)))
	for i, acl := range lists {
		jw.Long(int64(i + 1))
		jw.ACLs(acl)
	}
	cw.flushRecord()

	_ = t.Walk(func(path string, n *Node) error {
		if path == "/" {
			path = ""
		}
		jw.String(path)
		jw.Buffer(n.Data)
		jw.Long(nodeKey[n])
		s := &n.Stat
		jw.Long(s.Czxid)
		jw.Long(s.Mzxid)
		jw.Long(s.Ctime)
		jw.Long(s.Mtime)
		jw.Int(s.Version)
		jw.Int(s.Cversion)
		jw.Int(s.Aversion)
		jw.Long(s.EphemeralOwner)
		jw.Long(s.Pzxid)
		cw.flushRecord()
		return nil
	})
	jw.String("/")
	cw.flushRecord()
	cw.seal()

	// ZooKeeper writes the digest of its lastProcessedZxid; at zxid 0 it
	// has none and writes the empty digest (zxid 0, digest 0).
	jw.Long(t.Zxid)
	jw.Int(DigestVersion)
	if t.Zxid == 0 {
		jw.Long(0)
	} else {
		jw.Long(t.Digest())
	}
	cw.flushRecord()
	cw.seal()

	if cw.err != nil {
		return cw.err
	}
	if err := cw.w.Flush(); err != nil {
		return err
	}
	return zw.Close()
}
