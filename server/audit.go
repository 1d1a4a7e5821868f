package server

import (
	"fmt"
	"io"
	"os/user"
	"strings"
	"sync"
	"time"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
)

// ZooKeeper's audit log (zookeeper.audit.enable, ZooKeeper 3.6+): one line
// per change a client asked this member for, written once the change's
// outcome is known, as ZooKeeper's AuditHelper writes it from the
// FinalRequestProcessor of the server the client is connected to:
//
//	2026-12-01 14:50:00,123 INFO audit.Slf4jAuditLogger: session=0x1000..	user=127.0.0.1,alice	ip=127.0.0.1	operation=create	znode=/a	znode_type=persistent	result=success
//
// The line is ZooKeeper's AuditEvent (key=value pairs separated by tabs, in
// the order session, user, ip, operation, znode, znode_type, acl, with
// null values left out and result last) under the pattern of the audit
// appender of ZooKeeper's logback.xml, "%d{ISO8601} %p %c{2}: %m%n", for
// the logger org.apache.zookeeper.audit.Slf4jAuditLogger (3.6 called it
// Log4jAuditLogger); a failure is logged at ERROR, the rest at INFO.
//
// What is logged follows AuditHelper: create (create, create2 and
// createContainer; not createTTL outside a multi, as ZooKeeper), delete,
// setData and setAcl, each with the request's path when it failed and the
// result's when it succeeded; a multi logs each change it made (a create
// with znode_type only when the created path is the requested one, as
// ZooKeeper finds the mode by path), or one multiOperation failure without
// a path; each ephemeral a session's close or expiry deleted
// (ephemeralZNodeDeletionOnSessionCloseOrExpire, on every member, as
// ZooKeeper's DataTree does); serverStart when the server
// starts and serverStop (result=invoked) when it closes, with the OS user
// that runs it. The console's actions (console/) are logged through Audit
// with the admin's user and the HTTP peer's address, without a session.
// Reconfig is not logged.

// AuditLogger is the name of ZooKeeper's audit logger.
const AuditLogger = "org.apache.zookeeper.audit.Slf4jAuditLogger"

// The operations of ZooKeeper's AuditConstants.
const (
	AuditCreate  = "create"
	AuditDelete  = "delete"
	AuditSetData = "setData"
	AuditSetACL  = "setAcl"
	AuditMulti   = "multiOperation"
	auditStart   = "serverStart"
	auditStop    = "serverStop"
	// AuditKillSession is the console's: ZooKeeper has no such action.
	AuditKillSession = "killSession"
)

// AuditEvent is one line of the audit log; empty fields are left out.
type AuditEvent struct {
	Session, User, IP, Operation, Znode, ZnodeType, ACL string
	// Result is "success", "failure" or "invoked".
	Result string
}

// String is ZooKeeper's AuditEvent.toString.
func (e AuditEvent) String() string {
	var b strings.Builder
	for _, f := range [...][2]string{{"session", e.Session}, {"user", e.User}, {"ip", e.IP},
		{"operation", e.Operation}, {"znode", e.Znode}, {"znode_type", e.ZnodeType}, {"acl", e.ACL}} {
		if f[1] == "" {
			continue
		}
		b.WriteString(f[0])
		b.WriteByte('=')
		b.WriteString(auditSanitize(f[1]))
		b.WriteByte('\t')
	}
	b.WriteString("result=")
	b.WriteString(e.Result)
	return b.String()
}

// auditSanitize drops tabs and line breaks, as AuditEvent.sanitize.
func auditSanitize(s string) string {
	return strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(s)
}

// auditLog writes the audit lines; nil when audit is off.
type auditLog struct {
	mu struct {
		sync.Mutex
		w io.Writer
	}
}

func newAuditLog(w io.Writer) *auditLog {
	if w == nil {
		return nil
	}
	a := &auditLog{}
	a.mu.w = w
	return a
}

