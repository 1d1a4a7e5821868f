package server

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/znode"
)

// ZooKeeper 3.8 has neither the snapshot nor the shed_connections
// command, nor an AuthRequest on any command: these tests hold zkraft to
// ZooKeeper 3.9's documented and coded behaviour (Commands.runCommand,
// ShedConnectionsCommand): its status codes, sentences and fields.

// adminDo sends one AdminServer request and returns the status, the
// headers and the body.
func adminDo(t *testing.T, method, url, auth, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestAdminAuthRequest(t *testing.T) {
	const superPass = "super:secret"
	s := startStandalone(t, func(c *Config) {
		c.Admin = AdminConfig{Enabled: true, Addr: "127.0.0.1:0"}
		c.SuperDigest = znode.DigestID(superPass)
	})
	base := "http://" + s.AdminAddr().String() + "/commands/"
	shed := func(auth string) (int, string) {
		code, _, body := adminDo(t, http.MethodPost, base+"shed_connections", auth, `{"percentage": 0}`)
		return code, body
	}
	// No header: 401 and ZooKeeper's sentence, error before command.
	code, body := shed("")
	if want := "{\n  \"error\" : \"Auth info is missing for the command\",\n  \"command\" : \"shed_connections\"\n}\n"; code != 401 || body != want {
		t.Errorf("no Authorization: %d %q, want 401 %q", code, body, want)
	}
	for _, bad := range []string{"x509", "sasl bob", "digest", "digest a b c", "nosuch thing"} {
		if code, body := shed(bad); code != 401 || !strings.Contains(body, `"error" : "Not authenticated"`) {
			t.Errorf("Authorization %q: %d %s, want 401 Not authenticated", bad, code, body)
		}
	}
	// The root's default ACL is world:anyone:cdrwa: every authenticated
	// caller holds ALL on "/" (as in ZooKeeper).
	for _, ok := range []string{"digest alice:pw", "ip"} {
		if code, body := shed(ok); code != 200 || !strings.Contains(body, `"connections_shed" : 0,`) {
			t.Errorf("open root, %q: %d %s", ok, code, body)
		}
	}
	// Close the root to one digest user (keeping it readable to all).
	c := connectZK(t, s.Addr().String())
	if err := c.AddAuth("digest", []byte("admin:pw")); err != nil {
		t.Fatal(err)
	}
	acl := append(zk.DigestACL(zk.PermAll, "admin", "pw"), zk.ACL{Perms: zk.PermRead, Scheme: "world", ID: "anyone"})
	if _, err := c.SetACL("/", acl, -1); err != nil {
		t.Fatal(err)
	}
	for auth, want := range map[string]int{
		"digest admin:pw":     200, // holds cdrwa
		"digest admin:wrong":  403, // authenticates (digest always does) but holds only r
		"digest alice:pw":     403,
		"ip":                  403, // world's r only
		"digest " + superPass: 200,
	} {
		code, body := shed(auth)
		if code != want {
			t.Errorf("closed root, %q: %d %s, want %d", auth, code, body, want)
		}
		if want == 403 && !strings.Contains(body, `"error" : "Not authorized"`) {
			t.Errorf("closed root, %q: %s, want Not authorized", auth, body)
		}
	}
	// An ip ACL for this host lets "ip" in.
	acl = append(acl, zk.ACL{Perms: zk.PermAll, Scheme: "ip", ID: "127.0.0.1"})
	if _, err := c.SetACL("/", acl, -1); err != nil {
		t.Fatal(err)
	}
	if code, body := shed("ip"); code != 200 {
		t.Errorf("ip ACL, ip: %d %s", code, body)
	}
	// Commands without an AuthRequest ignore the header.
	if code, _, body := adminDo(t, http.MethodGet, base+"ruok", "", ""); code != 200 || !strings.Contains(body, `"error" : null`) {
		t.Errorf("ruok: %d %s", code, body)
	}
	// The wrong method.
	if code, _, body := adminDo(t, http.MethodGet, base+"shed", "digest admin:pw", ""); code != 405 || !strings.Contains(body, `"command" : "shed_connections"`) {
		t.Errorf("GET shed: %d %s", code, body)
	}
	if code, _, _ := adminDo(t, http.MethodPost, base+"ruok", "", ""); code != 405 {
		t.Errorf("POST ruok: %d", code)
	}
}

func TestShedConnections(t *testing.T) {
	s := startStandalone(t, func(c *Config) { c.Admin = AdminConfig{Enabled: true, Addr: "127.0.0.1:0"} })
	url := "http://" + s.AdminAddr().String() + "/commands/shed"
	const n = 20
	type client struct {
		c       *zk.Conn
		session int64
		mu      sync.Mutex
		drops   int
	}
	clients := make([]*client, n)
	for i := range clients {
		cl := &client{}
		c, ev, err := zk.Connect([]string{s.Addr().String()}, 10*time.Second, zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		cl.c = c
		has := make(chan struct{})
		go func() {
			once := sync.Once{}
			for e := range ev {
				switch e.State {
				case zk.StateHasSession:
					once.Do(func() { close(has) })
				case zk.StateDisconnected:
					cl.mu.Lock()
					cl.drops++
					cl.mu.Unlock()
				}
			}
		}()
		select {
		case <-has:
		case <-time.After(10 * time.Second):
			t.Fatal("no session")
		}
		cl.session = c.SessionID()
		clients[i] = cl
	}
	waitConns := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for s.connCount() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections, want %d", s.connCount(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitConns(n)
	drops := func() int {
		total := 0
		for _, cl := range clients {
			cl.mu.Lock()
			total += cl.drops
			cl.mu.Unlock()
		}
		return total
	}
	shed := func(pct string) map[string]any {
		t.Helper()
		code, _, body := adminDo(t, http.MethodPost, url, "ip", `{"percentage": `+pct+`}`)
		if code != 200 {
			t.Fatalf("shed %s%%: %d %s", pct, code, body)
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// 25 % of 20: exactly 5 connections go, their clients reconnect with
	// the same sessions.
	out := shed("25")
	if out["connections_shed"] != 5.0 || out["percentage_requested"] != 25.0 || out["command"] != "shed_connections" || out["error"] != nil {
		t.Fatalf("shed 25%%: %v", out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for drops() < 5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // room for a wrong sixth
	if d := drops(); d != 5 {
		t.Fatalf("%d clients were disconnected, want 5", d)
	}
	waitConns(n)
	for i, cl := range clients {
		if _, _, err := cl.c.Exists("/"); err != nil {
			t.Fatalf("client %d after the shed: %v", i, err)
		}
		if cl.c.SessionID() != cl.session {
			t.Fatalf("client %d has session %x, had %x: a shed must not end sessions", i, cl.c.SessionID(), cl.session)
		}
	}
	if out := shed("0"); out["connections_shed"] != 0.0 {
		t.Fatalf("shed 0%%: %v", out)
	}
	if out := shed("100"); out["connections_shed"] != 20.0 {
		t.Fatalf("shed 100%%: %v", out)
	}
	// Bad requests: ZooKeeper's 400s and sentences.
	for body, want := range map[string]string{
		``:                            "Missing required field: percentage",
		`{}`:                          "Missing required field: percentage",
		`{"percentage": 101}`:         "Percentage must be between 0 and 100",
		`{"percentage": -1}`:          "Percentage must be between 0 and 100",
		`{"percentage": `:             "Invalid JSON or failed to read request body",
		`{"percentage": "50", "x":1}`: "", // Jackson's asInt reads a numeric string
	} {
		code, _, got := adminDo(t, http.MethodPost, url, "ip", body)
		if want == "" {
			if code != 200 || !strings.Contains(got, `"percentage_requested" : 50,`) {
				t.Errorf("%q: %d %s", body, code, got)
			}
			continue
		}
		if code != 400 || !strings.Contains(got, `"error" : "`+want) {
			t.Errorf("%q: %d %s, want 400 %q", body, code, got, want)
		}
	}
}

// TestShedConnectionsPerListener: the share is taken of each listener's
// connections, as ZooKeeper sheds its plain and its secure factory apart.
func TestShedConnectionsPerListener(t *testing.T) {
	p := newTestPKI(t)
	s := startStandalone(t, func(c *Config) {
		c.Admin = AdminConfig{Enabled: true, Addr: "127.0.0.1:0"}
		c.TLS = TLSConfig{SecureClientAddr: "127.0.0.1:0", CertFile: p.serverPEM, CAFile: p.caFile, ClientAuth: "none"}
	})
	var plain, secure []net.Conn
	for i := 0; i < 4; i++ {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		plain = append(plain, nc)
		tc, err := tls.Dial("tcp", s.SecureAddr().String(), p.clientConfig(false))
		if err != nil {
			t.Fatal(err)
		}
		secure = append(secure, tc)
	}
	defer func() {
		for _, c := range append(plain, secure...) {
			c.Close()
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for s.connCount() != 8 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var ps, ss int
	for _, c := range s.view().conns() {
		if c.secure {
			ss++
		} else {
			ps++
		}
	}
	if ps != 4 || ss != 4 {
		t.Fatalf("%d plain and %d TLS connections, want 4 and 4", ps, ss)
	}
	// 50 % of each listener's 4: 2 and 2 (not 4 of one).
	if n := s.shedConnections(50); n != 4 {
		t.Fatalf("shed %d, want 4", n)
	}
	closed := func(cs []net.Conn) int {
		k := 0
		for _, c := range cs {
			c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
				k++
			}
		}
		return k
	}
	if a, b := closed(plain), closed(secure); a != 2 || b != 2 {
		t.Fatalf("closed %d plain and %d TLS connections, want 2 and 2", a, b)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestSnapshotRefusals: ZooKeeper 3.9's SnapshotCommand refusals: 503
// with admin.snapshot.enabled=false, 500 when the snapshot cannot be
// written, each after the AuthRequest passed (cmd/zkraft's
// TestAdminSnapshotStream streams one and loads it into ZooKeeper).
func TestSnapshotRefusals(t *testing.T) {
	const superPass = "super:secret"
	for _, c := range []struct {
		name     string
		disabled bool
		want     int
	}{
		{"disabled", true, http.StatusServiceUnavailable},
		{"no writer", false, http.StatusInternalServerError},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startStandalone(t, func(cfg *Config) {
				cfg.Admin = AdminConfig{Enabled: true, Addr: "127.0.0.1:0", SnapshotDisabled: c.disabled}
				cfg.SuperDigest = znode.DigestID(superPass)
			})
			url := "http://" + s.AdminAddr().String() + "/commands/snapshot"
			if code, _, _ := adminDo(t, http.MethodGet, url, "", ""); code != http.StatusUnauthorized {
				t.Errorf("without Authorization: %d, want 401", code)
			}
			code, hdr, body := adminDo(t, http.MethodGet, url, "digest "+superPass, "")
			if code != c.want || hdr.Get("Content-Type") != "application/json" || !strings.Contains(body, `"command" : "snapshot"`) {
				t.Errorf("%d %v %q, want %d and the command's JSON", code, hdr, body, c.want)
			}
			if matches, _ := filepath.Glob(filepath.Join(s.cfg.DataDir, "snapshots", "*")); len(matches) != 0 {
				t.Errorf("files left: %v", matches)
			}
		})
	}
}
