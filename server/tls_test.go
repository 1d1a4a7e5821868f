package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// testPKI is a CA with a server and a client certificate, as PEM files.
type testPKI struct {
	dir                  string
	caFile               string
	memberPEM            string // server and client use, for Raft TLS
	serverPEM            string // certificate and key in one file (a PEM key store)
	clientCert, clientKy string
	client               tls.Certificate
	pool                 *x509.CertPool
	ca                   *x509.Certificate
	caKey                *ecdsa.PrivateKey
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), pool: x509.NewCertPool()}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "zkraft test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p.pool.AddCert(ca)
	p.ca, p.caKey = ca, caKey
	p.caFile = p.write(t, "ca.pem", pemOf("CERTIFICATE", caDER))
	issue := func(serial int64, subject pkix.Name, usage ...x509.ExtKeyUsage) ([]byte, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: subject,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: usage,
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalPKCS8PrivateKey(key)
		return pemOf("CERTIFICATE", der), pemOf("PRIVATE KEY", kder)
	}
	sc, sk := issue(2, pkix.Name{CommonName: "localhost"}, x509.ExtKeyUsageServerAuth)
	p.serverPEM = p.write(t, "server.pem", append(sk, sc...))
	mc, mk := issue(4, pkix.Name{CommonName: "member"}, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	p.memberPEM = p.write(t, "member.pem", append(mc, mk...))
	cc, ck := issue(3, pkix.Name{CommonName: "alice", Organization: []string{"zkraft"}}, x509.ExtKeyUsageClientAuth)
	p.clientCert, p.clientKy = p.write(t, "client.crt", cc), p.write(t, "client.key", ck)
	if p.client, err = tls.X509KeyPair(cc, ck); err != nil {
		t.Fatal(err)
	}
	return p
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func (p *testPKI) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	f := filepath.Join(p.dir, name)
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func (p *testPKI) clientConfig(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.pool, ServerName: "localhost"}
	if withCert {
		c.Certificates = []tls.Certificate{p.client}
	}
	return c
}

func connectTLS(t *testing.T, addr string, cfg *tls.Config) *zk.Conn {
	t.Helper()
	dialer := func(network, address string, timeout time.Duration) (net.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, address, cfg)
	}
	return connectZKDial(t, addr, dialer)
}

func TestTLSClientPortAndX509(t *testing.T) {
	old := tlsHandshakeTimeout
	tlsHandshakeTimeout = 500 * time.Millisecond
	t.Cleanup(func() { tlsHandshakeTimeout = old })
	pki := newTestPKI(t)
	s := startStandalone(t, func(c *Config) {
		c.TLS = TLSConfig{SecureClientAddr: "127.0.0.1:0", CertFile: pki.serverPEM, CAFile: pki.caFile}
	})
	saddr := s.SecureAddr().String()

	// A half-open handshake: the TCP connection is up and says nothing.
	half, err := net.Dial("tcp", saddr)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()

	// Meanwhile a client with a certificate works, and is x509 "CN=alice,O=zkraft".
	c := connectTLS(t, saddr, pki.clientConfig(true))
	const id = "CN=alice,O=zkraft"
	acl := []zk.ACL{{Perms: zk.PermAll, Scheme: "x509", ID: id}}
	if _, err := c.Create("/secure", []byte("s"), 0, acl); err != nil {
		t.Fatal(err)
	}
	if data, _, err := c.Get("/secure"); err != nil || string(data) != "s" {
		t.Fatalf("get over TLS: %q %v", data, err)
	}
	// A plain client is not alice.
	plain := connectZK(t, s.Addr().String())
	if _, _, err := plain.Get("/secure"); err != zk.ErrNoAuth {
		t.Errorf("plain get: %v, want NOAUTH", err)
	}
	// Four-letter words answer on the secure port too.
	tc, err := tls.Dial("tcp", saddr, pki.clientConfig(true))
	if err != nil {
		t.Fatal(err)
	}
	tc.Write([]byte("srvr"))
	out, _ := io.ReadAll(tc)
	tc.Close()
	if !strings.Contains(string(out), "Mode: standalone") {
		t.Errorf("srvr over TLS: %q", out)
	}

	// The half-open connection is closed after the handshake timeout.
	half.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := half.Read(make([]byte, 1)); err == nil {
		t.Error("half-open TLS connection got data")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("half-open TLS connection not closed by the server")
	}

	// No client certificate with ssl.clientAuth=need: refused.
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", saddr, pki.clientConfig(false))
	if err == nil {
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		nc.Write([]byte("ruok"))
		_, err = io.ReadAll(nc)
		b, _ := io.ReadAll(nc)
		nc.Close()
		if err == nil && len(b) > 0 {
			t.Errorf("client without certificate answered %q", b)
		}
	}
	// Plain bytes on the TLS port: refused, and the server goes on.
	raw, _ := net.Dial("tcp", saddr)
	raw.Write([]byte("ruok"))
	raw.SetDeadline(time.Now().Add(5 * time.Second))
	if b, _ := io.ReadAll(raw); strings.Contains(string(b), "imok") {
		t.Error("plain ruok answered on the TLS port")
	}
	raw.Close()
	if _, _, err := c.Get("/secure"); err != nil {
		t.Fatalf("TLS client after bad handshakes: %v", err)
	}
	if s.counters.tlsHandshakeFailed.Load() < 2 {
		t.Errorf("failed handshakes counted: %d", s.counters.tlsHandshakeFailed.Load())
	}
}

