package conformance

import "fmt"

// Wire constants used by the raw-socket tests. They are spelled out here, not
// taken from jute, so that the suite states ZooKeeper's numbers independently
// of the implementation under test (zookeeper-facts.md §1).

// Op codes (ZooDefs.OpCode).
const (
	opNotification         int32 = 0
	opCreate               int32 = 1
	opDelete               int32 = 2
	opExists               int32 = 3
	opGetData              int32 = 4
	opSetData              int32 = 5
	opGetACL               int32 = 6
	opSetACL               int32 = 7
	opGetChildren          int32 = 8
	opSync                 int32 = 9
	opPing                 int32 = 11
	opGetChildren2         int32 = 12
	opCheck                int32 = 13
	opMulti                int32 = 14
	opCreate2              int32 = 15
	opReconfig             int32 = 16
	opCheckWatches         int32 = 17
	opRemoveWatches        int32 = 18
	opCreateContainer      int32 = 19
	opCreateTTL            int32 = 21
	opMultiRead            int32 = 22
	opAuth                 int32 = 100
	opSetWatches           int32 = 101
	opGetEphemerals        int32 = 103
	opGetAllChildrenNumber int32 = 104
	opSetWatches2          int32 = 105
	opAddWatch             int32 = 106
	opWhoAmI               int32 = 107
	opCreateSession        int32 = -10
	opCloseSession         int32 = -11
	opError                int32 = -1 // multi sub-result type of a failed multi
	opUnknownForTest       int32 = 999
)

// Error codes (KeeperException.Code).
const (
	errOK                      int32 = 0
	errRuntimeInconsistency    int32 = -2
	errMarshallingError        int32 = -5
	errUnimplemented           int32 = -6
	errBadArguments            int32 = -8
	errNoNode                  int32 = -101
	errBadVersion              int32 = -103
	errNoChildrenForEphemerals int32 = -108
	errNodeExists              int32 = -110
	errNotEmpty                int32 = -111
	errNoAuth                  int32 = -102
	errInvalidACL              int32 = -114
	errAuthFailed              int32 = -115
	errNoWatcher               int32 = -121
	errReconfigDisabled        int32 = -123
	errQuotaExceeded           int32 = -125
)

// Special xids (ClientCnxn).
const (
	xidNotification int32 = -1
	xidPing         int32 = -2
	xidAuth         int32 = -4
	xidSetWatches   int32 = -8
)

// Watcher event types and the state carried by server notifications.
const (
	eventNodeCreated         int32 = 1
	eventNodeDeleted         int32 = 2
	eventNodeDataChanged     int32 = 3
	eventNodeChildrenChanged int32 = 4
	eventDataWatchRemoved    int32 = 5
	eventChildWatchRemoved   int32 = 6

	stateSyncConnected int32 = 3
)

// Create flags (CreateMode).
const (
	flagPersistent           int32 = 0
	flagEphemeral            int32 = 1
	flagPersistentSequential int32 = 2
	flagEphemeralSequential  int32 = 3
	flagContainer            int32 = 4
	flagTTL                  int32 = 5
	flagTTLSequential        int32 = 6
)

// addWatch modes (AddWatchMode) and checkWatches/removeWatches watcher types
// (Watcher.WatcherType; 4 and 5 exist only in ZooKeeper 3.9).
const (
	addWatchPersistent          int32 = 0
	addWatchPersistentRecursive int32 = 1

	watcherChildren            int32 = 1
	watcherData                int32 = 2
	watcherAny                 int32 = 3
	watcherPersistent          int32 = 4
	watcherPersistentRecursive int32 = 5
)

// Perms.
const (
	permRead   int32 = 1
	permWrite  int32 = 2
	permCreate int32 = 4
	permDelete int32 = 8
	permAdmin  int32 = 16
	permAll    int32 = 31
)

// maxFrame is jute.maxbuffer's default (0xfffff): the largest frame length the
// server accepts.
const maxFrame = 0xfffff

var errNames = map[int32]string{
	0: "OK", -1: "SYSTEMERROR", -2: "RUNTIMEINCONSISTENCY", -3: "DATAINCONSISTENCY",
	-4: "CONNECTIONLOSS", -5: "MARSHALLINGERROR", -6: "UNIMPLEMENTED", -7: "OPERATIONTIMEOUT",
	-8: "BADARGUMENTS", -12: "UNKNOWNSESSION", -100: "APIERROR", -101: "NONODE", -102: "NOAUTH",
	-103: "BADVERSION", -108: "NOCHILDRENFOREPHEMERALS", -110: "NODEEXISTS", -111: "NOTEMPTY",
	-112: "SESSIONEXPIRED", -114: "INVALIDACL", -115: "AUTHFAILED", -118: "SESSIONMOVED",
	-121: "NOWATCHER", -123: "RECONFIGDISABLED", -125: "QUOTAEXCEEDED",
}

// errName renders an error code for failure messages, e.g. "NONODE(-101)".
func errName(code int32) string {
	if n, ok := errNames[code]; ok {
		return fmt.Sprintf("%s(%d)", n, code)
	}
	return fmt.Sprintf("code(%d)", code)
}
