package conformance

import (
	"errors"
	"testing"

	"github.com/go-zookeeper/zk"
)

// create, create2, create modes, sequential names and create errors
// (zookeeper-facts.md §1.5, §2.2, §3.1, §3.3).

func TestCreateModes(t *testing.T) {
	base := uniquePath(t)
	c, _ := connect(t)
	sid := c.SessionID()

	for _, tc := range []struct {
		name      string
		flags     int32
		wantOwner int64
	}{
		{"persistent", zk.FlagPersistent, 0},
		{"ephemeral", zk.FlagEphemeral, sid},
	} {
		p := base + "/" + tc.name
		got := mustCreate(t, c, p, []byte("data-"+tc.name), tc.flags)
		if got != p {
			t.Errorf("create %s returned %q, want the same path", p, got)
		}
		data, st, err := c.Get(p)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != "data-"+tc.name || st.EphemeralOwner != tc.wantOwner || st.DataLength != int32(len(data)) {
			t.Errorf("%s: data %q ephemeralOwner %#x dataLength %d; want %q, %#x, %d",
				tc.name, data, st.EphemeralOwner, st.DataLength, "data-"+tc.name, tc.wantOwner, len(data))
		}
	}

	// Sequential modes append a 10-digit counter.
	ps := mustCreate(t, c, base+"/pseq-", nil, zk.FlagSequence)
	es := mustCreate(t, c, base+"/eseq-", nil, zk.FlagEphemeralSequential)
	if ps != base+"/pseq-0000000002" || es != base+"/eseq-0000000003" {
		t.Errorf("sequential creates returned %q and %q, want %s/pseq-0000000002 and %s/eseq-0000000003", ps, es, base, base)
	}
	if st := mustStat(t, c, ps); st.EphemeralOwner != 0 {
		t.Errorf("persistent-sequential ephemeralOwner = %#x, want 0", st.EphemeralOwner)
	}
	if st := mustStat(t, c, es); st.EphemeralOwner != sid {
		t.Errorf("ephemeral-sequential ephemeralOwner = %#x, want %#x", st.EphemeralOwner, sid)
	}

	// Containers are created with op 19, and clients never see the container
	// marker in ephemeralOwner.
	cp, err := c.CreateContainer(base+"/container", nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
	if err != nil || cp != base+"/container" {
		t.Fatalf("createContainer = %q, %v", cp, err)
	}
	if st := mustStat(t, c, cp); st.EphemeralOwner != 0 {
		t.Errorf("container ephemeralOwner = %#x, want 0 (hidden from clients)", st.EphemeralOwner)
	}

	// The ephemerals go with the session; the persistent nodes stay.
	c.Close()
	for _, p := range []string{base + "/ephemeral", es} {
		mustNotExist(t, admin, p)
	}
	for _, p := range []string{base + "/persistent", ps, cp} {
		mustStat(t, admin, p)
	}
}

func TestCreateSequentialNumbering(t *testing.T) {
	// The suffix is the parent's count of child creates ever made (of any
	// kind), taken before the create: deletes do not lower it, failed creates
	// do not raise it, and each parent has its own.
	base := uniquePath(t)
	c, _ := connect(t)
	steps := []struct {
		path  string
		flags int32
		want  string
	}{
		{base + "/a", zk.FlagPersistent, base + "/a"},                      // count 0 -> 1
		{base + "/b-", zk.FlagSequence, base + "/b-0000000001"},            // 1 -> 2
		{base + "/c-", zk.FlagEphemeralSequential, base + "/c-0000000002"}, // 2 -> 3
		{base + "/a/x-", zk.FlagSequence, base + "/a/x-0000000000"},        // another parent
		{base + "/", zk.FlagSequence, base + "/0000000003"},                // name is only the suffix
		{base + "/d", zk.FlagEphemeral, base + "/d"},                       // 4 -> 5
		{base + "/e-", zk.FlagSequence, base + "/e-0000000005"},
	}
	for _, s := range steps {
		got := mustCreate(t, c, s.path, nil, s.flags)
		if got != s.want {
			t.Fatalf("create %s (flags %d) = %q, want %q", s.path, s.flags, got, s.want)
		}
	}
	// Deletes do not reduce the counter.
	for _, p := range []string{base + "/b-0000000001", base + "/d", base + "/0000000003"} {
		if err := c.Delete(p, -1); err != nil {
			t.Fatal(err)
		}
	}
	// A failed create does not consume a number.
	if _, err := c.Create(base+"/a", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("create existing: %v, want NODEEXISTS", err)
	}
	if got := mustCreate(t, c, base+"/f-", nil, zk.FlagSequence); got != base+"/f-0000000006" {
		t.Fatalf("after 6 creates and 3 deletes: %q, want %s/f-0000000006", got, base)
	}
	// Client-visible cversion counts creates and deletes: 7 + 3.
	if st := mustStat(t, c, base); st.Cversion != 10 || st.NumChildren != 4 {
		t.Fatalf("parent cversion %d numChildren %d, want 10 and 4", st.Cversion, st.NumChildren)
	}
}

func TestCreate2ReturnsStat(t *testing.T) {
	base := uniquePath(t)
	c := rawSession(t, 10000)

	rep, p, st := c.create2(base+"/n", []byte("hello"), flagPersistent)
	if rep.Err != errOK || p != base+"/n" {
		t.Fatalf("create2 = %v %q", rep, p)
	}
	want := zk.Stat{Czxid: rep.Zxid, Mzxid: rep.Zxid, Pzxid: rep.Zxid, Ctime: st.Ctime, Mtime: st.Ctime, DataLength: 5}
	if st != want || st.Ctime == 0 {
		t.Fatalf("create2 Stat = %+v, want %+v with non-zero ctime", st, want)
	}
	// The Stat is the node's.
	_, _, got := c.getData(base+"/n", false)
	if got != st {
		t.Fatalf("getData Stat = %+v, want the create2 Stat %+v", got, st)
	}

	// Ephemeral via create2: owner is the session.
	rep, _, st = c.create2(base+"/e", nil, flagEphemeralSequential)
	if rep.Err != errOK || st.EphemeralOwner != c.SessionID || st.DataLength != 0 {
		t.Fatalf("create2 ephemeral-sequential = %v %+v, want owner %#x", rep, st, c.SessionID)
	}

	// Plain create (op 1) answers with the path only.
	rep = c.callOK(opCreate, createReq(base+"/plain", nil, 0))
	r := &jr{b: rep.Body}
	if path := r.str(); path != base+"/plain" || r.end() != nil {
		t.Fatalf("create reply body = % x, want CreateResponse{%q}", rep.Body, base+"/plain")
	}

	// An error reply is the 16-byte header alone.
	rep = c.call(opCreate2, createReq(base+"/n", nil, 0))
	if rep.Err != errNodeExists || rep.Len != 16 {
		t.Fatalf("create2 existing = %v (%d bytes), want NODEEXISTS with a 16-byte frame", rep, rep.Len)
	}
}

func TestCreateErrors(t *testing.T) {
	base := uniquePath(t)
	c, _ := connect(t)
	mustCreate(t, c, base+"/exists", []byte("orig"), 0)
	eph := mustCreate(t, c, base+"/eph", nil, zk.FlagEphemeral)

	for _, tc := range []struct {
		name  string
		path  string
		flags int32
		want  error
	}{
		{"NodeExists", base + "/exists", 0, zk.ErrNodeExists},
		{"NodeExistsEphemeral", base + "/exists", zk.FlagEphemeral, zk.ErrNodeExists},
		{"NoParent", base + "/missing/child", 0, zk.ErrNoNode},
		{"NoParentSequential", base + "/missing/child-", zk.FlagSequence, zk.ErrNoNode},
		{"ChildOfEphemeral", eph + "/child", 0, zk.ErrNoChildrenForEphemerals},
		{"EphemeralChildOfEphemeral", eph + "/child", zk.FlagEphemeral, zk.ErrNoChildrenForEphemerals},
		{"SequentialChildOfEphemeral", eph + "/child-", zk.FlagSequence, zk.ErrNoChildrenForEphemerals},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Create(tc.path, []byte("new"), tc.flags, zk.WorldACL(zk.PermAll))
			if !errors.Is(err, tc.want) {
				t.Fatalf("create %s (flags %d): %v, want %v", tc.path, tc.flags, err, tc.want)
			}
		})
	}
	// A failed create changes nothing.
	data, st, err := c.Get(base + "/exists")
	if err != nil || string(data) != "orig" || st.Version != 0 {
		t.Fatalf("after failed creates: %q version %d err %v", data, st.Version, err)
	}
	if st := mustStat(t, c, eph); st.NumChildren != 0 {
		t.Fatalf("ephemeral has %d children", st.NumChildren)
	}
	if st := mustStat(t, c, base); st.NumChildren != 2 {
		t.Fatalf("base has %d children, want 2", st.NumChildren)
	}

	t.Run("EmptyACL", func(t *testing.T) {
		rc := rawSession(t, 10000)
		body := new(jw).str(base + "/noacl").buf(nil).acl(nil).i32(0).bytes()
		if rep := rc.call(opCreate, body); rep.Err != -114 { // INVALIDACL
			t.Fatalf("create with an empty ACL: %v, want INVALIDACL(-114)", rep)
		}
	})
	t.Run("BadFlags", func(t *testing.T) {
		rc := rawSession(t, 10000)
		if rep := rc.call(opCreate, createReq(base+"/badflags", nil, 99)); rep.Err != errBadArguments {
			t.Fatalf("create with flags 99: %v, want BADARGUMENTS", rep)
		}
	})
}

