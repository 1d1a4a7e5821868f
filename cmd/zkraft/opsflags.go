package main

import (
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/zkraft/zkraft/server"
)

// applyOpsZooCfg reads the operations keys of zoo.cfg: the AdminServer,
// the Prometheus metrics provider, the secure client port and its PEM
// files, TLS between members, globalOutstandingLimit and the enforce.auth
// settings. It returns the keys it used.
func applyOpsZooCfg(props map[string]string, cfg *server.Config) (map[string]bool, error) {
	used := map[string]bool{}
	get := func(k string) (string, bool) {
		v, ok := props[k]
		if ok {
			used[k] = true
		}
		return v, ok
	}
	boolean := func(k string, dflt bool) (bool, error) {
		v, ok := get(k)
		if !ok {
			return dflt, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("zoo.cfg: %s=%q is not true or false", k, v)
		}
		return b, nil
	}
	port := func(k string) (string, bool, error) {
		v, ok := get(k)
		if !ok {
			return "", false, nil
		}
		if n, err := strconv.Atoi(v); err != nil || n < 0 || n > 65535 {
			return "", false, fmt.Errorf("zoo.cfg: %s=%q is not a port", k, v)
		}
		return v, true, nil
	}
	// ZooKeeper binds 0.0.0.0 for these; zkraft uses clientPortAddress
	// when it is given, so a loopback member stays on loopback.
	host := "0.0.0.0"
	if v, ok := props["clientPortAddress"]; ok {
		host = v
	}

	var err error
	if cfg.Admin.Enabled, err = boolean("admin.enableServer", true); err != nil {
		return nil, err
	}
	adminHost := host
	if v, ok := get("admin.serverAddress"); ok {
		adminHost = v
	}
	adminPort, _, err := port("admin.serverPort")
	if err != nil {
		return nil, err
	}
	if adminPort == "" {
		adminPort = "8080"
	}
	cfg.Admin.Addr = net.JoinHostPort(adminHost, adminPort)
	if v, ok := get("admin.commandURL"); ok {
		cfg.Admin.CommandURL = v
	}
	get("admin.idleTimeout")

	if v, ok := get("metricsProvider.className"); ok && strings.HasSuffix(v, "PrometheusMetricsProvider") {
		cfg.Metrics.Enabled = true
	}
	mHost := host
	if v, ok := get("metricsProvider.httpHost"); ok {
		mHost = v
	}
	mPort, _, err := port("metricsProvider.httpPort")
	if err != nil {
		return nil, err
	}
	if mPort == "" {
		mPort = "7000"
	}
	cfg.Metrics.Addr = net.JoinHostPort(mHost, mPort)
	get("metricsProvider.exportJvmInfo")

	if p, ok, err := port("secureClientPort"); err != nil {
		return nil, err
	} else if ok {
		sh := host
		if v, ok := get("secureClientPortAddress"); ok {
			sh = v
		}
		cfg.TLS.SecureClientAddr = net.JoinHostPort(sh, p)
	}
	// A PEM key store holds the certificate chain and the key in one file
	// (ssl.keyStore.type=PEM); the trust store holds the CAs.
	if v, ok := get("ssl.keyStore.location"); ok {
		cfg.TLS.CertFile = v
	}
	if v, ok := get("ssl.trustStore.location"); ok {
		cfg.TLS.CAFile = v
	}
	if v, ok := get("ssl.clientAuth"); ok {
		cfg.TLS.ClientAuth = strings.ToLower(v)
	}
	for _, k := range []string{"ssl.keyStore.type", "ssl.trustStore.type", "ssl.keyStore.password",
		"ssl.trustStore.password", "serverCnxnFactory", "ssl.hostnameVerification", "ssl.quorum.hostnameVerification",
		"ssl.quorum.keyStore.type", "ssl.quorum.trustStore.type", "ssl.quorum.keyStore.password",
		"ssl.quorum.trustStore.password", "jaasLoginRenew"} {
		get(k)
	}
	for k := range props {
		if strings.HasPrefix(k, "authProvider.") {
			used[k] = true // sasl, digest, ip and x509 are always on
		}
	}
	if cfg.TLS.Quorum, err = boolean("sslQuorum", false); err != nil {
		return nil, err
	}
	if v, ok := get("ssl.quorum.keyStore.location"); ok {
		cfg.TLS.QuorumCertFile = v
	}
	if v, ok := get("ssl.quorum.trustStore.location"); ok {
		cfg.TLS.QuorumCAFile = v
	}
	if v, ok := get("globalOutstandingLimit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("zoo.cfg: globalOutstandingLimit=%q", v)
		}
		cfg.GlobalOutstandingLimit = n
	}
	if cfg.SASL.EnforceAuth, err = boolean("enforce.auth.enabled", false); err != nil {
		return nil, err
	}
	if v, ok := get("enforce.auth.schemes"); ok {
		cfg.SASL.EnforceAuthSchemes = splitList(v)
	}
	if req, err := boolean("sessionRequireClientSASLAuth", false); err != nil {
		return nil, err
	} else if req {
		cfg.SASL.EnforceAuth = true
		cfg.SASL.EnforceAuthSchemes = []string{"sasl"}
	}
	return used, nil
}

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
