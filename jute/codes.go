package jute

import (
	"errors"
	"strconv"
)

// OpCode is a request type (ZooDefs.OpCode). It appears in RequestHeader,
// MultiHeader and, for OpError, as the type of a failed multi sub-result.
type OpCode int32

// Op codes, as in ZooDefs.OpCode of ZooKeeper 3.8. There is no code 10.
// Each has one entry in opTable (table.go): its name, records and kind.
const (
	OpNotification         OpCode = 0
	OpCreate               OpCode = 1
	OpDelete               OpCode = 2
	OpExists               OpCode = 3
	OpGetData              OpCode = 4
	OpSetData              OpCode = 5
	OpGetACL               OpCode = 6
	OpSetACL               OpCode = 7
	OpGetChildren          OpCode = 8
	OpSync                 OpCode = 9
	OpPing                 OpCode = 11
	OpGetChildren2         OpCode = 12
	OpCheck                OpCode = 13
	OpMulti                OpCode = 14
	OpCreate2              OpCode = 15
	OpReconfig             OpCode = 16
	OpCheckWatches         OpCode = 17
	OpRemoveWatches        OpCode = 18
	OpCreateContainer      OpCode = 19
	OpDeleteContainer      OpCode = 20
	OpCreateTTL            OpCode = 21
	OpMultiRead            OpCode = 22
	OpAuth                 OpCode = 100
	OpSetWatches           OpCode = 101
	OpSASL                 OpCode = 102
	OpGetEphemerals        OpCode = 103
	OpGetAllChildrenNumber OpCode = 104
	OpSetWatches2          OpCode = 105
	OpAddWatch             OpCode = 106
	OpWhoAmI               OpCode = 107
	// zkraft extension ops, outside ZooKeeper's and ClickHouse Keeper's
	// ranges (see extension.go).
	OpWatchFrom     OpCode = 1000
	OpUnwatchFrom   OpCode = 1001
	OpCreateSession OpCode = -10
	OpCloseSession  OpCode = -11
	OpError         OpCode = -1
)

// String returns ZooKeeper's name for the op code (as in the Java client's
// Request.op2String), or "unknown(N)".
func (op OpCode) String() string {
	if s := opIndex[op]; s != nil {
		return s.Name
	}
	return "unknown(" + strconv.Itoa(int(op)) + ")"
}

// ErrCode is a KeeperException.Code. It travels in ReplyHeader.Err, in
// MultiHeader.Err and in ErrorResponse. ErrCode implements error, so code
// can return it directly; ErrOK (0) is success and should not be returned as
// an error.
type ErrCode int32

// Error codes, as in KeeperException.Code of ZooKeeper 3.8. There is no -126.
const (
	ErrOK                           ErrCode = 0
	ErrSystemError                  ErrCode = -1
	ErrRuntimeInconsistency         ErrCode = -2
	ErrDataInconsistency            ErrCode = -3
	ErrConnectionLoss               ErrCode = -4
	ErrMarshallingError             ErrCode = -5
	ErrUnimplemented                ErrCode = -6
	ErrOperationTimeout             ErrCode = -7
	ErrBadArguments                 ErrCode = -8
	ErrUnknownSession               ErrCode = -12
	ErrNewConfigNoQuorum            ErrCode = -13
	ErrReconfigInProgress           ErrCode = -14
	ErrAPIError                     ErrCode = -100
	ErrNoNode                       ErrCode = -101
	ErrNoAuth                       ErrCode = -102
	ErrBadVersion                   ErrCode = -103
	ErrNoChildrenForEphemerals      ErrCode = -108
	ErrNodeExists                   ErrCode = -110
	ErrNotEmpty                     ErrCode = -111
	ErrSessionExpired               ErrCode = -112
	ErrInvalidCallback              ErrCode = -113
	ErrInvalidACL                   ErrCode = -114
	ErrAuthFailed                   ErrCode = -115
	ErrSessionMoved                 ErrCode = -118
	ErrNotReadOnly                  ErrCode = -119
	ErrEphemeralOnLocalSession      ErrCode = -120
	ErrNoWatcher                    ErrCode = -121
	ErrRequestTimeout               ErrCode = -122
	ErrReconfigDisabled             ErrCode = -123
	ErrSessionClosedRequireSASLAuth ErrCode = -124
	ErrQuotaExceeded                ErrCode = -125
	ErrThrottledOp                  ErrCode = -127
	// ErrHistoryCompacted is zkraft's answer to watchFrom with a zxid older
	// than the retained history; the reply carries a CompactedResponse.
	ErrHistoryCompacted ErrCode = -1000
)

