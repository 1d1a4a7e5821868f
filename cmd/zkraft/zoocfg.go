package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zkraft/zkraft/server"
)

// This file is zkraft's one reader of ZooKeeper's configuration: zoo.cfg,
// its dynamic configuration file, and the Java system properties a
// ZooKeeper started by zkServer.sh would have. It reads them as ZooKeeper
// 3.8/3.9 does:
//
//   - QuorumPeerConfig parses its own keys (dataDir, clientPort, tickTime,
//     server.N, ...); every other zoo.cfg key becomes the system property
//     zookeeper.<key>, which overrides a -Dzookeeper.<key> JVM flag.
//   - The other settings are read from system properties (the -D words of
//     $SERVER_JVMFLAGS $JVMFLAGS, as the environment and the files zkEnv.sh
//     sources leave them), with ZooKeeper's defaults when absent.
//
// zooKeeperKeys (zookeys.go) names every setting of the Administrator's
// Guide: applyZooKeeperSettings applies those zkraft honours; the others,
// and any key ZooKeeper does not know, are returned as notes that say why
// they have no effect, for one log line each at start.

// zkSettings is what a ZooKeeper server reads at start.
type zkSettings struct {
	cfg     []property           // zoo.cfg keys QuorumPeerConfig parses itself
	dyn     []property           // the dynamic configuration file's keys
	props   map[string]propValue // Java system properties
	used    map[string]bool      // properties applyZooKeeperSettings read
	path    string               // zoo.cfg, for messages
	dynPath string               // the dynamic configuration file
	notes   []note
}

// note is a setting that has no effect, for the start-up log.
type note struct {
	key, value, from, why string
	warn                  bool
}

// log writes the note as one line.
func (n note) log(l *slog.Logger) {
	level := slog.LevelInfo
	if n.warn {
		level = slog.LevelWarn
	}
	l.Log(context.Background(), level, "ZooKeeper setting has no effect in zkraft", "key", n.key, "value", n.value, "from", n.from, "why", n.why)
}

// loadZooCfg reads the zoo.cfg at path, the dynamic configuration file it
// names, and the JVM flags from getenv and the files zkEnv.sh sources from
// the configuration directory ($ZOOCFGDIR, else the directory of path).
func loadZooCfg(path string, getenv func(string) string) (*zkSettings, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	confDir := getenv("ZOOCFGDIR")
	if confDir == "" {
		confDir = filepath.Dir(path)
	}
	jf, err := readJVMFlags(confDir, getenv)
	if err != nil {
		return nil, err
	}
	s, err := parseZooCfg(f, path, jf)
	if err != nil {
		return nil, err
	}
	if dyn := s.cfgValue("dynamicConfigFile"); dyn != "" {
		// ZooKeeper opens it as given, relative to its working directory.
		df, err := os.Open(dyn)
		if err != nil {
			return nil, fmt.Errorf("%s: dynamicConfigFile: %w", path, err)
		}
		defer df.Close()
		s.dynPath = dyn
		if s.dyn, err = readProperties(df); err != nil {
			return nil, fmt.Errorf("%s: %w", dyn, err)
		}
	}
	return s, nil
}

