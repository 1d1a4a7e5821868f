package main

import (
	"flag"
	"testing"

	"github.com/zkraft/zkraft/server"
)

// TestOpsFlags: the operations flags given explicitly override zoo.cfg;
// without zoo.cfg the AdminServer is on port 8080 of the client host.
func TestOpsFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o := defineOpsFlags(fs)
	if err := fs.Parse([]string{"--admin-addr=127.0.0.1:0", "--metrics-addr=127.0.0.1:0", "--jaas-config=/j.conf", "--enforce-auth"}); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg := server.Config{ClientAddr: "127.0.0.1:2181"}
	o.apply(&cfg, set, false)
	if !cfg.Admin.Enabled || cfg.Admin.Addr != "127.0.0.1:0" || !cfg.Metrics.Enabled || cfg.SASL.JAASFile != "/j.conf" || !cfg.SASL.EnforceAuth {
		t.Errorf("flags: %+v %+v %+v", cfg.Admin, cfg.Metrics, cfg.SASL)
	}

	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	o = defineOpsFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	cfg = server.Config{ClientAddr: "10.0.0.5:2181"}
	o.apply(&cfg, map[string]bool{}, false)
	if !cfg.Admin.Enabled || cfg.Admin.Addr != "10.0.0.5:8080" {
		t.Errorf("defaults without zoo.cfg: %+v", cfg.Admin)
	}
	cfg = server.Config{ClientAddr: "10.0.0.5:2181", Admin: server.AdminConfig{Enabled: false, Addr: "0.0.0.0:9090"}}
	o.apply(&cfg, map[string]bool{}, true)
	if cfg.Admin.Enabled || cfg.Admin.Addr != "0.0.0.0:9090" {
		t.Errorf("zoo.cfg's admin settings changed by default flags: %+v", cfg.Admin)
	}
}
