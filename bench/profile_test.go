package bench

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
)

// TestProfile runs one workload against an in-process zkraft under a CPU
// profile (and takes an allocation profile at the end). It runs only when
// BENCH_PROFILE names an output directory; BENCH_PROFILE_ARGS holds the
// zkraft bench flags (space-separated; -addr is set here), e.g.
//
//	BENCH_PROFILE=/tmp/prof BENCH_PROFILE_ARGS='-workload write -inflight 256 -duration 10s' \
//	    go test -run TestProfile -timeout 10m ./bench/
//	go tool pprof -top -focus 'zkraft/(server|raftsm|znode|jute)|dragonboat|pebble' /tmp/prof/cpu.pprof
//
// Client and server share the process (and the profile); the server's part
// is what the focus above selects.
func TestProfile(t *testing.T) {
	dir := os.Getenv("BENCH_PROFILE")
	if dir == "" {
		t.Skip("set BENCH_PROFILE to an output directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	addr := startServer(t)
	args := append([]string{"-addr", addr}, strings.Fields(os.Getenv("BENCH_PROFILE_ARGS"))...)
	cfg, err := ParseArgs(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runtime.MemProfileRate = 64 << 10
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), cfg, os.Stderr)
	pprof.StopCPUProfile()
	if err != nil {
		t.Fatal(err)
	}
	mf, err := os.Create(filepath.Join(dir, "allocs.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close()
	if err := pprof.Lookup("allocs").WriteTo(mf, 0); err != nil {
		t.Fatal(err)
	}
	WriteText(os.Stderr, cfg, res)
}