// parseZooCfg reads a zoo.cfg from r over the JVM flags jf (nil: none).
func parseZooCfg(r io.Reader, path string, jf *jvmFlags) (*zkSettings, error) {
	if path == "" {
		path = "zoo.cfg"
	}
	lines, err := readProperties(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s := &zkSettings{props: map[string]propValue{}, used: map[string]bool{}, path: path}
	if jf != nil {
		for k, v := range jf.props {
			s.props[k] = v
		}
		for _, u := range jf.unread {
			s.notes = append(s.notes, note{key: "SERVER_JVMFLAGS/JVMFLAGS", from: u,
				why: "zkraft reads plain assignments (NAME=\"...\", NAME=\"$NAME ...\") of the JVM flags, not this line; put -D flags in a plain assignment", warn: true})
		}
	}
	for _, p := range lines {
		if isCfgKey(p.key) {
			s.cfg = append(s.cfg, p)
			continue
		}
		s.props["zookeeper."+p.key] = propValue{value: p.value, from: fmt.Sprintf("%s line %d", path, p.line), key: p.key}
	}
	return s, nil
}

// applyZooCfg reads a zoo.cfg (with no JVM flags) into cfg and returns
// the notes on the settings that have no effect.
func applyZooCfg(r io.Reader, cfg *server.Config) ([]note, error) {
	s, err := parseZooCfg(r, "", nil)
	if err != nil {
		return nil, err
	}
	if err := s.apply(cfg); err != nil {
		return nil, err
	}
	return s.notes, nil
}

func (s *zkSettings) cfgValue(k string) string {
	v, _ := s.cfgLookup(k)
	return v
}

// cfgLookup finds a key QuorumPeerConfig parses; the last line wins.
func (s *zkSettings) cfgLookup(k string) (string, bool) {
	for i := len(s.cfg) - 1; i >= 0; i-- {
		if s.cfg[i].key == k {
			return s.cfg[i].value, true
		}
	}
	return "", false
}

// prop reads system property name.
func (s *zkSettings) prop(name string) (string, bool) {
	s.used[name] = true
	p, ok := s.props[name]
	return p.value, ok
}

// errorf prefixes a configuration error with the file and what set it.
func (s *zkSettings) errorf(key string, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %s", s.path, key, fmt.Sprintf(format, args...))
}

// javaInt parses an int as Integer.parseInt does (a leading + allowed).
func javaInt(v string) (int, error) {
	n, err := strconv.ParseInt(strings.TrimPrefix(v, "+"), 10, 32)
	return int(n), err
}

// cfgInt reads an int key of zoo.cfg; ZooKeeper fails to start on a bad one.
func (s *zkSettings) cfgInt(k string, dflt int) (int, error) {
	v, ok := s.cfgLookup(k)
	if !ok {
		return dflt, nil
	}
	n, err := javaInt(v)
	if err != nil {
		return 0, s.errorf(k, "%q is not a number", v)
	}
	return n, nil
}

// cfgBool reads a boolean key of zoo.cfg: QuorumPeerConfig accepts only
// true or false.
func (s *zkSettings) cfgBool(k string, dflt bool) (bool, error) {
	v, ok := s.cfgLookup(k)
	if !ok {
		return dflt, nil
	}
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, s.errorf(k, "invalid option %q: choose 'true' or 'false'", v)
}

// propBool reads a boolean system property as Boolean.parseBoolean does:
// "true" in any case is true, anything else false.
func (s *zkSettings) propBool(name string, dflt bool) bool {
	v, ok := s.prop(name)
	if !ok {
		return dflt
	}
	return strings.EqualFold(v, "true")
}

// propInt reads an int system property as Integer.getInteger does: a
// value that is not a number is the default.
func (s *zkSettings) propInt(name string, dflt int) int {
	v, ok := s.prop(name)
	if !ok {
		return dflt
	}
	n, err := javaInt(strings.TrimSpace(v))
	if err != nil {
		return dflt
	}
	return n
}

// apply fills cfg from the settings, with ZooKeeper's defaults for what
// they do not set, and records the notes.
func (s *zkSettings) apply(cfg *server.Config) error {
	if err := s.applyQuorumPeerConfig(cfg); err != nil {
		return err
	}
	if err := s.applySystemProperties(cfg); err != nil {
		return err
	}
	s.noteUnused()
	return nil
}

// applyQuorumPeerConfig applies the keys QuorumPeerConfig parses.
func (s *zkSettings) applyQuorumPeerConfig(cfg *server.Config) error {
	if v, ok := s.cfgLookup("dataDir"); ok {
		cfg.DataDir = v
	}
	if v, ok := s.cfgLookup("dataLogDir"); ok {
		cfg.LogDir = v
	}
	tick, err := s.cfgInt("tickTime", 3000) // ZooKeeperServer.DEFAULT_TICK_TIME
	if err != nil {
		return err
	}
	if tick <= 0 {
		return s.errorf("tickTime", "is not set (it must be positive)")
	}
	cfg.TickTime = time.Duration(tick) * time.Millisecond
	for _, k := range []string{"minSessionTimeout", "maxSessionTimeout"} {
		n, err := s.cfgInt(k, -1)
		if err != nil {
			return err
		}
		d := time.Duration(max(n, 0)) * time.Millisecond // -1 (or 0): 2 and 20 ticks
		if k == "minSessionTimeout" {
			cfg.MinSessionTimeout = d
		} else {
			cfg.MaxSessionTimeout = d
		}
	}
	cnxns, err := s.cfgInt("maxClientCnxns", 60)
	if err != nil {
		return err
	}
	cfg.MaxClientCnxns = max(cnxns, 0) // ZooKeeper limits only when > 0

	port, err := s.cfgInt("clientPort", 0)
	if err != nil {
		return err
	}
	host, hasHost := s.cfgLookup("clientPortAddress")
	switch {
	case port > 0 && hasHost:
		cfg.ClientAddr = net.JoinHostPort(host, strconv.Itoa(port))
	case port > 0:
		cfg.ClientAddr = net.JoinHostPort("0.0.0.0", strconv.Itoa(port))
	case hasHost:
		return s.errorf("clientPortAddress", "is set but clientPort is not set")
	}
	sport, err := s.cfgInt("secureClientPort", 0)
	if err != nil {
		return err
	}
	shost, hasSHost := s.cfgLookup("secureClientPortAddress")
	switch {
	case sport > 0 && hasSHost:
		cfg.TLS.SecureClientAddr = net.JoinHostPort(shost, strconv.Itoa(sport))
	case sport > 0:
		cfg.TLS.SecureClientAddr = net.JoinHostPort("0.0.0.0", strconv.Itoa(sport))
	case hasSHost:
		return s.errorf("secureClientPortAddress", "is set but secureClientPort is not set")
	}
	if alg, err := s.cfgInt("electionAlg", 3); err != nil {
		return err
	} else if alg != 3 {
		return s.errorf("electionAlg", "invalid value %d: only 3 is supported", alg)
	}
	if cfg.ReconfigEnabled, err = s.cfgBool("reconfigEnabled", false); err != nil {
		return err
	}
	if cfg.TLS.Quorum, err = s.cfgBool("sslQuorum", false); err != nil {
		return err
	}
	allIPs, err := s.cfgBool("quorumListenOnAllIPs", false)
	if err != nil {
		return err
	}
	for _, k := range []string{"localSessionsEnabled", "localSessionsUpgradingEnabled", "syncEnabled",
		"sslQuorumReloadCertFiles", "portUnification", "multiAddress.enabled", "multiAddress.reachabilityCheckEnabled",
		"quorum.auth.enableSasl", "quorum.auth.serverRequireSasl", "quorum.auth.learnerRequireSasl", "jvm.pause.monitor"} {
		if _, err := s.cfgBool(k, false); err != nil {
			return err
		}
	}
	if err := s.applyServers(cfg, allIPs); err != nil {
		return err
	}

	// The Prometheus provider (metricsProvider.*) binds 0.0.0.0:7000 unless told.
	if v, ok := s.cfgLookup("metricsProvider.className"); ok && strings.HasSuffix(v, "PrometheusMetricsProvider") {
		cfg.Metrics.Enabled = true
	} else if ok && v != "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider" {
		s.notes = append(s.notes, note{key: "metricsProvider.className", value: v, from: s.path,
			why: "zkraft has the Prometheus provider only (and the metrics of mntr, which need none)"})
	}
	mHost, mPort := "0.0.0.0", "7000"
	if v, ok := s.cfgLookup("metricsProvider.httpHost"); ok {
		mHost = v
	}
	if v, ok := s.cfgLookup("metricsProvider.httpPort"); ok {
		if n, err := javaInt(v); err != nil || n < 0 || n > 65535 {
			return s.errorf("metricsProvider.httpPort", "%q is not a port", v)
		}
		mPort = v
	}
	cfg.Metrics.Addr = net.JoinHostPort(mHost, mPort)
	return nil
}

// applyServers reads the ensemble from the server.N lines of zoo.cfg or,
// with dynamicConfigFile, of that file:
//
//	server.N=host:peerPort:electionPort[:participant|observer][;[clientHost:]clientPort]
//
// As ZooKeeper, one voting member with standaloneEnabled=true (the
// default) is a standalone server: it opens no Raft port, and the server
// lines are not used.
func (s *zkSettings) applyServers(cfg *server.Config, listenAllIPs bool) error {
	lines := s.cfg
	if _, ok := s.cfgLookup("dynamicConfigFile"); ok {
		for _, p := range s.cfg {
			if strings.HasPrefix(p.key, "server.") || strings.HasPrefix(p.key, "group") || strings.HasPrefix(p.key, "weight") {
				return s.errorf(p.key, "must be in the separate dynamic config file (dynamicConfigFile is set)")
			}
		}
		lines = s.dyn
	}
	var members []server.Member
	for _, p := range lines {
		if strings.HasPrefix(p.key, "server.") {
			m, err := parseServer(p.key, p.value, cfg.ClientAddr)
			if err != nil {
				return fmt.Errorf("%s: %w", s.path, err)
			}
			members = append(members, m)
		}
	}
	sort.Slice(members, func(i, j int) bool { return members[i].ID < members[j].ID })
	voters := 0
	for _, m := range members {
		if !m.Observer {
			voters++
		}
	}
	standaloneEnabled, err := s.cfgBool("standaloneEnabled", true)
	if err != nil {
		return err
	}
	if voters == 1 && standaloneEnabled {
		// QuorumPeerMain runs ZooKeeperServerMain: the server lines give at
		// most this server's client address (with a myid that names it).
		id, err := readMyID(cfg.DataDir)
		if err == nil {
			cfg.ReplicaID = id
			for _, m := range members {
				if m.ID == id && cfg.ClientAddr == "" {
					cfg.ClientAddr = m.ClientAddr
				}
			}
		}
		s.notes = append(s.notes, note{key: "server.N", from: s.path,
			why: "one voting member and standaloneEnabled=true: a standalone server, as ZooKeeper runs it (no Raft port); set standaloneEnabled=false to run an ensemble of one that reconfig can grow"})
		return nil
	}
	cfg.Members = members
	if listenAllIPs {
		cfg.RaftListenAllIPs = true
	}
	return nil
}

// parseServer parses one server.N line (server.ParseServerLine); a member
// without a client address uses clientAddr (clientPortAddress:clientPort).
func parseServer(key, v, clientAddr string) (server.Member, error) {
	m, hasClient, err := server.ParseServerLine(key, v)
	if err == nil && !hasClient {
		m.ClientAddr = clientAddr
	}
	return m, err
}

// applySystemProperties applies the settings ZooKeeper reads from system
// properties.
func (s *zkSettings) applySystemProperties(cfg *server.Config) error {
	cfg.ExtendedTypes = s.propBool("zookeeper.extendedTypesEnabled", false)
	if s.propBool("zookeeper.audit.enable", false) {
		// ZooKeeper's audit logger writes where its logging configuration
		// sends org.apache.zookeeper.audit.Slf4jAuditLogger, by default
		// with the rest of its log; zkraft's log is stderr (--audit-log
		// names a file).
		cfg.AuditLog = os.Stderr
	}
	cfg.EnforceQuota = s.propBool("zookeeper.enforceQuota", false)
	if v, ok := s.prop("zookeeper.DigestAuthenticationProvider.superDigest"); ok {
		cfg.SuperDigest = v
	}
	cfg.MaxBuffer = s.propInt("jute.maxbuffer", 0xfffff)
	if cfg.MaxBuffer <= 0 {
		return fmt.Errorf("jute.maxbuffer=%d: must be positive", cfg.MaxBuffer)
	}
	ms := s.propInt("znode.container.checkIntervalMs", 60000)
	if ms <= 0 {
		return fmt.Errorf("znode.container.checkIntervalMs=%d: must be positive", ms)
	}
	cfg.ContainerCheckInterval = time.Duration(ms) * time.Millisecond

	// snapCount: transactions between snapshots; ZooKeeper takes no fewer than 2.
	cfg.SnapshotEntries = uint64(max(s.propInt("zookeeper.snapCount", 100000), 2))

	// globalOutstandingLimit: as a ZooKeeper quorum member, each member of
	// an ensemble of more than two voters takes limit/(voters-1).
	limit := s.propInt("zookeeper.globalOutstandingLimit", 1000)
	if voters := votingMembers(cfg.Members); voters > 2 {
		limit /= voters - 1
	}
	cfg.GlobalOutstandingLimit = max(limit, 1)
	cfg.MaxCnxns = max(s.propInt("zookeeper.maxCnxns", 0), 0)

	// The four-letter words: srvr always (zkServer.sh needs it), isro too
	// in read-only mode.
	if v, ok := s.prop("zookeeper.4lw.commands.whitelist"); ok {
		cfg.FourLetterWords = nil
		for _, w := range splitList(v) {
			if w == "*" {
				cfg.FourLetterWords = []string{"*"}
				break
			}
			cfg.FourLetterWords = append(cfg.FourLetterWords, w)
		}
	}
	if len(cfg.FourLetterWords) != 1 || cfg.FourLetterWords[0] != "*" {
		cfg.FourLetterWords = appendMissing(cfg.FourLetterWords, "srvr")
		if s.propBool("readonlymode.enabled", false) {
			cfg.FourLetterWords = appendMissing(cfg.FourLetterWords, "isro")
		}
	}

	if !s.propBool("zookeeper.datadir.autocreate", true) {
		if err := checkDataDirsExist(cfg); err != nil {
			return err
		}
	}
	if err := s.applyAdmin(cfg); err != nil {
		return err
	}
	if err := s.applyTLS(cfg); err != nil {
		return err
	}
	s.applyAuth(cfg)
	return nil
}

func appendMissing(list []string, w string) []string {
	for _, x := range list {
		if x == w {
			return list
		}
	}
	return append(list, w)
}

func votingMembers(ms []server.Member) int {
	n := 0
	for _, m := range ms {
		if !m.Observer {
			n++
		}
	}
	return n
}

// checkDataDirsExist is zookeeper.datadir.autocreate=false: ZooKeeper
// refuses to start unless dataDir/version-2 (and dataLogDir/version-2)
// exist, so that a mistyped or unmounted dataDir is not served as an
// empty tree. zkraft also takes its own directories there as proof.
func checkDataDirsExist(cfg *server.Config) error {
	check := func(dir string, own string) error {
		for _, sub := range []string{"version-2", own} {
			if fi, err := os.Stat(filepath.Join(dir, sub)); err == nil && fi.IsDir() {
				return nil
			}
		}
		return fmt.Errorf("data directory %s is missing (no version-2 or %s in it), and automatic data directory creation is disabled "+
			"(zookeeper.datadir.autocreate is false): create it, or run zkServer-initialize.sh", dir, own)
	}
	if cfg.DataDir == "" {
		return errors.New("dataDir is not set")
	}
	if err := check(cfg.DataDir, "raft"); err != nil {
		return err
	}
	if cfg.LogDir != "" && cfg.LogDir != cfg.DataDir {
		return check(cfg.LogDir, "raft-wal")
	}
	return nil
}

// applyAdmin reads the AdminServer settings: on by default, on
// 0.0.0.0:8080 at /commands, as ZooKeeper.
func (s *zkSettings) applyAdmin(cfg *server.Config) error {
	cfg.Admin.Enabled = s.propBool("zookeeper.admin.enableServer", true)
	host := "0.0.0.0"
	if v, ok := s.prop("zookeeper.admin.serverAddress"); ok {
		host = v
	}
	port := "8080"
	if v, ok := s.prop("zookeeper.admin.serverPort"); ok {
		if n, err := javaInt(v); err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("zookeeper.admin.serverPort=%q is not a port", v)
		}
		port = v
	}
	cfg.Admin.Addr = net.JoinHostPort(host, port)
	cfg.Admin.CommandURL = "/commands"
	if v, ok := s.prop("zookeeper.admin.commandURL"); ok {
		cfg.Admin.CommandURL = v
	}
	cfg.Admin.IdleTimeout = time.Duration(s.propInt("zookeeper.admin.idleTimeout", 30000)) * time.Millisecond
	// ZooKeeper 3.9's snapshot command: on by default, one per interval.
	cfg.Admin.SnapshotDisabled = !s.propBool("zookeeper.admin.snapshot.enabled", true)
	if ms := s.propInt("zookeeper.admin.rateLimiterIntervalInMS", 300000); ms > 0 {
		cfg.Admin.SnapshotInterval = time.Duration(ms) * time.Millisecond
	}
	if s.propBool("zookeeper.admin.forceHttps", false) && cfg.Admin.Enabled {
		cfg.Admin.Enabled = false // it would have served HTTPS only; see its note
	}
	return nil
}

