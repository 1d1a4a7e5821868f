package jute

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

func TestTableCoversAllOpCodes(t *testing.T) {
	seen := map[OpCode]bool{}
	for _, op := range AllOpCodes {
		if seen[op] {
			t.Errorf("AllOpCodes lists %v twice", op)
		}
		seen[op] = true
		req, ok := NewRequest(op)
		if !ok || req == nil {
			t.Errorf("NewRequest(%v) missing", op)
		}
		resp, ok := NewResponse(op)
		if !ok || resp == nil {
			t.Errorf("NewResponse(%v) missing", op)
		}
		// Fresh records each call.
		if req2, _ := NewRequest(op); req2 == req && fmt.Sprintf("%T", req) != "*jute.Empty" {
			t.Errorf("NewRequest(%v) returned a shared record", op)
		}
	}
	if len(AllOpCodes) != 35 {
		t.Errorf("AllOpCodes has %d codes, want 35 (ZooKeeper 3.9s 33 and zkraft watchFrom, unwatchFrom)", len(AllOpCodes))
	}
	for _, op := range []OpCode{10, 23, 99, 108, -2, -12} {
		if _, ok := NewRequest(op); ok {
			t.Errorf("NewRequest(%d) should be unknown", op)
		}
		if _, ok := NewResponse(op); ok {
			t.Errorf("NewResponse(%d) should be unknown", op)
		}
	}
}

// TestOpTableMatchesConstants: every OpCode constant declared in codes.go
// has one entry in opTable, and the table has no code without a constant,
// so a new op cannot be declared without its name and records.
func TestOpTableMatchesConstants(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "codes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "OpCode" {
				for _, n := range vs.Names {
					declared[n.Name] = true
				}
			}
		}
	}
	if len(declared) != len(opTable) {
		t.Errorf("codes.go declares %d OpCode constants, opTable has %d entries", len(declared), len(opTable))
	}
	seen := map[OpCode]bool{}
	for _, s := range opTable {
		if seen[s.Code] {
			t.Errorf("opTable lists %v twice", s.Code)
		}
		seen[s.Code] = true
		if s.Name == "" || s.Request == nil || s.Response == nil {
			t.Errorf("opTable entry %d is incomplete: %+v", s.Code, s)
		}
		// The constant is Op + the name with its first letter raised
		// (OpGetChildren2: "getChildren2"), except sasl (OpSASL).
		name := "Op" + strings.ToUpper(s.Name[:1]) + s.Name[1:]
		if s.Code == OpSASL {
			name = "OpSASL"
		}
		if !declared[name] {
			t.Errorf("opTable entry %q has no constant %s in codes.go", s.Name, name)
		}
	}
}

// TestOpTableKinds: the writes, and the ops a multi may hold, are
// ZooKeeper's.
func TestOpTableKinds(t *testing.T) {
	var writes, inMulti []string
	for _, op := range AllOpCodes {
		s, ok := Op(op)
		if !ok {
			t.Fatalf("Op(%v) missing", op)
		}
		if s.Write {
			writes = append(writes, s.Name)
		}
		if s.InMulti {
			inMulti = append(inMulti, s.Name)
			if _, ok := newMultiOpRequest(op); !ok {
				t.Errorf("%v is InMulti but has no multi request record", op)
			}
		}
	}
	if got, want := strings.Join(writes, ","), "create,delete,setData,setACL,check,multi,create2,reconfig,createContainer,createTTL"; got != want {
		t.Errorf("writes = %s, want %s", got, want)
	}
	if got, want := strings.Join(inMulti, ","), "create,delete,getData,setData,getChildren,check,create2,createContainer,createTTL"; got != want {
		t.Errorf("in multi = %s, want %s", got, want)
	}
	if _, ok := Op(10); ok {
		t.Error("Op(10) is defined")
	}
	for _, op := range []OpCode{OpDelete, OpCheck} {
		if r, ok := newMultiOpResponse(op); !ok || r != nil {
			t.Errorf("multi result %v: %T %v, want no body", op, r, ok)
		}
	}
	if r, _ := newMultiOpResponse(OpError); fmt.Sprintf("%T", r) != "*jute.ErrorResponse" {
		t.Errorf("multi result error: %T", r)
	}
	if _, ok := newMultiOpResponse(OpSetACL); ok {
		t.Error("setACL is a multi result type")
	}
}

