package jute

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// unhex decodes hex, ignoring spaces and newlines.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.Join(strings.Fields(s), "")
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

var sampleStat = Stat{
	Czxid: 0x102, Mzxid: 0x203, Ctime: 1700000000123, Mtime: 1700000000456,
	Version: 3, Cversion: 4, Aversion: 5, EphemeralOwner: 0x100000960cd0000,
	DataLength: 6, NumChildren: 7, Pzxid: 0x304,
}

var sampleACL = []ACL{
	{Perms: PermAll, ID: ID{Scheme: "world", ID: "anyone"}},
	{Perms: PermRead | PermWrite, ID: ID{Scheme: "digest", ID: "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E="}},
}

// sampleRecords has one populated value of every record type.
func sampleRecords() []Record {
	return []Record{
		&Stat{},
		func() *Stat { s := sampleStat; return &s }(),
		&ID{Scheme: "ip", ID: "127.0.0.1"},
		&ACL{Perms: PermCreate | PermDelete | PermAdmin, ID: ID{Scheme: "world", ID: "anyone"}},
		&ConnectRequest{ProtocolVersion: 0, LastZxidSeen: 7, TimeOut: 30000, SessionID: 0x100000960cd0001,
			Passwd: bytes.Repeat([]byte{0xab}, 16), ReadOnly: true, HasReadOnly: true},
		&ConnectRequest{TimeOut: 4000, Passwd: make([]byte, 16)},
		&ConnectResponse{TimeOut: 4000, SessionID: 42, Passwd: []byte("0123456789abcdef"), HasReadOnly: true},
		&ConnectResponse{TimeOut: 4000, SessionID: 42, Passwd: []byte{}},
		&RequestHeader{Xid: 17, Type: OpGetChildren2},
		&ReplyHeader{Xid: XidNotification, Zxid: -1, Err: ErrOK},
		&ReplyHeader{Xid: 3, Zxid: 0x1234567890, Err: ErrNoNode},
		&CreateRequest{Path: "/a/b", Data: []byte("hello"), ACL: sampleACL, Flags: FlagEphemeralSequential},
		&CreateRequest{Path: "/n", Data: nil, ACL: nil, Flags: FlagPersistent},
		&CreateRequest{Path: "/e", Data: []byte{}, ACL: []ACL{}, Flags: FlagContainer},
		&CreateTTLRequest{Path: "/ttl", Data: []byte{1, 2}, ACL: sampleACL[:1], Flags: FlagPersistentTTL, TTL: 3600000},
		&CreateResponse{Path: "/a/b0000000001"},
		&Create2Response{Path: "/x", Stat: sampleStat},
		&DeleteRequest{Path: "/x", Version: -1},
		&ExistsRequest{Path: "/x", Watch: true},
		&ExistsResponse{Stat: sampleStat},
		&GetDataRequest{Path: "/x", Watch: false},
		&GetDataResponse{Data: []byte("v"), Stat: sampleStat},
		&GetDataResponse{Data: nil, Stat: sampleStat},
		&SetDataRequest{Path: "/x", Data: []byte("new"), Version: 9},
		&SetDataResponse{Stat: sampleStat},
		&GetACLRequest{Path: "/"},
		&GetACLResponse{ACL: sampleACL, Stat: sampleStat},
		&SetACLRequest{Path: "/x", ACL: sampleACL, Version: -1},
		&SetACLResponse{Stat: sampleStat},
		&GetChildrenRequest{Path: "/", Watch: true},
		&GetChildrenResponse{Children: []string{"zookeeper", "a", "ü"}},
		&GetChildrenResponse{Children: []string{}},
		&GetChildrenResponse{Children: nil},
		&GetChildren2Request{Path: "/a", Watch: true},
		&GetChildren2Response{Children: []string{"c1", "c2"}, Stat: sampleStat},
		&SyncRequest{Path: "/s"},
		&SyncResponse{Path: "/s"},
		&CheckVersionRequest{Path: "/c", Version: 2},
		&ReconfigRequest{JoiningServers: "server.4=h:2888:3888;2181", LeavingServers: "3", NewMembers: "", CurConfigID: -1},
		&MultiHeader{Type: OpCreate, Done: false, Err: -1},
		&MultiHeader{Type: -1, Done: true, Err: -1},
		&ErrorResponse{Err: ErrBadVersion},
		&AuthPacket{Type: 0, Scheme: "digest", Auth: []byte("alice:secret")},
		&SetWatches{RelativeZxid: 9, DataWatches: []string{"/a"}, ExistWatches: []string{}, ChildWatches: nil},
		&SetWatches2{RelativeZxid: 10, DataWatches: []string{"/a"}, ExistWatches: []string{"/b"}, ChildWatches: []string{"/c"},
			PersistentWatches: []string{"/d"}, PersistentRecursiveWatches: []string{"/e", "/f"}},
		&AddWatchRequest{Path: "/w", Mode: AddWatchModePersistentRecursive},
		&CheckWatchesRequest{Path: "/w", Type: WatcherTypeData},
		&RemoveWatchesRequest{Path: "/w", Type: WatcherTypeAny},
		&GetEphemeralsRequest{PrefixPath: "/app"},
		&GetEphemeralsResponse{Ephemerals: []string{"/app/e1", "/app/e2"}},
		&GetAllChildrenNumberRequest{Path: "/"},
		&GetAllChildrenNumberResponse{TotalNumber: 12},
		&ClientInfo{AuthScheme: "ip", User: "127.0.0.1"},
		&WhoAmIResponse{ClientInfo: []ClientInfo{{AuthScheme: "ip", User: "127.0.0.1"}, {AuthScheme: "digest", User: "alice"}}},
		&WhoAmIResponse{},
		&WatchFromRequest{Path: "/app", FromZxid: 0x100000007, Mode: WatchModeSubtree},
		&WatchFromResponse{WatchID: 3, Zxid: 0x10000002a},
		&CompactedResponse{OldestZxid: 17},
		&UnwatchFromRequest{WatchID: 3},
		&ResumableEvents{WatchID: 3, Zxid: 9, Events: []ResumableEvent{{EventNodeCreated, "/app/a"}, {EventNodeDataChanged, "/app"}}},
		&WatcherEvent{Type: EventNodeDataChanged, State: StateSyncConnected, Path: "/x"},
		&GetSASLRequest{Token: []byte{1, 2, 3}},
		&SetSASLResponse{Token: nil},
		&DeleteContainerRequest{Path: "/container"},
		&Empty{},
		&MultiRequest{Ops: []MultiOp{
			{Type: OpCreate, Req: &CreateRequest{Path: "/m1", Data: []byte("d"), ACL: sampleACL[:1], Flags: 0}},
			{Type: OpCreate2, Req: &CreateRequest{Path: "/m2", Data: nil, ACL: sampleACL[:1], Flags: 1}},
			{Type: OpCreateContainer, Req: &CreateRequest{Path: "/m3", Data: nil, ACL: sampleACL[:1], Flags: 4}},
			{Type: OpCreateTTL, Req: &CreateTTLRequest{Path: "/m4", ACL: sampleACL[:1], Flags: 5, TTL: 10}},
			{Type: OpSetData, Req: &SetDataRequest{Path: "/m1", Data: []byte("e"), Version: 0}},
			{Type: OpCheck, Req: &CheckVersionRequest{Path: "/m1", Version: 1}},
			{Type: OpDelete, Req: &DeleteRequest{Path: "/m1", Version: -1}},
		}},
		&MultiRequest{Ops: []MultiOp{
			{Type: OpGetData, Req: &GetDataRequest{Path: "/a"}},
			{Type: OpGetChildren, Req: &GetChildrenRequest{Path: "/"}},
		}},
		&MultiRequest{},
		&MultiResponse{Results: []MultiResult{
			{Type: OpCreate, Resp: &CreateResponse{Path: "/m1"}},
			{Type: OpCreate2, Resp: &Create2Response{Path: "/m2", Stat: sampleStat}},
			{Type: OpCreateContainer, Resp: &Create2Response{Path: "/m3", Stat: sampleStat}},
			{Type: OpCreateTTL, Resp: &Create2Response{Path: "/m4", Stat: sampleStat}},
			{Type: OpSetData, Resp: &SetDataResponse{Stat: sampleStat}},
			{Type: OpCheck},
			{Type: OpDelete},
			{Type: OpGetData, Resp: &GetDataResponse{Data: []byte("x"), Stat: sampleStat}},
			{Type: OpGetChildren, Resp: &GetChildrenResponse{Children: []string{"a"}}},
			{Type: OpError, Err: ErrNoNode, Resp: &ErrorResponse{Err: ErrNoNode}},
		}},
		&MultiResponse{},
	}
}

