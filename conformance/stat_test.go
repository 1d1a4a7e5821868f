package conformance

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Stat maintenance and zxid accounting (zookeeper-facts.md §2.2, §3.2, §3.7).

func TestStatLifecycle(t *testing.T) {
	base := uniquePath(t)
	c := rawSession(t, 10000)
	n := base + "/n"
	before := time.Now()

	// create: czxid == mzxid == pzxid == the txn zxid, ctime == mtime.
	rep, _, st0 := c.create2(n, []byte("a"), flagPersistent)
	if rep.Err != errOK {
		t.Fatalf("create2: %v", rep)
	}
	z1 := rep.Zxid
	want := zk.Stat{Czxid: z1, Mzxid: z1, Pzxid: z1, Ctime: st0.Ctime, Mtime: st0.Ctime, DataLength: 1}
	if st0 != want {
		t.Fatalf("after create: %+v, want %+v", st0, want)
	}
	// ctime is wall-clock milliseconds (loosely: the server's clock is near ours).
	if d := time.Duration(st0.Ctime-before.UnixMilli()) * time.Millisecond; d < -10*time.Minute || d > 10*time.Minute {
		t.Errorf("ctime %d is %v away from the client's clock; want wall-clock ms", st0.Ctime, d)
	}

	// setData: version+1, mzxid and mtime move; czxid, ctime, pzxid stay.
	rep, st1 := c.setData(n, []byte("bb"), 0)
	if rep.Err != errOK {
		t.Fatalf("setData: %v", rep)
	}
	z2 := rep.Zxid
	want = st0
	want.Mzxid, want.Mtime, want.Version, want.DataLength = z2, st1.Mtime, 1, 2
	if st1 != want || z2 <= z1 || st1.Mtime < st1.Ctime {
		t.Fatalf("after setData (zxid %#x): %+v, want %+v with mtime >= ctime", z2, st1, want)
	}

	// child create: parent's cversion+1, pzxid = the child's czxid,
	// numChildren+1; its mzxid, mtime and version do not change.
	rep, _, cst := c.create2(n+"/c", nil, flagPersistent)
	if rep.Err != errOK {
		t.Fatalf("create child: %v", rep)
	}
	z3 := rep.Zxid
	_, _, st2 := c.getData(n, false)
	want = st1
	want.Cversion, want.Pzxid, want.NumChildren = 1, z3, 1
	if st2 != want || cst.Czxid != z3 {
		t.Fatalf("after child create (zxid %#x): %+v, want %+v", z3, st2, want)
	}

	// child delete: cversion+1 again (clients see creates + deletes), pzxid =
	// the delete's zxid, numChildren-1.
	rep = c.callOK(opDelete, deleteReq(n+"/c", -1))
	z4 := rep.Zxid
	if len(rep.Body) != 0 {
		t.Errorf("delete reply has a %d-byte body, want none", len(rep.Body))
	}
	_, _, st3 := c.getData(n, false)
	want = st2
	want.Cversion, want.Pzxid, want.NumChildren = 2, z4, 0
	if st3 != want || z4 <= z3 {
		t.Fatalf("after child delete (zxid %#x): %+v, want %+v", z4, st3, want)
	}

	// setACL: aversion+1 only (mzxid unchanged).
	rep = c.callOK(opSetACL, setACLReq(n, openACL, 0))
	r := &jr{b: rep.Body}
	st4 := r.stat()
	if err := r.end(); err != nil {
		t.Fatal(err)
	}
	want = st3
	want.Aversion = 1
	if st4 != want {
		t.Fatalf("after setACL: %+v, want %+v", st4, want)
	}
	_, _, st5 := c.getData(n, false)
	if st5 != st4 {
		t.Fatalf("getData after setACL: %+v, want the setACL Stat %+v", st5, st4)
	}

	// ephemeralOwner is the session id for an ephemeral, 0 otherwise.
	rep, _, est := c.create2(n+"/e", []byte("xyz"), flagEphemeral)
	if rep.Err != errOK || est.EphemeralOwner != c.SessionID || est.DataLength != 3 || est.Czxid != rep.Zxid {
		t.Fatalf("ephemeral create2: %v %+v, want owner %#x", rep, est, c.SessionID)
	}
	_, _, st6 := c.getData(n, false)
	if st6.EphemeralOwner != 0 || st6.NumChildren != 1 || st6.Cversion != 3 || st6.Pzxid != rep.Zxid {
		t.Fatalf("parent of an ephemeral: %+v", st6)
	}
}

