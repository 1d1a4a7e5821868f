package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/zkraft/zkraft/jute"
)

// tlsHandshakeTimeout bounds a client's TLS handshake: a peer that opens
// the connection and never finishes the handshake is closed after it,
// without holding up anyone else (each handshake runs on the connection's
// own goroutine).
var tlsHandshakeTimeout = 10 * time.Second

type tlsState struct {
	cfg *tls.Config
}

// newTLSState loads the PEM files of the secure client port: ZooKeeper
// 3.7+ reads ssl.keyStore.location as a PEM file holding the certificate
// chain and the private key, and ssl.trustStore.location as PEM CAs.
func newTLSState(c TLSConfig) (*tlsState, error) {
	if c.Config != nil {
		return &tlsState{cfg: c.Config}, nil
	}
	keyFile := c.KeyFile
	if keyFile == "" {
		keyFile = c.CertFile
	}
	certPEM, err := os.ReadFile(c.CertFile)
	if err != nil {
		return nil, fmt.Errorf("server: ssl.keyStore.location: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("server: ssl key: %w", err)
	}
	cert, err := tls.X509KeyPair(onlyBlocks(certPEM, "CERTIFICATE"), onlyKeyBlocks(keyPEM))
	if err != nil {
		return nil, fmt.Errorf("server: ssl.keyStore.location %s: %w", c.CertFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		caPEM, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("server: ssl.trustStore.location: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("server: ssl.trustStore.location %s: no PEM certificate", c.CAFile)
		}
		cfg.ClientCAs = pool
	}
	switch c.ClientAuth {
	case "need":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case "want":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	default:
		cfg.ClientAuth = tls.NoClientCert
	}
	if cfg.ClientAuth != tls.NoClientCert && cfg.ClientCAs == nil {
		return nil, errors.New("server: ssl.clientAuth needs ssl.trustStore.location")
	}
	return &tlsState{cfg: cfg}, nil
}

// onlyBlocks keeps the PEM blocks of one type (a PEM key store mixes
// certificates and a key).
func onlyBlocks(data []byte, typ string) []byte {
	var out []byte
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		if b.Type == typ {
			out = append(out, pem.EncodeToMemory(b)...)
		}
	}
}

func onlyKeyBlocks(data []byte) []byte {
	var out []byte
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		if b.Type == "PRIVATE KEY" || b.Type == "RSA PRIVATE KEY" || b.Type == "EC PRIVATE KEY" {
			out = append(out, pem.EncodeToMemory(b)...)
		}
	}
}

// secureAcceptLoop accepts TLS clients. The per-IP limit applies before
// the handshake; the handshake runs on the connection's goroutine with a
// deadline.
func (s *Server) secureAcceptLoop(ln net.Listener) {
	defer s.wg.Done()
	for {
		raw, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("accept (TLS)", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		tc := tls.Server(raw, s.ops.tls.cfg)
		c, ok := s.register(tc, s.cell)
		if !ok {
			raw.Close()
			continue
		}
		c.secure = true
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if !s.tlsHandshake(c, tc) {
				c.close()
				s.unregister(c)
				return
			}
			c.serve()
		}()
	}
}

func (s *Server) tlsHandshake(c *conn, tc *tls.Conn) bool {
	s.counters.tlsHandshakes.Add(1)
	defer s.counters.tlsHandshakes.Add(-1)
	ctx, cancel := context.WithTimeout(s.ctx, tlsHandshakeTimeout)
	defer cancel()
	tc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	if err := tc.HandshakeContext(ctx); err != nil {
		s.counters.tlsHandshakeFailed.Add(1)
		c.log().Info("TLS handshake failed", "err", err)
		return false
	}
	tc.SetDeadline(time.Time{})
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		// X509AuthenticationProvider: the client certificate's subject,
		// as Java's X500Principal.getName() prints it, is the
		// connection's x509 id (x509name.go). Go's parser has accepted
		// the subject already, so x509ID failing is not expected; the
		// connection then has no x509 id rather than a wrong one.
		id, err := x509ID(certs[0].RawSubject)
		if err != nil {
			c.log().Warn("TLS client certificate subject not understood: no x509 id", "err", err)
			return true
		}
		c.setAuthIDs(append(c.authIDs(), jute.ID{Scheme: "x509", ID: id}))
		c.log().Debug("TLS client authenticated", "x509", id)
	}
	return true
}