func (a *auditLog) log(e AuditEvent) {
	if a == nil {
		return
	}
	level := "INFO"
	if e.Result == "failure" {
		level = "ERROR"
	}
	line := fmt.Sprintf("%s %s audit.Slf4jAuditLogger: %s\n", time.Now().Format("2006-01-02 15:04:05,000"), level, e)
	a.mu.Lock()
	defer a.mu.Unlock()
	io.WriteString(a.mu.w, line)
}

// Audit writes one event to the audit log, if it is on.
func (s *Server) Audit(e AuditEvent) { s.audit.log(e) }

// AuditEnabled reports whether the audit log is on.
func (s *Server) AuditEnabled() bool { return s.audit != nil }

// auditServer logs serverStart or serverStop as the OS user.
func (s *Server) auditServer(op, result string) {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	s.audit.log(AuditEvent{User: name, Operation: op, Result: result})
}

// AuditUsers is the user field of a request with these ids (ZooKeeper's
// AuthUtil.getUsers): each id's user name by its scheme's provider (digest:
// the name before the first ':'; ip, x509, sasl: the id), those without a
// provider (super) left out, joined by ','. The super user's name comes
// first, as ZooKeeper 3.8 prints it ("super,127.0.0.1" where another digest
// user gets "127.0.0.1,alice"; TestAuditLogMatchesZooKeeper).
func AuditUsers(ids []jute.ID) string {
	var names []string
	for i, id := range ids {
		n := ""
		switch id.Scheme {
		case "digest":
			n, _, _ = strings.Cut(id.ID, ":")
		case "ip", "x509", "sasl":
			n = id.ID
		}
		if strings.TrimSpace(n) == "" {
			continue
		}
		// authenticate adds the super id right after the digest id that
		// matched the superDigest.
		if id.Scheme == "digest" && i+1 < len(ids) && ids[i+1].Scheme == "super" {
			names = append([]string{n}, names...)
			continue
		}
		names = append(names, n)
	}
	return strings.Join(names, ",")
}

// AuditACL is an ACL as ZooKeeper's ZKUtil.aclToString prints it:
// scheme:id:perms for each entry, with nothing between entries, the
// permissions in getPermString's order c, d, r, w, a.
func AuditACL(acl []jute.ACL) string {
	var b strings.Builder
	for _, a := range acl {
		b.WriteString(a.ID.Scheme)
		b.WriteByte(':')
		b.WriteString(a.ID.ID)
		b.WriteByte(':')
		for _, p := range [...]struct {
			bit int32
			c   byte
		}{{jute.PermCreate, 'c'}, {jute.PermDelete, 'd'}, {jute.PermRead, 'r'}, {jute.PermWrite, 'w'}, {jute.PermAdmin, 'a'}} {
			if a.Perms&p.bit != 0 {
				b.WriteByte(p.c)
			}
		}
	}
	return b.String()
}

// AuditCreateMode is CreateMode.fromFlag(flags).toString().toLowerCase().
func AuditCreateMode(flags int32) string {
	switch flags {
	case 0:
		return "persistent"
	case 1:
		return "ephemeral"
	case 2:
		return "persistent_sequential"
	case 3:
		return "ephemeral_sequential"
	case 4:
		return "container"
	case 5:
		return "persistent_with_ttl"
	case 6:
		return "persistent_sequential_with_ttl"
	}
	return ""
}

func auditResult(failed bool) string {
	if failed {
		return "failure"
	}
	return "success"
}

// auditWrite logs a client's write once its reply is known. body is the
// request's (copied when it was read).
func (c *conn) auditWrite(op jute.OpCode, body []byte, rep *raftsm.Reply) {
	ev := AuditEvent{Session: hexID(c.sessionID), User: AuditUsers(c.authIDs()), IP: c.ip}
	failed := rep.Err != jute.ErrOK
	switch op {
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer:
		req := new(jute.CreateRequest)
		if jute.Unmarshal(body, req) != nil {
			return
		}
		ev.Operation, ev.ZnodeType, ev.Znode = AuditCreate, AuditCreateMode(req.Flags), req.Path
		if !failed {
			ev.Znode = createdPath(op, rep.Body, req.Path)
		}
	case jute.OpDelete, jute.OpDeleteContainer:
		req := new(jute.DeleteRequest)
		if jute.Unmarshal(body, req) != nil {
			return
		}
		ev.Operation, ev.Znode = AuditDelete, req.Path
	case jute.OpSetData:
		req := new(jute.SetDataRequest)
		if jute.Unmarshal(body, req) != nil {
			return
		}
		ev.Operation, ev.Znode = AuditSetData, req.Path
	case jute.OpSetACL:
		req := new(jute.SetACLRequest)
		if jute.Unmarshal(body, req) != nil {
			return
		}
		ev.Operation, ev.Znode, ev.ACL = AuditSetACL, req.Path, AuditACL(req.ACL)
	case jute.OpMulti:
		c.auditMulti(ev, body, rep)
		return
	default:
		return
	}
	ev.Result = auditResult(failed)
	c.srv.audit.log(ev)
}

