package server

import (
	"reflect"
	"testing"

	"github.com/zkraft/zkraft/jute"
)

// TestOpTable: every op code jute knows has an entry, and only those; each
// entry is a write (as jute says), a read with a handler taking jute's
// request record, answered by the connection, or explicitly UNIMPLEMENTED.
func TestOpTable(t *testing.T) {
	for _, op := range jute.AllOpCodes {
		if _, ok := opTable[op]; !ok {
			t.Errorf("op %v (%d) has no entry in the server's op table", op, op)
		}
	}
	for op, e := range opTable {
		spec, ok := jute.Op(op)
		if !ok {
			t.Errorf("the op table has an entry for %d, which jute does not know", op)
			continue
		}
		switch e.kind {
		case opUnset:
			t.Errorf("%v: no kind: neither a write, a read with a handler, the connection's nor unimplemented", op)
		case opRead:
			req, _ := jute.NewRequest(op)
			if got, want := e.read.req, reflect.TypeOf(req); got != want {
				t.Errorf("%v: the read handler takes %v, jute's request record is %v", op, got, want)
			}
		}
		if (e.kind == opWrite) != spec.Write {
			t.Errorf("%v: kind %d, jute's Write %v", op, e.kind, spec.Write)
		}
		if e.kind != opRead && e.read.plan != nil {
			t.Errorf("%v: a read handler on an entry of kind %d", op, e.kind)
		}
	}
	// Spot checks of what conn.dispatch and cons rely on.
	for op, want := range map[jute.OpCode]opKind{jute.OpPing: opConn, jute.OpCloseSession: opConn,
		jute.OpGetData: opRead, jute.OpMulti: opWrite, jute.OpDeleteContainer: opUnimplemented} {
		if got := opTable[op].kind; got != want {
			t.Errorf("%v: kind %d, want %d", op, got, want)
		}
	}
	for op, want := range map[jute.OpCode]string{jute.OpGetAllChildrenNumber: "GETACN", jute.OpCreateTTL: "CREA",
		jute.OpWatchFrom: "watchFrom", jute.OpCode(999): "unknown(999)"} {
		if got := lastOpOf(op); got != want {
			t.Errorf("lastOpOf(%v) = %q, want %q", op, got, want)
		}
	}
}

// TestReadOpsAnswerJuteRecords: each read op, sent well formed, is answered
// OK with a body that is exactly jute's response record for the op.
func TestReadOpsAnswerJuteRecords(t *testing.T) {
	s := startStandalone(t, nil)
	rc := dialRaw(t, s.Addr().String())
	call := func(op jute.OpCode, req jute.Record) (*jute.ReplyHeader, []byte) {
		t.Helper()
		h, body, err := rc.call(op, req)
		if err != nil {
			t.Fatalf("%v: %v", op, err)
		}
		return h, body
	}
	h, _ := call(jute.OpCreate, &jute.CreateRequest{Path: "/t", Data: []byte("x"), ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}})
	if h.Err != jute.ErrOK {
		t.Fatalf("create: %v", h.Err)
	}
	zxid := h.Zxid
	var watchID int64
	// In this order: the data watch getData sets is what checkWatches and
	// removeWatches find, the resumable watch what unwatchFrom ends.
	samples := []struct {
		op  jute.OpCode
		req func() jute.Record
	}{
		{jute.OpExists, func() jute.Record { return &jute.ExistsRequest{Path: "/t"} }},
		{jute.OpGetData, func() jute.Record { return &jute.GetDataRequest{Path: "/t", Watch: true} }},
		{jute.OpCheckWatches, func() jute.Record { return &jute.CheckWatchesRequest{Path: "/t", Type: jute.WatcherTypeData} }},
		{jute.OpRemoveWatches, func() jute.Record { return &jute.RemoveWatchesRequest{Path: "/t", Type: jute.WatcherTypeData} }},
		{jute.OpGetChildren, func() jute.Record { return &jute.GetChildrenRequest{Path: "/"} }},
		{jute.OpGetChildren2, func() jute.Record { return &jute.GetChildren2Request{Path: "/"} }},
		{jute.OpGetACL, func() jute.Record { return &jute.GetACLRequest{Path: "/t"} }},
		{jute.OpSync, func() jute.Record { return &jute.SyncRequest{Path: "/t"} }},
		{jute.OpGetAllChildrenNumber, func() jute.Record { return &jute.GetAllChildrenNumberRequest{Path: "/"} }},
		{jute.OpGetEphemerals, func() jute.Record { return &jute.GetEphemeralsRequest{PrefixPath: "/"} }},
		{jute.OpWhoAmI, func() jute.Record { return &jute.Empty{} }},
		{jute.OpMultiRead, func() jute.Record {
			return &jute.MultiRequest{Ops: []jute.MultiOp{{Type: jute.OpGetData, Req: &jute.GetDataRequest{Path: "/t"}}}}
		}},
		{jute.OpSetWatches, func() jute.Record { return &jute.SetWatches{RelativeZxid: zxid, DataWatches: []string{"/t"}} }},
		{jute.OpSetWatches2, func() jute.Record { return &jute.SetWatches2{RelativeZxid: zxid, ChildWatches: []string{"/t"}} }},
		{jute.OpAddWatch, func() jute.Record { return &jute.AddWatchRequest{Path: "/t"} }},
		{jute.OpWatchFrom, func() jute.Record { return &jute.WatchFromRequest{Path: "/t", FromZxid: zxid} }},
		{jute.OpUnwatchFrom, func() jute.Record { return &jute.UnwatchFromRequest{WatchID: watchID} }},
	}
	tried := map[jute.OpCode]bool{}
	for _, sm := range samples {
		tried[sm.op] = true
		h, body := call(sm.op, sm.req())
		if h.Err != jute.ErrOK {
			t.Errorf("%v: %v", sm.op, h.Err)
			continue
		}
		resp, _ := jute.NewResponse(sm.op)
		r := jute.NewReader(body)
		resp.Decode(r)
		if r.Err() != nil || r.Remaining() != 0 {
			t.Errorf("%v: the reply body %x is not a %T (err %v, %d bytes left)", sm.op, body, resp, r.Err(), r.Remaining())
		}
		if w, ok := resp.(*jute.WatchFromResponse); ok {
			watchID = w.WatchID
		}
	}
	for op, e := range opTable {
		if e.kind == opRead && !tried[op] {
			t.Errorf("read op %v has no sample here", op)
		}
	}
}

// TestUnknownOpsShareOneLabel: op codes ZooKeeper does not know share the
// label "unknown", so a client cannot grow the request metric without
// bound by sending made-up codes.
func TestUnknownOpsShareOneLabel(t *testing.T) {
	if a, b := opLabel(jute.OpCode(777)), opLabel(jute.OpCode(-99)); a != "unknown" || b != "unknown" {
		t.Fatalf("labels %q and %q, want unknown", a, b)
	}
	if got := opLabel(jute.OpGetData); got != jute.OpGetData.String() {
		t.Fatalf("getData label %q", got)
	}
}