var errNames = map[ErrCode]string{
	ErrOK:                           "OK",
	ErrSystemError:                  "SYSTEMERROR",
	ErrRuntimeInconsistency:         "RUNTIMEINCONSISTENCY",
	ErrDataInconsistency:            "DATAINCONSISTENCY",
	ErrConnectionLoss:               "CONNECTIONLOSS",
	ErrMarshallingError:             "MARSHALLINGERROR",
	ErrUnimplemented:                "UNIMPLEMENTED",
	ErrOperationTimeout:             "OPERATIONTIMEOUT",
	ErrBadArguments:                 "BADARGUMENTS",
	ErrUnknownSession:               "UNKNOWNSESSION",
	ErrNewConfigNoQuorum:            "NEWCONFIGNOQUORUM",
	ErrReconfigInProgress:           "RECONFIGINPROGRESS",
	ErrAPIError:                     "APIERROR",
	ErrNoNode:                       "NONODE",
	ErrNoAuth:                       "NOAUTH",
	ErrBadVersion:                   "BADVERSION",
	ErrNoChildrenForEphemerals:      "NOCHILDRENFOREPHEMERALS",
	ErrNodeExists:                   "NODEEXISTS",
	ErrNotEmpty:                     "NOTEMPTY",
	ErrSessionExpired:               "SESSIONEXPIRED",
	ErrInvalidCallback:              "INVALIDCALLBACK",
	ErrInvalidACL:                   "INVALIDACL",
	ErrAuthFailed:                   "AUTHFAILED",
	ErrSessionMoved:                 "SESSIONMOVED",
	ErrNotReadOnly:                  "NOTREADONLY",
	ErrEphemeralOnLocalSession:      "EPHEMERALONLOCALSESSION",
	ErrNoWatcher:                    "NOWATCHER",
	ErrRequestTimeout:               "REQUESTTIMEOUT",
	ErrReconfigDisabled:             "RECONFIGDISABLED",
	ErrSessionClosedRequireSASLAuth: "SESSIONCLOSEDREQUIRESASLAUTH",
	ErrQuotaExceeded:                "QUOTAEXCEEDED",
	ErrThrottledOp:                  "THROTTLEDOP",
	ErrHistoryCompacted:             "HISTORYCOMPACTED",
}

// String returns the KeeperException.Code name, e.g. "NONODE", or
// "UNKNOWN(N)".
func (e ErrCode) String() string {
	if s, ok := errNames[e]; ok {
		return s
	}
	return "UNKNOWN(" + strconv.Itoa(int(e)) + ")"
}

// Error returns e.g. "zookeeper: NONODE (-101)".
func (e ErrCode) Error() string {
	return "zookeeper: " + e.String() + " (" + strconv.Itoa(int(e)) + ")"
}

// CodeOf maps an error to the wire code a client should see: nil is ErrOK, an
// error wrapping an ErrCode (errors.As) is that code, anything else is
// ErrSystemError. It is the one place where Go errors become wire codes.
func CodeOf(err error) ErrCode {
	if err == nil {
		return ErrOK
	}
	var c ErrCode
	if errors.As(err, &c) {
		return c
	}
	return ErrSystemError
}