// applyTLS reads the ssl.* settings of the secure client port and of TLS
// between members. zkraft reads PEM stores only.
func (s *zkSettings) applyTLS(cfg *server.Config) error {
	str := func(name string, dst *string) {
		if v, ok := s.prop(name); ok {
			*dst = v
		}
	}
	str("zookeeper.ssl.keyStore.location", &cfg.TLS.CertFile)
	// ZooKeeper 3.9: reload the client port's stores when they change.
	cfg.TLS.Reload = s.propBool("zookeeper.client.certReload", false)
	str("zookeeper.ssl.trustStore.location", &cfg.TLS.CAFile)
	str("zookeeper.ssl.quorum.keyStore.location", &cfg.TLS.QuorumCertFile)
	str("zookeeper.ssl.quorum.trustStore.location", &cfg.TLS.QuorumCAFile)
	if v, ok := s.prop("zookeeper.ssl.clientAuth"); ok {
		cfg.TLS.ClientAuth = strings.ToLower(v)
	}
	for _, name := range []string{"zookeeper.ssl.keyStore.type", "zookeeper.ssl.trustStore.type",
		"zookeeper.ssl.quorum.keyStore.type", "zookeeper.ssl.quorum.trustStore.type"} {
		if v, ok := s.prop(name); ok && v != "" && !strings.EqualFold(v, "PEM") {
			return fmt.Errorf("%s=%s: zkraft reads PEM stores only (convert it: openssl pkcs12 -in store.p12 -nodes, or keytool -importkeystore to PKCS12 first)", name, v)
		}
	}
	return nil
}

