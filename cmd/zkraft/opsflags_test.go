package main

import (
	"flag"
	"reflect"
	"strings"
	"testing"

	"github.com/zkraft/zkraft/server"
)

func TestZooCfgOps(t *testing.T) {
	var cfg server.Config
	ignored, err := applyZooCfg(strings.NewReader(`
tickTime=2000
dataDir=/tmp/zk
clientPort=2181
clientPortAddress=127.0.0.1
admin.serverPort=9090
metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider
metricsProvider.httpPort=7001
secureClientPort=2281
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=/etc/zk/server.pem
ssl.keyStore.type=PEM
ssl.trustStore.location=/etc/zk/ca.pem
ssl.trustStore.type=PEM
ssl.clientAuth=want
authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider
sessionRequireClientSASLAuth=true
globalOutstandingLimit=500
`), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ignored) != 0 {
		t.Errorf("ignored %v", ignored)
	}
	if !cfg.Admin.Enabled || cfg.Admin.Addr != "127.0.0.1:9090" {
		t.Errorf("admin %+v", cfg.Admin)
	}
	if !cfg.Metrics.Enabled || cfg.Metrics.Addr != "127.0.0.1:7001" {
		t.Errorf("metrics %+v", cfg.Metrics)
	}
	want := server.TLSConfig{SecureClientAddr: "127.0.0.1:2281", CertFile: "/etc/zk/server.pem", CAFile: "/etc/zk/ca.pem", ClientAuth: "want"}
	if !reflect.DeepEqual(cfg.TLS, want) {
		t.Errorf("tls %+v", cfg.TLS)
	}
	if !cfg.SASL.EnforceAuth || !reflect.DeepEqual(cfg.SASL.EnforceAuthSchemes, []string{"sasl"}) || cfg.GlobalOutstandingLimit != 500 {
		t.Errorf("sasl %+v limit %d", cfg.SASL, cfg.GlobalOutstandingLimit)
	}

	// Defaults: the AdminServer on, port 8080 of the client host; no metrics.
	cfg = server.Config{}
	if _, err := applyZooCfg(strings.NewReader("dataDir=/tmp/zk\nclientPort=2181\nadmin.enableServer=false\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Admin.Enabled || cfg.Admin.Addr != "0.0.0.0:8080" || cfg.Metrics.Enabled {
		t.Errorf("defaults: admin %+v metrics %+v", cfg.Admin, cfg.Metrics)
	}
	if _, err := applyZooCfg(strings.NewReader("admin.serverPort=x\n"), &cfg); err == nil {
		t.Error("bad admin port accepted")
	}

	// Flags override.
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o := defineOpsFlags(fs)
	if err := fs.Parse([]string{"--admin-addr=127.0.0.1:0", "--metrics-addr=127.0.0.1:0", "--jaas-config=/j.conf", "--enforce-auth"}); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg = server.Config{ClientAddr: "127.0.0.1:2181"}
	o.apply(&cfg, set, false)
	if !cfg.Admin.Enabled || cfg.Admin.Addr != "127.0.0.1:0" || !cfg.Metrics.Enabled || cfg.SASL.JAASFile != "/j.conf" || !cfg.SASL.EnforceAuth {
		t.Errorf("flags: %+v %+v %+v", cfg.Admin, cfg.Metrics, cfg.SASL)
	}
}