// TestQuorumTLS: members talk Raft over mutual TLS (sslQuorum) and
// replicate.
func TestQuorumTLS(t *testing.T) {
	pki := newTestPKI(t)
	tc := newTestClusterWith(t, 3, 0, func(c *Config) {
		c.TLS = TLSConfig{Quorum: true, QuorumCertFile: pki.memberPEM, QuorumCAFile: pki.caFile}
	})
	c, _ := tc.connect(1)
	if _, err := c.Create("/q", []byte("tls"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	c3, _ := tc.connect(3)
	if _, err := c3.Sync("/q"); err != nil {
		t.Fatal(err)
	}
	if data, _, err := c3.Get("/q"); err != nil || string(data) != "tls" {
		t.Fatalf("member 3: %q %v", data, err)
	}
}

// TestTLSReload: with Reload (ZooKeeper 3.9's zookeeper.client.certReload)
// new handshakes use the key and trust stores written over the old ones,
// open connections keep working, and stores that do not load leave the
// previous ones in use.
func TestTLSReload(t *testing.T) {
	old := tlsReloadPoll
	tlsReloadPoll = 50 * time.Millisecond
	t.Cleanup(func() { tlsReloadPoll = old })
	first, second := newTestPKI(t), newTestPKI(t)
	dir := t.TempDir()
	keyStore, trustStore := filepath.Join(dir, "server.pem"), filepath.Join(dir, "ca.pem")
	copyFile := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to+".tmp", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(to+".tmp", to); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(first.serverPEM, keyStore)
	copyFile(first.caFile, trustStore)
	s := startStandalone(t, func(c *Config) {
		c.TLS = TLSConfig{SecureClientAddr: "127.0.0.1:0", CertFile: keyStore, CAFile: trustStore, Reload: true}
	})
	saddr := s.SecureAddr().String()
	handshake := func(p *testPKI) error {
		nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", saddr, p.clientConfig(true))
		if err != nil {
			return err
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Write([]byte("ruok")); err != nil {
			return err
		}
		b, err := io.ReadAll(nc)
		if string(b) != "imok" {
			return fmt.Errorf("ruok answered %q (%v)", b, err)
		}
		return nil
	}
	if err := handshake(first); err != nil {
		t.Fatalf("first stores: %v", err)
	}
	if err := handshake(second); err == nil {
		t.Fatal("a client of the second CA was accepted before the stores changed")
	}
	c := connectTLS(t, saddr, first.clientConfig(true))
	if _, err := c.Create("/before", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	// New stores: the second CA's server certificate and trust.
	copyFile(second.serverPEM, keyStore)
	copyFile(second.caFile, trustStore)
	waitFor(t, func() bool { return s.counters.tlsReloads.Load() >= 1 })
	if err := handshake(second); err != nil {
		t.Fatalf("after the reload, a client of the second CA: %v", err)
	}
	if err := handshake(first); err == nil {
		t.Error("after the reload, a client of the first CA was still accepted")
	}
	if _, _, err := c.Exists("/before"); err != nil {
		t.Errorf("the connection opened before the reload: %v", err)
	}

	// A store that does not load: logged, and the second stores stay.
	if err := os.WriteFile(keyStore, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.counters.tlsReloadFailed.Load() >= 1 })
	if err := handshake(second); err != nil {
		t.Errorf("after a broken key store, the previous stores: %v", err)
	}
}
