package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/auth"
	"github.com/zkraft/zkraft/jute"
)

// issueClient makes a client certificate with the given DER subject,
// issued by the PKI's CA.
func (p *testPKI) issueClient(t *testing.T, subject []byte) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(9), RawSubject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// whoAmITLS opens a session over TLS with cfg and returns what whoAmI
// answers.
func whoAmITLS(t *testing.T, addr string, cfg *tls.Config) []jute.ClientInfo {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	readFrame := func() *jute.Reader {
		b, err := jute.ReadFrame(nc, nil, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return jute.NewReader(b)
	}
	if _, err := nc.Write(jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)})); err != nil {
		t.Fatal(err)
	}
	var cr jute.ConnectResponse
	cr.Decode(readFrame())
	if cr.SessionID == 0 {
		t.Fatalf("connect: %+v", cr)
	}
	if _, err := nc.Write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: 1, Type: jute.OpWhoAmI})); err != nil {
		t.Fatal(err)
	}
	r := readFrame()
	var hdr jute.ReplyHeader
	var resp jute.WhoAmIResponse
	hdr.Decode(r)
	resp.Decode(r)
	if r.Err() != nil || hdr.Xid != 1 || hdr.Err != jute.ErrOK {
		t.Fatalf("whoAmI: %+v %v", hdr, r.Err())
	}
	nc.Write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: 2, Type: jute.OpCloseSession}))
	return resp.ClientInfo
}

// TestX509IDOverTLS: a client certificate's x509 id is Java's form of its
// subject in whoAmI and in ACL checks, and the id Go's pkix.Name.String()
// would make grants nothing.
func TestX509IDOverTLS(t *testing.T) {
	pki := newTestPKI(t)
	s := startStandalone(t, func(c *Config) {
		c.TLS = TLSConfig{SecureClientAddr: "127.0.0.1:0", CertFile: pki.serverPEM, CAFile: pki.caFile}
	})
	saddr := s.SecureAddr().String()
	// A subject whose Java form (auth.X509ID, checked against the JDK in
	// package auth) is not Go's pkix.Name.String(): a multi-valued RDN,
	// which Java prints in encoded order and Go backwards.
	subject, err := asn1.Marshal(pkix.RDNSequence{
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 6}, Value: "DE"}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: "Acme, Inc."}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "Zoë"}, {Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}, Value: "z1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	id, err := auth.X509ID(subject)
	if err != nil || id != `CN=Zoë+UID=z1,O=Acme\, Inc.,C=DE` {
		t.Fatalf("auth.X509ID = %q, %v", id, err)
	}
	zoe := pki.issueClient(t, subject)
	cfg := &tls.Config{RootCAs: pki.pool, ServerName: "localhost", Certificates: []tls.Certificate{zoe}}

	infos := whoAmITLS(t, saddr, cfg)
	want := jute.ClientInfo{AuthScheme: "x509", User: id}
	found := false
	for _, ci := range infos {
		found = found || ci == want
	}
	if !found {
		t.Fatalf("whoAmI %+v, want an entry %+v", infos, want)
	}

	c := connectTLS(t, saddr, cfg)
	if _, err := c.Create("/zoe", []byte("z"), 0, []zk.ACL{{Perms: zk.PermAll, Scheme: "x509", ID: id}}); err != nil {
		t.Fatal(err)
	}
	if data, _, err := c.Get("/zoe"); err != nil || string(data) != "z" {
		t.Fatalf("get /zoe as %s: %q %v", id, data, err)
	}
	leaf, err := x509.ParseCertificate(zoe.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	goForm := leaf.Subject.String()
	if goForm == id {
		t.Fatalf("pkix.Name.String() %q is Java's form: the case shows nothing", goForm)
	}
	if _, err := c.Create("/goform", nil, 0, []zk.ACL{{Perms: zk.PermAll, Scheme: "x509", ID: goForm}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get("/goform"); err != zk.ErrNoAuth {
		t.Errorf("get /goform (ACL x509:%s): %v, want NOAUTH", goForm, err)
	}
	// Another certificate is another id.
	alice := connectTLS(t, saddr, pki.clientConfig(true))
	if _, _, err := alice.Get("/zoe"); err != zk.ErrNoAuth {
		t.Errorf("alice reads /zoe: %v, want NOAUTH", err)
	}
}