func TestRoundTripEveryRecord(t *testing.T) {
	covered := map[string]bool{}
	for _, rec := range sampleRecords() {
		typ := reflect.TypeOf(rec)
		covered[typ.String()] = true
		b := Marshal(rec)
		fresh := reflect.New(typ.Elem()).Interface().(Record)
		r := NewReader(b)
		fresh.Decode(r)
		if err := r.Err(); err != nil {
			t.Errorf("%T: decode: %v", rec, err)
			continue
		}
		if r.Remaining() != 0 {
			t.Errorf("%T: %d bytes left after decode", rec, r.Remaining())
		}
		if r.lossy {
			t.Errorf("%T: our own encoding decoded as lossy", rec)
		}
		if !reflect.DeepEqual(rec, fresh) {
			t.Errorf("%T: round trip\n got %+v\nwant %+v", rec, fresh, rec)
		}
		if b2 := Marshal(fresh); !bytes.Equal(b, b2) {
			t.Errorf("%T: re-encoding differs:\n%x\n%x", rec, b, b2)
		}
		// Every strict prefix must fail (except records whose tail is
		// optional or which consume the rest of the input).
		switch rec.(type) {
		case *Empty, *DeleteContainerRequest:
			continue
		}
		for n := 0; n < len(b); n++ {
			if _, ok := rec.(*ConnectRequest); ok && n == len(b)-1 && rec.(*ConnectRequest).HasReadOnly {
				continue
			}
			if _, ok := rec.(*ConnectResponse); ok && n == len(b)-1 && rec.(*ConnectResponse).HasReadOnly {
				continue
			}
			fresh := reflect.New(typ.Elem()).Interface().(Record)
			err := Unmarshal(b[:n], fresh)
			if !errors.Is(err, ErrShortBuffer) {
				t.Errorf("%T: prefix %d/%d: err = %v, want ErrShortBuffer", rec, n, len(b), err)
				break
			}
		}
	}
	// Every record type reachable from the table must be covered above.
	for _, op := range AllOpCodes {
		for _, f := range []func(OpCode) (Record, bool){NewRequest, NewResponse} {
			rec, _ := f(op)
			if name := reflect.TypeOf(rec).String(); !covered[name] {
				t.Errorf("no round-trip sample for %s (op %v)", name, op)
			}
		}
	}
}

