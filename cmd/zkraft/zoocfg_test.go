package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zkraft/zkraft/server"
)

func TestReadProperties(t *testing.T) {
	for _, c := range []struct {
		text string
		want [][2]string
	}{
		{"a=b", [][2]string{{"a", "b"}}},
		{"  a = b  ", [][2]string{{"a", "b"}}},
		{"a:b", [][2]string{{"a", "b"}}},
		{"a b c", [][2]string{{"a", "b c"}}},
		{"a \t= b", [][2]string{{"a", "b"}}},
		{"a==b", [][2]string{{"a", "=b"}}},
		{`a\=b=c`, [][2]string{{"a=b", "c"}}},
		{`a\:b:c`, [][2]string{{"a:b", "c"}}},
		{"alone", [][2]string{{"alone", ""}}},
		{"# comment\n! also\n\n   \na=1", [][2]string{{"a", "1"}}},
		{"a=one \\\n    two", [][2]string{{"a", "one two"}}},
		{"a=x\\\\\nb=y", [][2]string{{"a", `x\`}, {"b", "y"}}},
		{`a=\u0041\t|`, [][2]string{{"a", "A\t|"}}},
		{"a=1\nb=2\na=3", [][2]string{{"a", "3"}, {"b", "2"}}},
		{"dataDir=C:\\\\zk\\\\data", [][2]string{{"dataDir", `C:\zk\data`}}},
	} {
		ps, err := readProperties(strings.NewReader(c.text))
		if err != nil {
			t.Errorf("%q: %v", c.text, err)
			continue
		}
		var got [][2]string
		for _, p := range ps {
			got = append(got, [2]string{p.key, p.value})
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %q, want %q", c.text, got, c.want)
		}
	}
	if _, err := readProperties(strings.NewReader(`a=\u00zz`)); err == nil {
		t.Error("a malformed \\u escape was accepted (Java throws)")
	}
}

// parseWith reads a zoo.cfg over the -D flags given (name=value).
func parseWith(t *testing.T, text string, jvm map[string]string) (*server.Config, []note, error) {
	t.Helper()
	jf := &jvmFlags{props: map[string]propValue{}}
	for k, v := range jvm {
		jf.props[k] = propValue{value: v, from: "SERVER_JVMFLAGS (environment)"}
	}
	s, err := parseZooCfg(strings.NewReader(text), "zoo.cfg", jf)
	if err != nil {
		return nil, nil, err
	}
	var cfg server.Config
	if err := s.apply(&cfg); err != nil {
		return nil, nil, err
	}
	return &cfg, s.notes, nil
}

func noteFor(notes []note, key string) (note, bool) {
	for _, n := range notes {
		if n.key == key {
			return n, true
		}
	}
	return note{}, false
}

// TestZooCfgDefaults: what a zoo.cfg leaves out takes ZooKeeper's default.
func TestZooCfgDefaults(t *testing.T) {
	cfg, notes, err := parseWith(t, "dataDir=/var/lib/zookeeper\nclientPort=2181\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := server.Config{
		DataDir:                "/var/lib/zookeeper",
		ClientAddr:             "0.0.0.0:2181",
		TickTime:               3 * time.Second, // ZooKeeperServer.DEFAULT_TICK_TIME
		MaxClientCnxns:         60,
		MaxBuffer:              0xfffff,
		SnapshotEntries:        100000,
		GlobalOutstandingLimit: 1000,
		ContainerCheckInterval: time.Minute,
		FourLetterWords:        []string{"srvr"},
		Admin:                  server.AdminConfig{Enabled: true, Addr: "0.0.0.0:8080", CommandURL: "/commands", IdleTimeout: 30 * time.Second, SnapshotInterval: 5 * time.Minute},
		Metrics:                server.MetricsConfig{Addr: "0.0.0.0:7000"},
	}
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("config\n %+v\nwant\n %+v", *cfg, want)
	}
	if len(notes) != 0 {
		t.Errorf("notes %+v", notes)
	}
	// Validate turns the session timeouts into 2 and 20 ticks.
	if err := cfg.Validate(); err != nil || cfg.MinSessionTimeout != 6*time.Second || cfg.MaxSessionTimeout != 60*time.Second {
		t.Fatalf("Validate: %v, session timeouts %v..%v", err, cfg.MinSessionTimeout, cfg.MaxSessionTimeout)
	}
}

// TestZooCfgDebianSample: the zoo.cfg the Debian zookeeper package ships.
func TestZooCfgDebianSample(t *testing.T) {
	const debian = `# The number of milliseconds of each tick
tickTime=2000
# The number of ticks that the initial
# synchronization phase can take
initLimit=10
# The number of ticks that can pass between
# sending a request and getting an acknowledgement
syncLimit=5
dataDir=/tmp/zookeeper
clientPort=2181
#maxClientCnxns=60
#autopurge.snapRetainCount=3
#metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider
`
	cfg, notes, err := parseWith(t, debian, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TickTime != 2*time.Second || cfg.MaxClientCnxns != 60 || cfg.DataDir != "/tmp/zookeeper" || cfg.ClientAddr != "0.0.0.0:2181" || len(cfg.Members) != 0 {
		t.Errorf("config %+v", cfg)
	}
	var keys []string
	for _, n := range notes {
		keys = append(keys, n.key)
	}
	if strings.Join(keys, ",") != "initLimit,syncLimit" {
		t.Errorf("notes on %v, want initLimit and syncLimit", keys)
	}
	if n, _ := noteFor(notes, "syncLimit"); n.value != "5" || n.from != "zoo.cfg line 8" || !strings.Contains(n.why, "election") {
		t.Errorf("syncLimit note %+v", n)
	}
}

// TestZooCfgMapping: table of zoo.cfg lines and -D flags and what each
// sets, with ZooKeeper's reading of each.
func TestZooCfgMapping(t *testing.T) {
	const base = "dataDir=/d\nclientPort=2181\n"
	for _, c := range []struct {
		name  string
		cfg   string
		jvm   map[string]string
		check func(*server.Config) bool
		note  string // a key that must be named in a note
	}{
		{"TTL from zoo.cfg", "extendedTypesEnabled=true", nil, func(c *server.Config) bool { return c.ExtendedTypes }, ""},
		{"TTL from -D", "", map[string]string{"zookeeper.extendedTypesEnabled": "true"}, func(c *server.Config) bool { return c.ExtendedTypes }, ""},
		{"zoo.cfg overrides -D", "extendedTypesEnabled=false", map[string]string{"zookeeper.extendedTypesEnabled": "true"}, func(c *server.Config) bool { return !c.ExtendedTypes }, ""},
		{"Java booleans: only true is true", "extendedTypesEnabled=yes", nil, func(c *server.Config) bool { return !c.ExtendedTypes }, ""},
		{"prefixed key in zoo.cfg does nothing", "zookeeper.extendedTypesEnabled=true", nil, func(c *server.Config) bool { return !c.ExtendedTypes }, "zookeeper.extendedTypesEnabled"},
		{"enforceQuota", "enforceQuota=true", nil, func(c *server.Config) bool { return c.EnforceQuota }, ""},
		{"superDigest", "DigestAuthenticationProvider.superDigest=super:abc=", nil, func(c *server.Config) bool { return c.SuperDigest == "super:abc=" }, ""},
		{"snapCount", "snapCount=100", nil, func(c *server.Config) bool { return c.SnapshotEntries == 100 }, ""},
		{"snapCount at least 2", "snapCount=1", nil, func(c *server.Config) bool { return c.SnapshotEntries == 2 }, ""},
		{"jute.maxbuffer from -D", "", map[string]string{"jute.maxbuffer": "4194304"}, func(c *server.Config) bool { return c.MaxBuffer == 4194304 }, ""},
		{"jute.maxbuffer in zoo.cfg does nothing", "jute.maxbuffer=4194304", nil, func(c *server.Config) bool { return c.MaxBuffer == 0xfffff }, "jute.maxbuffer"},
		{"container interval from -D", "", map[string]string{"znode.container.checkIntervalMs": "5000"}, func(c *server.Config) bool { return c.ContainerCheckInterval == 5*time.Second }, ""},
		{"container interval in zoo.cfg does nothing", "znode.container.checkIntervalMs=5000", nil, func(c *server.Config) bool { return c.ContainerCheckInterval == time.Minute }, "znode.container.checkIntervalMs"},
		{"globalOutstandingLimit standalone", "globalOutstandingLimit=900", nil, func(c *server.Config) bool { return c.GlobalOutstandingLimit == 900 }, ""},
		{"globalOutstandingLimit divided in an ensemble of 3", "globalOutstandingLimit=900\nserver.1=a:1:2\nserver.2=b:1:2\nserver.3=c:1:2", nil,
			func(c *server.Config) bool { return c.GlobalOutstandingLimit == 450 }, ""},
		{"maxClientCnxns=0 is no limit", "maxClientCnxns=0", nil, func(c *server.Config) bool { return c.MaxClientCnxns == 0 }, ""},
		{"a negative maxClientCnxns is no limit", "maxClientCnxns=-3", nil, func(c *server.Config) bool { return c.MaxClientCnxns == 0 }, ""},
		{"maxClientCnxns", "maxClientCnxns=10", nil, func(c *server.Config) bool { return c.MaxClientCnxns == 10 }, ""},
		{"maxCnxns", "maxCnxns=500", nil, func(c *server.Config) bool { return c.MaxCnxns == 500 }, ""},
		{"4lw list keeps srvr", "4lw.commands.whitelist=ruok, mntr ,", nil, func(c *server.Config) bool { return strings.Join(c.FourLetterWords, ",") == "ruok,mntr,srvr" }, ""},
		{"4lw all", "4lw.commands.whitelist=*", nil, func(c *server.Config) bool { return strings.Join(c.FourLetterWords, ",") == "*" }, ""},
		{"read-only mode adds isro", "4lw.commands.whitelist=ruok", map[string]string{"readonlymode.enabled": "true"},
			func(c *server.Config) bool { return strings.Join(c.FourLetterWords, ",") == "ruok,srvr,isro" }, "readonlymode.enabled"},
		{"superUser", "superUser=bob", nil, func(c *server.Config) bool { return c.SASL.SuperUser == "bob" }, ""},
		{"JAAS from -D", "", map[string]string{"java.security.auth.login.config": "/etc/zk/jaas.conf", "zookeeper.sasl.serverconfig": "ZkServer"},
			func(c *server.Config) bool {
				return c.SASL.JAASFile == "/etc/zk/jaas.conf" && c.SASL.JAASSection == "ZkServer"
			}, ""},
		{"sessionRequireClientSASLAuth", "sessionRequireClientSASLAuth=true", nil,
			func(c *server.Config) bool {
				return c.SASL.EnforceAuth && reflect.DeepEqual(c.SASL.EnforceAuthSchemes, []string{"sasl"})
			}, ""},
		{"enforce.auth", "enforce.auth.enabled=true\nenforce.auth.schemes=sasl,x509", nil,
			func(c *server.Config) bool {
				return c.SASL.EnforceAuth && reflect.DeepEqual(c.SASL.EnforceAuthSchemes, []string{"sasl", "x509"})
			}, ""},
		{"built-in auth provider", "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider", nil, func(*server.Config) bool { return true }, ""},
		{"custom auth provider is named", "authProvider.2=com.example.LdapProvider", nil, func(*server.Config) bool { return true }, "authProvider.2"},
		{"admin", "admin.serverAddress=127.0.0.1\nadmin.serverPort=9090\nadmin.commandURL=/cmd\nadmin.idleTimeout=5000", nil,
			func(c *server.Config) bool {
				a := c.Admin
				return a.Enabled && a.Addr == "127.0.0.1:9090" && a.CommandURL == "/cmd" && a.IdleTimeout == 5*time.Second &&
					!a.SnapshotDisabled && a.SnapshotInterval == 5*time.Minute
			}, ""},
		{"admin snapshot", "admin.snapshot.enabled=false\nadmin.rateLimiterIntervalInMS=2000", nil,
			func(c *server.Config) bool {
				return c.Admin.SnapshotDisabled && c.Admin.SnapshotInterval == 2*time.Second
			}, ""},
		{"admin off", "admin.enableServer=false", nil, func(c *server.Config) bool { return !c.Admin.Enabled }, ""},
		{"admin off from -D", "", map[string]string{"zookeeper.admin.enableServer": "false"}, func(c *server.Config) bool { return !c.Admin.Enabled }, ""},
		{"HTTPS-only admin is not served over HTTP", "admin.forceHttps=true", nil, func(c *server.Config) bool { return !c.Admin.Enabled }, "admin.forceHttps"},
		{"prometheus", "metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\nmetricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort=7001", nil,
			func(c *server.Config) bool { return c.Metrics.Enabled && c.Metrics.Addr == "127.0.0.1:7001" }, ""},
		{"secure port binds all addresses unless told", "clientPortAddress=127.0.0.1\nsecureClientPort=2281", nil,
			func(c *server.Config) bool {
				return c.TLS.SecureClientAddr == "0.0.0.0:2281" && c.ClientAddr == "127.0.0.1:2181"
			}, ""},
		{"TLS files", "secureClientPort=2281\nsecureClientPortAddress=127.0.0.1\nssl.keyStore.location=/k.pem\nssl.keyStore.type=PEM\nssl.trustStore.location=/ca.pem\nssl.clientAuth=WANT\nsslQuorum=true\nssl.quorum.keyStore.location=/q.pem\nssl.quorum.trustStore.location=/qca.pem", nil,
			func(c *server.Config) bool {
				return c.TLS == server.TLSConfig{SecureClientAddr: "127.0.0.1:2281", CertFile: "/k.pem", CAFile: "/ca.pem", ClientAuth: "want",
					Quorum: true, QuorumCertFile: "/q.pem", QuorumCAFile: "/qca.pem"}
			}, ""},
		{"one server line is standalone", "server.1=zk1:2888:3888", nil, func(c *server.Config) bool { return len(c.Members) == 0 }, "server.N"},
		{"standaloneEnabled=false makes an ensemble of one", "standaloneEnabled=false\nserver.1=zk1:2888:3888", nil,
			func(c *server.Config) bool { return len(c.Members) == 1 && c.Members[0].RaftAddr == "zk1:2888" }, ""},
		{"one participant and an observer is standalone", "server.1=zk1:2888:3888\nserver.2=zk2:2888:3888:observer", nil,
			func(c *server.Config) bool { return len(c.Members) == 0 }, "server.N"},
		{"ensemble", "server.2=b:2888:3888;127.0.0.1:2182\nserver.1=a:2888:3888\nserver.3=c:2888:3888:observer\nserver.4=d:2888:3888", nil,
			func(c *server.Config) bool {
				return reflect.DeepEqual(c.Members, []server.Member{
					{ID: 1, RaftAddr: "a:2888", ElectionAddr: "a:3888", ClientAddr: "0.0.0.0:2181"},
					{ID: 2, RaftAddr: "b:2888", ElectionAddr: "b:3888", ClientAddr: "127.0.0.1:2182"},
					{ID: 3, RaftAddr: "c:2888", ElectionAddr: "c:3888", ClientAddr: "0.0.0.0:2181", Observer: true},
					{ID: 4, RaftAddr: "d:2888", ElectionAddr: "d:3888", ClientAddr: "0.0.0.0:2181"},
				})
			}, ""},
		{"IPv6 hosts in brackets", "server.1=[::1]:2888:3888;[::1]:2181\nserver.2=[2001:db8::2]:2888:3888\nserver.3=[2001:db8::3]:2888:3888:observer", nil,
			func(c *server.Config) bool {
				return reflect.DeepEqual(c.Members, []server.Member{
					{ID: 1, RaftAddr: "[::1]:2888", ElectionAddr: "[::1]:3888", ClientAddr: "[::1]:2181"},
					{ID: 2, RaftAddr: "[2001:db8::2]:2888", ElectionAddr: "[2001:db8::2]:3888", ClientAddr: "0.0.0.0:2181"},
					{ID: 3, RaftAddr: "[2001:db8::3]:2888", ElectionAddr: "[2001:db8::3]:3888", ClientAddr: "0.0.0.0:2181", Observer: true},
				})
			}, ""},
		{"quorumListenOnAllIPs", "quorumListenOnAllIPs=true\nserver.1=a:1:2\nserver.2=b:1:2", nil, func(c *server.Config) bool { return c.RaftListenAllIPs }, ""},
		{"reconfigEnabled", "reconfigEnabled=true", nil, func(c *server.Config) bool { return c.ReconfigEnabled }, ""},
		{"electionAlg=3 is accepted and named", "electionAlg=3", nil, func(*server.Config) bool { return true }, "electionAlg"},
		{"hierarchical quorum is named", "group.1=1:2:3\nweight.1=1", nil, func(*server.Config) bool { return true }, "group.1"},
		{"unknown key is named", "foo.bar=1", nil, func(*server.Config) bool { return true }, "foo.bar"},
		{"unknown -D zookeeper property is named", "", map[string]string{"zookeeper.notAThing": "1"}, func(*server.Config) bool { return true }, "zookeeper.notAThing"},
	} {
		cfg, notes, err := parseWith(t, base+c.cfg, c.jvm)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !c.check(cfg) {
			t.Errorf("%s: config %+v", c.name, cfg)
		}
		if c.note != "" {
			if _, ok := noteFor(notes, c.note); !ok {
				t.Errorf("%s: no note on %s in %+v", c.name, c.note, notes)
			}
		} else if len(notes) != 0 {
			t.Errorf("%s: notes %+v", c.name, notes)
		}
	}
}

func TestZooCfgErrors(t *testing.T) {
	for _, text := range []string{
		"tickTime=abc",
		"tickTime=0",
		"clientPort=x",
		"clientPortAddress=127.0.0.1",
		"secureClientPortAddress=127.0.0.1",
		"maxClientCnxns=many",
		"minSessionTimeout=soon",
		"electionAlg=1",
		"reconfigEnabled=yes",
		"standaloneEnabled=1",
		"server.0=a:1:2\nserver.1=b:1:2",
		"server.1=a:1\nserver.2=b:1:2",
		"server.1=a:1:2|a2:3:4\nserver.2=b:1:2",
		"server.1=a:1:2:witness\nserver.2=b:1:2",
		"server.1=::1:1:2\nserver.2=b:1:2",
		"server.1=[::1:1:2\nserver.2=b:1:2",
		"dynamicConfigFile=/nonexistent\nserver.1=a:1:2",
		"ssl.keyStore.type=JKS",
		"admin.serverPort=x",
		"metricsProvider.httpPort=70000",
	} {
		if _, _, err := parseWith(t, "dataDir=/d\n"+text, nil); err == nil {
			t.Errorf("%q: no error", text)
		}
	}
}

// TestZooCfgFiles: loadZooCfg reads the dynamic configuration file and the
// JVM flags of the environment and of the files beside zoo.cfg.
func TestZooCfgFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dyn := write("zoo.cfg.dynamic.100000000", "server.1=a:2888:3888:participant;2181\nserver.2=b:2888:3888:participant;2181\nversion=100000000\n")
	cfgPath := write("zoo.cfg", "dataDir="+dir+"\nclientPort=2181\ndynamicConfigFile="+dyn+"\n")
	write("java.env", `# zkEnv.sh sources this
export SERVER_JVMFLAGS="-Xmx1g -Dzookeeper.extendedTypesEnabled=true $SERVER_JVMFLAGS"
JVMFLAGS="$JVMFLAGS -Djute.maxbuffer=2000000"
`)
	write("zookeeper-env.sh", `HEAP=512m
SERVER_JVMFLAGS='-Dzookeeper.snapCount=5000'
if [ -n "$X" ]; then JVMFLAGS="$JVMFLAGS -Dzookeeper.enforceQuota=true"; fi
`)
	env := map[string]string{"SERVER_JVMFLAGS": "-Dzookeeper.maxCnxns=7", "JVMFLAGS": "-Djute.maxbuffer=1000 -Dzookeeper.superUser=alice"}
	s, err := loadZooCfg(cfgPath, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	var cfg server.Config
	if err := s.apply(&cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Members) != 2 || cfg.Members[1].RaftAddr != "b:2888" || cfg.Members[1].ClientAddr != "0.0.0.0:2181" {
		t.Errorf("members from the dynamic file: %+v", cfg.Members)
	}
	// zookeeper-env.sh replaced the environment's SERVER_JVMFLAGS (so no
	// maxCnxns), java.env prepended to it; JVMFLAGS kept the environment's
	// words and java.env's later -Djute.maxbuffer wins.
	if !cfg.ExtendedTypes || cfg.SnapshotEntries != 5000 || cfg.MaxCnxns != 0 || cfg.MaxBuffer != 2000000 || cfg.SASL.SuperUser != "alice" || cfg.EnforceQuota {
		t.Errorf("from the JVM flags: extended %v snapCount %d maxCnxns %d maxbuffer %d superUser %q enforceQuota %v",
			cfg.ExtendedTypes, cfg.SnapshotEntries, cfg.MaxCnxns, cfg.MaxBuffer, cfg.SASL.SuperUser, cfg.EnforceQuota)
	}
	n, ok := noteFor(s.notes, "SERVER_JVMFLAGS/JVMFLAGS")
	if !ok || !strings.HasSuffix(n.from, "zookeeper-env.sh:3") || !n.warn {
		t.Errorf("the conditional line is not named: %+v", s.notes)
	}

	// $ZOOCFGDIR names the directory instead, as zkEnv.sh.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "java.env"), []byte("SERVER_JVMFLAGS=-Dzookeeper.snapCount=77\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env = map[string]string{"ZOOCFGDIR": other}
	if s, err = loadZooCfg(cfgPath, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	cfg = server.Config{}
	if err := s.apply(&cfg); err != nil || cfg.SnapshotEntries != 77 || cfg.ExtendedTypes {
		t.Errorf("with ZOOCFGDIR: %v, snapCount %d, extended %v", err, cfg.SnapshotEntries, cfg.ExtendedTypes)
	}

	// server.N lines beside dynamicConfigFile are refused, as ZooKeeper.
	bad := write("bad.cfg", "dataDir="+dir+"\ndynamicConfigFile="+dyn+"\nserver.3=c:1:2\n")
	if s, err = loadZooCfg(bad, func(string) string { return "" }); err == nil {
		err = s.apply(&server.Config{})
	}
	if err == nil || !strings.Contains(err.Error(), "dynamic config file") {
		t.Errorf("server.N beside dynamicConfigFile: %v", err)
	}
}

func TestShellAssignments(t *testing.T) {
	env := map[string]string{"BASE": "-Da=1"}
	vars, from := map[string]string{}, map[string]string{}
	var unread []string
	readShellAssignments(`
X=plain
JVMFLAGS="$BASE ${X} ${NOPE:-dflt} '\$lit'"
SERVER_JVMFLAGS='-Db=$X'
SERVER_JVMFLAGS+=" -Dc=3"
export Y=1 # comment
JVMFLAGS="$(cat /etc/flags)"
FOO=bar some-command
`, "f", vars, from, func(k string) string { return env[k] }, &unread)
	if vars["JVMFLAGS"] != `-Da=1 plain dflt '$lit'` || vars["SERVER_JVMFLAGS"] != "-Db=$X -Dc=3" || vars["Y"] != "1" {
		t.Errorf("vars %q", vars)
	}
	if _, ok := vars["FOO"]; ok {
		t.Errorf("FOO=bar command assigned FOO")
	}
	if !reflect.DeepEqual(unread, []string{"f:7"}) {
		t.Errorf("unread %v", unread)
	}
}

// TestReadJVMFlagsAutocreate: ZOO_DATADIR_AUTOCREATE_DISABLE is zkServer.sh's
// -Dzookeeper.datadir.autocreate=false, which refuses a missing data dir.
func TestReadJVMFlagsAutocreate(t *testing.T) {
	jf, err := readJVMFlags("", func(k string) string {
		if k == "ZOO_DATADIR_AUTOCREATE_DISABLE" {
			return "1"
		}
		return ""
	})
	if err != nil || jf.props["zookeeper.datadir.autocreate"].value != "false" {
		t.Fatalf("%v %+v", err, jf)
	}
	dir := t.TempDir()
	s, err := parseZooCfg(strings.NewReader("dataDir="+dir+"\n"), "", jf)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.apply(&server.Config{}); err == nil || !strings.Contains(err.Error(), "autocreate") {
		t.Fatalf("empty data dir with autocreate off: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "version-2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.apply(&server.Config{}); err != nil {
		t.Fatalf("initialized data dir: %v", err)
	}
}

// TestServeFlagsOverrideZooCfg: flags given explicitly win over zoo.cfg and
// the JVM flags; the others leave them.
func TestServeFlagsOverrideZooCfg(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(path, []byte("dataDir="+dir+"\nclientPort=2181\nmaxClientCnxns=5\nextendedTypesEnabled=true\ntickTime=2000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		if k == "SERVER_JVMFLAGS" {
			return "-Djute.maxbuffer=2000000 -Dzookeeper.enforceQuota=true"
		}
		return ""
	}
	cfg, _, err := serveConfig([]string{"--config", path, "--log-level", "error"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxClientCnxns != 5 || !cfg.ExtendedTypes || cfg.MaxBuffer != 2000000 || !cfg.EnforceQuota || cfg.TickTime != 2*time.Second || cfg.RaftAddr != "" {
		t.Errorf("from zoo.cfg: %+v", cfg)
	}
	cfg, _, err = serveConfig([]string{"--config", path, "--log-level", "error", "--max-client-cnxns", "0", "--extended-types=false",
		"--jute-maxbuffer", "100", "--tick-time", "1s", "--raft-addr", "127.0.0.1:12888"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxClientCnxns != 0 || cfg.ExtendedTypes || cfg.MaxBuffer != 100 || !cfg.EnforceQuota || cfg.TickTime != time.Second || cfg.RaftAddr != "127.0.0.1:12888" {
		t.Errorf("with flags: %+v", cfg)
	}
	// Without --config: the flags' defaults are ZooKeeper's.
	cfg, notes, err := serveConfig([]string{"--log-level", "error"}, env)
	if err != nil || len(notes) != 0 {
		t.Fatal(err, notes)
	}
	if cfg.MaxClientCnxns != 60 || cfg.TickTime != 3*time.Second || cfg.MaxBuffer != 0xfffff || cfg.RaftAddr != "" || cfg.EnforceQuota {
		t.Errorf("flags only: %+v", cfg)
	}
}

// TestElectionTimeoutFlag: --election-timeout becomes Dragonboat's
// ElectionRTT with a heartbeat a tenth of it; without it the server's
// defaults stand (zero here), and a timeout under 100 ms is refused.
func TestElectionTimeoutFlag(t *testing.T) {
	env := func(string) string { return "" }
	cfg, _, err := serveConfig([]string{"--log-level", "error", "--election-timeout", "2500ms"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RTT != 10*time.Millisecond || cfg.ElectionRTT != 250 || cfg.HeartbeatRTT != 25 {
		t.Errorf("--election-timeout 2500ms: RTT %v, ElectionRTT %d, HeartbeatRTT %d", cfg.RTT, cfg.ElectionRTT, cfg.HeartbeatRTT)
	}
	if cfg, _, err = serveConfig([]string{"--log-level", "error"}, env); err != nil || cfg.ElectionRTT != 0 || cfg.HeartbeatRTT != 0 {
		t.Errorf("without the flag: ElectionRTT %d, HeartbeatRTT %d, %v", cfg.ElectionRTT, cfg.HeartbeatRTT, err)
	}
	if _, _, err := serveConfig([]string{"--log-level", "error", "--election-timeout", "50ms"}, env); err == nil {
		t.Error("--election-timeout 50ms accepted")
	}
}
