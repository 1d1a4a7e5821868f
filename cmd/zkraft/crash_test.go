package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
)

// TestCrashKeepsAcknowledgedWrites starts the real binary, streams writes
// at it from concurrent clients, SIGKILLs it mid-stream, restarts it on the
// same data directory and checks that every acknowledged write is there.
// It does this for several rounds on one directory.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	crashRounds(t, crashLoad{})
}

// TestCrashKeepsAcknowledgedWritesAcrossSnapshots is the same with a Raft
// snapshot every 100 entries (snapCount=100): Dragonboat syncs the state
// store before it records each snapshot and then compacts the log below
// it, so the kills land with the log already compacted past entries the
// store holds only as far as its last Sync; what the store did not make
// durable must come back from the part of the log that is left.
func TestCrashKeepsAcknowledgedWritesAcrossSnapshots(t *testing.T) {
	crashRounds(t, crashLoad{zooCfg: []string{"snapCount=100"}})
}

// TestCrashKeepsAcknowledgedMultis is the same with every other write a
// multi of two creates (one Raft entry, two znodes, one batch) and a Raft
// snapshot, hence a flush of the state store, every 1000 entries: what a
// replay after the kill applies again includes multis cut off at any
// point of the store's memtable.
func TestCrashKeepsAcknowledgedMultis(t *testing.T) {
	crashRounds(t, crashLoad{zooCfg: []string{"snapCount=1000"}, multi: true})
}

// crashLoad is what crashRounds runs the member with and writes.
type crashLoad struct {
	zooCfg []string // zoo.cfg lines, if any (the flags still give the data dir and the addresses)
	multi  bool     // every other write a multi of two creates
}

// crashRounds runs the kill-and-check rounds.
func crashRounds(t *testing.T, load crashLoad) {
	zooCfg := load.zooCfg
	if testing.Short() {
		t.Skip("builds and kills the binary; skipped with -short")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "zkraft")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dataDir := filepath.Join(dir, "data")
	clientAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	raftAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	var extra []string
	if len(zooCfg) > 0 {
		_, port, _ := net.SplitHostPort(clientAddr)
		cfg := filepath.Join(dir, "zoo.cfg")
		lines := append([]string{"dataDir=" + dataDir, "clientPort=" + port, "clientPortAddress=127.0.0.1", "admin.enableServer=false"}, zooCfg...)
		if err := os.WriteFile(cfg, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		extra = []string{"--config", cfg}
	}

	acked := map[string]string{} // path -> data, every write a client saw succeed
	const rounds = 3
	for round := 0; round < rounds; round++ {
		srv := startBinary(t, bin, dataDir, clientAddr, raftAddr, extra...)
		verifyAcked(t, clientAddr, acked, round)

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var mu sync.Mutex
		var wg sync.WaitGroup
		conn, _, err := zk.Connect([]string{clientAddr}, 10*time.Second, zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		parent := fmt.Sprintf("/crash-%d", round)
		if _, err := conn.Create(parent, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", parent, err)
		}
		acked[parent] = ""
		// 32 writers pipeline creates on one session until the kill.
		for w := 0; w < 32; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < 100000 && ctx.Err() == nil; i++ {
					p := fmt.Sprintf("%s/w%02d-%06d", parent, w, i)
					data := fmt.Sprintf("round %d writer %d op %d", round, w, i)
					if load.multi && i%2 == 1 {
						q := p + "-m"
						if _, err := conn.Multi(
							&zk.CreateRequest{Path: p, Data: []byte(data), Acl: zk.WorldACL(zk.PermAll)},
							&zk.CreateRequest{Path: q, Data: []byte(data), Acl: zk.WorldACL(zk.PermAll)}); err != nil {
							return
						}
						mu.Lock()
						acked[p], acked[q] = data, data
						mu.Unlock()
						continue
					}
					if _, err := conn.Create(p, []byte(data), 0, zk.WorldACL(zk.PermAll)); err != nil {
						return // the server is gone: stop this writer
					}
					mu.Lock()
					acked[p] = data
					mu.Unlock()
				}
			}(w)
		}
		// Let writes flow, then kill without warning.
		time.Sleep(time.Duration(700+300*round) * time.Millisecond)
		mu.Lock()
		before := len(acked)
		mu.Unlock()
		if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		srv.Wait()
		wg.Wait()
		cancel()
		conn.Close()
		t.Logf("round %d: %d writes acknowledged in total (%d when the kill was sent)%s; Raft log store: %s", round, len(acked), before, snapshotsIn(t, dataDir), logStoreIn(dataDir))
		if len(acked) < 100*(round+1) {
			t.Fatalf("round %d: only %d writes acknowledged; the load did not run", round, len(acked))
		}
	}
	srv := startBinary(t, bin, dataDir, clientAddr, raftAddr, extra...)
	verifyAcked(t, clientAddr, acked, rounds)
	srv.Process.Signal(syscall.SIGTERM)
	srv.Wait()
}

// logStoreIn names the Raft log store under dataDir, for the log: the
// runs are on the default, Pebble for a new data directory.
func logStoreIn(dataDir string) string {
	if m, _ := filepath.Glob(filepath.Join(dataDir, "raft", "*", "*", "tandb", "node-1-1")); len(m) > 0 {
		return "tan (" + m[0] + ")"
	}
	if m, _ := filepath.Glob(filepath.Join(dataDir, "raft", "*", "*", "logdb-*")); len(m) > 0 {
		return "pebble"
	}
	return "none found"
}

// snapshotsIn names the newest Raft snapshot Dragonboat recorded under
// dataDir, for the log.
func snapshotsIn(t *testing.T, dataDir string) string {
	var newest string
	filepath.WalkDir(filepath.Join(dataDir, "raft"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && len(d.Name()) == len("snapshot-")+16 && strings.HasPrefix(d.Name(), "snapshot-") && d.Name() > newest {
			newest = d.Name()
		}
		return nil
	})
	if newest == "" {
		return ""
	}
	return "; newest Raft snapshot at index 0x" + strings.TrimLeft(newest[len("snapshot-"):], "0")
}

func verifyAcked(t *testing.T, addr string, acked map[string]string, round int) {
	t.Helper()
	conn, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	missing := 0
	for p, want := range acked {
		data, _, err := conn.Get(p)
		if err != nil || string(data) != want {
			missing++
			if missing <= 5 {
				t.Errorf("after restart %d: acknowledged %s: got %q, %v; want %q", round, p, data, err, want)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("after restart %d: %d of %d acknowledged writes lost", round, missing, len(acked))
	}
	t.Logf("after restart %d: all %d acknowledged writes present", round, len(acked))
}

func startBinary(t *testing.T, bin, dataDir, clientAddr, raftAddr string, extra ...string) *exec.Cmd {
	t.Helper()
	args := append([]string{"serve", "--data-dir", dataDir, "--client-addr", clientAddr, "--raft-addr", raftAddr, "--log-level", "warn"}, extra...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if line := sc.Text(); strings.Contains(line, "level=ERROR") || strings.Contains(line, "panic") {
				t.Logf("server: %s", line)
			}
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", clientAddr, 200*time.Millisecond); err == nil {
			c.Close()
			return cmd
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("server did not listen on %s", clientAddr)
	return nil
}

func freePort(t *testing.T) int {
	t.Helper()
	return freeport.Port(t)
}