func TestStatSize(t *testing.T) {
	if n := len(Marshal(&Stat{})); n != statSize {
		t.Fatalf("Stat encodes to %d bytes, want %d", n, statSize)
	}
}

func TestPrimitiveEncoding(t *testing.T) {
	w := NewWriter(0)
	w.Int(-2)
	w.Long(0x0102030405060708)
	w.Bool(true)
	w.Bool(false)
	w.Buffer(nil)
	w.Buffer([]byte{})
	w.Buffer([]byte{0xaa})
	w.String("")
	w.String("hé")
	w.StringVector(nil)
	w.StringVector([]string{})
	w.StringVector([]string{"a"})
	w.ACLs(nil)
	w.Raw([]byte{0xff})
	want := unhex(t, `fffffffe 0102030405060708 01 00 ffffffff 00000000 00000001aa
		00000000 0000000368c3a9 ffffffff 00000000 00000001 0000000161 ffffffff ff`)
	if !bytes.Equal(w.Bytes(), want) {
		t.Fatalf("encoding\n got %x\nwant %x", w.Bytes(), want)
	}
	if w.Len() != len(want) {
		t.Fatal("Len")
	}
	r := NewReader(want)
	if r.Int() != -2 || r.Long() != 0x0102030405060708 || !r.Bool() || r.Bool() {
		t.Fatal("numbers")
	}
	if b := r.Buffer(); b != nil {
		t.Fatal("null buffer")
	}
	if b := r.Buffer(); b == nil || len(b) != 0 {
		t.Fatal("empty buffer")
	}
	if b := r.Buffer(); !bytes.Equal(b, []byte{0xaa}) {
		t.Fatal("buffer")
	}
	if r.String() != "" || r.String() != "hé" {
		t.Fatal("strings")
	}
	if v := r.StringVector(); v != nil {
		t.Fatal("null vector")
	}
	if v := r.StringVector(); v == nil || len(v) != 0 {
		t.Fatal("empty vector")
	}
	if v := r.StringVector(); !reflect.DeepEqual(v, []string{"a"}) {
		t.Fatal("vector")
	}
	if a := r.ACLs(); a != nil {
		t.Fatal("null acl vector")
	}
	if r.Offset() != len(want)-1 || r.Remaining() != 1 {
		t.Fatal("offset")
	}
	if rest := r.Rest(); !bytes.Equal(rest, []byte{0xff}) || r.Remaining() != 0 {
		t.Fatal("rest")
	}
	if r.Err() != nil || r.lossy {
		t.Fatal(r.Err(), r.lossy)
	}
	w.Reset()
	if w.Len() != 0 {
		t.Fatal("Reset")
	}
}

