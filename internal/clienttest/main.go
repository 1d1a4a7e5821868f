package clienttest

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/server"
)

// Main runs a package's tests and Example functions with a standalone
// in-process zkraft for the examples: it sets *servers to its address
// before m.Run and stops it after. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(clienttest.Main(m, &servers)) }
func Main(m *testing.M, servers *[]string) int {
	dir, err := os.MkdirTemp("", "zkraft-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	port, err := freeport.Get()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv, err := server.New(server.Config{
		ClientAddr: "127.0.0.1:0",
		RaftAddr:   fmt.Sprintf("127.0.0.1:%d", port),
		DataDir:    dir,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start zkraft for the examples:", err)
		return 1
	}
	*servers = []string{srv.Addr().String()}
	code := m.Run()
	srv.Close()
	return code
}
