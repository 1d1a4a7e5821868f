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
	"slices"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/auth"
	"github.com/zkraft/zkraft/jute"
)

// tlsHandshakeTimeout bounds a client's TLS handshake: a peer that opens
// the connection and never finishes the handshake is closed after it,
// without holding up anyone else (each handshake runs on the connection's
// own goroutine).
var tlsHandshakeTimeout = 10 * time.Second

// tlsReloadPoll is how often the key and trust stores are looked at when
// TLSConfig.Reload is on.
var tlsReloadPoll = time.Second

type tlsState struct {
	// cfg is handed to every TLS connection. With Reload it only returns
	// cur for each handshake.
	cfg *tls.Config
	cur atomic.Pointer[tls.Config]

	files  TLSConfig
	stamps []fileStamp // of files' stores as last loaded or tried
}

// fileStamp tells a file's change: its modification time and size.
type fileStamp struct {
	mod  time.Time
	size int64
	err  bool
}

// newTLSState loads the PEM files of the secure client port: ZooKeeper
// 3.7+ reads ssl.keyStore.location as a PEM file holding the certificate
// chain and the private key, and ssl.trustStore.location as PEM CAs.
//
// With Reload (ZooKeeper 3.9's zookeeper.client.certReload, X509Util's
// enableCertFileReloading) the files are looked at every tlsReloadPoll
// (ZooKeeper's FileChangeWatcher hears of each change from the file
// system): when one has changed, all are loaded again and new handshakes
// use them; connections already open keep theirs. Files that do not load
// (half written, a key that does not match) are logged and the previous
// stores stay in use, as ZooKeeper keeps its previous SSL context.
func newTLSState(c TLSConfig) (*tlsState, error) {
	if c.Config != nil {
		return &tlsState{cfg: c.Config}, nil
	}
	st := &tlsState{files: c}
	st.stamps = st.stampFiles()
	cfg, err := loadTLSConfig(c)
	if err != nil {
		return nil, err
	}
	st.cur.Store(cfg)
	st.cfg = cfg
	if c.Reload {
		st.cfg = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return st.cur.Load(), nil
		}}
	}
	return st, nil
}

func (st *tlsState) paths() []string {
	out := []string{st.files.CertFile}
	for _, f := range []string{st.files.KeyFile, st.files.CAFile} {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (st *tlsState) stampFiles() []fileStamp {
	var out []fileStamp
	for _, p := range st.paths() {
		fi, err := os.Stat(p)
		if err != nil {
			out = append(out, fileStamp{err: true})
			continue
		}
		out = append(out, fileStamp{mod: fi.ModTime(), size: fi.Size()})
	}
	return out
}

// tlsReloadLoop reloads the stores when their files change, until the
// server closes.
func (s *Server) tlsReloadLoop(st *tlsState) {
	t := time.NewTicker(tlsReloadPoll)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		stamps := st.stampFiles()
		if slices.Equal(stamps, st.stamps) {
			continue
		}
		st.stamps = stamps
		cfg, err := loadTLSConfig(st.files)
		if err != nil {
			s.counters.tlsReloadFailed.Add(1)
			s.log.Warn("TLS key or trust store changed but does not load; the previous ones stay in use", "err", err)
			continue
		}
		st.cur.Store(cfg)
		s.counters.tlsReloads.Add(1)
		s.log.Info("TLS key and trust stores reloaded", "files", st.paths())
	}
}

// loadTLSConfig reads the stores into a TLS configuration.
func loadTLSConfig(c TLSConfig) (*tls.Config, error) {
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
	return cfg, nil
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
func (s *Server) secureAcceptLoop(ln net.Listener, cl *cell) {
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
		c, ok := s.register(tc, cl)
		if !ok {
			raw.Close()
			continue
		}
		c.secure = true
		if !s.routines.start(func() {
			if !s.tlsHandshake(c, tc) {
				c.close()
				s.unregister(c)
				return
			}
			c.serve()
		}) {
			raw.Close()
			s.unregister(c)
		}
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
		// connection's x509 id (auth.X509ID). Go's parser has accepted
		// the subject already, so auth.X509ID failing is not expected; the
		// connection then has no x509 id rather than a wrong one.
		id, err := auth.X509ID(certs[0].RawSubject)
		if err != nil {
			c.log().Warn("TLS client certificate subject not understood: no x509 id", "err", err)
			return true
		}
		c.setAuthIDs(append(c.authIDs(), jute.ID{Scheme: "x509", ID: id}))
		c.log().Debug("TLS client authenticated", "x509", id)
	}
	return true
}
