package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/zktest"
	"github.com/zkraft/zkraft/server"
	"github.com/zkraft/zkraft/session"
	"github.com/zkraft/zkraft/zkdata"
)

// TestAdminSnapshotStream: ZooKeeper 3.9's snapshot command (3.8 has
// none) streams a snapshot that a real ZooKeeper 3.8 loads as its own
// data and `zkraft import` reads back, each serving the tree zkraft
// served (every Stat, data and ACL, as go-zookeeper reads them) and the
// session that was open.
func TestAdminSnapshotStream(t *testing.T) {
	zktest.Require(t)
	srcDir := t.TempDir()
	srv, err := server.New(server.Config{
		DataDir:                srcDir,
		ClientAddr:             fmt.Sprintf("127.0.0.1:%d", zktest.FreePort(t)),
		ExtendedTypes:          true,
		SuperDigest:            zktest.SuperDigest,
		ContainerCheckInterval: time.Hour,
		MaxSessionTimeout:      40 * time.Second,
		Admin: server.AdminConfig{Enabled: true, Addr: "127.0.0.1:0", WriteSnapshot: writeZooKeeperSnapshot,
			SnapshotInterval: 1500 * time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := srv.Addr().String()
	c := zktest.Connect(t, addr) // the super user
	open := zk.WorldACL(zk.PermAll)
	must := func(_ string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Create("/app", []byte("hello"), 0, open))
	must(c.Create("/app/config", []byte(`{"replicas": 3, "name": "x"}`), 0, open))
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	must(c.Create("/app/bin", bin, 0, open))
	must(c.Create("/app/empty", nil, 0, open))
	must(c.Create("/app/seq", nil, 0, open))
	for i := 0; i < 3; i++ {
		must(c.Create("/app/seq/s-", []byte{byte(i)}, zk.FlagSequence, open))
	}
	must(c.Create("/secret", []byte("alice's"), 0, zk.DigestACL(zk.PermAll, "alice", "pw")))
	must(c.Create("/app/eph", []byte("mine"), zk.FlagEphemeral, open))
	must(c.CreateContainer("/box", nil, zk.FlagContainer, open))
	must(c.Create("/box/item", nil, 0, open))
	must(c.CreateTTL("/app/ttl", []byte("t"), zk.FlagTTL, open, time.Hour))
	for i := 0; i < 3; i++ {
		if _, err := c.Set("/app", []byte("hello "+strconv.Itoa(i)), -1); err != nil {
			t.Fatal(err)
		}
	}
	must(c.Create("/app/gone", nil, 0, open))
	if err := c.Delete("/app/gone", -1); err != nil {
		t.Fatal(err)
	}
	want, err := zktest.DumpTree(c)
	if err != nil {
		t.Fatal(err)
	}
	srvr, err := zktest.FourLetter(addr, "srvr")
	if err != nil {
		t.Fatal(err)
	}
	zxidLine := ""
	for _, l := range strings.Split(srvr, "\n") {
		if v, ok := strings.CutPrefix(l, "Zxid: "); ok {
			zxidLine = v
		}
	}

	url := "http://" + srv.AdminAddr().String() + "/commands/snapshot"
	get := func(u, auth string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	const super = "digest super:secret"
	if resp, body := get(url, ""); resp.StatusCode != 401 || !strings.Contains(string(body), "Auth info is missing") {
		t.Fatalf("without Authorization: %d %s", resp.StatusCode, body)
	}
	// streaming=false: the headers and JSON, no file.
	resp, body := get(url+"?streaming=false", super)
	if resp.StatusCode != 200 || resp.Header.Get("last_zxid") != zxidLine || resp.Header.Get("Content-Type") != "application/json" ||
		!strings.Contains(string(body), `"command" : "snapshot"`) {
		t.Fatalf("streaming=false: %d %v %s (srvr's zxid %s)", resp.StatusCode, resp.Header, body, zxidLine)
	}
	// One per interval.
	if resp, _ := get(url, super); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a second snapshot at once: %d, want 429", resp.StatusCode)
	}
	time.Sleep(1600 * time.Millisecond)
	resp, snap := get(url, super)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("snapshot: %d %v %.200s", resp.StatusCode, resp.Header, snap)
	}
	if resp.Header.Get("last_zxid") != zxidLine || resp.Header.Get("snapshot_size") != strconv.Itoa(len(snap)) {
		t.Fatalf("headers last_zxid %q snapshot_size %q, want %q and %d", resp.Header.Get("last_zxid"), resp.Header.Get("snapshot_size"), zxidLine, len(snap))
	}
	// The zxid is in the file's name, as ZooKeeper names its snapshots.
	if _, info, err := zkdata.ReadSnapshot(bytes.NewReader(snap)); err != nil || info.Sessions != 1 {
		t.Fatalf("the streamed snapshot does not read: %v %+v", err, info)
	}
	name := "snapshot." + strings.TrimPrefix(zxidLine, "0x")
	place := func() string {
		d := t.TempDir()
		if err := os.MkdirAll(filepath.Join(d, "version-2"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "version-2", name), snap, 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	sessionID := c.SessionID()

	// 1. Apache ZooKeeper 3.8 serves it as its own data directory.
	z := zktest.Start(t, zktest.Config{DataDir: place()})
	zc := zktest.Connect(t, z.Addr)
	got, err := zktest.DumpTree(zc)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range zktest.Compare(want, got, zkraftOnly, 20) {
		t.Errorf("ZooKeeper from the streamed snapshot: %s", d)
	}
	if z.LogContains("Digests are not matching") {
		t.Errorf("ZooKeeper found the snapshot's digest wrong:\n%s", z.Log(30))
	}
	if _, r := reconnect(t, z.Addr, sessionID, session.Password(sessionID), 0); r.SessionID != sessionID {
		t.Errorf("ZooKeeper does not know the open session %#x: %+v", sessionID, r)
	}

	// 2. zkraft import reads it into a new member, which serves the same.
	dataDir := t.TempDir()
	var out bytes.Buffer
	if err := importCmd(&out, []string{"--zk-data-dir", place(), "--data-dir", dataDir, "--verify"}); err != nil {
		t.Fatalf("import: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "verify: OK") {
		t.Errorf("import without verify: OK:\n%s", out.String())
	}
	back := startZkraft(t, dataDir, fmt.Sprintf("127.0.0.1:%d", zktest.FreePort(t)))
	defer back.Close()
	bc := zktest.Connect(t, back.Addr().String())
	got, err = zktest.DumpTree(bc)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range zktest.Compare(want, got, zkraftOnly, 20) {
		t.Errorf("zkraft imported from the streamed snapshot: %s", d)
	}
	// The file stays in the data directory, the newest only.
	files, _ := filepath.Glob(filepath.Join(srcDir, "snapshots", "snapshot.*"))
	if len(files) != 1 || filepath.Base(files[0]) != name {
		t.Errorf("snapshot files kept: %v, want just %s", files, name)
	}
}
