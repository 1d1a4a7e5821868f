package conformance

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

// multi (op 14): all or nothing, one result per op, one zxid
// (zookeeper-facts.md §2.3).

// multiResult is one decoded sub-result of a MultiResponse.
type multiResult struct {
	Type int32
	Err  int32 // the MultiHeader err
	Path string
	Stat zk.Stat
	Code int32 // ErrorResponse.err, for type -1
}

// decodeMultiResponse decodes a MultiResponse body strictly, terminator
// included.
func decodeMultiResponse(t *testing.T, body []byte) []multiResult {
	t.Helper()
	r := &jr{b: body}
	var out []multiResult
	for {
		typ, done, herr := r.i32(), r.boolean(), r.i32()
		if r.err != nil {
			t.Fatalf("multi response % x: %v", body, r.err)
		}
		if done {
			if typ != -1 || herr != -1 {
				t.Fatalf("multi terminator {%d true %d}, want {-1 true -1}", typ, herr)
			}
			break
		}
		res := multiResult{Type: typ, Err: herr}
		switch typ {
		case opCreate:
			res.Path = r.str()
		case opCreate2:
			res.Path, res.Stat = r.str(), r.stat()
		case opSetData:
			res.Stat = r.stat()
		case opDelete, opCheck:
		case opError:
			res.Code = r.i32()
		default:
			t.Fatalf("multi response has sub-result type %d: % x", typ, body)
		}
		out = append(out, res)
	}
	if err := r.end(); err != nil {
		t.Fatalf("multi response: %v", err)
	}
	return out
}

func TestMultiSuccess(t *testing.T) {
	base := uniquePath(t)
	c, _ := connect(t)
	a, b := base+"/a", base+"/b"
	mustCreate(t, c, base+"/old", []byte("o"), 0)

	res, err := c.Multi(
		&zk.CreateRequest{Path: a, Data: []byte("A"), Acl: zk.WorldACL(zk.PermAll)},
		&zk.CreateRequest{Path: b, Acl: zk.WorldACL(zk.PermAll)},
		&zk.SetDataRequest{Path: a, Data: []byte("A1"), Version: 0},
		&zk.CheckVersionRequest{Path: a, Version: 1},
		&zk.DeleteRequest{Path: b, Version: 0},
		&zk.DeleteRequest{Path: base + "/old", Version: -1},
	)
	if err != nil {
		t.Fatalf("multi: %v", err)
	}
	if len(res) != 6 {
		t.Fatalf("multi returned %d results, want 6", len(res))
	}
	for i, r := range res {
		if r.Error != nil {
			t.Errorf("result %d: %v", i, r.Error)
		}
	}
	if res[0].String != a || res[1].String != b {
		t.Errorf("create results %q %q, want %q %q", res[0].String, res[1].String, a, b)
	}
	if res[2].Stat == nil || res[2].Stat.Version != 1 || res[2].Stat.DataLength != 2 {
		t.Errorf("setData result Stat = %+v, want version 1, dataLength 2", res[2].Stat)
	}
	data, st, err := c.Get(a)
	if err != nil || string(data) != "A1" || st.Version != 1 {
		t.Fatalf("after multi: %s = %q version %d (%v)", a, data, st.Version, err)
	}
	mustNotExist(t, c, b)
	mustNotExist(t, c, base+"/old")
	// One txn: the create and the setData share a zxid.
	if st.Czxid != st.Mzxid || res[2].Stat.Mzxid != st.Czxid {
		t.Fatalf("multi ops have different zxids: czxid %#x mzxid %#x", st.Czxid, st.Mzxid)
	}
	pst := mustStat(t, c, base)
	// 3 creates + 2 deletes under base.
	if pst.Pzxid != st.Czxid || pst.NumChildren != 1 || pst.Cversion != 5 {
		t.Fatalf("parent after multi: %+v; want pzxid %#x, 1 child, cversion 5", pst, st.Czxid)
	}
}

