package server

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/auth"
	"github.com/zkraft/zkraft/jute"
)

// rawClient speaks the wire protocol directly (go-zookeeper has no SASL).
type rawClient struct {
	t   *testing.T
	nc  net.Conn
	xid int32
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	rc := &rawClient{t: t, nc: nc}
	if _, err := nc.Write(jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)})); err != nil {
		t.Fatal(err)
	}
	resp := new(jute.ConnectResponse)
	body, err := rc.frame()
	if err != nil {
		t.Fatal(err)
	}
	if err := jute.Unmarshal(body, resp); err != nil || resp.SessionID == 0 {
		t.Fatalf("connect: %+v %v", resp, err)
	}
	return rc
}

func (rc *rawClient) frame() ([]byte, error) { return jute.ReadFrame(rc.nc, nil, 1<<20) }

// call sends one request and returns the reply header and body; err is
// the read error (the server closed).
func (rc *rawClient) call(op jute.OpCode, req jute.Record) (*jute.ReplyHeader, []byte, error) {
	rc.xid++
	if _, err := rc.nc.Write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: rc.xid, Type: op}, req)); err != nil {
		return nil, nil, err
	}
	b, err := rc.frame()
	if err != nil {
		return nil, nil, err
	}
	r := jute.NewReader(b)
	h := new(jute.ReplyHeader)
	h.Decode(r)
	return h, r.Rest(), r.Err()
}

// saslDigest runs the client side of DIGEST-MD5 (as Java's DigestMD5Client)
// and returns the final reply's error code.
func (rc *rawClient) saslDigest(user, password string) jute.ErrCode {
	rc.t.Helper()
	h, body, err := rc.call(jute.OpSASL, &jute.GetSASLRequest{Token: []byte{}})
	if err != nil {
		rc.t.Fatal(err)
	}
	if h.Err != jute.ErrOK || h.Zxid != 0 || h.Xid != rc.xid {
		rc.t.Fatalf("challenge reply %+v", h)
	}
	ch := new(jute.SetSASLResponse)
	if err := jute.Unmarshal(body, ch); err != nil {
		rc.t.Fatal(err)
	}
	tok, rspauth, err := auth.DigestMD5Response(ch.Token, user, password, "OA6MHXh6VqTrRk")
	if err != nil || !strings.Contains(string(ch.Token), `realm="zk-sasl-md5"`) {
		rc.t.Fatalf("challenge %q: %v", ch.Token, err)
	}
	h, body, err = rc.call(jute.OpSASL, &jute.GetSASLRequest{Token: tok})
	if err != nil {
		rc.t.Fatal(err)
	}
	if h.Err == jute.ErrOK {
		fin := new(jute.SetSASLResponse)
		jute.Unmarshal(body, fin)
		if string(fin.Token) != rspauth {
			rc.t.Errorf("rspauth %q, want %q", fin.Token, rspauth)
		}
	}
	return h.Err
}

func TestSASLDigest(t *testing.T) {
	jaas := filepath.Join(t.TempDir(), "jaas.conf")
	os.WriteFile(jaas, []byte(`Server {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  user_alice="secret"
  user_admin="adminpw";
};`), 0o600)
	s := startStandalone(t, func(c *Config) {
		c.SASL = SASLConfig{JAASFile: jaas, SuperUser: "admin"}
	})
	addr := s.Addr().String()

	rc := dialRaw(t, addr)
	if code := rc.saslDigest("alice", "secret"); code != jute.ErrOK {
		t.Fatalf("alice: %v", code)
	}
	acl := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "sasl", ID: "alice"}}}
	if h, _, err := rc.call(jute.OpCreate, &jute.CreateRequest{Path: "/sasl", Data: []byte("a"), ACL: acl}); err != nil || h.Err != jute.ErrOK {
		t.Fatalf("create: %+v %v", h, err)
	}
	if h, _, err := rc.call(jute.OpGetData, &jute.GetDataRequest{Path: "/sasl"}); err != nil || h.Err != jute.ErrOK {
		t.Fatalf("get as alice: %+v %v", h, err)
	}
	// Another session is not alice; the super user reads everything.
	plain := connectZK(t, addr)
	if _, _, err := plain.Get("/sasl"); err != zk.ErrNoAuth {
		t.Errorf("plain get: %v", err)
	}
	su := dialRaw(t, addr)
	if code := su.saslDigest("admin", "adminpw"); code != jute.ErrOK {
		t.Fatalf("admin: %v", code)
	}
	if h, _, err := su.call(jute.OpGetData, &jute.GetDataRequest{Path: "/sasl"}); err != nil || h.Err != jute.ErrOK {
		t.Errorf("get as super: %+v %v", h, err)
	}

	// Wrong password: AUTHFAILED, then the server closes the connection.
	bad := dialRaw(t, addr)
	if code := bad.saslDigest("alice", "wrong"); code != jute.ErrAuthFailed {
		t.Errorf("wrong password: %v", code)
	}
	if _, err := bad.frame(); err == nil {
		t.Error("connection open after AUTHFAILED")
	}
	// An unknown user and a garbage token too.
	if code := dialRaw(t, addr).saslDigest("mallory", "x"); code != jute.ErrAuthFailed {
		t.Errorf("unknown user: %v", code)
	}
	g := dialRaw(t, addr)
	g.call(jute.OpSASL, &jute.GetSASLRequest{Token: []byte{}})
	if h, _, err := g.call(jute.OpSASL, &jute.GetSASLRequest{Token: []byte(`username="x,`)}); err != nil || h.Err != jute.ErrAuthFailed {
		t.Errorf("garbage token: %+v %v", h, err)
	}
	// The server and the authenticated session go on.
	if h, _, err := rc.call(jute.OpGetData, &jute.GetDataRequest{Path: "/sasl"}); err != nil || h.Err != jute.ErrOK {
		t.Fatalf("alice after failures: %+v %v", h, err)
	}
	if n := s.counters.authFailed.Load(); n != 3 {
		t.Errorf("auth_failed_count %d, want 3", n)
	}
}

func TestEnforceAuth(t *testing.T) {
	s := startStandalone(t, func(c *Config) {
		c.SASL = SASLConfig{Users: map[string]string{"alice": "secret"}, EnforceAuth: true}
	})
	addr := s.Addr().String()
	// Without authentication the first request is refused and the
	// connection closed.
	rc := dialRaw(t, addr)
	h, _, err := rc.call(jute.OpExists, &jute.ExistsRequest{Path: "/"})
	if err != nil || h.Err != jute.ErrSessionClosedRequireSASLAuth {
		t.Fatalf("unauthenticated exists: %+v %v", h, err)
	}
	if _, err := rc.frame(); err == nil {
		t.Error("connection open after SESSIONCLOSEDREQUIRESASLAUTH")
	}
	// A failed SASL exchange is answered SESSIONCLOSEDREQUIRESASLAUTH.
	if code := dialRaw(t, addr).saslDigest("alice", "nope"); code != jute.ErrSessionClosedRequireSASLAuth {
		t.Errorf("failed sasl under enforcement: %v", code)
	}
	ok := dialRaw(t, addr)
	if code := ok.saslDigest("alice", "secret"); code != jute.ErrOK {
		t.Fatal(code)
	}
	if h, _, err := ok.call(jute.OpExists, &jute.ExistsRequest{Path: "/"}); err != nil || h.Err != jute.ErrOK {
		t.Fatalf("authenticated exists: %+v %v", h, err)
	}
	if !strings.Contains(fourLW(t, addr, "srvr"), "Mode: standalone") {
		t.Error("srvr")
	}
}
