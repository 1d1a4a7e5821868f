package server

import (
	"reflect"
	"strings"

	"github.com/zkraft/zkraft/jute"
)

// The op table: how the member answers each op code a client may send.
//
// What the wire says about an op (its name, which is also its metrics
// label, its request and reply records, whether it is a write) is jute's op
// table (jute.OpSpec); jute imports nothing of the server, so what only the
// server knows lives here, keyed by the same codes: which part of the
// member answers the op, a read's handler, and ZooKeeper's lastOp
// abbreviation. A new read op is one entry here (and one in jute) plus its
// handler in reads.go, as ZooKeeper's FinalRequestProcessor has one short
// case per op calling a named handler. TestOpTable checks that every code
// jute knows has an entry here, of one kind, and that each read handler
// takes jute's request record for its op.

// opKind says which part of the member answers an op.
type opKind uint8

const (
	opUnset opKind = iota // a table entry that says nothing (TestOpTable fails)
	// opRead: decoded, then run by its read handler in order on the
	// connection's processor (reads.go).
	opRead
	// opWrite: proposed through the log and applied by the state machine;
	// the fact is jute's (jute.OpSpec.Write), conn.dispatch proposes it.
	opWrite
	// opConn: answered by the connection itself (conn.dispatch, sasl.go):
	// ping, auth, sasl, closeSession; createSession is the handshake.
	opConn
	// opUnimplemented: answered UNIMPLEMENTED with zxid -1, the connection
	// staying open: a code that no client sends to a ZooKeeper server.
	opUnimplemented
)

// opEntry is how the member answers one op code.
type opEntry struct {
	kind opKind // set from read and jute.OpSpec.Write where those say it
	// read builds the execution of a read (kind opRead).
	read readHandler
	// lastOp is ZooKeeper's abbreviation of the op in cons and the
	// connections command (FinalRequestProcessor's lastOp); "" where
	// ZooKeeper has none, and the op's name is shown.
	lastOp string
	// untimed: the request counts in neither readlatency nor updatelatency
	// (the connection's own exchanges: ping, auth, sasl).
	untimed bool
}

// opTable holds an entry for every op code jute knows, and only those.
var opTable = withKinds(map[jute.OpCode]opEntry{
	// Writes (jute.OpSpec.Write). check alone and reconfig have
	// conn.dispatch's special cases: UNIMPLEMENTED and close (as
	// ZooKeeper 3.9), and the reconfig path when it is enabled.
	jute.OpCreate:          {lastOp: "CREA"},
	jute.OpCreate2:         {lastOp: "CREA"},
	jute.OpCreateContainer: {lastOp: "CREA"},
	jute.OpCreateTTL:       {lastOp: "CREA"},
	jute.OpDelete:          {lastOp: "DELE"},
	jute.OpSetData:         {lastOp: "SETD"},
	jute.OpSetACL:          {lastOp: "SETA"},
	jute.OpCheck:           {lastOp: "CHEC"},
	jute.OpMulti:           {lastOp: "MULT"},
	jute.OpReconfig:        {lastOp: "RECO"},

	// Reads (reads.go).
	jute.OpExists:               {lastOp: "EXIS", read: handle((*conn).existsOp)},
	jute.OpGetData:              {lastOp: "GETD", read: handle((*conn).getDataOp)},
	jute.OpGetChildren:          {lastOp: "GETC", read: handle((*conn).getChildrenOp)},
	jute.OpGetChildren2:         {lastOp: "GETC", read: handle((*conn).getChildren2Op)},
	jute.OpGetACL:               {lastOp: "GETA", read: handle((*conn).getACLOp)},
	jute.OpSync:                 {lastOp: "SYNC", read: handle((*conn).syncOp)},
	jute.OpGetAllChildrenNumber: {lastOp: "GETACN", read: handle((*conn).getAllChildrenNumberOp)},
	jute.OpGetEphemerals:        {lastOp: "GETE", read: handle((*conn).getEphemeralsOp)},
	jute.OpWhoAmI:               {lastOp: "HOMI", read: handle((*conn).whoAmIOp)},
	jute.OpMultiRead:            {lastOp: "MLTR", read: handle((*conn).multiReadOp)},
	jute.OpSetWatches:           {lastOp: "SETW", read: handle((*conn).setWatchesOp)},
	jute.OpSetWatches2:          {lastOp: "SETW", read: handle((*conn).setWatches2Op)},
	jute.OpAddWatch:             {lastOp: "ADDW", read: handle((*conn).addWatchOp)},
	jute.OpCheckWatches:         {lastOp: "CHKW", read: handle((*conn).checkWatchesOp)},
	jute.OpRemoveWatches:        {lastOp: "REMW", read: handle((*conn).removeWatchesOp)},
	jute.OpWatchFrom:            {read: handle((*conn).watchFromOp)},   // resumable.go
	jute.OpUnwatchFrom:          {read: handle((*conn).unwatchFromOp)}, // resumable.go

	// Answered by the connection itself.
	jute.OpPing:          {kind: opConn, lastOp: "PING", untimed: true},
	jute.OpAuth:          {kind: opConn, lastOp: "AUTH", untimed: true},
	jute.OpSASL:          {kind: opConn, lastOp: "SASL", untimed: true},
	jute.OpCloseSession:  {kind: opConn, lastOp: "CLOS"},
	jute.OpCreateSession: {kind: opConn, lastOp: "SESS"},

	// Not taken from a client. deleteContainer is the container reaper's
	// own command (raftsm accepts it from no session); notification and
	// error travel only from the server.
	jute.OpDeleteContainer: {kind: opUnimplemented, lastOp: "DELE"},
	jute.OpNotification:    {kind: opUnimplemented},
	jute.OpError:           {kind: opUnimplemented},
})

// withKinds sets the kind that an entry's read handler or jute's Write
// flag implies, so that neither fact is written twice.
func withKinds(t map[jute.OpCode]opEntry) map[jute.OpCode]opEntry {
	for op, e := range t {
		spec, _ := jute.Op(op)
		switch {
		case e.kind != opUnset:
		case e.read.plan != nil:
			e.kind = opRead
		case spec.Write:
			e.kind = opWrite
		}
		t[op] = e
	}
	return t
}

// lastOpOf is what cons shows as the last operation of a connection that
// sent op.
func lastOpOf(op jute.OpCode) string {
	if e := opTable[op]; e.lastOp != "" {
		return e.lastOp
	}
	return op.String()
}

// opLabel is the op's label in zkraft_requests_total: jute's name, and
// "unknown" for every op code jute does not know (a label per code would
// let a client grow the metric without bound by sending made-up codes).
func opLabel(op jute.OpCode) string {
	if name := op.String(); !strings.HasPrefix(name, "unknown(") {
		return name
	}
	return "unknown"
}

// readHandler builds the execution of a read from its decoded request.
type readHandler struct {
	// req is the request record plan takes: jute's for the op.
	req  reflect.Type
	plan func(c *conn, q *readReq, req jute.Record) readPlan
}

// handle makes a readHandler of a handler that takes its own record type.
func handle[R jute.Record](fn func(c *conn, q *readReq, req R) readPlan) readHandler {
	return readHandler{
		req:  reflect.TypeFor[R](),
		plan: func(c *conn, q *readReq, req jute.Record) readPlan { return fn(c, q, req.(R)) },
	}
}