func TestMultiSuccessRaw(t *testing.T) {
	base := uniquePath(t)
	c := rawSession(t, 10000)
	before := c.callOK(opCreate, createReq(base+"/x", []byte("x"), 0)).Zxid

	rep := c.callOK(opMulti, multiReq(
		multiOp{opCreate, createReq(base+"/a", nil, 0)},
		multiOp{opCreate, createReq(base+"/b", nil, flagEphemeral)},
		multiOp{opCreate, createReq(base+"/s-", nil, flagPersistentSequential)},
		multiOp{opCreate2, createReq(base+"/c2", nil, 0)},
		multiOp{opSetData, setDataReq(base+"/x", []byte("y"), 0)},
		multiOp{opCheck, checkReq(base+"/x", 1)},
		multiOp{opDelete, deleteReq(base+"/a", 0)},
	))
	// The whole multi is one txn with one zxid (nothing else writes meanwhile).
	if rep.Zxid != before+1 {
		t.Fatalf("multi reply zxid %#x, want %#x (one zxid for the whole multi)", rep.Zxid, before+1)
	}
	res := decodeMultiResponse(t, rep.Body)
	want := []multiResult{
		{Type: opCreate, Path: base + "/a"},
		{Type: opCreate, Path: base + "/b"},
		{Type: opCreate, Path: base + "/s-0000000003"},
		// A create2 inside a multi: 3.8 answers a plain create (path only),
		// 3.9 a create2 with the Stat. zkraft follows 3.9; both pass here.
		{Type: opCreate, Path: base + "/c2"},
		{Type: opSetData},
		{Type: opCheck},
		{Type: opDelete},
	}
	if len(res) != len(want) {
		t.Fatalf("multi results %+v, want %d", res, len(want))
	}
	for i := range want {
		got := res[i]
		if i == 3 && got.Type == opCreate2 {
			// 3.9: the create2's Stat is the new node's.
			if got.Stat.Czxid != rep.Zxid || got.Stat.Mzxid != rep.Zxid || got.Stat.Version != 0 {
				t.Errorf("create2 result Stat = %+v, want czxid = mzxid = %#x", got.Stat, rep.Zxid)
			}
			got.Type, got.Stat = opCreate, zk.Stat{}
		}
		if i == 4 {
			// The setData Stat is the node's new Stat.
			if got.Stat.Version != 1 || got.Stat.Mzxid != rep.Zxid || got.Stat.DataLength != 1 {
				t.Errorf("setData result Stat = %+v", got.Stat)
			}
			got.Stat = zk.Stat{}
		}
		if got != want[i] {
			t.Errorf("result %d = %+v, want %+v", i, got, want[i])
		}
	}
	for _, p := range []string{base + "/b", base + "/s-0000000003", base + "/c2"} {
		_, _, st := c.getData(p, false)
		if st.Czxid != rep.Zxid {
			t.Errorf("%s czxid %#x, want the multi's zxid %#x", p, st.Czxid, rep.Zxid)
		}
	}
	if _, _, st := c.getData(base+"/b", false); st.EphemeralOwner != c.SessionID {
		t.Errorf("ephemeral created in a multi: owner %#x, want %#x", st.EphemeralOwner, c.SessionID)
	}
	if rep := c.call(opExists, pathWatchReq(base+"/a", false)); rep.Err != errNoNode {
		t.Errorf("%s created and deleted in one multi: exists = %v", base+"/a", rep)
	}
	// The next write takes the next zxid.
	if z := c.callOK(opCreate, createReq(base+"/after", nil, 0)).Zxid; z != rep.Zxid+1 {
		t.Errorf("write after the multi at zxid %#x, want %#x", z, rep.Zxid+1)
	}
}

