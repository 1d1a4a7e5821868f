package znode

import (
	"reflect"
	"testing"

	"github.com/zkraft/zkraft/jute"
)

func createOp(typ jute.OpCode, path string, flags int32) jute.MultiOp {
	return jute.MultiOp{Type: typ, Req: &jute.CreateRequest{Path: path, Data: []byte("d"), ACL: OpenACL, Flags: flags}}
}

func ttlOp(path string, flags int32, ttl int64) jute.MultiOp {
	return jute.MultiOp{Type: jute.OpCreateTTL, Req: &jute.CreateTTLRequest{Path: path, ACL: OpenACL, Flags: flags, TTL: ttl}}
}

func deleteOp(path string, version int32) jute.MultiOp {
	return jute.MultiOp{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: path, Version: version}}
}

func setDataOp(path string, data string, version int32) jute.MultiOp {
	return jute.MultiOp{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: path, Data: []byte(data), Version: version}}
}

func checkOp(path string, version int32) jute.MultiOp {
	return jute.MultiOp{Type: jute.OpCheck, Req: &jute.CheckVersionRequest{Path: path, Version: version}}
}

// resultShape is a MultiResult without Stats: type, err, the response
// record's Go type and path.
type resultShape struct {
	Type jute.OpCode
	Err  jute.ErrCode
	Resp string
	Path string
}

func shapes(rs []jute.MultiResult) []resultShape {
	out := make([]resultShape, len(rs))
	for i, r := range rs {
		s := resultShape{Type: r.Type, Err: r.Err}
		switch x := r.Resp.(type) {
		case nil:
		case *jute.CreateResponse:
			s.Resp, s.Path = "create", x.Path
		case *jute.Create2Response:
			s.Resp, s.Path = "create2", x.Path
		case *jute.SetDataResponse:
			s.Resp = "setData"
		default:
			s.Resp = reflect.TypeOf(x).String()
		}
		out[i] = s
	}
	return out
}

