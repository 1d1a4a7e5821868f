package jute

// OpSpec is what the wire protocol says about one op code: ZooKeeper's name
// for it, the records of its request and of its successful reply, whether
// it is a write, and whether it may stand inside a multi.
//
// The table of specs (opTable) is the one place for these facts: NewRequest,
// NewResponse, OpCode.String, AllOpCodes and the records inside a multi all
// read it, znode.IsWrite reads Write, and the server's own table (how each
// op is answered, server/optable.go) is keyed by the same codes and checked
// against this one by its tests. jute imports nothing of the server, so
// what the server does with an op (its read handler, its lastOp
// abbreviation) lives there, not here.
type OpSpec struct {
	Code OpCode
	// Name is ZooKeeper's name for the op (the Java client's
	// Request.op2String); the server also uses it as its metrics label.
	Name string
	// Request and Response return fresh zero records: the request body
	// (after the RequestHeader) and the body of a successful reply (after a
	// ReplyHeader whose err is 0). Empty stands for no body.
	Request, Response func() Record
	// Write marks a transaction: an op that changes the tree, is ordered by
	// the log and gets a zxid of its own (multi is one transaction). Session
	// ops are not writes in this sense: they are commands of their own.
	Write bool
	// InMulti marks an op that may stand inside a multi (the writes) or a
	// multiRead (getData, getChildren).
	InMulti bool
}

// rec returns a fresh zero record of type *T.
func rec[T any, P interface {
	*T
	Record
}]() Record {
	return P(new(T))
}

// opTable lists every op code of codes.go once, in code order within
// ZooKeeper's ranges, then zkraft's extension ops, then the session and
// error codes.
var opTable = []OpSpec{
	// The server-to-client watch notification (xid -1); a client never sends it.
	{Code: OpNotification, Name: "notification", Request: rec[WatcherEvent], Response: rec[WatcherEvent]},
	{Code: OpCreate, Name: "create", Request: rec[CreateRequest], Response: rec[CreateResponse], Write: true, InMulti: true},
	{Code: OpDelete, Name: "delete", Request: rec[DeleteRequest], Response: rec[Empty], Write: true, InMulti: true},
	{Code: OpExists, Name: "exists", Request: rec[ExistsRequest], Response: rec[ExistsResponse]},
	{Code: OpGetData, Name: "getData", Request: rec[GetDataRequest], Response: rec[GetDataResponse], InMulti: true},
	{Code: OpSetData, Name: "setData", Request: rec[SetDataRequest], Response: rec[SetDataResponse], Write: true, InMulti: true},
	{Code: OpGetACL, Name: "getACL", Request: rec[GetACLRequest], Response: rec[GetACLResponse]},
	{Code: OpSetACL, Name: "setACL", Request: rec[SetACLRequest], Response: rec[SetACLResponse], Write: true},
	{Code: OpGetChildren, Name: "getChildren", Request: rec[GetChildrenRequest], Response: rec[GetChildrenResponse], InMulti: true},
	{Code: OpSync, Name: "sync", Request: rec[SyncRequest], Response: rec[SyncResponse]},
	{Code: OpPing, Name: "ping", Request: rec[Empty], Response: rec[Empty]},
	{Code: OpGetChildren2, Name: "getChildren2", Request: rec[GetChildren2Request], Response: rec[GetChildren2Response]},
	// check is a write inside a multi; ZooKeeper 3.9 refuses it alone.
	{Code: OpCheck, Name: "check", Request: rec[CheckVersionRequest], Response: rec[Empty], Write: true, InMulti: true},
	{Code: OpMulti, Name: "multi", Request: rec[MultiRequest], Response: rec[MultiResponse], Write: true},
	{Code: OpCreate2, Name: "create2", Request: rec[CreateRequest], Response: rec[Create2Response], Write: true, InMulti: true},
	// reconfig answers the new configuration znode's data and Stat.
	{Code: OpReconfig, Name: "reconfig", Request: rec[ReconfigRequest], Response: rec[GetDataResponse], Write: true},
	{Code: OpCheckWatches, Name: "checkWatches", Request: rec[CheckWatchesRequest], Response: rec[Empty]},
	{Code: OpRemoveWatches, Name: "removeWatches", Request: rec[RemoveWatchesRequest], Response: rec[Empty]},
	{Code: OpCreateContainer, Name: "createContainer", Request: rec[CreateRequest], Response: rec[Create2Response], Write: true, InMulti: true},
	// deleteContainer is the server's own (its container reaper), not a
	// client's write.
	{Code: OpDeleteContainer, Name: "deleteContainer", Request: rec[DeleteContainerRequest], Response: rec[Empty]},
	{Code: OpCreateTTL, Name: "createTTL", Request: rec[CreateTTLRequest], Response: rec[Create2Response], Write: true, InMulti: true},
	{Code: OpMultiRead, Name: "multiRead", Request: rec[MultiRequest], Response: rec[MultiResponse]},
	{Code: OpAuth, Name: "auth", Request: rec[AuthPacket], Response: rec[Empty]},
	{Code: OpSetWatches, Name: "setWatches", Request: rec[SetWatches], Response: rec[Empty]},
	{Code: OpSASL, Name: "sasl", Request: rec[GetSASLRequest], Response: rec[SetSASLResponse]},
	{Code: OpGetEphemerals, Name: "getEphemerals", Request: rec[GetEphemeralsRequest], Response: rec[GetEphemeralsResponse]},
	{Code: OpGetAllChildrenNumber, Name: "getAllChildrenNumber", Request: rec[GetAllChildrenNumberRequest], Response: rec[GetAllChildrenNumberResponse]},
	{Code: OpSetWatches2, Name: "setWatches2", Request: rec[SetWatches2], Response: rec[Empty]},
	// The server answers addWatch with ErrorResponse{0}: a 4-byte body.
	{Code: OpAddWatch, Name: "addWatch", Request: rec[AddWatchRequest], Response: rec[ErrorResponse]},
	{Code: OpWhoAmI, Name: "whoAmI", Request: rec[Empty], Response: rec[WhoAmIResponse]},
	{Code: OpWatchFrom, Name: "watchFrom", Request: rec[WatchFromRequest], Response: rec[WatchFromResponse]},
	{Code: OpUnwatchFrom, Name: "unwatchFrom", Request: rec[UnwatchFromRequest], Response: rec[Empty]},
	// createSession's records are the handshake's, which has no
	// RequestHeader or ReplyHeader on the wire.
	{Code: OpCreateSession, Name: "createSession", Request: rec[ConnectRequest], Response: rec[ConnectResponse]},
	{Code: OpCloseSession, Name: "closeSession", Request: rec[Empty], Response: rec[Empty]},
	// error is the type of a failed multi sub-result (and of the server's
	// error transactions).
	{Code: OpError, Name: "error", Request: rec[ErrorResponse], Response: rec[ErrorResponse]},
}

