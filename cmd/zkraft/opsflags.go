package main

import (
	"flag"
	"net"
	"strings"

	"github.com/zkraft/zkraft/server"
)

func splitList(v string) []string {
	var out []string
	for _, w := range strings.Split(v, ",") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// opsFlags are the command-line forms of the operations settings; a flag
// given explicitly overrides zoo.cfg.
type opsFlags struct {
	adminEnable      *bool
	adminAddr        *string
	metricsAddr      *string
	secureClientAddr *string
	sslCert, sslKey  *string
	sslCA            *string
	sslClientAuth    *string
	sslQuorum        *bool
	jaas             *string
	saslSuperUser    *string
	enforceAuth      *bool
	enforceSchemes   *string
	outstanding      *int
}

func defineOpsFlags(fs *flag.FlagSet) *opsFlags {
	return &opsFlags{
		adminEnable:      fs.Bool("admin-enable", true, "serve ZooKeeper's AdminServer /commands (admin.enableServer)"),
		adminAddr:        fs.String("admin-addr", "", "AdminServer address (default: the client host, port 8080)"),
		metricsAddr:      fs.String("metrics-addr", "", "serve Prometheus /metrics on this address (ZooKeeper's PrometheusMetricsProvider; zoo.cfg default port 7000)"),
		secureClientAddr: fs.String("secure-client-addr", "", "TLS client listener address (secureClientPort)"),
		sslCert:          fs.String("ssl-cert", "", "PEM certificate chain, or PEM key store with the key too (ssl.keyStore.location)"),
		sslKey:           fs.String("ssl-key", "", "PEM private key, if not in --ssl-cert"),
		sslCA:            fs.String("ssl-ca", "", "PEM CAs for client certificates (ssl.trustStore.location)"),
		sslClientAuth:    fs.String("ssl-client-auth", "", "need (default), want or none (ssl.clientAuth)"),
		sslQuorum:        fs.Bool("ssl-quorum", false, "mutual TLS between members with the same files (sslQuorum)"),
		jaas:             fs.String("jaas-config", "", "JAAS file whose Server section lists DigestLoginModule users (java.security.auth.login.config)"),
		saslSuperUser:    fs.String("sasl-super-user", "", "SASL user that is the super user (zookeeper.superUser)"),
		enforceAuth:      fs.Bool("enforce-auth", false, "require every session to authenticate (enforce.auth.enabled)"),
		enforceSchemes:   fs.String("enforce-auth-schemes", "", "schemes that satisfy --enforce-auth, comma-separated (default sasl)"),
		outstanding:      fs.Int("global-outstanding-limit", 0, "requests in flight across all connections before reading pauses (default 1000)"),
	}
}

// apply sets the flags given explicitly, and the AdminServer's default
// address (the client host, port 8080) when zoo.cfg did not set one.
func (o *opsFlags) apply(cfg *server.Config, set map[string]bool, fromZooCfg bool) {
	if !fromZooCfg {
		cfg.Admin.Enabled = *o.adminEnable
		host, _, err := net.SplitHostPort(cfg.ClientAddr)
		if err != nil {
			host = "127.0.0.1"
		}
		cfg.Admin.Addr = net.JoinHostPort(host, "8080")
	}
	if set["admin-enable"] {
		cfg.Admin.Enabled = *o.adminEnable
	}
	if set["admin-addr"] {
		cfg.Admin.Addr = *o.adminAddr
	}
	if set["metrics-addr"] {
		cfg.Metrics.Enabled = *o.metricsAddr != ""
		cfg.Metrics.Addr = *o.metricsAddr
	}
	str := func(name string, dst *string, v *string) {
		if set[name] {
			*dst = *v
		}
	}
	str("secure-client-addr", &cfg.TLS.SecureClientAddr, o.secureClientAddr)
	str("ssl-cert", &cfg.TLS.CertFile, o.sslCert)
	str("ssl-key", &cfg.TLS.KeyFile, o.sslKey)
	str("ssl-ca", &cfg.TLS.CAFile, o.sslCA)
	str("ssl-client-auth", &cfg.TLS.ClientAuth, o.sslClientAuth)
	if set["ssl-quorum"] {
		cfg.TLS.Quorum = *o.sslQuorum
	}
	str("jaas-config", &cfg.SASL.JAASFile, o.jaas)
	str("sasl-super-user", &cfg.SASL.SuperUser, o.saslSuperUser)
	if set["enforce-auth"] {
		cfg.SASL.EnforceAuth = *o.enforceAuth
	}
	if set["enforce-auth-schemes"] {
		cfg.SASL.EnforceAuthSchemes = splitList(*o.enforceSchemes)
	}
	if set["global-outstanding-limit"] {
		cfg.GlobalOutstandingLimit = *o.outstanding
	}
}