func TestMultiSuccess(t *testing.T) {
	kv := newTree()
	mustCreate(t, kv, 2, "/old", jute.FlagPersistent)
	tx := txn(kv, 9)
	resp, err := tx.Multi([]jute.MultiOp{
		createOp(jute.OpCreate, "/a", jute.FlagPersistent),
		createOp(jute.OpCreate2, "/a/b", jute.FlagPersistent), // child of an earlier op
		createOp(jute.OpCreate, "/a/s-", jute.FlagPersistentSequential),
		createOp(jute.OpCreate2, "/a/s-", jute.FlagEphemeralSequential), // sees the earlier cversion
		createOp(jute.OpCreateContainer, "/c", jute.FlagContainer),
		createOp(jute.OpCreate2, "/c2", jute.FlagContainer),
		ttlOp("/t", jute.FlagPersistentTTL, 100),
		setDataOp("/a/b", "v", 0),
		setDataOp("/a/b", "w", 1), // sees the earlier setData
		checkOp("/a/b", 2),
		deleteOp("/old", 0),
		createOp(jute.OpCreate, "/old", jute.FlagPersistent), // re-create after delete
		deleteOp("/old", -1),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []resultShape{
		{jute.OpCreate, 0, "create", "/a"},
		{jute.OpCreate2, 0, "create2", "/a/b"}, // 3.9: create2 keeps its Stat (3.8 answered a plain create)
		{jute.OpCreate, 0, "create", "/a/s-0000000001"},
		{jute.OpCreate2, 0, "create2", "/a/s-0000000002"},
		{jute.OpCreate2, 0, "create2", "/c"},
		{jute.OpCreate2, 0, "create2", "/c2"},
		{jute.OpCreate2, 0, "create2", "/t"},
		{jute.OpSetData, 0, "setData", ""},
		{jute.OpSetData, 0, "setData", ""},
		{jute.OpCheck, 0, "", ""},
		{jute.OpDelete, 0, "", ""},
		{jute.OpCreate, 0, "create", "/old"},
		{jute.OpDelete, 0, "", ""},
	}
	if got := shapes(resp.Results); !reflect.DeepEqual(got, want) {
		t.Errorf("results\n got %+v\nwant %+v", got, want)
	}
	// The stats carry the multi's one zxid and hide container/TTL owners.
	for _, i := range []int{4, 5, 6} {
		st := resp.Results[i].Resp.(*jute.Create2Response).Stat
		if st.Czxid != 9 || st.EphemeralOwner != 0 {
			t.Errorf("result %d stat %+v", i, st)
		}
	}
	if st := resp.Results[8].Resp.(*jute.SetDataResponse).Stat; st.Version != 2 || st.Mzxid != 9 {
		t.Errorf("second setData stat %+v", st)
	}
	for p, n := range kv.nodes {
		if n.Mzxid > 2 && n.Mzxid != 9 {
			t.Errorf("%s mzxid %d, want the multi's zxid 9", p, n.Mzxid)
		}
	}
	if kv.nodes["/old"] != nil || kv.nodes["/a/b"] == nil || string(kv.nodes["/a/b"].Data) != "w" {
		t.Errorf("tree after multi wrong")
	}
	if KindOf(kv.nodes["/c2"].EphemeralOwner) != OwnerContainer {
		t.Errorf("/c2 is not a container")
	}
	if eph, _ := kv.Ephemerals(0x100); !reflect.DeepEqual(eph, []string{"/a/s-0000000002"}) {
		t.Errorf("ephemerals %v", eph)
	}
	a := kv.nodes["/a"]
	if a.NumChildren != 3 || a.Cversion != 3 {
		t.Errorf("/a numChildren %d cversion %d", a.NumChildren, a.Cversion)
	}
	root := kv.nodes["/"]
	// /zookeeper, /a, /c, /c2, /t; /old deleted and re-created and deleted.
	if root.NumChildren != 5 || root.Cversion != 6 {
		t.Errorf("root numChildren %d cversion %d", root.NumChildren, root.Cversion)
	}
	wantTrig := []Trigger{
		{Type: jute.EventNodeCreated, Path: "/a"}, {Type: jute.EventNodeChildrenChanged, Path: "/"},
		{Type: jute.EventNodeCreated, Path: "/a/b"}, {Type: jute.EventNodeChildrenChanged, Path: "/a"},
		{Type: jute.EventNodeCreated, Path: "/a/s-0000000001"}, {Type: jute.EventNodeChildrenChanged, Path: "/a"},
		{Type: jute.EventNodeCreated, Path: "/a/s-0000000002"}, {Type: jute.EventNodeChildrenChanged, Path: "/a"},
		{Type: jute.EventNodeCreated, Path: "/c"}, {Type: jute.EventNodeChildrenChanged, Path: "/"},
		{Type: jute.EventNodeCreated, Path: "/c2"}, {Type: jute.EventNodeChildrenChanged, Path: "/"},
		{Type: jute.EventNodeCreated, Path: "/t"}, {Type: jute.EventNodeChildrenChanged, Path: "/"},
		{Type: jute.EventNodeDataChanged, Path: "/a/b"},
		{Type: jute.EventNodeDataChanged, Path: "/a/b"},
		{Type: jute.EventNodeDeleted, Path: "/old"}, {Type: jute.EventNodeChildrenChanged, Path: "/"},
		{Type: jute.EventNodeCreated, Path: "/old"}, {Type: jute.EventNodeChildrenChanged, Path: "/"},
		{Type: jute.EventNodeDeleted, Path: "/old"}, {Type: jute.EventNodeChildrenChanged, Path: "/"},
	}
	if !reflect.DeepEqual(withoutACL(tx.Triggers), wantTrig) {
		t.Errorf("triggers\n got %v\nwant %v", tx.Triggers, wantTrig)
	}
	// The response encodes and decodes as the Java client reads it.
	var back jute.MultiResponse
	if err := jute.Unmarshal(jute.Marshal(resp), &back); err != nil {
		t.Fatalf("multi response does not decode: %v", err)
	}
	if got := shapes(back.Results); !reflect.DeepEqual(got, want) {
		t.Errorf("decoded results\n got %+v\nwant %+v", got, want)
	}
}

func TestMultiFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []jute.MultiOp
		want []jute.ErrCode
	}{
		{"first fails", []jute.MultiOp{
			createOp(jute.OpCreate, "/nope/x", 0),
			createOp(jute.OpCreate, "/b", 0),
		}, []jute.ErrCode{jute.ErrNoNode, jute.ErrRuntimeInconsistency}},
		{"middle fails", []jute.MultiOp{
			createOp(jute.OpCreate, "/a", 0),
			setDataOp("/a", "x", 7),
			deleteOp("/a", -1),
			checkOp("/a", -1),
		}, []jute.ErrCode{jute.ErrOK, jute.ErrBadVersion, jute.ErrRuntimeInconsistency, jute.ErrRuntimeInconsistency}},
		{"last fails", []jute.MultiOp{
			createOp(jute.OpCreate, "/a", 0),
			createOp(jute.OpCreate, "/a/b", jute.FlagEphemeral),
			createOp(jute.OpCreate, "/a", 0),
		}, []jute.ErrCode{jute.ErrOK, jute.ErrOK, jute.ErrNodeExists}},
		{"check fails", []jute.MultiOp{
			checkOp("/exists", 3),
			setDataOp("/exists", "x", -1),
		}, []jute.ErrCode{jute.ErrBadVersion, jute.ErrRuntimeInconsistency}},
		{"sees earlier deletes", []jute.MultiOp{
			deleteOp("/exists", -1),
			checkOp("/exists", -1),
		}, []jute.ErrCode{jute.ErrOK, jute.ErrNoNode}},
		{"ephemeral parent from earlier op", []jute.MultiOp{
			createOp(jute.OpCreate, "/e", jute.FlagEphemeral),
			createOp(jute.OpCreate, "/e/c", 0),
		}, []jute.ErrCode{jute.ErrOK, jute.ErrNoChildrenForEphemerals}},
		{"ttl without extended types", []jute.MultiOp{
			ttlOp("/t", jute.FlagPersistentTTL, 10),
		}, []jute.ErrCode{jute.ErrUnimplemented}},
		{"not empty", []jute.MultiOp{
			createOp(jute.OpCreate, "/exists/c", 0),
			deleteOp("/exists", -1),
		}, []jute.ErrCode{jute.ErrOK, jute.ErrNotEmpty}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := newTree()
			mustCreate(t, kv, 2, "/exists", jute.FlagPersistent)
			before := kv.snapshot()
			writes := kv.writes
			tx := txn(kv, 9)
			tx.Options.ExtendedTypes = false
			resp, err := tx.Multi(tc.ops)
			if err != nil {
				t.Fatalf("Multi: %v", err)
			}
			var got []jute.ErrCode
			for i, r := range resp.Results {
				if r.Type != jute.OpError {
					t.Errorf("result %d type %v, want error", i, r.Type)
				}
				got = append(got, r.Err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("codes %v, want %v", got, tc.want)
			}
			if kv.writes != writes || !sameNodes(kv.nodes, before) {
				t.Errorf("failed multi wrote to the store")
			}
			if eph, _ := kv.Ephemerals(0x100); len(eph) != 0 {
				t.Errorf("failed multi left ephemerals %v", eph)
			}
			if len(tx.Triggers) != 0 {
				t.Errorf("failed multi triggered %v", tx.Triggers)
			}
			// On the wire: header type -1 with each code, err in the body.
			var back jute.MultiResponse
			if err := jute.Unmarshal(jute.Marshal(resp), &back); err != nil {
				t.Fatalf("decode: %v", err)
			}
			for i, r := range back.Results {
				er, ok := r.Resp.(*jute.ErrorResponse)
				if r.Type != jute.OpError || !ok || er.Err != tc.want[i] {
					t.Errorf("decoded result %d = %+v", i, r)
				}
			}
		})
	}
}