// applyAuth reads the authentication settings.
func (s *zkSettings) applyAuth(cfg *server.Config) {
	if v, ok := s.prop("zookeeper.superUser"); ok {
		cfg.SASL.SuperUser = v
	}
	if v, ok := s.prop("java.security.auth.login.config"); ok {
		cfg.SASL.JAASFile = v
	}
	if v, ok := s.prop("zookeeper.sasl.serverconfig"); ok {
		cfg.SASL.JAASSection = v
	}
	cfg.SASL.EnforceAuth = s.propBool("zookeeper.enforce.auth.enabled", false)
	if v, ok := s.prop("zookeeper.enforce.auth.schemes"); ok {
		cfg.SASL.EnforceAuthSchemes = splitList(v)
	}
	if s.propBool("zookeeper.sessionRequireClientSASLAuth", false) {
		cfg.SASL.EnforceAuth = true
		cfg.SASL.EnforceAuthSchemes = []string{"sasl"}
	}
	// authProvider.N: sasl, digest, ip and x509 are built in; another
	// provider class is named in the log.
	for name, p := range s.props {
		if !strings.HasPrefix(name, "zookeeper.authProvider.") {
			continue
		}
		s.used[name] = true
		if !builtinAuthProvider(p.value) {
			s.notes = append(s.notes, note{key: displayKey(name, p), value: p.value, from: p.from,
				why: "zkraft's providers (digest, ip, sasl, x509) are built in; another provider class is not loaded", warn: true})
		}
	}
}