func TestStatNullAndEmptyData(t *testing.T) {
	base := uniquePath(t)
	c := rawSession(t, 10000)
	n := base + "/n"
	// Null data (buffer length -1) stays null: getData answers length -1.
	c.callOK(opCreate, createReq(n, nil, 0))
	rep := c.callOK(opGetData, pathWatchReq(n, false))
	r := &jr{b: rep.Body}
	if l := r.i32(); l != -1 {
		t.Fatalf("getData of a node created with null data: data length %d, want -1 (null)", l)
	}
	if st := r.stat(); st.DataLength != 0 || r.end() != nil {
		t.Fatalf("null data: dataLength %d", st.DataLength)
	}
	// Empty data stays empty (length 0).
	c.callOK(opSetData, setDataReq(n, []byte{}, -1))
	rep = c.callOK(opGetData, pathWatchReq(n, false))
	r = &jr{b: rep.Body}
	if l := r.i32(); l != 0 {
		t.Fatalf("getData after setting empty data: data length %d, want 0", l)
	}
	if st := r.stat(); st.DataLength != 0 || st.Version != 1 || r.end() != nil {
		t.Fatalf("empty data: %+v", st)
	}
}

// TestZxidAccounting checks that every write, failed or not, consumes exactly
// one zxid, that reads consume none and report the last zxid, and that the
// reply header of a write carries its txn's zxid. It assumes nothing else
// writes to the server meanwhile (it is not parallel).
func TestZxidAccounting(t *testing.T) {
	base := uniquePath(t)
	c := rawSession(t, 10000)
	a := base + "/a"

	z := c.callOK(opCreate, createReq(a, nil, 0)).Zxid
	step := func(what string, rep reply, wantErr int32, wantZxid int64) {
		t.Helper()
		if rep.Err != wantErr || rep.Zxid != wantZxid {
			t.Fatalf("%s: %v, want %s at zxid %#x", what, rep, errName(wantErr), wantZxid)
		}
	}
	// Failed writes are logged as error txns: each takes a zxid.
	step("create existing", c.call(opCreate, createReq(a, nil, 0)), errNodeExists, z+1)
	step("delete missing", c.call(opDelete, deleteReq(base+"/missing", -1)), errNoNode, z+2)
	step("setData bad version", c.call(opSetData, setDataReq(a, nil, 7)), errBadVersion, z+3)
	step("create under missing parent", c.call(opCreate, createReq(base+"/x/y", nil, 0)), errNoNode, z+4)
	step("delete non-empty", c.call(opDelete, deleteReq(base, -1)), errNotEmpty, z+5)
	step("setACL bad version", c.call(opSetACL, setACLReq(a, openACL, 3)), errBadVersion, z+6)

	// The next successful write's czxid is right after them.
	rep, _, st := c.create2(base+"/b", nil, 0)
	step("create2 after failures", rep, errOK, z+7)
	if st.Czxid != z+7 {
		t.Fatalf("czxid = %#x, want %#x (failed writes consumed %d zxids)", st.Czxid, z+7, 6)
	}

	// Reads take no zxid and report the last one.
	step("getData", c.call(opGetData, pathWatchReq(a, false)), errOK, z+7)
	step("exists missing", c.call(opExists, pathWatchReq(base+"/missing", false)), errNoNode, z+7)
	step("getChildren", c.call(opGetChildren, pathWatchReq(base, false)), errOK, z+7)
	step("getACL", c.call(opGetACL, pathReq(a)), errOK, z+7)
	if err := c.sendXid(xidPing, opPing, nil); err != nil {
		t.Fatal(err)
	}
	ping, err := c.readReply(rawIOTimeout)
	if err != nil || ping.Xid != xidPing || ping.Zxid != z+7 || ping.Err != errOK || ping.Len != 16 {
		t.Fatalf("ping reply = %v, %v; want {xid -2 zxid %#x err 0}, header only", ping, err, z+7)
	}

	// A successful setData/delete each take one.
	step("setData", c.call(opSetData, setDataReq(a, []byte("x"), 0)), errOK, z+8)
	step("delete", c.call(opDelete, deleteReq(base+"/b", 0)), errOK, z+9)
	_, _, ast := c.getData(a, false)
	if ast.Mzxid != z+8 || ast.Czxid != z {
		t.Fatalf("%s: czxid %#x mzxid %#x, want %#x and %#x", a, ast.Czxid, ast.Mzxid, z, z+8)
	}
}