func TestNullUstringDecodesEmpty(t *testing.T) {
	var c CreateResponse
	r := NewReader(unhex(t, "ffffffff"))
	c.Decode(r)
	if r.Err() != nil || c.Path != "" || !r.lossy {
		t.Fatalf("null ustring: %v %q lossy=%v", r.Err(), c.Path, r.lossy)
	}
	if got := Marshal(&c); !bytes.Equal(got, unhex(t, "00000000")) {
		t.Fatalf("re-encoded as %x", got)
	}
}

func TestReaderErrors(t *testing.T) {
	cases := []struct {
		name string
		in   string
		read func(r *Reader)
		want error
	}{
		{"short int", "000000", func(r *Reader) { r.Int() }, ErrShortBuffer},
		{"short long", "00000000000000", func(r *Reader) { r.Long() }, ErrShortBuffer},
		{"short bool", "", func(r *Reader) { r.Bool() }, ErrShortBuffer},
		{"buffer -2", "fffffffe", func(r *Reader) { r.Buffer() }, ErrBadLength},
		{"buffer too long", "00000002 aa", func(r *Reader) { r.Buffer() }, ErrShortBuffer},
		{"huge buffer", "7fffffff", func(r *Reader) { r.Buffer() }, ErrShortBuffer},
		{"string min int", "80000000", func(r *Reader) { _ = r.String() }, ErrBadLength},
		{"string too long", "00000005 6162", func(r *Reader) { _ = r.String() }, ErrShortBuffer},
		{"vector -5", "fffffffb", func(r *Reader) { r.StringVector() }, ErrBadLength},
		// Count 2 needs at least 8 bytes; only 7 remain.
		{"vector count vs remaining", "00000002 00000000 000000", func(r *Reader) { r.StringVector() }, ErrShortBuffer},
		{"huge vector", "7fffffff 00000000", func(r *Reader) { r.StringVector() }, ErrShortBuffer},
		{"huge acl vector", "01000000 00000000 00000000 00000000", func(r *Reader) { r.ACLs() }, ErrShortBuffer},
		{"huge whoami", "01000000 00000000 00000000", func(r *Reader) { (&WhoAmIResponse{}).Decode(r) }, ErrShortBuffer},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewReader(unhex(t, c.in))
			c.read(r)
			if !errors.Is(r.Err(), c.want) {
				t.Fatalf("err = %v, want %v", r.Err(), c.want)
			}
			// Sticky: later reads return zero values and keep the first error.
			first := r.Err()
			if r.Int() != 0 || r.Long() != 0 || r.Bool() || r.Buffer() != nil || r.String() != "" ||
				r.StringVector() != nil || r.ACLs() != nil || r.Rest() != nil {
				t.Fatal("reads after an error must return zero values")
			}
			if r.Err() != first {
				t.Fatal("error not sticky")
			}
		})
	}
}