func TestMultiFailure(t *testing.T) {
	base := uniquePath(t)
	c := rawSession(t, 10000)
	x := base + "/x"
	before := c.callOK(opCreate, createReq(x, []byte("orig"), 0)).Zxid
	_, _, xst := c.getData(x, false)
	_, _, bst := c.getData(base, false)

	// ops 0 and 1 would succeed, op 2 fails (NODEEXISTS), 3 and 4 are never tried.
	rep := c.call(opMulti, multiReq(
		multiOp{opCreate, createReq(base+"/new1", nil, 0)},
		multiOp{opSetData, setDataReq(x, []byte("changed"), 0)},
		multiOp{opCreate, createReq(x, nil, 0)},
		multiOp{opDelete, deleteReq(x, -1)},
		multiOp{opCreate, createReq(base+"/new2", nil, 0)},
	))
	// The failure is in the body only: the reply header says OK. A failed
	// multi still consumes one zxid.
	if rep.Err != errOK || rep.Zxid != before+1 {
		t.Fatalf("failed multi reply header %v, want err 0 at zxid %#x", rep, before+1)
	}
	// Byte for byte: every result is type -1 with an ErrorResponse; ops
	// before the failing one report 0, the failing one its code, the rest
	// RUNTIMEINCONSISTENCY (-2).
	wantBody := new(jw)
	for _, code := range []int32{errOK, errOK, errNodeExists, errRuntimeInconsistency, errRuntimeInconsistency} {
		wantBody.i32(opError).boolean(false).i32(code).i32(code)
	}
	wantBody.i32(-1).boolean(true).i32(-1)
	if !bytes.Equal(rep.Body, wantBody.bytes()) {
		t.Fatalf("failed multi body\n got % x\nwant % x", rep.Body, wantBody.bytes())
	}

	// Nothing was applied.
	_, data, xst2 := c.getData(x, false)
	_, _, bst2 := c.getData(base, false)
	if string(data) != "orig" || xst2 != xst || bst2 != bst {
		t.Fatalf("failed multi changed the tree: %s = %q %+v (was %+v), parent %+v (was %+v)", x, data, xst2, xst, bst2, bst)
	}
	for _, p := range []string{base + "/new1", base + "/new2"} {
		if rep := c.call(opExists, pathWatchReq(p, false)); rep.Err != errNoNode {
			t.Fatalf("%s exists after a failed multi", p)
		}
	}
	// The failed multi's zxid is gone; the next write takes the one after.
	if z := c.callOK(opCreate, createReq(base+"/after", nil, 0)).Zxid; z != before+2 {
		t.Fatalf("write after a failed multi at zxid %#x, want %#x", z, before+2)
	}

	// When the first op fails, all the others are RUNTIMEINCONSISTENCY.
	rep = c.call(opMulti, multiReq(
		multiOp{opCheck, checkReq(x, 5)},
		multiOp{opCreate, createReq(base+"/new3", nil, 0)},
	))
	res := decodeMultiResponse(t, rep.Body)
	if rep.Err != errOK || len(res) != 2 ||
		res[0] != (multiResult{Type: opError, Err: errBadVersion, Code: errBadVersion}) ||
		res[1] != (multiResult{Type: opError, Err: errRuntimeInconsistency, Code: errRuntimeInconsistency}) {
		t.Fatalf("multi failing at op 0: %v %+v", rep, res)
	}
}

func TestMultiFailureClient(t *testing.T) {
	// The same through go-zookeeper: Multi returns the first error and one
	// result per op.
	base := uniquePath(t)
	c, _ := connect(t)
	mustCreate(t, c, base+"/x", nil, 0)
	res, err := c.Multi(
		&zk.CreateRequest{Path: base + "/a", Acl: zk.WorldACL(zk.PermAll)},
		&zk.DeleteRequest{Path: base + "/missing", Version: -1},
		&zk.SetDataRequest{Path: base + "/x", Data: []byte("y"), Version: -1},
	)
	if !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("multi error = %v, want NONODE", err)
	}
	if len(res) != 3 || res[0].Error != nil || !errors.Is(res[1].Error, zk.ErrNoNode) ||
		res[2].Error == nil || !strings.Contains(res[2].Error.Error(), "-2") {
		t.Fatalf("multi results = %+v, want [OK, NONODE, RUNTIMEINCONSISTENCY(-2)]", res)
	}
	mustNotExist(t, c, base+"/a")
	if data, st, _ := c.Get(base + "/x"); len(data) != 0 || st.Version != 0 {
		t.Fatalf("failed multi changed %s/x", base)
	}
}

