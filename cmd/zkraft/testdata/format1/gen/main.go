// Command gen wrote cmd/zkraft/testdata/format1: the data directory of a
// zkraft whose state store is in key layout format 1 (before format 2),
// and the tree and open session a client saw in it (expected.json). It
// was run once, with the binary built from commit 6366337 (the last with
// format 1):
//
//	git archive 6366337 | tar -x -C /tmp/old && (cd /tmp/old && go build -o /tmp/zkraft-6366337 ./cmd/zkraft)
//	go run ./cmd/zkraft/testdata/format1/gen -bin /tmp/zkraft-6366337 -out cmd/zkraft/testdata/format1
//
// It lives under testdata so that no build of the repository compiles it.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/zktest"
)

func main() {
	bin := flag.String("bin", "", "zkraft binary built from 6366337")
	out := flag.String("out", "", "directory to write datadir.tar.gz and expected.json to")
	flag.Parse()
	tmp, err := os.MkdirTemp("", "format1-")
	must(err)
	defer os.RemoveAll(tmp)
	data := filepath.Join(tmp, "data")
	// The Raft address is recorded in the data directory: the test starts
	// on the same one (RaftAddr in format1_test.go).
	client, raft := addr(), "127.0.0.1:28871"
	cmd := exec.Command(*bin, "--data-dir", data, "--client-addr", client, "--raft-addr", raft,
		"--extended-types", "--super-digest", zktest.SuperDigest, "--max-session-timeout", "40s", "--log-level", "warn")
	cmd.Stderr = os.Stderr
	must(cmd.Start())
	time.Sleep(3 * time.Second)

	c, _, err := zk.Connect([]string{client}, 40*time.Second, zk.WithLogInfo(false))
	must(err)
	for c.State() != zk.StateHasSession {
		time.Sleep(10 * time.Millisecond)
	}
	must(c.AddAuth("digest", []byte("super:secret")))
	open := zk.WorldACL(zk.PermAll)
	secret := zk.DigestACL(zk.PermAll, "alice", "pw")
	create := func(p string, data string, flags int32, acl []zk.ACL) string {
		got, err := c.Create(p, []byte(data), flags, acl)
		must(err)
		return got
	}
	create("/app", "app", 0, open)
	create("/app/config", `{"replicas": 3}`, 0, open)
	for i := 0; i < 3; i++ {
		create("/app/seq-", "s", zk.FlagSequence, open)
	}
	create("/app/locks", "", zk.FlagContainer, open) // a container (flags 4)
	create("/app/locks/lock-", "me", zk.FlagEphemeral|zk.FlagSequence, open)
	create("/app/eph", "mine", zk.FlagEphemeral, open)
	create("/secret", "hidden", 0, secret)
	_, err = c.CreateTTL("/ttl", []byte("t"), zk.FlagTTL, open, time.Hour)
	must(err)
	p := "/deep"
	for i := 0; i < 50; i++ {
		create(p, fmt.Sprint(i), 0, open)
		p += "/d"
	}
	long := "/" + strings.Repeat("L", 2000)
	create(long, "long name", 0, open)
	create(long+"/child", "under a long name", 0, open)
	_, err = c.Set("/app/config", []byte(`{"replicas": 5}`), 0)
	must(err)
	must(c.Delete("/app/seq-0000000001", -1))

	nodes, err := zktest.DumpTree(c)
	must(err)
	eph := []string{"/app/eph", "/app/locks/lock-0000000000"}
	d := &zktest.Dump{Nodes: nodes, Sessions: []zktest.Session{{ID: c.SessionID(), Ephemerals: eph}}}
	must(zktest.WriteDump(filepath.Join(*out, "expected.json"), d))
	// Stop the server with the session still open: its ephemerals stay.
	must(cmd.Process.Signal(syscall.SIGTERM))
	cmd.Wait()
	c.Close()
	tar := exec.Command("tar", "-C", tmp, "-czf", filepath.Join(*out, "datadir.tar.gz"), "data")
	tar.Stderr = os.Stderr
	must(tar.Run())
}

func addr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	defer ln.Close()
	return ln.Addr().String()
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
