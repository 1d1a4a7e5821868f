package conformance

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// multiRead (22), getEphemerals (103), getAllChildrenNumber (104), whoAmI
// (107), check (13) outside a multi, reconfig (16) on a standalone server,
// and a multi with an op it cannot hold (zookeeper-facts.md §2.2, §2.3).

func TestMultiRead(t *testing.T) {
	base := uniquePath(t)
	c := rawSession(t, 10000)
	n := base + "/n"
	c.callOK(opCreate, createReq(n, []byte("data"), 0))
	c.callOK(opCreate, createReq(n+"/only", nil, 0))
	last := c.callOK(opSetData, setDataReq(n, []byte("data2"), -1)).Zxid
	_, _, nst := c.getData(n, false)
	_, _, ost := c.getData(n+"/only", false)

	// Every sub-op answers on its own; a failed one does not stop the others.
	// Results: getData → {type 4, done false, err 0} + GetDataResponse,
	// getChildren → {8, false, 0} + GetChildrenResponse, a failure →
	// {-1, false, code} + ErrorResponse{code}; then {-1, true, -1}.
	rep := c.callOK(opMultiRead, multiReq(
		multiOp{opGetData, pathWatchReq(n, false)},
		multiOp{opGetChildren, pathWatchReq(base+"/missing", false)},
		multiOp{opGetChildren, pathWatchReq(n, false)},
		multiOp{opGetData, pathWatchReq(base+"/missing", false)},
		multiOp{opGetData, pathWatchReq(n+"/only", false)},
		multiOp{opGetChildren, pathWatchReq(n+"/only", false)},
	))
	w := new(jw)
	w.i32(opGetData).boolean(false).i32(0).buf([]byte("data2"))
	writeStat(w, nst)
	w.i32(opError).boolean(false).i32(errNoNode).i32(errNoNode)
	w.i32(opGetChildren).boolean(false).i32(0).strVec([]string{"only"})
	w.i32(opError).boolean(false).i32(errNoNode).i32(errNoNode)
	w.i32(opGetData).boolean(false).i32(0).buf(nil) // null data reads back as null
	writeStat(w, ost)
	w.i32(opGetChildren).boolean(false).i32(0).strVec(nil)
	w.i32(-1).boolean(true).i32(-1)
	if string(rep.Body) != string(w.bytes()) {
		t.Fatalf("multiRead body\n got % x\nwant % x", rep.Body, w.bytes())
	}
	// A read: no zxid is consumed, the reply carries the last one.
	if rep.Zxid != last {
		t.Fatalf("multiRead reply zxid %#x, want the last zxid %#x", rep.Zxid, last)
	}

	// An empty multiRead is just the terminator.
	rep = c.callOK(opMultiRead, multiReq())
	if want := new(jw).i32(-1).boolean(true).i32(-1).bytes(); string(rep.Body) != string(want) {
		t.Fatalf("empty multiRead body % x, want % x", rep.Body, want)
	}

	// The watch flag of a sub-op is ignored: multiRead sets no watch.
	c.callOK(opMultiRead, multiReq(
		multiOp{opGetData, pathWatchReq(n, true)},
		multiOp{opGetChildren, pathWatchReq(n, true)},
	))
	mustCreate(t, admin, n+"/more", nil, 0)
	if _, err := admin.Set(n, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	if evs := rawBarrier(c); len(evs) != 0 {
		t.Fatalf("notifications after a multiRead with watch flags: %s, want none", fmtEvents(evs))
	}

	// A write op in a multiRead, or an unknown op: MARSHALLINGERROR, nothing
	// done, no zxid consumed, the connection stays usable. (For the write
	// op ZooKeeper has already started the response and sends the empty
	// MultiResponse, i.e. just the terminator, after the error header; an
	// op it cannot decode gets the header alone.)
	last = c.callOK(opSetData, setDataReq(n, []byte("y"), -1)).Zxid
	rep = c.call(opMultiRead, multiReq(multiOp{opCreate, createReq(n+"/bywrite", nil, 0)}))
	if rep.Err != errMarshallingError || rep.Zxid != last || string(rep.Body) != string(new(jw).i32(-1).boolean(true).i32(-1).bytes()) {
		t.Fatalf("multiRead with a create: %v body % x, want MARSHALLINGERROR at zxid %#x with the 9-byte empty MultiResponse", rep, rep.Body, last)
	}
	rep = c.call(opMultiRead, multiReq(multiOp{opGetData, pathWatchReq(n, false)}, multiOp{opUnknownForTest, pathReq(n)}))
	if rep.Err != errMarshallingError || rep.Zxid != last || rep.Len != 16 {
		t.Fatalf("multiRead with op %d: %v, want MARSHALLINGERROR at zxid %#x, header only", opUnknownForTest, rep, last)
	}
	if rep := c.call(opExists, pathWatchReq(n+"/bywrite", false)); rep.Err != errNoNode {
		t.Fatalf("multiRead applied a create: %v", rep)
	}
	if z := c.callOK(opSetData, setDataReq(n, []byte("z"), -1)).Zxid; z != last+1 {
		t.Fatalf("write after the refused multiReads at zxid %#x, want %#x", z, last+1)
	}
}

// writeStat appends the 68-byte wire Stat.
func writeStat(w *jw, s zk.Stat) {
	w.i64(s.Czxid).i64(s.Mzxid).i64(s.Ctime).i64(s.Mtime).i32(s.Version).i32(s.Cversion).i32(s.Aversion).
		i64(s.EphemeralOwner).i32(s.DataLength).i32(s.NumChildren).i64(s.Pzxid)
}

func TestMultiUnsupportedOp(t *testing.T) {
	// A multi (op 14) holding an op it cannot decode (op 999, or a read op
	// such as getData, see TestMultiWithReadOp): MARSHALLINGERROR in the
	// reply header, header only, nothing applied, one zxid consumed, the
	// connection stays usable.
	base := uniquePath(t)
	c := rawSession(t, 10000)
	before := c.callOK(opCreate, createReq(base+"/x", []byte("x"), 0)).Zxid
	for i, ops := range [][]multiOp{
		{{opUnknownForTest, pathReq(base + "/x")}},
		{{opCreate, createReq(base+"/made", nil, 0)}, {opUnknownForTest, createReq(base+"/other", nil, 0)}},
		{{opCreate, createReq(base+"/made", nil, 0)}, {opMultiRead, pathReq(base)}},
		{{opSetData, setDataReq(base+"/x", nil, -1)}, {opAddWatch, addWatchReq(base, 0)}},
	} {
		rep := c.call(opMulti, multiReq(ops...))
		if want := before + int64(i) + 1; rep.Err != errMarshallingError || rep.Len != 16 || rep.Zxid != want {
			t.Fatalf("multi %d: %v, want MARSHALLINGERROR at zxid %#x, header only", i, rep, want)
		}
	}
	if rep := c.call(opExists, pathWatchReq(base+"/made", false)); rep.Err != errNoNode {
		t.Fatalf("the create before the unsupported op was applied: %v", rep)
	}
	if _, data, st := c.getData(base+"/x", false); string(data) != "x" || st.Version != 0 {
		t.Fatalf("%s/x = %q version %d after refused multis", base, data, st.Version)
	}
}

func TestGetEphemerals(t *testing.T) {
	base := uniquePath(t)
	mustCreate(t, admin, base+"/sub", nil, 0)
	c := rawSession(t, 10000)
	mine := []string{base + "/e1", base + "/e2", base + "/sub/e3", base + "/f"}
	for _, p := range mine {
		c.callOK(opCreate, createReq(p, nil, flagEphemeral))
	}
	seq := c.callOK(opCreate, createReq(base+"/s-", nil, flagEphemeralSequential))
	seqPath := (&jr{b: seq.Body}).str()
	mine = append(mine, seqPath)
	// Another session's ephemerals are never listed.
	other := rawSession(t, 10000)
	other.callOK(opCreate, createReq(base+"/other", nil, flagEphemeral))
	other.callOK(opCreate, createReq(base+"/e-other", nil, flagEphemeral))

	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		// "" and "/" mean all of the session's ephemerals.
		{"", mine},
		{"/", mine},
		{base, mine},
		// A plain string prefix, not a path prefix.
		{base + "/e", []string{base + "/e1", base + "/e2"}},
		{base + "/e1", []string{base + "/e1"}},
		{base + "/sub", []string{base + "/sub/e3"}},
		{base + "/s", []string{base + "/sub/e3", seqPath}},
		{base + "/none", nil},
		{base + "/f/", nil},
	} {
		rep, got := c.strings(opGetEphemerals, pathReq(tc.prefix))
		if rep.Err != errOK || got == nil || !sameSet(got, tc.want) {
			t.Fatalf("getEphemerals %q = %v %q, want %q (in any order)", tc.prefix, rep, got, tc.want)
		}
	}
	// The other session sees only its own.
	if rep, got := other.strings(opGetEphemerals, pathReq(base)); rep.Err != errOK ||
		!sameSet(got, []string{base + "/other", base + "/e-other"}) {
		t.Fatalf("getEphemerals of the other session = %v %q", rep, got)
	}
	// A session without ephemerals: an empty (not null) vector.
	empty := rawSession(t, 10000)
	if rep := empty.callOK(opGetEphemerals, pathReq("/")); string(rep.Body) != "\x00\x00\x00\x00" {
		t.Fatalf("getEphemerals without ephemerals: body % x, want 00 00 00 00", rep.Body)
	}
	// A deleted ephemeral is no longer listed.
	c.callOK(opDelete, deleteReq(base+"/e1", -1))
	if _, got := c.strings(opGetEphemerals, pathReq(base+"/e")); !sameSet(got, []string{base + "/e2"}) {
		t.Fatalf("getEphemerals after a delete = %q, want [%s/e2]", got, base)
	}
}