func TestTableSpecificEntries(t *testing.T) {
	want := []struct {
		op        OpCode
		req, resp string
	}{
		{OpNotification, "*jute.WatcherEvent", "*jute.WatcherEvent"},
		{OpCreate, "*jute.CreateRequest", "*jute.CreateResponse"},
		{OpCreate2, "*jute.CreateRequest", "*jute.Create2Response"},
		{OpCreateContainer, "*jute.CreateRequest", "*jute.Create2Response"},
		{OpCreateTTL, "*jute.CreateTTLRequest", "*jute.Create2Response"},
		{OpDelete, "*jute.DeleteRequest", "*jute.Empty"},
		{OpExists, "*jute.ExistsRequest", "*jute.ExistsResponse"},
		{OpGetData, "*jute.GetDataRequest", "*jute.GetDataResponse"},
		{OpSetData, "*jute.SetDataRequest", "*jute.SetDataResponse"},
		{OpGetACL, "*jute.GetACLRequest", "*jute.GetACLResponse"},
		{OpSetACL, "*jute.SetACLRequest", "*jute.SetACLResponse"},
		{OpGetChildren, "*jute.GetChildrenRequest", "*jute.GetChildrenResponse"},
		{OpSync, "*jute.SyncRequest", "*jute.SyncResponse"},
		{OpPing, "*jute.Empty", "*jute.Empty"},
		{OpGetChildren2, "*jute.GetChildren2Request", "*jute.GetChildren2Response"},
		{OpMulti, "*jute.MultiRequest", "*jute.MultiResponse"},
		{OpMultiRead, "*jute.MultiRequest", "*jute.MultiResponse"},
		{OpReconfig, "*jute.ReconfigRequest", "*jute.GetDataResponse"},
		{OpCheckWatches, "*jute.CheckWatchesRequest", "*jute.Empty"},
		{OpRemoveWatches, "*jute.RemoveWatchesRequest", "*jute.Empty"},
		{OpAuth, "*jute.AuthPacket", "*jute.Empty"},
		{OpSetWatches, "*jute.SetWatches", "*jute.Empty"},
		{OpSetWatches2, "*jute.SetWatches2", "*jute.Empty"},
		{OpGetEphemerals, "*jute.GetEphemeralsRequest", "*jute.GetEphemeralsResponse"},
		{OpGetAllChildrenNumber, "*jute.GetAllChildrenNumberRequest", "*jute.GetAllChildrenNumberResponse"},
		{OpAddWatch, "*jute.AddWatchRequest", "*jute.ErrorResponse"},
		{OpWhoAmI, "*jute.Empty", "*jute.WhoAmIResponse"},
		{OpWatchFrom, "*jute.WatchFromRequest", "*jute.WatchFromResponse"},
		{OpUnwatchFrom, "*jute.UnwatchFromRequest", "*jute.Empty"},
		{OpCreateSession, "*jute.ConnectRequest", "*jute.ConnectResponse"},
		{OpCloseSession, "*jute.Empty", "*jute.Empty"},
		{OpError, "*jute.ErrorResponse", "*jute.ErrorResponse"},
	}
	for _, w := range want {
		req, _ := NewRequest(w.op)
		resp, _ := NewResponse(w.op)
		if got := fmt.Sprintf("%T", req); got != w.req {
			t.Errorf("NewRequest(%v) = %s, want %s", w.op, got, w.req)
		}
		if got := fmt.Sprintf("%T", resp); got != w.resp {
			t.Errorf("NewResponse(%v) = %s, want %s", w.op, got, w.resp)
		}
	}
}

