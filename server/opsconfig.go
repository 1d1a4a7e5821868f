package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// AdminConfig configures the AdminServer: ZooKeeper's /commands over HTTP.
// The zero value is off.
type AdminConfig struct {
	// Enabled starts it (admin.enableServer).
	Enabled bool
	// Addr is host:port (admin.serverAddress, admin.serverPort). Default
	// 127.0.0.1:8080. ZooKeeper binds 0.0.0.0; cmd/zkraft uses the client
	// listener's host.
	Addr string
	// CommandURL is the path prefix (admin.commandURL). Default /commands.
	CommandURL string
	// IdleTimeout closes an idle HTTP connection (admin.idleTimeout).
	// Default 30s.
	IdleTimeout time.Duration

	// WriteSnapshot writes the state as a ZooKeeper snapshot for the
	// snapshot command (snapshotstream.go); cmd/zkraft sets it. Nil: the
	// command answers 500.
	WriteSnapshot SnapshotWriter
	// SnapshotDisabled turns the snapshot command off
	// (admin.snapshot.enabled=false): it answers 503.
	SnapshotDisabled bool
	// SnapshotInterval allows one snapshot command per interval
	// (admin.rateLimiterIntervalInMS). Default 5 minutes.
	SnapshotInterval time.Duration
}

// MetricsConfig configures the Prometheus endpoint (ZooKeeper's
// PrometheusMetricsProvider). The metrics are always kept; Enabled serves
// them over HTTP.
type MetricsConfig struct {
	// Enabled serves /metrics on Addr.
	Enabled bool
	// Addr is host:port (metricsProvider.httpHost, metricsProvider.httpPort).
	// Default 127.0.0.1:7000.
	Addr string
	// Registerer receives the member's collectors; the owner hands in its
	// registry (several members in one process need one each, or
	// prometheus.WrapRegistererWith with a distinguishing label). Nil: the
	// member makes a registry of its own.
	Registerer prometheus.Registerer
	// Gatherer is what the endpoint serves. Nil: Registerer when it is a
	// Gatherer (a *prometheus.Registry), else nothing is served.
	Gatherer prometheus.Gatherer
}

// TLSConfig configures the secure client port (ZooKeeper's
// secureClientPort with ssl.* PEM files) and Raft TLS between members.
type TLSConfig struct {
	// SecureClientAddr, if set, is a TLS client listener
	// (secureClientPortAddress:secureClientPort).
	SecureClientAddr string
	// CertFile and KeyFile are the server's PEM certificate chain and key
	// (ssl.keyStore.location; a PEM key store may hold both, then KeyFile
	// may be empty). CAFile holds the PEM CAs that client certificates must
	// chain to (ssl.trustStore.location).
	CertFile, KeyFile, CAFile string
	// ClientAuth is ssl.clientAuth: "need" (default, as ZooKeeper),
	// "want" or "none".
	ClientAuth string
	// Quorum turns on mutual TLS between members (sslQuorum), with
	// QuorumCertFile, QuorumKeyFile and QuorumCAFile (ssl.quorum.*),
	// defaulting to the client files.
	Quorum                                      bool
	QuorumCertFile, QuorumKeyFile, QuorumCAFile string

	// Reload reads CertFile, KeyFile and CAFile again when they change,
	// for new connections (ZooKeeper 3.9's zookeeper.client.certReload;
	// tls.go).
	Reload bool

	// Config, if set, is used as is for the secure client listener
	// instead of the files (for embedding and tests).
	Config *tls.Config
}

// SASLConfig configures SASL authentication (op 102) with DIGEST-MD5.
type SASLConfig struct {
	// JAASFile is a JAAS configuration whose Server section lists
	// DigestLoginModule users (user_<name>="<password>")
	// (java.security.auth.login.config).
	JAASFile string
	// JAASSection is the section read. Default "Server"
	// (zookeeper.sasl.serverconfig).
	JAASSection string
	// Users adds users (name to password) to those of JAASFile.
	Users map[string]string
	// SuperUser is a SASL user that becomes the super user
	// (zookeeper.superUser).
	SuperUser string
	// EnforceAuth requires every session to authenticate with one of
	// EnforceAuthSchemes before any other request (enforce.auth.enabled,
	// enforce.auth.schemes; sessionRequireClientSASLAuth=true is the same
	// with the sasl scheme). Default schemes: sasl.
	EnforceAuth        bool
	EnforceAuthSchemes []string
}

// validateOps fills the defaults of the operations settings.
func (c *Config) validateOps() error {
	if c.GlobalOutstandingLimit <= 0 {
		c.GlobalOutstandingLimit = 1000
	}
	if c.Admin.Addr == "" {
		c.Admin.Addr = "127.0.0.1:8080"
	}
	if c.Admin.IdleTimeout <= 0 {
		c.Admin.IdleTimeout = 30 * time.Second
	}
	if c.Admin.SnapshotInterval <= 0 {
		c.Admin.SnapshotInterval = 5 * time.Minute
	}
	if c.Admin.CommandURL == "" {
		c.Admin.CommandURL = "/commands"
	}
	c.Admin.CommandURL = "/" + strings.Trim(c.Admin.CommandURL, "/")
	if c.Metrics.Addr == "" {
		c.Metrics.Addr = "127.0.0.1:7000"
	}
	for _, a := range []string{c.Admin.Addr, c.Metrics.Addr} {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("server: address %q: %w", a, err)
		}
	}
	switch c.TLS.ClientAuth {
	case "":
		c.TLS.ClientAuth = "need"
	case "need", "want", "none":
	default:
		return fmt.Errorf("server: ssl.clientAuth %q: want need, want or none", c.TLS.ClientAuth)
	}
	if c.TLS.SecureClientAddr != "" && c.TLS.Config == nil && c.TLS.CertFile == "" {
		return errors.New("server: a secure client port needs a certificate (ssl.keyStore.location)")
	}
	if c.TLS.Quorum {
		if c.TLS.QuorumCertFile == "" {
			c.TLS.QuorumCertFile = c.TLS.CertFile
		}
		if c.TLS.QuorumKeyFile == "" {
			c.TLS.QuorumKeyFile = c.TLS.KeyFile
		}
		if c.TLS.QuorumKeyFile == "" {
			c.TLS.QuorumKeyFile = c.TLS.QuorumCertFile
		}
		if c.TLS.QuorumCAFile == "" {
			c.TLS.QuorumCAFile = c.TLS.CAFile
		}
		if c.TLS.QuorumCertFile == "" || c.TLS.QuorumCAFile == "" {
			return errors.New("server: sslQuorum needs ssl.quorum.keyStore.location and ssl.quorum.trustStore.location")
		}
	}
	if c.SASL.JAASSection == "" {
		c.SASL.JAASSection = "Server"
	}
	if c.SASL.EnforceAuth && len(c.SASL.EnforceAuthSchemes) == 0 {
		c.SASL.EnforceAuthSchemes = []string{"sasl"}
	}
	return nil
}