func TestGetAllChildrenNumber(t *testing.T) {
	base := uniquePath(t)
	c := rawSession(t, 10000)
	count := func(p string) (reply, int32) {
		t.Helper()
		rep := c.call(opGetAllChildrenNumber, pathReq(p))
		if rep.Err != errOK {
			if rep.Len != 16 {
				t.Fatalf("getAllChildrenNumber %s: error reply %v has a body", p, rep)
			}
			return rep, -1
		}
		r := &jr{b: rep.Body}
		v := r.i32()
		if err := r.end(); err != nil {
			t.Fatalf("getAllChildrenNumber %s: body % x: %v", p, rep.Body, err)
		}
		return rep, v
	}
	for _, p := range []string{"/a", "/a/b", "/a/b/c", "/a/b/d", "/e", "/ab"} {
		c.callOK(opCreate, createReq(base+p, nil, 0))
	}
	c.callOK(opCreate, createReq(base+"/e/eph", nil, flagEphemeral))
	for p, want := range map[string]int32{"": 7, "/a": 3, "/a/b": 2, "/a/b/c": 0, "/e": 1, "/ab": 0} {
		// All descendants, not only children; "/ab" is not under "/a".
		if rep, got := count(base + p); rep.Err != errOK || got != want {
			t.Fatalf("getAllChildrenNumber %s = %v %d, want %d", base+p, rep, got, want)
		}
	}
	if rep, _ := count(base + "/missing"); rep.Err != errNoNode {
		t.Fatalf("getAllChildrenNumber of a missing node: %v, want NONODE", rep)
	}

	// For "/" it is the number of all znodes but the root, /zookeeper and
	// its children included. Compare with a walk of the tree, retrying if
	// something else changed the tree meanwhile. (The walk needs READ
	// everywhere; if some node refuses it, walk again as the super user.)
	walker := admin
	var noRead *errNoRead
	for attempt := 0; ; attempt++ {
		before, err := countTree(walker, "/")
		if errors.As(err, &noRead) && walker == admin {
			walker = superConn(t, base)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		_, got := count("/")
		after, err := countTree(walker, "/")
		if err != nil {
			t.Fatal(err)
		}
		if before == after {
			if got != before {
				t.Fatalf("getAllChildrenNumber / = %d, want %d (znodes but the root)", got, before)
			}
			break
		}
		if attempt == 5 {
			t.Fatalf("the tree kept changing during the walk (%d, %d nodes)", before, after)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type errNoRead struct{ path string }

func (e *errNoRead) Error() string { return "no READ permission on " + e.path }

// countTree counts the nodes under p (p excluded).
func countTree(c *zk.Conn, p string) (int32, error) {
	children, _, err := c.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil
	}
	if errors.Is(err, zk.ErrNoAuth) {
		return 0, &errNoRead{p}
	}
	if err != nil {
		return 0, fmt.Errorf("children %s: %w", p, err)
	}
	n := int32(len(children))
	for _, ch := range children {
		q := p + "/" + ch
		if p == "/" {
			q = "/" + ch
		}
		m, err := countTree(c, q)
		if err != nil {
			return 0, err
		}
		n += m
	}
	return n, nil
}

func TestWhoAmI(t *testing.T) {
	c := rawSession(t, 10000)
	// Without credentials: the connection's ip id only.
	rep := c.callOK(opWhoAmI, nil)
	want := new(jw).i32(1).str("ip").str("127.0.0.1").bytes()
	if string(rep.Body) != string(want) {
		t.Fatalf("whoAmI body % x, want % x (one ClientInfo{ip, 127.0.0.1})", rep.Body, want)
	}
	// A digest identity is listed with its user name (order unspecified).
	c.authOK("digest", []byte("user:pw"))
	if got := c.whoAmI(); !sameInfos(got, []clientInfo{{"ip", "127.0.0.1"}, {"digest", "user"}}) {
		t.Fatalf("whoAmI after addauth = %+v, want {ip 127.0.0.1} and {digest user}", got)
	}
	// Other connections are not affected.
	if got := rawSession(t, 10000).whoAmI(); !sameInfos(got, []clientInfo{{"ip", "127.0.0.1"}}) {
		t.Fatalf("whoAmI of another connection = %+v", got)
	}
}

func TestCheckOutsideMulti(t *testing.T) {
	// check (op 13) is meant for multi only. ZooKeeper 3.8.0 still runs it as
	// a txn: a failed check answers its error (header only, one zxid
	// consumed); a check that passes gets NO reply at all (the server fails
	// to serialize the null Stat of its response and drops it), and the
	// connection goes on. (3.8.0 also logs it as txn type 13, which its own
	// log reader cannot read back after a restart.) ZooKeeper 3.9
	// (ZOOKEEPER-2623) treats it as an unknown op: UNIMPLEMENTED with zxid
	// -1, then it closes the connection. zkraft follows 3.9; the test accepts
	// exactly these two behaviours.
	base := uniquePath(t)
	n := mustCreate(t, admin, base+"/n", nil, 0)

	for _, tc := range []struct {
		name   string
		req    []byte
		want38 int32 // 3.8's answer; errOK means no answer
	}{
		{"WrongVersion", checkReq(n, 5), errBadVersion},
		{"MissingNode", checkReq(base+"/missing", -1), errNoNode},
		{"Passes", checkReq(n, 0), errOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rawSession(t, 10000)
			checkXid, _ := c.send(opCheck, tc.req)
			probeXid, _ := c.send(opExists, pathWatchReq(n, false))
			var frames []reply
			for {
				rep, err := c.readReply(rawIOTimeout)
				if err != nil {
					if isClosedErr(err) {
						break
					}
					t.Fatalf("after check: %v (frames %v)", err, frames)
				}
				frames = append(frames, rep)
				if rep.Xid == probeXid {
					break
				}
			}
			is39 := len(frames) == 1 && frames[0].Xid == checkXid && frames[0].Zxid == -1 &&
				frames[0].Err == errUnimplemented && frames[0].Len == 16
			var is38 bool
			switch tc.want38 {
			case errOK:
				is38 = len(frames) == 1 && frames[0].Xid == probeXid && frames[0].Err == errOK
			default:
				is38 = len(frames) == 2 && frames[0].Xid == checkXid && frames[0].Err == tc.want38 &&
					frames[0].Len == 16 && frames[0].Zxid > 0 && frames[1].Xid == probeXid && frames[1].Err == errOK
			}
			switch {
			case is38:
				t.Logf("ZooKeeper 3.8.0 behaviour")
			case is39:
				t.Logf("ZooKeeper 3.9 behaviour")
				if _, err := c.readUntilClosed(rawIOTimeout); err != nil {
					t.Fatalf("3.9 closes the connection after UNIMPLEMENTED: %v", err)
				}
			default:
				t.Fatalf("check outside a multi: frames %v; want (3.8) %s for xid %d then the exists reply, or (3.9) {xid %d, zxid -1, UNIMPLEMENTED} then close",
					frames, map[bool]string{true: "no reply", false: errName(tc.want38)}[tc.want38 == errOK], checkXid, checkXid)
			}
		})
	}
	if st := mustStat(t, admin, n); st.Version != 0 {
		t.Fatalf("check changed the node: %+v", st)
	}
}

func TestReconfigStandalone(t *testing.T) {
	// reconfig on a standalone server with reconfigEnabled off (the default):
	// RECONFIGDISABLED, header only, one zxid consumed (an error txn), and
	// the connection stays usable.
	base := uniquePath(t)
	c := rawSession(t, 10000)
	before := c.callOK(opCreate, createReq(base+"/x", nil, 0)).Zxid
	for i, req := range [][]byte{
		// ReconfigRequest{joiningServers, leavingServers, newMembers, curConfigId}
		new(jw).str("").str("").str("").i64(-1).bytes(),
		new(jw).str("server.5=127.0.0.1:2888:3888:participant;2181").str("").str("").i64(-1).bytes(),
		new(jw).str("").str("").str("server.1=127.0.0.1:2888:3888;2181").i64(0).bytes(),
	} {
		rep := c.call(opReconfig, req)
		if want := before + int64(i) + 1; rep.Err != errReconfigDisabled || rep.Len != 16 || rep.Zxid != want {
			t.Fatalf("reconfig %d: %v, want RECONFIGDISABLED at zxid %#x, header only", i, rep, want)
		}
	}
	if data, st := mustGetConfig(t); len(data) != 0 || st.Version != 0 {
		t.Fatalf("/zookeeper/config after refused reconfigs: %q version %d", data, st.Version)
	}
	// go-zookeeper maps the code to ErrReconfigDisabled.
	g, _ := connect(t)
	if _, err := g.IncrementalReconfig([]string{"server.5=127.0.0.1:2888:3888:participant;2181"}, nil, -1); !errors.Is(err, zk.ErrReconfigDisabled) {
		t.Fatalf("IncrementalReconfig: %v, want ErrReconfigDisabled", err)
	}
	if _, err := g.Reconfig([]string{"server.1=127.0.0.1:2888:3888;2181"}, -1); !errors.Is(err, zk.ErrReconfigDisabled) {
		t.Fatalf("Reconfig: %v, want ErrReconfigDisabled", err)
	}
}

func mustGetConfig(t *testing.T) ([]byte, zk.Stat) {
	t.Helper()
	data, st, err := admin.Get("/zookeeper/config")
	if err != nil {
		t.Fatalf("get /zookeeper/config: %v", err)
	}
	return data, *st
}