func TestHugeCountsDoNotAllocate(t *testing.T) {
	in := unhex(t, "7fffffff 00000000 00000000")
	allocs := testing.AllocsPerRun(100, func() {
		var g GetChildrenResponse
		if Unmarshal(in, &g) == nil {
			t.Fatal("expected an error")
		}
	})
	// Only the error value may be allocated (and the pooled Reader, which
	// the race detector's sync.Pool drops at random), never a
	// 2^31-element slice.
	if allocs > 8 {
		t.Fatalf("%v allocations for a bogus count", allocs)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		var g GetChildrenResponse
		_ = Unmarshal(in, &g)
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Fatalf("%d bytes allocated by 100 decodes of a bogus count", d)
	}
}

func TestUnmarshalAllowsTrailingBytes(t *testing.T) {
	b := append(Marshal(&DeleteRequest{Path: "/a", Version: 1}), 1, 2, 3)
	var d DeleteRequest
	if err := Unmarshal(b, &d); err != nil || d.Path != "/a" || d.Version != 1 {
		t.Fatalf("%v %+v", err, d)
	}
}

func TestAppendFrame(t *testing.T) {
	dst := []byte{0xee}
	got := AppendFrame(dst, &RequestHeader{Xid: 1, Type: OpExists}, &ExistsRequest{Path: "/a", Watch: true})
	want := unhex(t, "ee 0000000f 00000001 00000003 00000002 2f61 01")
	if !bytes.Equal(got, want) {
		t.Fatalf("got %x want %x", got, want)
	}
	if got := AppendFrame(nil, &RequestHeader{Xid: XidPing, Type: OpPing}); !bytes.Equal(got, unhex(t, "00000008 fffffffe 0000000b")) {
		t.Fatalf("ping frame %x", got)
	}
	if got := AppendFrame(nil); !bytes.Equal(got, unhex(t, "00000000")) {
		t.Fatalf("empty frame %x", got)
	}
}

// ConnectRequest / ConnectResponse with and without the trailing readOnly
// byte (zookeeper-facts.md section 2.1: 44/45-byte requests, 36/37-byte
// responses).
func TestConnectReadOnlyByte(t *testing.T) {
	passwd := make([]byte, 16)
	old := ConnectRequest{ProtocolVersion: 0, LastZxidSeen: 0, TimeOut: 30000, SessionID: 0, Passwd: passwd}
	b := Marshal(&old)
	if len(b) != 44 {
		t.Fatalf("old-client ConnectRequest is %d bytes, want 44", len(b))
	}
	var got ConnectRequest
	if err := Unmarshal(b, &got); err != nil || got.HasReadOnly || got.ReadOnly {
		t.Fatalf("44-byte request: %v %+v", err, got)
	}
	nw := old
	nw.HasReadOnly, nw.ReadOnly = true, true
	b = Marshal(&nw)
	if len(b) != 45 || b[44] != 1 {
		t.Fatalf("new-client ConnectRequest is %d bytes (%x), want 45 ending 01", len(b), b)
	}
	got = ConnectRequest{}
	if err := Unmarshal(b, &got); err != nil || !got.HasReadOnly || !got.ReadOnly || !reflect.DeepEqual(got, nw) {
		t.Fatalf("45-byte request: %v %+v", err, got)
	}

	resp := ConnectResponse{TimeOut: 4000, SessionID: 0x100000960cd0000, Passwd: bytes.Repeat([]byte{7}, 16)}
	b = Marshal(&resp)
	if len(b) != 36 {
		t.Fatalf("old-client ConnectResponse is %d bytes, want 36", len(b))
	}
	var gr ConnectResponse
	if err := Unmarshal(b, &gr); err != nil || gr.HasReadOnly || !reflect.DeepEqual(gr, resp) {
		t.Fatalf("36-byte response: %v %+v", err, gr)
	}
	resp.HasReadOnly = true
	b = Marshal(&resp)
	if len(b) != 37 || b[36] != 0 {
		t.Fatalf("ConnectResponse is %d bytes (%x), want 37 ending 00", len(b), b)
	}
	gr = ConnectResponse{}
	if err := Unmarshal(b, &gr); err != nil || !reflect.DeepEqual(gr, resp) {
		t.Fatalf("37-byte response: %v %+v", err, gr)
	}
}

