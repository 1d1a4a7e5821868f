package server

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

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

func (rc *rawClient) frame() ([]byte, error) {
	var l [4]byte
	if _, err := io.ReadFull(rc.nc, l[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(l[:]))
	_, err := io.ReadFull(rc.nc, b)
	return b, err
}

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
	f, err := parseDigestDirectives(string(ch.Token))
	if err != nil || f["algorithm"] != "md5-sess" || f["qop"] != "auth" || f["realm"] != "zk-sasl-md5" {
		rc.t.Fatalf("challenge %q: %v", ch.Token, err)
	}
	const cnonce, nc, uri = "OA6MHXh6VqTrRk", "00000001", "zookeeper/zk-sasl-md5"
	resp := digestResponse(user, f["realm"], password, f["nonce"], cnonce, nc, "auth", uri, "", "AUTHENTICATE")
	tok := `charset=utf-8,username="` + user + `",realm="zk-sasl-md5",nonce="` + f["nonce"] + `",nc=` + nc +
		`,cnonce="` + cnonce + `",digest-uri="` + uri + `",maxbuf=65536,response=` + resp + `,qop=auth`
	h, body, err = rc.call(jute.OpSASL, &jute.GetSASLRequest{Token: []byte(tok)})
	if err != nil {
		rc.t.Fatal(err)
	}
	if h.Err == jute.ErrOK {
		fin := new(jute.SetSASLResponse)
		jute.Unmarshal(body, fin)
		want := "rspauth=" + digestResponse(user, f["realm"], password, f["nonce"], cnonce, nc, "auth", uri, "", "")
		if string(fin.Token) != want {
			rc.t.Errorf("rspauth %q, want %q", fin.Token, want)
		}
	}
	return h.Err
}

// TestDigestMD5Vector checks the response computation against RFC 2831's
// example (section 4: chris / Circle Of Life / elwood.innosoft.com).
func TestDigestMD5Vector(t *testing.T) {
	got := digestResponse("chris", "elwood.innosoft.com", "secret", "OA6MG9tEQGm2hh", "OA6MHXh6VqTrRk",
		"00000001", "auth", "imap/elwood.innosoft.com", "", "AUTHENTICATE")
	if got != "d388dad90d4bbd760a152321f2143af7" {
		t.Errorf("response %s", got)
	}
	if got := digestResponse("chris", "elwood.innosoft.com", "secret", "OA6MG9tEQGm2hh", "OA6MHXh6VqTrRk",
		"00000001", "auth", "imap/elwood.innosoft.com", "", ""); got != "ea40f60335c427b5527b84dbabcdfffd" {
		t.Errorf("rspauth %s", got)
	}
}

func TestParseJAAS(t *testing.T) {
	sections, err := parseJAAS(`
// ZooKeeper server users
Server {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       user_super="adminsecret"
       user_bob="bob;secret=x";
};
/* the client side */
Client {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       username="bob"
       password="bob;secret=x";
};`)
	if err != nil {
		t.Fatal(err)
	}
	s := sections["Server"]
	if len(s) != 1 || s[0].flag != "required" || s[0].options["user_bob"] != "bob;secret=x" || s[0].options["user_super"] != "adminsecret" {
		t.Errorf("Server: %+v", s)
	}
	if c := sections["Client"]; len(c) != 1 || c[0].options["username"] != "bob" {
		t.Errorf("Client: %+v", c)
	}
	for _, bad := range []string{"Server {", "Server { m required user_a=\"x\" }", "Server { m required user_a=\"x ; };"} {
		if _, err := parseJAAS(bad); err == nil {
			t.Errorf("parseJAAS(%q) accepted", bad)
		}
	}
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