// createdPath is the path a create's reply names, or the request's.
func createdPath(op jute.OpCode, body []byte, reqPath string) string {
	if op == jute.OpCreate {
		r := new(jute.CreateResponse)
		if jute.Unmarshal(body, r) == nil {
			return r.Path
		}
		return reqPath
	}
	r := new(jute.Create2Response)
	if jute.Unmarshal(body, r) == nil {
		return r.Path
	}
	return reqPath
}

// auditMulti logs each change of a multi that applied, or one
// multiOperation failure.
func (c *conn) auditMulti(ev AuditEvent, body []byte, rep *raftsm.Reply) {
	req, res := new(jute.MultiRequest), new(jute.MultiResponse)
	if jute.Unmarshal(body, req) != nil {
		return
	}
	failed := rep.Err != jute.ErrOK || jute.Unmarshal(rep.Body, res) != nil
	for _, r := range res.Results {
		if r.Type == jute.OpError {
			failed = true
		}
	}
	if failed {
		ev.Operation, ev.Result = AuditMulti, "failure"
		c.srv.audit.log(ev)
		return
	}
	for i, r := range res.Results {
		if i >= len(req.Ops) {
			break
		}
		e := ev
		e.Result = "success"
		switch q := req.Ops[i].Req.(type) {
		case *jute.CreateRequest:
			// ZooKeeper looks the mode up by the created path among the
			// requests' paths: a sequential node's is not there.
			e.Operation, e.Znode = AuditCreate, resultPath(r.Resp, q.Path)
			if e.Znode == q.Path {
				e.ZnodeType = AuditCreateMode(q.Flags)
			}
		case *jute.CreateTTLRequest:
			// Nor is a TTL node's (its mode is not collected).
			e.Operation, e.Znode = AuditCreate, resultPath(r.Resp, q.Path)
		case *jute.DeleteRequest:
			e.Operation, e.Znode = AuditDelete, q.Path
		case *jute.SetDataRequest:
			e.Operation, e.Znode = AuditSetData, q.Path
		default:
			continue
		}
		c.srv.audit.log(e)
	}
}

func resultPath(r jute.Record, def string) string {
	switch x := r.(type) {
	case *jute.CreateResponse:
		return x.Path
	case *jute.Create2Response:
		return x.Path
	}
	return def
}

// auditEphemeralDeletion is ZooKeeper's AuditConstants.OP_DEL_EZNODE_EXP.
const auditEphemeralDeletion = "ephemeralZNodeDeletionOnSessionCloseOrExpire"

// auditEphemerals logs the ephemerals a session's close or expiry deleted,
// as ZooKeeper's DataTree.killSession does on every member, with the
// server's OS user: the NodeDeleted triggers at the close's zxid that
// precede its EventSessionClosed. It runs in the event sink, under the
// state machine's lock, and only writes a line per node when audit is on.
func (s *Server) auditEphemerals(before []raftsm.Event, closed *raftsm.Event) {
	if s.audit == nil {
		return
	}
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	for _, ev := range before {
		if ev.Kind == raftsm.EventWatch && ev.Zxid == closed.Zxid && ev.Type == jute.EventNodeDeleted {
			s.audit.log(AuditEvent{Session: hexID(closed.Session), User: name, Operation: auditEphemeralDeletion,
				Znode: ev.Path, Result: "success"})
		}
	}
}
