package conformance

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/server"
)

// startEmbedded starts an in-process zkraft with its data in dataDir and
// returns its client address and a function that stops it. The suite still
// reaches it only over TCP.
func startEmbedded(dataDir string) (addr string, stop func(), err error) {
	raftPort, err := freePort()
	if err != nil {
		return "", nil, err
	}
	var logOut io.Writer = io.Discard
	if os.Getenv("CONFORMANCE_SERVER_LOG") != "" {
		logOut = os.Stderr
	}
	srv, err := server.New(server.Config{
		ClientAddr:      "127.0.0.1:0",
		RaftAddr:        fmt.Sprintf("127.0.0.1:%d", raftPort),
		DataDir:         dataDir,
		TickTime:        time.Duration(tickMs) * time.Millisecond,
		FourLetterWords: []string{"*"},
		// The same server settings as scripts/zk-differential.sh gives
		// ZooKeeper: TTL nodes on, a 1 s container/TTL check, the super
		// digest of "super:secret", hard quota limits enforced.
		ExtendedTypes:          true,
		ContainerCheckInterval: time.Second,
		SuperDigest:            "super:lK75jTNcA+U9vtVEw5vB51mj/w4=",
		EnforceQuota:           true,
		Logger:                 slog.New(slog.NewTextHandler(logOut, nil)),
	})
	if err != nil {
		return "", nil, err
	}
	return srv.Addr().String(), func() { srv.Close() }, nil
}

func freePort() (int, error) { return freeport.Get() }
