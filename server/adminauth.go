package server

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/zkraft/zkraft/auth"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/znode"
)

// ZooKeeper 3.9's AdminServer commands that change or expose the whole
// state (snapshot, restore, shed_connections) carry an AuthRequest: the
// request's Authorization header names a client authentication scheme
// and its credentials (auth.Header turns them into ids exactly as for a
// client's addAuth), and the ids must hold every permission the command
// asks for on a znode (ALL on "/" for all three): a super user always
// does, and with the default open ACL of "/" every authenticated caller
// does, so an operator who wants these commands closed sets an ACL on "/".
// zkraft's console uses the same check for its actions (console.go).

// ZooKeeper's sentences for the refusals of an AuthRequest beyond
// auth.Header's, with their HTTP status codes.
const (
	authNotAuthorized = "Not authorized"
	authError         = "Error occurred during auth"
)

// authRefusal is a request refused by the AdminServer's authentication.
type authRefusal struct {
	status int
	text   string
}

func (a *authRefusal) Error() string { return a.text }

var errNotAuthorized = &authRefusal{http.StatusForbidden, authNotAuthorized}

// httpRemoteIP is the address of an HTTP request's peer (ZooKeeper's
// IPAuthenticationProvider.getClientIPAddress without X-Forwarded-For,
// its default).
func httpRemoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// adminAuthenticate turns an Authorization header into ids
// (auth.Header): 401 without one, or when the scheme is unknown, cannot be
// used over HTTP or authenticates no id.
func (s *Server) adminAuthenticate(r *http.Request) ([]jute.ID, error) {
	ids, err := auth.Header(r.Header.Get("Authorization"), httpRemoteIP(r), s.cfg.SuperDigest)
	if err != nil {
		return nil, &authRefusal{http.StatusUnauthorized, err.Error()}
	}
	return ids, nil
}

// adminAuthorize authenticates the request and checks that its ids hold
// every bit of perm on path (ZooKeeper's Commands.handleAuthorization).
// The ACL is read as a client's getACL is, through the cell.
func (s *Server) adminAuthorize(r *http.Request, perm int32, path string) ([]jute.ID, error) {
	ids, err := s.adminAuthenticate(r)
	if err != nil {
		return nil, err
	}
	acl, err := s.consoleACL(path)
	if err != nil {
		return nil, &authRefusal{http.StatusInternalServerError, authError}
	}
	for b := int32(1); b <= perm; b <<= 1 {
		if perm&b != 0 && znode.CheckACL(acl, b, ids) != nil {
			return nil, errNotAuthorized
		}
	}
	return ids, nil
}

// superAuth reads everything, for the server's own bookkeeping (the
// AdminServer's authorization and the console read ACLs with it).
var superAuth = []jute.ID{{Scheme: "super", ID: "zkraft"}}

// consoleACL reads a znode's ACL with the server's own rights, on the
// read path clients use.
func (s *Server) consoleACL(path string) ([]jute.ACL, error) {
	return consoleRead(s, func(v raftsm.View) ([]jute.ACL, error) {
		_, acl, err := znode.Reader{KV: v.Tree(), Auth: superAuth}.GetACL(path)
		return acl, err
	})
}

// consoleRead runs fn on a consistent snapshot of the cell's state, as a
// client's read runs (snapshotRead): after a ReadIndex unless the member
// reads locally, never under the state machine's lock.
func consoleRead[T any](s *Server, fn func(v raftsm.View) (T, error)) (T, error) {
	q := localRead
	if s.cfg.ReadMode == ReadLinearizable && !s.cell.localReads.Load() {
		q = linearizableRead
	}
	return readValue(s.cell.rep, nil, q, fn)
}

// adminReply is a command's answer over HTTP.
type adminReply struct {
	status int // 0: 200
	fields jobj
	err    string
	// headers are set before the body.
	headers [][2]string
	// body, if set, is sent as application/octet-stream instead of JSON
	// (a streamed snapshot); it is closed after.
	body io.ReadCloser
}

// queryBool is a boolean query parameter as Java's Boolean.parseBoolean
// reads it ("true" in any case is true, anything else false), def when
// absent.
func queryBool(r *http.Request, name string, def bool) bool {
	q := r.URL.Query()
	if !q.Has(name) {
		return def
	}
	return strings.EqualFold(q.Get(name), "true")
}

// hexZxid is a zxid as ZooKeeper's admin headers print it: "0x" and
// ZxidUtils.zxidToString, lower-case hex without padding.
func hexZxid(z int64) string { return "0x" + strconv.FormatInt(z, 16) }