// EventType is a WatcherEvent type (Watcher.Event.EventType).
type EventType int32

// Event types.
const (
	EventNone                   EventType = -1
	EventNodeCreated            EventType = 1
	EventNodeDeleted            EventType = 2
	EventNodeDataChanged        EventType = 3
	EventNodeChildrenChanged    EventType = 4
	EventDataWatchRemoved       EventType = 5
	EventChildWatchRemoved      EventType = 6
	EventPersistentWatchRemoved EventType = 7
)

var eventNames = map[EventType]string{
	EventNone:                   "None",
	EventNodeCreated:            "NodeCreated",
	EventNodeDeleted:            "NodeDeleted",
	EventNodeDataChanged:        "NodeDataChanged",
	EventNodeChildrenChanged:    "NodeChildrenChanged",
	EventDataWatchRemoved:       "DataWatchRemoved",
	EventChildWatchRemoved:      "ChildWatchRemoved",
	EventPersistentWatchRemoved: "PersistentWatchRemoved",
}

// String returns the Java enum name, e.g. "NodeCreated", or "EventType(N)".
func (t EventType) String() string {
	if s, ok := eventNames[t]; ok {
		return s
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// State is a keeper state (Watcher.Event.KeeperState). Server-sent
// notifications always carry StateSyncConnected.
type State int32

// Keeper states.
const (
	StateUnknown           State = -1
	StateDisconnected      State = 0
	StateNoSyncConnected   State = 1
	StateSyncConnected     State = 3
	StateAuthFailed        State = 4
	StateConnectedReadOnly State = 5
	StateSaslAuthenticated State = 6
	StateExpired           State = -112
	StateClosed            State = 7
)

var stateNames = map[State]string{
	StateUnknown:           "Unknown",
	StateDisconnected:      "Disconnected",
	StateNoSyncConnected:   "NoSyncConnected",
	StateSyncConnected:     "SyncConnected",
	StateAuthFailed:        "AuthFailed",
	StateConnectedReadOnly: "ConnectedReadOnly",
	StateSaslAuthenticated: "SaslAuthenticated",
	StateExpired:           "Expired",
	StateClosed:            "Closed",
}

// String returns the Java enum name, e.g. "SyncConnected", or "State(N)".
func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Special xids (ClientCnxn).
const (
	XidNotification int32 = -1 // server-to-client WatcherEvent
	XidPing         int32 = -2 // ping request and reply
	XidAuth         int32 = -4 // AuthPacket request and reply
	XidSetWatches   int32 = -8 // SetWatches / SetWatches2 request and reply
)

// Create flags (CreateMode), the Flags field of CreateRequest.
const (
	FlagPersistent              int32 = 0
	FlagEphemeral               int32 = 1
	FlagPersistentSequential    int32 = 2
	FlagEphemeralSequential     int32 = 3
	FlagContainer               int32 = 4 // sent with OpCreateContainer
	FlagPersistentTTL           int32 = 5 // sent with OpCreateTTL
	FlagPersistentSequentialTTL int32 = 6 // sent with OpCreateTTL
)

// ACL permission bits (ZooDefs.Perms).
const (
	PermRead   int32 = 1
	PermWrite  int32 = 2
	PermCreate int32 = 4
	PermDelete int32 = 8
	PermAdmin  int32 = 16
	PermAll    int32 = 31
)

// Watcher types for checkWatches / removeWatches (Watcher.WatcherType).
const (
	WatcherTypeChildren int32 = 1
	WatcherTypeData     int32 = 2
	WatcherTypeAny      int32 = 3
)

// AddWatch modes (AddWatchMode).
const (
	AddWatchModePersistent          int32 = 0
	AddWatchModePersistentRecursive int32 = 1
)

// DefaultMaxBuffer is ZooKeeper's default jute.maxbuffer: the largest frame
// length the server accepts.
const DefaultMaxBuffer = 0xfffff