func builtinAuthProvider(class string) bool {
	switch class {
	case "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
		"org.apache.zookeeper.server.auth.DigestAuthenticationProvider",
		"org.apache.zookeeper.server.auth.IPAuthenticationProvider",
		"org.apache.zookeeper.server.auth.X509AuthenticationProvider":
		return true
	}
	return false
}

// displayKey is how a note names a property: by its zoo.cfg key when it
// came from zoo.cfg.
func displayKey(name string, p propValue) string {
	if p.key != "" {
		return p.key
	}
	return name
}

// noteUnused records a note for every setting present that zkraft does not
// apply: the zoo.cfg keys QuorumPeerConfig parses and zkraft does not use,
// and the system properties zkraft does not read.
func (s *zkSettings) noteUnused() {
	type line struct {
		property
		file string
	}
	var lines []line
	for _, p := range s.cfg {
		lines = append(lines, line{p, s.path})
	}
	for _, p := range s.dyn {
		lines = append(lines, line{p, s.dynPath})
	}
	for _, p := range lines {
		from := fmt.Sprintf("%s line %d", p.file, p.line)
		if strings.HasPrefix(p.key, "server.") || p.key == "version" {
			continue
		}
		if strings.HasPrefix(p.key, "group") || strings.HasPrefix(p.key, "weight") {
			z, _ := lookupCfgKey(p.key)
			why := "not a ZooKeeper setting zkraft knows"
			warn := false
			if z != nil {
				why, warn = z.why, z.warn
			}
			s.notes = append(s.notes, note{key: p.key, value: p.value, from: from, why: why, warn: warn})
			continue
		}
		z, ok := lookupCfgKey(p.key)
		if !ok {
			if strings.HasPrefix(p.key, "metricsProvider.") {
				s.notes = append(s.notes, note{key: p.key, value: p.value, from: from,
					why: "not a setting of ZooKeeper's Prometheus provider"})
			}
			continue
		}
		if z.why != "" {
			s.notes = append(s.notes, note{key: p.key, value: p.value, from: from, why: z.why, warn: z.warn})
		}
	}
	names := make([]string, 0, len(s.props))
	for name := range s.props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := s.props[name]
		n := note{key: displayKey(name, p), value: p.value, from: p.from}
		z, ok := lookupProp(name)
		switch {
		case ok && z.why != "":
			// Named even when read for a side effect (readonlymode.enabled
			// whitelists isro).
			n.why, n.warn = z.why, z.warn
		case ok || s.used[name]:
			continue
		case p.key != "" && isSysOnlyKey(p.key):
			n.why = fmt.Sprintf("ZooKeeper reads %s only as a Java system property (-D%s=... in SERVER_JVMFLAGS); as a zoo.cfg key it sets zookeeper.%s, which nothing reads", p.key, p.key, p.key)
		case p.key != "" && strings.HasPrefix(p.key, "zookeeper."):
			n.why = fmt.Sprintf("a zoo.cfg key takes no zookeeper. prefix: this sets zookeeper.%s, which nothing reads (write %s=...)", p.key, strings.TrimPrefix(p.key, "zookeeper."))
		case strings.HasPrefix(name, "zookeeper.") || p.key != "":
			n.why = "not a ZooKeeper 3.8/3.9 setting zkraft knows"
		default:
			continue // a JVM flag for something else (java.*, log4j, ...)
		}
		s.notes = append(s.notes, n)
	}
}

func isSysOnlyKey(k string) bool {
	for _, z := range zooKeeperKeys {
		if z.kind == sysOnly && z.key == k {
			return true
		}
	}
	return false
}

// readMyID reads ZooKeeper's dataDir/myid.
func readMyID(dataDir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "myid"))
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || id == 0 || id > 254 {
		return 0, fmt.Errorf("%s/myid: %q is not a server id 1..254", dataDir, strings.TrimSpace(string(b)))
	}
	return id, nil
}
