package auth

import (
	"errors"
	"slices"
	"testing"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

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

// TestDigestMD5Exchange: the client's side and the server's agree for the
// right password, the server refuses a wrong one and a user it does not
// know, and an exchange ends once complete.
func TestDigestMD5Exchange(t *testing.T) {
	users := map[string]string{"bob": "secret"}
	for _, c := range []struct {
		user, password string
		ok             bool
	}{{"bob", "secret", true}, {"bob", "wrong", false}, {"eve", "secret", false}} {
		d := NewDigestMD5(users)
		ch, err := d.Next(nil)
		if err != nil {
			t.Fatal(err)
		}
		tok, rspauth, err := DigestMD5Response(ch, c.user, c.password, "OA6MHXh6VqTrRk")
		if err != nil {
			t.Fatalf("challenge %q: %v", ch, err)
		}
		fin, err := d.Next(tok)
		switch {
		case c.ok && (err != nil || string(fin) != rspauth || !d.Complete() || d.User() != "bob"):
			t.Errorf("%s/%s: %q %v, complete %v user %q", c.user, c.password, fin, err, d.Complete(), d.User())
		case !c.ok && (!errors.Is(err, errDigestAuthFailed) || d.Complete()):
			t.Errorf("%s/%s: %v, complete %v", c.user, c.password, err, d.Complete())
		}
		if _, err := d.Next(tok); !errors.Is(err, errDigestComplete) {
			t.Errorf("a third token: %v", err)
		}
	}
	if _, _, err := DigestMD5Response([]byte(`realm="x",qop="auth-conf",nonce="n",algorithm=md5-sess`), "bob", "secret", "c"); err == nil {
		t.Error("a challenge without qop=auth was answered")
	}
}

// TestProviders: the ids of each scheme's credentials, as ZooKeeper's
// providers give them.
func TestProviders(t *testing.T) {
	super := znode.DigestID("super:pw")
	if got := Digest("alice:secret", super); !slices.Equal(got, []jute.ID{{Scheme: "digest", ID: znode.DigestID("alice:secret")}}) {
		t.Errorf("Digest(alice) = %v", got)
	}
	if got := Digest("super:pw", super); !slices.Equal(got, []jute.ID{{Scheme: "digest", ID: super}, {Scheme: "super", ID: ""}}) {
		t.Errorf("Digest(super) = %v", got)
	}
	if got := Digest("super:pw", ""); len(got) != 1 {
		t.Errorf("Digest without a superDigest = %v", got)
	}
	if got := SASL("zookeeper", "zookeeper"); !slices.Equal(got, []jute.ID{{Scheme: "sasl", ID: "zookeeper"}, {Scheme: "super", ID: ""}}) {
		t.Errorf("SASL(super user) = %v", got)
	}
	held := []jute.ID{{Scheme: "ip", ID: "127.0.0.1"}}
	got := Merge(held, []jute.ID{{Scheme: "ip", ID: "127.0.0.1"}, {Scheme: "sasl", ID: "bob"}})
	if !slices.Equal(got, []jute.ID{{Scheme: "ip", ID: "127.0.0.1"}, {Scheme: "sasl", ID: "bob"}}) || len(held) != 1 {
		t.Errorf("Merge = %v (held %v)", got, held)
	}
	for _, c := range []struct {
		header string
		want   []jute.ID
		err    error
	}{
		{"", nil, ErrAuthMissing},
		{"digest alice:secret", []jute.ID{{Scheme: "digest", ID: znode.DigestID("alice:secret")}}, nil},
		{"digest super:pw", []jute.ID{{Scheme: "super", ID: ""}, {Scheme: "digest", ID: super}}, nil},
		{"ip", []jute.ID{{Scheme: "ip", ID: "10.0.0.1"}}, nil},
		{"digest", nil, ErrNotAuthenticated},
		{"x509 CN=a", nil, ErrNotAuthenticated},
		{"digest a b", nil, ErrNotAuthenticated},
	} {
		ids, err := Header(c.header, "10.0.0.1", super)
		if !errors.Is(err, c.err) || !slices.Equal(ids, c.want) {
			t.Errorf("Header(%q) = %v, %v; want %v, %v", c.header, ids, err, c.want, c.err)
		}
	}
}
