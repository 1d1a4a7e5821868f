package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
)

// startProxyProc runs "zkraft proxy" as a process in front of members'
// proxy ports, with its AdminServer on admin, and waits until it serves.
func startProxyProc(t *testing.T, dir, client, admin string, members ...string) *zkraftProc {
	t.Helper()
	logPath := filepath.Join(dir, "proxy-"+strings.ReplaceAll(client, ":", "_")+".log")
	p := startProcEnv(t, logPath, os.O_TRUNC, os.Environ(), "proxy", "--client-addr", client,
		"--members", strings.Join(members, ","), "--admin-addr", admin, "--4lw", "srvr,ruok")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if p.exited() {
			t.Fatalf("proxy exited:\n%s", tail(logPath, 20))
		}
		if st, err := proxyUpstream(admin); err == nil && st["connected"] == true {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy does not connect upstream:\n%s", tail(logPath, 20))
		}
	}
}

// proxyUpstream is a proxy's AdminServer upstream command.
func proxyUpstream(admin string) (map[string]any, error) {
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + admin + "/commands/upstream")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// TestProxyPausedKeepsUpstream: a proxy process stopped (SIGSTOP) for
// longer than its upstream idle bound (3 s), as a starved process is, is
// not a dead member, and a member stopped for 4 s (past the bound, within
// the grace after it) is slow, not dead: the proxy keeps its upstream
// connection, none of its clients is disconnected, and a watch whose
// change came during or after the pause fires once. (The proxy's own
// pause passed before the reader told a silent member from a late one
// too: woken by SIGCONT, an idle Go runtime sees the socket ready before
// the deadline's timer; the member's pause closed every client.)
func TestProxyPausedKeepsUpstream(t *testing.T) {
	dir := t.TempDir()
	client, proxyPort := freeport.Addr(t), freeport.Addr(t)
	_, port, _ := net.SplitHostPort(proxyPort)
	m := startServe(t, dir, client, "--data-dir", filepath.Join(dir, "data"), "--client-addr", client,
		"--tick-time", "1s", "--proxy-port", port, "--admin-enable=false", "--max-client-cnxns", "0")
	pc, admin := freeport.Addr(t), freeport.Addr(t)
	p := startProxyProc(t, dir, pc, admin, proxyPort)

	direct, _, err := zk.Connect([]string{client}, 15*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := direct.Create("/paused", []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	const n = 20
	type sess struct {
		c     *zk.Conn
		ev    <-chan zk.Event
		watch <-chan zk.Event
	}
	ss := make([]sess, n)
	for i := range ss {
		c, ev, err := zk.Connect([]string{pc}, 15*time.Second, zk.WithLogger(quiet{}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ss[i] = sess{c: c, ev: ev}
	}
	for i := range ss {
		for e := range ss[i].ev {
			if e.State == zk.StateHasSession {
				break
			}
		}
		_, _, w, err := ss[i].c.GetW("/paused")
		if err != nil {
			t.Fatal(err)
		}
		ss[i].watch = w
	}

	// A paused (starved) proxy: a change during the pause, whose Event
	// waits in the proxy's socket.
	p.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(2 * time.Second)
	if _, err := direct.Set("/paused", []byte("1"), -1); err != nil {
		p.cmd.Process.Signal(syscall.SIGCONT)
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	p.cmd.Process.Signal(syscall.SIGCONT)
	fired := func(phase string) {
		for i := range ss {
			select {
			case e := <-ss[i].watch:
				if e.Type != zk.EventNodeDataChanged {
					t.Errorf("%s: session %d: watch event %v, want a data change", phase, i, e)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: session %d: no watch event", phase, i)
			}
		}
	}
	fired("proxy paused")

	// A paused (starved) member, silent past the proxy's idle bound (3 s)
	// but within its grace (2 s more): slow, not dead.
	for i := range ss {
		_, _, w, err := ss[i].c.GetW("/paused")
		if err != nil {
			t.Fatal(err)
		}
		ss[i].watch = w
	}
	m.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(4 * time.Second)
	m.cmd.Process.Signal(syscall.SIGCONT)
	if _, err := direct.Set("/paused", []byte("2"), -1); err != nil {
		t.Fatal(err)
	}
	fired("member paused")

	// Every session still works, on the connection it had.
	for i := range ss {
		if _, _, err := ss[i].c.Get("/paused"); err != nil {
			t.Errorf("session %d after the pause: %v", i, err)
		}
	}
	for i := range ss {
	drain:
		for {
			select {
			case e := <-ss[i].ev:
				if e.State == zk.StateDisconnected || e.State == zk.StateExpired {
					t.Errorf("session %d: %v after the proxy's pause", i, e.State)
				}
			default:
				break drain
			}
		}
		select {
		case e, ok := <-ss[i].watch: // go-zookeeper closes a fired watch's channel
			if ok {
				t.Errorf("session %d: a second watch event %v", i, e)
			}
		default:
		}
	}
	st, err := proxyUpstream(admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("proxy upstream after the pause: connects %v, reader_starved %v, member_slow %v, member_silent %v, reader_late_max_ms %v, note %q",
		st["connects"], st["reader_starved"], st["member_slow"], st["member_silent"], st["reader_late_max_ms"], st["last_liveness_note"])
	if st["connects"] != float64(1) || st["member_silent"] != float64(0) || st["member_slow"] == float64(0) {
		t.Errorf("the proxy's upstream connection did not survive its pause: %s", fmt.Sprint(st))
	}
}