// The multi encodings of zookeeper-facts.md section 2.3.
func TestMultiResponseSuccessBytes(t *testing.T) {
	// create /a then check /a: "00000001 00 00000000" + path ... "0000000d 00 00000000" ...
	want := unhex(t, `00000001 00 00000000 00000002 2f61
		0000000d 00 00000000
		ffffffff 01 ffffffff`)
	m := MultiResponse{Results: []MultiResult{
		{Type: OpCreate, Err: ErrOK, Resp: &CreateResponse{Path: "/a"}},
		{Type: OpCheck, Err: ErrOK},
	}}
	if got := Marshal(&m); !bytes.Equal(got, want) {
		t.Fatalf("got %x\nwant %x", got, want)
	}
	var d MultiResponse
	if err := Unmarshal(want, &d); err != nil || !reflect.DeepEqual(d, m) {
		t.Fatalf("%v %+v", err, d)
	}
}

func TestMultiResponseFailureBytes(t *testing.T) {
	// Op 1 would have succeeded (err 0), op 2 failed BADVERSION, op 3 was
	// not run (RUNTIMEINCONSISTENCY). Every result has type -1.
	want := unhex(t, `ffffffff 00 00000000 00000000
		ffffffff 00 ffffff99 ffffff99
		ffffffff 00 fffffffe fffffffe
		ffffffff 01 ffffffff`)
	m := MultiResponse{Results: []MultiResult{
		{Type: OpError, Err: ErrOK, Resp: &ErrorResponse{Err: ErrOK}},
		{Type: OpError, Err: ErrBadVersion, Resp: &ErrorResponse{Err: ErrBadVersion}},
		{Type: OpError, Err: ErrRuntimeInconsistency, Resp: &ErrorResponse{Err: ErrRuntimeInconsistency}},
	}}
	if got := Marshal(&m); !bytes.Equal(got, want) {
		t.Fatalf("got %x\nwant %x", got, want)
	}
	// Encode writes the ErrorResponse body from Err even when Resp is nil.
	m2 := MultiResponse{Results: []MultiResult{{Type: OpError}, {Type: OpError, Err: ErrBadVersion}, {Type: OpError, Err: ErrRuntimeInconsistency}}}
	if got := Marshal(&m2); !bytes.Equal(got, want) {
		t.Fatalf("nil Resp: got %x\nwant %x", got, want)
	}
	var d MultiResponse
	if err := Unmarshal(want, &d); err != nil || !reflect.DeepEqual(d, m) {
		t.Fatalf("%v %+v", err, d)
	}
}

