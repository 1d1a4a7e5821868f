package main

import (
	"strings"
	"testing"
	"time"

	"github.com/zkraft/zkraft/server"
)

func TestApplyZooCfg(t *testing.T) {
	const cfgText = `
# a ZooKeeper 3.8 standalone config
tickTime=3000
initLimit=10
dataDir=/var/lib/zookeeper
dataLogDir = /var/log/zookeeper
clientPort=2181
clientPortAddress=127.0.0.1
maxClientCnxns=60
minSessionTimeout=7000
4lw.commands.whitelist=srvr, ruok ,mntr
autopurge.purgeInterval=1
`
	var cfg server.Config
	ignored, err := applyZooCfg(strings.NewReader(cfgText), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := server.Config{
		TickTime:          3 * time.Second,
		DataDir:           "/var/lib/zookeeper",
		LogDir:            "/var/log/zookeeper",
		ClientAddr:        "127.0.0.1:2181",
		MaxClientCnxns:    60,
		MinSessionTimeout: 7 * time.Second,
		FourLetterWords:   []string{"srvr", "ruok", "mntr"},
	}
	if cfg.TickTime != want.TickTime || cfg.DataDir != want.DataDir || cfg.LogDir != want.LogDir ||
		cfg.ClientAddr != want.ClientAddr || cfg.MaxClientCnxns != want.MaxClientCnxns ||
		cfg.MinSessionTimeout != want.MinSessionTimeout || cfg.MaxSessionTimeout != 0 ||
		strings.Join(cfg.FourLetterWords, ",") != strings.Join(want.FourLetterWords, ",") {
		t.Fatalf("config = %+v\nwant %+v", cfg, want)
	}
	if strings.Join(ignored, ",") != "autopurge.purgeInterval,initLimit" && strings.Join(ignored, ",") != "initLimit,autopurge.purgeInterval" {
		t.Errorf("ignored keys = %v", ignored)
	}
	// Validate applies ZooKeeper's defaults: max session timeout 20 ticks.
	if err := cfg.Validate(); err != nil || cfg.MaxSessionTimeout != 60*time.Second {
		t.Fatalf("Validate: %v, max session timeout %v", err, cfg.MaxSessionTimeout)
	}
}

func TestApplyZooCfgErrors(t *testing.T) {
	for _, text := range []string{
		"tickTime=abc",
		"tickTime=0",
		"clientPort=x",
		"maxClientCnxns=-1",
		"no equals sign here",
		"minSessionTimeout=-5",
	} {
		var cfg server.Config
		if _, err := applyZooCfg(strings.NewReader(text), &cfg); err == nil {
			t.Errorf("%q: no error", text)
		}
	}
	// Client port without an address listens on all addresses, as ZooKeeper.
	var cfg server.Config
	if _, err := applyZooCfg(strings.NewReader("clientPort=2182"), &cfg); err != nil || cfg.ClientAddr != "0.0.0.0:2182" {
		t.Fatalf("clientPort only: %q, %v", cfg.ClientAddr, err)
	}
}