func TestOpCodeNames(t *testing.T) {
	want := map[OpCode]string{
		OpNotification: "notification", OpCreate: "create", OpDelete: "delete", OpExists: "exists",
		OpGetData: "getData", OpSetData: "setData", OpGetACL: "getACL", OpSetACL: "setACL",
		OpGetChildren: "getChildren", OpSync: "sync", OpPing: "ping", OpGetChildren2: "getChildren2",
		OpCheck: "check", OpMulti: "multi", OpCreate2: "create2", OpReconfig: "reconfig",
		OpCheckWatches: "checkWatches", OpRemoveWatches: "removeWatches", OpCreateContainer: "createContainer",
		OpDeleteContainer: "deleteContainer", OpCreateTTL: "createTTL", OpMultiRead: "multiRead",
		OpAuth: "auth", OpSetWatches: "setWatches", OpSASL: "sasl", OpGetEphemerals: "getEphemerals",
		OpGetAllChildrenNumber: "getAllChildrenNumber", OpSetWatches2: "setWatches2", OpAddWatch: "addWatch",
		OpWhoAmI: "whoAmI", OpWatchFrom: "watchFrom", OpUnwatchFrom: "unwatchFrom", OpCreateSession: "createSession", OpCloseSession: "closeSession", OpError: "error",
	}
	if len(want) != len(AllOpCodes) {
		t.Fatalf("name table has %d entries, AllOpCodes %d", len(want), len(AllOpCodes))
	}
	for _, op := range AllOpCodes {
		if got := op.String(); got != want[op] {
			t.Errorf("OpCode(%d).String() = %q, want %q", int32(op), got, want[op])
		}
	}
	if got := OpCode(10).String(); got != "unknown(10)" {
		t.Errorf("OpCode(10).String() = %q", got)
	}
}

func TestErrCodeNames(t *testing.T) {
	want := map[ErrCode]string{
		ErrOK: "OK", ErrSystemError: "SYSTEMERROR", ErrRuntimeInconsistency: "RUNTIMEINCONSISTENCY",
		ErrDataInconsistency: "DATAINCONSISTENCY", ErrConnectionLoss: "CONNECTIONLOSS",
		ErrMarshallingError: "MARSHALLINGERROR", ErrUnimplemented: "UNIMPLEMENTED",
		ErrOperationTimeout: "OPERATIONTIMEOUT", ErrBadArguments: "BADARGUMENTS",
		ErrUnknownSession: "UNKNOWNSESSION", ErrNewConfigNoQuorum: "NEWCONFIGNOQUORUM",
		ErrReconfigInProgress: "RECONFIGINPROGRESS", ErrAPIError: "APIERROR", ErrNoNode: "NONODE",
		ErrNoAuth: "NOAUTH", ErrBadVersion: "BADVERSION", ErrNoChildrenForEphemerals: "NOCHILDRENFOREPHEMERALS",
		ErrNodeExists: "NODEEXISTS", ErrNotEmpty: "NOTEMPTY", ErrSessionExpired: "SESSIONEXPIRED",
		ErrInvalidCallback: "INVALIDCALLBACK", ErrInvalidACL: "INVALIDACL", ErrAuthFailed: "AUTHFAILED",
		ErrSessionMoved: "SESSIONMOVED", ErrNotReadOnly: "NOTREADONLY",
		ErrEphemeralOnLocalSession: "EPHEMERALONLOCALSESSION", ErrNoWatcher: "NOWATCHER",
		ErrRequestTimeout: "REQUESTTIMEOUT", ErrReconfigDisabled: "RECONFIGDISABLED",
		ErrSessionClosedRequireSASLAuth: "SESSIONCLOSEDREQUIRESASLAUTH", ErrQuotaExceeded: "QUOTAEXCEEDED",
		ErrThrottledOp: "THROTTLEDOP",
	}
	codes := map[ErrCode]int32{
		ErrOK: 0, ErrSystemError: -1, ErrRuntimeInconsistency: -2, ErrDataInconsistency: -3,
		ErrConnectionLoss: -4, ErrMarshallingError: -5, ErrUnimplemented: -6, ErrOperationTimeout: -7,
		ErrBadArguments: -8, ErrUnknownSession: -12, ErrNewConfigNoQuorum: -13, ErrReconfigInProgress: -14,
		ErrAPIError: -100, ErrNoNode: -101, ErrNoAuth: -102, ErrBadVersion: -103,
		ErrNoChildrenForEphemerals: -108, ErrNodeExists: -110, ErrNotEmpty: -111, ErrSessionExpired: -112,
		ErrInvalidCallback: -113, ErrInvalidACL: -114, ErrAuthFailed: -115, ErrSessionMoved: -118,
		ErrNotReadOnly: -119, ErrEphemeralOnLocalSession: -120, ErrNoWatcher: -121, ErrRequestTimeout: -122,
		ErrReconfigDisabled: -123, ErrSessionClosedRequireSASLAuth: -124, ErrQuotaExceeded: -125,
		ErrThrottledOp: -127,
	}
	if len(codes) != len(want) {
		t.Fatal("test tables disagree")
	}
	for c, name := range want {
		if int32(c) != codes[c] {
			t.Errorf("%s = %d, want %d", name, int32(c), codes[c])
		}
		if got := c.String(); got != name {
			t.Errorf("ErrCode(%d).String() = %q, want %q", int32(c), got, name)
		}
	}
	if got := ErrNoNode.Error(); got != "zookeeper: NONODE (-101)" {
		t.Errorf("ErrNoNode.Error() = %q", got)
	}
	if got := ErrCode(-126).String(); !strings.Contains(got, "-126") {
		t.Errorf("ErrCode(-126).String() = %q", got)
	}
}

