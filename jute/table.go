package jute

// NewRequest returns a fresh zero record for the request body of op: Empty
// for ops without a body (ping, closeSession, whoAmI), and (nil, false) for an
// unknown op. OpCreateSession gives
// *ConnectRequest (which has no RequestHeader on the wire) and OpNotification
// gives *WatcherEvent, so that every code has an entry.
func NewRequest(op OpCode) (Record, bool) {
	switch op {
	case OpNotification:
		return &WatcherEvent{}, true
	case OpCreate, OpCreate2, OpCreateContainer:
		return &CreateRequest{}, true
	case OpCreateTTL:
		return &CreateTTLRequest{}, true
	case OpDelete:
		return &DeleteRequest{}, true
	case OpDeleteContainer:
		return &DeleteContainerRequest{}, true
	case OpExists:
		return &ExistsRequest{}, true
	case OpGetData:
		return &GetDataRequest{}, true
	case OpSetData:
		return &SetDataRequest{}, true
	case OpGetACL:
		return &GetACLRequest{}, true
	case OpSetACL:
		return &SetACLRequest{}, true
	case OpGetChildren:
		return &GetChildrenRequest{}, true
	case OpSync:
		return &SyncRequest{}, true
	case OpGetChildren2:
		return &GetChildren2Request{}, true
	case OpCheck:
		return &CheckVersionRequest{}, true
	case OpMulti, OpMultiRead:
		return &MultiRequest{}, true
	case OpReconfig:
		return &ReconfigRequest{}, true
	case OpCheckWatches:
		return &CheckWatchesRequest{}, true
	case OpRemoveWatches:
		return &RemoveWatchesRequest{}, true
	case OpAuth:
		return &AuthPacket{}, true
	case OpSetWatches:
		return &SetWatches{}, true
	case OpSetWatches2:
		return &SetWatches2{}, true
	case OpSASL:
		return &GetSASLRequest{}, true
	case OpGetEphemerals:
		return &GetEphemeralsRequest{}, true
	case OpGetAllChildrenNumber:
		return &GetAllChildrenNumberRequest{}, true
	case OpAddWatch:
		return &AddWatchRequest{}, true
	case OpWatchFrom:
		return &WatchFromRequest{}, true
	case OpUnwatchFrom:
		return &UnwatchFromRequest{}, true
	case OpPing, OpCloseSession, OpWhoAmI:
		return &Empty{}, true
	case OpCreateSession:
		return &ConnectRequest{}, true
	case OpError:
		return &ErrorResponse{}, true
	}
	return nil, false
}

// NewResponse returns a fresh zero record for the body of a successful reply
// to op (the body follows the ReplyHeader only when its err is 0): Empty for
// header-only replies, and (nil, false) for an unknown op.
func NewResponse(op OpCode) (Record, bool) {
	switch op {
	case OpNotification:
		return &WatcherEvent{}, true
	case OpCreate:
		return &CreateResponse{}, true
	case OpCreate2, OpCreateContainer, OpCreateTTL:
		return &Create2Response{}, true
	case OpDelete, OpDeleteContainer, OpSetWatches, OpSetWatches2, OpCheckWatches, OpRemoveWatches,
		OpAuth, OpPing, OpCloseSession, OpCheck:
		return &Empty{}, true
	case OpExists:
		return &ExistsResponse{}, true
	case OpGetData, OpReconfig:
		return &GetDataResponse{}, true
	case OpSetData:
		return &SetDataResponse{}, true
	case OpGetACL:
		return &GetACLResponse{}, true
	case OpSetACL:
		return &SetACLResponse{}, true
	case OpGetChildren:
		return &GetChildrenResponse{}, true
	case OpSync:
		return &SyncResponse{}, true
	case OpGetChildren2:
		return &GetChildren2Response{}, true
	case OpMulti, OpMultiRead:
		return &MultiResponse{}, true
	case OpSASL:
		return &SetSASLResponse{}, true
	case OpGetEphemerals:
		return &GetEphemeralsResponse{}, true
	case OpGetAllChildrenNumber:
		return &GetAllChildrenNumberResponse{}, true
	case OpAddWatch:
		// The server answers addWatch with ErrorResponse{0}: a 4-byte body.
		return &ErrorResponse{}, true
	case OpWhoAmI:
		return &WhoAmIResponse{}, true
	case OpWatchFrom:
		return &WatchFromResponse{}, true
	case OpUnwatchFrom:
		return &Empty{}, true
	case OpCreateSession:
		return &ConnectResponse{}, true
	case OpError:
		return &ErrorResponse{}, true
	}
	return nil, false
}