func TestMultiRequestBytes(t *testing.T) {
	want := unhex(t, `00000001 00 ffffffff 00000002 2f61 ffffffff ffffffff 00000000
		0000000d 00 ffffffff 00000002 2f61 00000005
		00000002 00 ffffffff 00000002 2f61 ffffffff
		ffffffff 01 ffffffff`)
	m := MultiRequest{Ops: []MultiOp{
		{Type: OpCreate, Req: &CreateRequest{Path: "/a"}},
		{Type: OpCheck, Req: &CheckVersionRequest{Path: "/a", Version: 5}},
		{Type: OpDelete, Req: &DeleteRequest{Path: "/a", Version: -1}},
	}}
	if got := Marshal(&m); !bytes.Equal(got, want) {
		t.Fatalf("got %x\nwant %x", got, want)
	}
	var d MultiRequest
	if err := Unmarshal(want, &d); err != nil || !reflect.DeepEqual(d, m) {
		t.Fatalf("%v %+v", err, d)
	}
}

func TestMultiBadOps(t *testing.T) {
	for _, op := range []OpCode{OpExists, OpPing, OpMulti, OpDeleteContainer, OpError, 10, 999} {
		b := append(Marshal(&MultiHeader{Type: op, Err: -1}), make([]byte, 32)...)
		var m MultiRequest
		if err := Unmarshal(b, &m); !errors.Is(err, ErrBadMultiOp) || m.Ops != nil {
			t.Errorf("request op %v: err %v ops %v", op, err, m.Ops)
		}
	}
	for _, op := range []OpCode{OpExists, OpPing, OpMulti, OpSync, 10} {
		b := append(Marshal(&MultiHeader{Type: op, Err: 0}), make([]byte, 32)...)
		var m MultiResponse
		if err := Unmarshal(b, &m); !errors.Is(err, ErrBadMultiOp) || m.Results != nil {
			t.Errorf("response op %v: err %v", op, err)
		}
	}
	// Missing terminator.
	b := Marshal(&MultiRequest{Ops: []MultiOp{{Type: OpDelete, Req: &DeleteRequest{Path: "/a"}}}})
	var m MultiRequest
	if err := Unmarshal(b[:len(b)-9], &m); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("no terminator: %v", err)
	}
}

func TestReadFrame(t *testing.T) {
	stream := AppendFrame(nil, &RequestHeader{Xid: 1, Type: OpPing})
	stream = append(stream, 0, 0, 0, 0) // an empty frame
	stream = AppendFrame(stream, &RequestHeader{Xid: 2, Type: OpGetData}, &GetDataRequest{Path: "/a"})
	r := bytes.NewReader(stream)
	buf := make([]byte, 0, 64)
	var got [][]byte
	for {
		b, err := ReadFrame(r, buf, 1024)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if cap(b) != 64 {
			t.Errorf("frame of %d bytes not read into the 64-byte buffer", len(b))
		}
		got = append(got, append([]byte(nil), b...))
	}
	if len(got) != 3 || len(got[0]) != 8 || len(got[1]) != 0 || len(got[2]) != 8+4+2+1 {
		t.Fatalf("frames %x", got)
	}
	for _, c := range []struct {
		in   []byte
		want error
	}{
		{[]byte{0xff, 0xff, 0xff, 0xff}, ErrFrameLength}, // negative
		{[]byte{0, 0, 4, 1}, ErrFrameLength},             // 1025 > limit
		{[]byte{0, 0, 0, 5, 1, 2}, io.ErrUnexpectedEOF},  // body cut short
		{[]byte{0, 0, 0, 5}, io.ErrUnexpectedEOF},        // no body at all
		{[]byte{0, 0}, io.ErrUnexpectedEOF},              // prefix cut short
		{nil, io.EOF},                                    // between frames
	} {
		if _, err := ReadFrame(bytes.NewReader(c.in), nil, 1024); !errors.Is(err, c.want) {
			t.Errorf("ReadFrame(%x) = %v, want %v", c.in, err, c.want)
		}
	}
	if n, err := FrameLength([4]byte{0, 0, 4, 0}, 1024); n != 1024 || err != nil {
		t.Errorf("FrameLength(1024) = %d, %v", n, err)
	}
}