func TestEventAndStateNames(t *testing.T) {
	events := map[EventType]string{
		EventNone: "None", EventNodeCreated: "NodeCreated", EventNodeDeleted: "NodeDeleted",
		EventNodeDataChanged: "NodeDataChanged", EventNodeChildrenChanged: "NodeChildrenChanged",
		EventDataWatchRemoved: "DataWatchRemoved", EventChildWatchRemoved: "ChildWatchRemoved",
		EventPersistentWatchRemoved: "PersistentWatchRemoved",
	}
	for e, name := range events {
		if e.String() != name {
			t.Errorf("EventType(%d).String() = %q, want %q", int32(e), e.String(), name)
		}
	}
	if EventNone != -1 || EventNodeCreated != 1 || EventPersistentWatchRemoved != 7 {
		t.Error("event type values")
	}
	states := map[State]string{
		StateUnknown: "Unknown", StateDisconnected: "Disconnected", StateNoSyncConnected: "NoSyncConnected",
		StateSyncConnected: "SyncConnected", StateAuthFailed: "AuthFailed", StateConnectedReadOnly: "ConnectedReadOnly",
		StateSaslAuthenticated: "SaslAuthenticated", StateExpired: "Expired", StateClosed: "Closed",
	}
	for s, name := range states {
		if s.String() != name {
			t.Errorf("State(%d).String() = %q, want %q", int32(s), s.String(), name)
		}
	}
	if StateSyncConnected != 3 || StateExpired != -112 || StateClosed != 7 {
		t.Error("state values")
	}
	if EventType(99).String() == "" || State(99).String() == "" {
		t.Error("unknown names must not be empty")
	}
}

func TestCodeOf(t *testing.T) {
	if CodeOf(nil) != ErrOK {
		t.Error("CodeOf(nil)")
	}
	if CodeOf(ErrNoNode) != ErrNoNode {
		t.Error("CodeOf(ErrNoNode)")
	}
	if got := CodeOf(fmt.Errorf("delete /a: %w", ErrNotEmpty)); got != ErrNotEmpty {
		t.Errorf("CodeOf(wrapped) = %v", got)
	}
	if got := CodeOf(errors.New("disk on fire")); got != ErrSystemError {
		t.Errorf("CodeOf(other) = %v", got)
	}
	var err error = ErrBadVersion
	if !errors.Is(fmt.Errorf("x: %w", err), ErrBadVersion) {
		t.Error("errors.Is on ErrCode")
	}
}