func TestMultiCheck(t *testing.T) {
	base := uniquePath(t)
	c, _ := connect(t)
	x := mustCreate(t, c, base+"/x", nil, 0)
	if _, err := c.Set(x, []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	xst := mustStat(t, c, x)
	for _, tc := range []struct {
		name    string
		path    string
		version int32
		want    error
	}{
		{"Matches", x, 1, nil},
		{"AnyVersion", x, -1, nil},
		{"WrongVersion", x, 0, zk.ErrBadVersion},
		{"Missing", base + "/missing", -1, zk.ErrNoNode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.Multi(
				&zk.CheckVersionRequest{Path: tc.path, Version: tc.version},
				&zk.CreateRequest{Path: base + "/made-" + tc.name, Acl: zk.WorldACL(zk.PermAll)},
			)
			if !errors.Is(err, tc.want) || len(res) != 2 || !errors.Is(res[0].Error, tc.want) {
				t.Fatalf("multi(check %s version %d, create) = %+v, %v; want %v", tc.path, tc.version, res, err, tc.want)
			}
			ok, _, _ := c.Exists(base + "/made-" + tc.name)
			if ok != (tc.want == nil) {
				t.Fatalf("create after check: exists = %v, want %v", ok, tc.want == nil)
			}
		})
	}
	// check changes nothing on the node it checks.
	if st := mustStat(t, c, x); st != xst {
		t.Fatalf("after checks: %+v, want unchanged %+v", st, xst)
	}
}

func TestMultiWithReadOp(t *testing.T) {
	// A getData inside a multi (op 14) cannot be decoded: ZooKeeper 3.8
	// answers MARSHALLINGERROR in the reply header, with no body, applies
	// nothing, consumes a zxid, and keeps the connection open.
	base := uniquePath(t)
	c := rawSession(t, 10000)
	before := c.callOK(opCreate, createReq(base+"/x", []byte("x"), 0)).Zxid
	for i, ops := range [][]multiOp{
		{{opGetData, pathWatchReq(base+"/x", false)}},
		{{opCreate, createReq(base+"/made", nil, 0)}, {opGetData, pathWatchReq(base+"/x", false)}},
	} {
		rep := c.call(opMulti, multiReq(ops...))
		if rep.Err != errMarshallingError || rep.Len != 16 || rep.Zxid != before+int64(i)+1 {
			t.Fatalf("multi with a read op: %v, want MARSHALLINGERROR at zxid %#x, header only", rep, before+int64(i)+1)
		}
	}
	if rep := c.call(opExists, pathWatchReq(base+"/made", false)); rep.Err != errNoNode {
		t.Fatalf("the create before the read op was applied: %v", rep)
	}
	if _, data, _ := c.getData(base+"/x", false); string(data) != "x" {
		t.Fatalf("connection unusable after the marshalling error")
	}
}

func TestMultiEmpty(t *testing.T) {
	// An empty multi succeeds with just the terminator, and takes a zxid.
	base := uniquePath(t)
	c := rawSession(t, 10000)
	before := c.callOK(opCreate, createReq(base+"/x", nil, 0)).Zxid
	rep := c.callOK(opMulti, multiReq())
	want := new(jw).i32(-1).boolean(true).i32(-1).bytes()
	if !bytes.Equal(rep.Body, want) || rep.Zxid != before+1 {
		t.Fatalf("empty multi: %v body % x, want % x at zxid %#x", rep, rep.Body, want, before+1)
	}
	if res, err := admin.Multi(); err != nil || len(res) != 0 {
		t.Fatalf("empty multi via go-zookeeper: %v %v", res, err)
	}
}
