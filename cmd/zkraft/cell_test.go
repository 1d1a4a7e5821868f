package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/internal/zktest"
	"github.com/zkraft/zkraft/server"
	"github.com/zkraft/zkraft/zkdata"
)

// TestCellCommands drives `zkraft cell` against a standalone member's
// AdminServer: wrong credentials are refused; create serves a cell on its
// port (a go-zookeeper client writes there, the default cell does not see
// it); list and show report it; a delete of a cell holding data is refused
// unless forced; delete and purge free its name.
func TestCellCommands(t *testing.T) {
	srv, err := server.New(server.Config{
		DataDir:     t.TempDir(),
		ClientAddr:  "127.0.0.1:0",
		SuperDigest: zktest.SuperDigest,
		TickTime:    500 * time.Millisecond,
		Admin:       server.AdminConfig{Enabled: true, Addr: "127.0.0.1:0"},
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	admin := "http://" + srv.AdminAddr().String() + "/commands"
	cell := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := runCell(append(args, "--admin", admin, "--super", "super:secret"), &out)
		return out.String(), err
	}

	if err := runCell([]string{"list", "--admin", admin, "--super", "super:wrong"}, io.Discard); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("list with a wrong password: %v", err)
	}
	port := freeport.Port(t)
	// The map may not have imported the configuration yet: retry until it has.
	var out string
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err = cell("create", "tenant-a", "--voters", "1", "--port", fmt.Sprint(port), "--max-znodes", "100")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || !strings.Contains(out, `"result" : "ok"`) {
		t.Fatalf("create: %v\n%s", err, out)
	}
	if out, err := cell("create", "tenant-b", "--voters", "1", "--port", fmt.Sprint(port)); err == nil || !strings.Contains(out, "portTaken") {
		t.Fatalf("create on a taken port: %v\n%s", err, out)
	}

	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var c *zk.Conn
	for {
		c, _, err = zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false))
		if err == nil {
			if _, err = c.Create("/data", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err == nil {
				break
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("write to the new cell at %s: %v", addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.Close()
	d, _, err := zk.Connect([]string{srv.Addr().String()}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := d.Exists("/data"); err != nil || ok {
		t.Fatalf("the default cell sees the new cell's node: %v %v", ok, err)
	}
	d.Close()

	if out, err := cell("list"); err != nil || !strings.Contains(out, `"name" : "tenant-a"`) || !strings.Contains(out, `"name" : "default"`) {
		t.Fatalf("list: %v\n%s", err, out)
	}
	out, err = cell("show", "tenant-a")
	if err != nil || !strings.Contains(out, `"max_znodes" : 100`) || !strings.Contains(out, `"serving" : "`+addr+`"`) || !strings.Contains(out, `"leader_member" : 1`) {
		t.Fatalf("show: %v\n%s", err, out)
	}
	// member reaches member_*: the standalone member already votes on the
	// map; an unknown member is refused.
	var mout bytes.Buffer
	if err := runMember([]string{"promote", "1", "--admin", admin, "--super", "super:secret"}, &mout); err != nil || !strings.Contains(mout.String(), `"changed" : false`) {
		t.Fatalf("member promote 1: %v\n%s", err, mout.String())
	}
	if err := runMember([]string{"leave", "9", "--admin", admin, "--super", "super:secret"}, io.Discard); err == nil || !strings.Contains(err.Error(), "no member 9") {
		t.Fatalf("member leave 9: %v", err)
	}
	// abort reaches cell_abort: a cell that is not moving is refused.
	if out, err := cell("abort", "tenant-a"); err == nil || !strings.Contains(out, "badState") {
		t.Fatalf("abort of a cell that is not moving: %v\n%s", err, out)
	}
	if out, err := cell("delete", "tenant-a"); err == nil || !strings.Contains(out, "notEmpty") {
		t.Fatalf("delete of a cell with data: %v\n%s", err, out)
	}
	if out, err := cell("delete", "tenant-a", "--force"); err != nil {
		t.Fatalf("forced delete: %v\n%s", err, out)
	}
	if out, err := cell("purge", "tenant-a"); err != nil {
		t.Fatalf("purge: %v\n%s", err, out)
	}
	if out, err := cell("show", "tenant-a"); err == nil || !strings.Contains(out, "no cell") {
		t.Fatalf("show after purge: %v\n%s", err, out)
	}
}

// TestExportCell: export --cell writes one cell of a stopped member as a
// ZooKeeper data directory: the cell's znodes, not the default cell's.
func TestExportCell(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.New(server.Config{
		DataDir:     dir,
		ClientAddr:  "127.0.0.1:0",
		TickTime:    500 * time.Millisecond,
		SuperDigest: zktest.SuperDigest,
		Admin:       server.AdminConfig{Enabled: true, Addr: "127.0.0.1:0"},
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	admin := func(c *zk.Conn, path, data string) {
		t.Helper()
		if _, err := c.Create(path, []byte(data), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", path, err)
		}
	}
	port := freeport.Port(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := runCell([]string{"create", "exported", "--voters", "1", "--port", fmt.Sprint(port),
			"--admin", "http://" + srv.AdminAddr().String() + "/commands", "--super", "super:secret"}, io.Discard)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var c *zk.Conn
	for {
		c, _, err = zk.Connect([]string{fmt.Sprintf("127.0.0.1:%d", port)}, 5*time.Second, zk.WithLogInfo(false))
		if err == nil {
			if _, _, err = c.Exists("/"); err == nil {
				break
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cell does not serve: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	admin(c, "/in-cell", "cell data")
	c.Close()
	d, _, err := zk.Connect([]string{srv.Addr().String()}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	admin(d, "/in-default", "default data")
	d.Close()
	srv.Close()

	out := t.TempDir()
	var buf bytes.Buffer
	if err := exportCmd(&buf, []string{"--data-dir", dir, "--cell", "exported", "--zk-data-dir", out}); err != nil {
		t.Fatalf("export --cell: %v\n%s", err, buf.String())
	}
	back, err := zkdata.Restore(out, "")
	if err != nil {
		t.Fatal(err)
	}
	if n := back.Tree.Get("/in-cell"); n == nil || string(n.Data) != "cell data" {
		t.Errorf("the export lacks the cell's /in-cell: %+v", n)
	}
	if n := back.Tree.Get("/in-default"); n != nil {
		t.Errorf("the export of the cell has the default cell's /in-default")
	}
	if err := exportCmd(io.Discard, []string{"--data-dir", dir, "--cell", "nosuch", "--zk-data-dir", t.TempDir()}); err == nil || !strings.Contains(err.Error(), "no cell") {
		t.Errorf("export of an unknown cell: %v", err)
	}
}