// TestInvalidPaths sends malformed paths over a raw socket (go-zookeeper
// refuses to send most of them) and checks ZooKeeper's exact answer per op.
//
// ZooKeeper 3.8 checks the parent of a create before it validates the whole
// path, so a malformed segment before the last one ("//x", "/./x", "/../x")
// gives NONODE for create (no such parent), while setData validates first and
// always gives BADARGUMENTS. delete only rejects paths without a '/' and
// paths with NUL; otherwise the node is just not found. Reads do no path
// validation at all, except that exists rejects NUL.
func TestInvalidPaths(t *testing.T) {
	base := uniquePath(t)
	c := rawSession(t, 10000)
	c.callOK(opCreate, createReq(base+"/a", []byte("keep"), 0))

	const (
		bad  = errBadArguments
		none = errNoNode
	)
	for _, tc := range []struct {
		name                                     string
		path                                     string
		create, setData, delete, exists, getData int32
	}{
		{"NoLeadingSlash", "a", bad, bad, bad, none, none},
		{"TrailingSlash", base + "/a/", bad, bad, none, none, none},
		{"DotSegment", base + "/.", bad, bad, none, none, none},
		{"DotDotSegment", base + "/..", bad, bad, none, none, none},
		{"DotSegmentUnderNode", base + "/a/.", bad, bad, none, none, none},
		{"EmptySegmentInside", base + "//x", none, bad, none, none, none},
		{"DotSegmentInside", base + "/./x", none, bad, none, none, none},
		{"DotDotSegmentInside", base + "/../x", none, bad, none, none, none},
		{"DoubleSlashAtEnd", base + "//", none, bad, none, none, none},
		{"NUL", base + "/x\x00y", bad, bad, bad, bad, none},
		{"ControlChar", base + "/x\x01y", bad, bad, none, none, none},
		{"DEL", base + "/x\x7fy", bad, bad, none, none, none},
		{"C1Control", base + "/x\u0085y", bad, bad, none, none, none},
		{"PrivateUse", base + "/x\uf000", bad, bad, none, none, none},
		{"Specials", base + "/x\ufff0", bad, bad, none, none, none},
		{"NonBMP", base + "/x\U0001F600", bad, bad, none, none, none},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(op string, rep reply, want int32) {
				t.Helper()
				if rep.Err != want || rep.Len != 16 {
					t.Errorf("%s %q: %v, want %s (header only)", op, tc.path, rep, errName(want))
				}
			}
			check("create", c.call(opCreate, createReq(tc.path, nil, 0)), tc.create)
			check("setData", c.call(opSetData, setDataReq(tc.path, nil, -1)), tc.setData)
			check("delete", c.call(opDelete, deleteReq(tc.path, -1)), tc.delete)
			check("exists", c.call(opExists, pathWatchReq(tc.path, false)), tc.exists)
			check("getData", c.call(opGetData, pathWatchReq(tc.path, false)), tc.getData)
		})
	}

	// Nothing was created or changed.
	_, data, st := c.getData(base+"/a", false)
	if string(data) != "keep" || st.Version != 0 || st.NumChildren != 0 {
		t.Fatalf("%s/a = %q version %d children %d after invalid requests", base, data, st.Version, st.NumChildren)
	}
	if _, _, st := c.getData(base, false); st.NumChildren != 1 {
		t.Fatalf("%s has %d children after invalid requests, want 1", base, st.NumChildren)
	}

	// A sequential create may end in '/' (the name is then the suffix alone)
	// or in a dot segment: the suffix makes the path valid.
	for _, tc := range []struct{ path, want string }{
		{base + "/a/", base + "/a/0000000000"},
		{base + "/.", base + "/.0000000001"},
	} {
		rep := c.callOK(opCreate, createReq(tc.path, nil, flagPersistentSequential))
		if got := (&jr{b: rep.Body}).str(); got != tc.want {
			t.Errorf("sequential create %q = %q, want %q", tc.path, got, tc.want)
		}
	}
}
