package bench

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseDefaults(t *testing.T) {
	cfg, err := ParseArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workload != WorkWrite || cfg.Sessions != 4 || cfg.InFlight != 64 || cfg.Duration != 10*time.Second ||
		cfg.Warmup != 2*time.Second || cfg.ValueSize != 1024 || cfg.Prefix != "/zkraft-bench" || cfg.WriteOp != "set" ||
		len(cfg.Addrs) != 1 || cfg.Addrs[0] != "127.0.0.1:2181" || cfg.JSON {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := ParseArgs([]string{
		"-addr", "127.0.0.1:1, 127.0.0.1:2,,127.0.0.1:3", "-workload", "mixed", "-sessions", "8",
		"-inflight", "256", "-duration", "3s", "-warmup", "0s", "-json", "-prefix", "/a/b",
		"-read-ratio", "0.5", "-value-size", "100", "-keys", "10",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Addrs, " ") != "127.0.0.1:1 127.0.0.1:2 127.0.0.1:3" {
		t.Errorf("addrs %q", cfg.Addrs)
	}
	if cfg.Workload != WorkMixed || cfg.Sessions != 8 || cfg.InFlight != 256 || cfg.Duration != 3*time.Second ||
		cfg.Warmup != 0 || !cfg.JSON || cfg.Prefix != "/a/b" || cfg.ReadRatio != 0.5 || cfg.ValueSize != 100 || cfg.Keys != 10 {
		t.Errorf("parsed %+v", cfg)
	}
	total := 0
	for i := 0; i < cfg.Sessions; i++ {
		total += cfg.perSession(i)
	}
	if total != 256 || cfg.perSession(0) != 32 {
		t.Errorf("in flight split: total %d, first %d", total, cfg.perSession(0))
	}
}

func TestInFlightSplitUneven(t *testing.T) {
	cfg := &Config{Sessions: 3, InFlight: 10}
	got := []int{cfg.perSession(0), cfg.perSession(1), cfg.perSession(2)}
	if got[0] != 4 || got[1] != 3 || got[2] != 3 {
		t.Fatalf("split %v", got)
	}
}

func TestWorkloadDefaults(t *testing.T) {
	for w, want := range map[string]int{WorkWatch: 100, WorkSessions: 1000, WorkLock: 8, WorkRead: 4, WorkMulti: 4} {
		cfg, err := ParseArgs([]string{"-workload", w}, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", w, err)
		}
		if cfg.Sessions != want {
			t.Errorf("%s: %d sessions, want %d", w, cfg.Sessions, want)
		}
	}
	cfg, err := ParseArgs([]string{"-workload", "watch", "-watchers", "7"}, io.Discard)
	if err != nil || cfg.Sessions != 7 || cfg.Watchers != 7 {
		t.Fatalf("watchers: %+v %v", cfg, err)
	}
	// Sessions and watch need not have -inflight >= -sessions.
	if _, err := ParseArgs([]string{"-workload", "sessions", "-sessions", "5000", "-inflight", "1"}, io.Discard); err != nil {
		t.Fatal(err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-workload", "nope"},
		{"-addr", " , "},
		{"-sessions", "-1"},
		{"-inflight", "0"},
		{"-inflight", "3", "-sessions", "4"},
		{"-duration", "0s"},
		{"-duration", "25h"},
		{"-warmup", "-1s"},
		{"-value-size", "-1"},
		{"-value-size", "2000000"},
		{"-keys", "0"},
		{"-read-ratio", "1.5"},
		{"-write-op", "delete"},
		{"-multi-ops", "0"},
		{"-prefix", "relative"},
		{"-prefix", "/"},
		{"-prefix", "/a/"},
		{"-prefix", "/zookeeper"},
		{"-prefix", "/zookeeper/quota"},
		{"-session-timeout", "10ms"},
		{"-max-ops", "0"},
		{"-no-such-flag"},
		{"extra"},
	} {
		if _, err := ParseArgs(args, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	if _, err := ParseArgs([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}