// TestMultiKeepsEarlierTriggers: a multi on a Txn that already holds
// triggers appends to them on success and leaves them on failure.
func TestMultiKeepsEarlierTriggers(t *testing.T) {
	kv := newTree()
	tx := txn(kv, 3)
	tx.Triggers = []Trigger{{Type: jute.EventNodeDataChanged, Path: "/x"}}
	if _, err := tx.Multi([]jute.MultiOp{createOp(jute.OpCreate, "/nope/a", 0)}); err != nil {
		t.Fatal(err)
	}
	if len(tx.Triggers) != 1 {
		t.Errorf("failed multi changed triggers: %v", tx.Triggers)
	}
	if _, err := tx.Multi(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Multi([]jute.MultiOp{createOp(jute.OpCreate, "/a", 0)}); err != nil {
		t.Fatal(err)
	}
	if len(tx.Triggers) != 3 {
		t.Errorf("triggers %v", tx.Triggers)
	}
}

// TestApply covers the single-op dispatcher: create returns a path, create2
// and the container/TTL creates a path and Stat.
func TestApply(t *testing.T) {
	kv := newTree()
	tx := txn(kv, 4)
	for _, tc := range []struct {
		op   jute.OpCode
		req  jute.Record
		want string
	}{
		{jute.OpCreate, &jute.CreateRequest{Path: "/a", ACL: OpenACL}, "*jute.CreateResponse"},
		{jute.OpCreate2, &jute.CreateRequest{Path: "/b", ACL: OpenACL}, "*jute.Create2Response"},
		{jute.OpCreateContainer, &jute.CreateRequest{Path: "/c", ACL: OpenACL, Flags: jute.FlagContainer}, "*jute.Create2Response"},
		{jute.OpCreateTTL, &jute.CreateTTLRequest{Path: "/t", ACL: OpenACL, Flags: jute.FlagPersistentTTL, TTL: 5}, "*jute.Create2Response"},
		{jute.OpSetData, &jute.SetDataRequest{Path: "/a", Version: -1}, "*jute.SetDataResponse"},
		{jute.OpSetACL, &jute.SetACLRequest{Path: "/a", ACL: OpenACL, Version: -1}, "*jute.SetACLResponse"},
		{jute.OpCheck, &jute.CheckVersionRequest{Path: "/a", Version: 1}, "<nil>"},
		{jute.OpDelete, &jute.DeleteRequest{Path: "/a", Version: -1}, "<nil>"},
	} {
		resp, err := tx.Apply(tc.op, tc.req)
		if err != nil {
			t.Errorf("Apply(%v): %v", tc.op, err)
			continue
		}
		got := "<nil>"
		if resp != nil {
			got = reflect.TypeOf(resp).String()
		}
		if got != tc.want {
			t.Errorf("Apply(%v) = %s, want %s", tc.op, got, tc.want)
		}
	}
	if _, err := tx.Apply(jute.OpGetData, &jute.GetDataRequest{Path: "/b"}); code(err) != jute.ErrUnimplemented {
		t.Errorf("Apply(getData) = %v", err)
	}
	for _, op := range []jute.OpCode{jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL,
		jute.OpDelete, jute.OpSetData, jute.OpSetACL, jute.OpCheck, jute.OpMulti} {
		if !IsWrite(op) {
			t.Errorf("IsWrite(%v) = false", op)
		}
	}
	for _, op := range []jute.OpCode{jute.OpGetData, jute.OpExists, jute.OpGetChildren, jute.OpSync, jute.OpPing, jute.OpMultiRead, jute.OpError} {
		if IsWrite(op) {
			t.Errorf("IsWrite(%v) = true", op)
		}
	}
}
