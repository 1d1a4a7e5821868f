// Package testserver starts an in-process zkraft for tests of packages
// that reach it over TCP (client libraries, recipes, benchmarks). It is
// the real server: Dragonboat and Pebble in a temporary directory.
package testserver

import (
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/server"
)

// Start runs a standalone zkraft until the test ends and returns its
// client address. tweak, if given, adjusts the config first. Logs go to
// stderr when ZKRAFT_TEST_LOG is set.
func Start(t testing.TB, tweak ...func(*server.Config)) string {
	t.Helper()
	raft := freeport.Addr(t)
	var out io.Writer = io.Discard
	if os.Getenv("ZKRAFT_TEST_LOG") != "" {
		out = os.Stderr
	}
	cfg := server.Config{
		ClientAddr: "127.0.0.1:0",
		RaftAddr:   raft,
		DataDir:    t.TempDir(),
		Logger:     slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, f := range tweak {
		f(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addr().String()
}