// opIndex finds an op's spec.
var opIndex = func() map[OpCode]*OpSpec {
	m := make(map[OpCode]*OpSpec, len(opTable))
	for i := range opTable {
		m[opTable[i].Code] = &opTable[i]
	}
	return m
}()

// AllOpCodes lists every op code, in the table's order.
var AllOpCodes = func() []OpCode {
	out := make([]OpCode, len(opTable))
	for i, s := range opTable {
		out[i] = s.Code
	}
	return out
}()

// Op returns the spec of op; false for a code ZooKeeper and zkraft do not
// define.
func Op(op OpCode) (OpSpec, bool) {
	if s := opIndex[op]; s != nil {
		return *s, true
	}
	return OpSpec{}, false
}

// NewRequest returns a fresh zero record for the request body of op: Empty
// for ops without a body (ping, closeSession, whoAmI), and (nil, false) for an
// unknown op. OpCreateSession gives *ConnectRequest (which has no
// RequestHeader on the wire) and OpNotification gives *WatcherEvent, so that
// every code has an entry.
func NewRequest(op OpCode) (Record, bool) {
	if s := opIndex[op]; s != nil {
		return s.Request(), true
	}
	return nil, false
}

// NewResponse returns a fresh zero record for the body of a successful reply
// to op (the body follows the ReplyHeader only when its err is 0): Empty for
// header-only replies, and (nil, false) for an unknown op.
func NewResponse(op OpCode) (Record, bool) {
	if s := opIndex[op]; s != nil {
		return s.Response(), true
	}
	return nil, false
}

// newMultiOpRequest returns a fresh request record for an op allowed inside
// multi or multiRead.
func newMultiOpRequest(op OpCode) (Record, bool) {
	if s := opIndex[op]; s != nil && s.InMulti {
		return s.Request(), true
	}
	return nil, false
}

// newMultiOpResponse returns a fresh reply record for a multi result type
// (an op allowed inside a multi, or OpError); nil with ok for types without
// a body.
func newMultiOpResponse(op OpCode) (Record, bool) {
	s := opIndex[op]
	if s == nil || !s.InMulti && op != OpError {
		return nil, false
	}
	resp := s.Response()
	if _, empty := resp.(*Empty); empty {
		return nil, true
	}
	return resp, true
}
