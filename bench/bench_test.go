package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/server"
)

// startServer starts an in-process zkraft and returns its client address.
func startServer(t testing.TB) string {
	t.Helper()
	raftAddr := freeport.Addr(t)
	srv, err := server.New(server.Config{
		ClientAddr: "127.0.0.1:0",
		RaftAddr:   raftAddr,
		DataDir:    t.TempDir(),
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addr().String()
}

// testConfig is a short run of workload against addr.
func testConfig(t *testing.T, addr, workload string, extra ...string) *Config {
	t.Helper()
	args := append([]string{"-addr", addr, "-workload", workload, "-duration", "1s", "-warmup", "200ms",
		"-q", "-op-timeout", "5s", "-prefix", "/bench-" + strings.ReplaceAll(t.Name(), "/", "-")}, extra...)
	cfg, err := ParseArgs(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// assertGone checks that the run removed its subtree.
func assertGone(t *testing.T, addr, prefix string) {
	t.Helper()
	c, err := Dial(addr, ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(5 * time.Second)
	if err := c.Do(jute.OpExists, &jute.ExistsRequest{Path: prefix}, nil, 5*time.Second); !errors.Is(err, jute.ErrNoNode) {
		t.Errorf("%s after the run: %v, want NONODE", prefix, err)
	}
}

func TestWorkloads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	addr := startServer(t)
	cases := []struct {
		name  string
		work  string
		extra []string
		check func(t *testing.T, r *Result)
	}{
		{"write-set", WorkWrite, []string{"-inflight", "32", "-keys", "50", "-value-size", "1024"}, nil},
		{"write-create", WorkWrite, []string{"-write-op", "create", "-inflight", "16", "-value-size", "100"}, nil},
		{"read", WorkRead, []string{"-inflight", "32", "-keys", "50"}, nil},
		{"mixed", WorkMixed, []string{"-inflight", "16", "-keys", "20", "-read-ratio", "0.5"}, func(t *testing.T, r *Result) {
			if r.ByOp["getData"].Ops == 0 || r.ByOp["setData"].Ops == 0 {
				t.Errorf("mixed: by op %+v", r.ByOp)
			}
		}},
		{"create-seq", WorkCreateSeq, []string{"-inflight", "16", "-value-size", "10"}, nil},
		{"multi", WorkMulti, []string{"-inflight", "8", "-multi-ops", "5", "-keys", "20"}, nil},
		{"watch", WorkWatch, []string{"-watchers", "20"}, func(t *testing.T, r *Result) {
			if r.Lost == nil || *r.Lost != 0 || r.Rounds == 0 || r.Notifications != r.Rounds*20 {
				t.Errorf("watch: lost %v, rounds %d, notifications %d", r.Lost, r.Rounds, r.Notifications)
			}
		}},
		{"sessions", WorkSessions, []string{"-sessions", "200", "-session-timeout", "4s", "-duration", "2s", "-server-pid", fmt.Sprint(os.Getpid())}, func(t *testing.T, r *Result) {
			if r.Opened != 200 || r.Expired == nil || *r.Expired != 0 || r.Disconnected != 0 {
				t.Errorf("sessions: opened %d, expired %v, disconnected %d", r.Opened, r.Expired, r.Disconnected)
			}
			if r.PingLatency == nil || r.PingLatency.Count == 0 {
				t.Errorf("sessions: no pings in 2 s with a 4 s timeout")
			}
			if r.RSSBeforeKB == 0 || r.RSSEndKB == 0 {
				t.Errorf("sessions: RSS not read")
			}
		}},
		{"lock", WorkLock, []string{"-sessions", "4"}, func(t *testing.T, r *Result) {
			if r.Violations == nil || *r.Violations != 0 {
				t.Errorf("lock: violations %v", r.Violations)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, addr, tc.work, tc.extra...)
			start := time.Now()
			res, err := Run(context.Background(), cfg, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("run took %v", d)
			}
			if res.Ops <= 0 || res.Throughput <= 0 || res.Latency.Count == 0 || res.Latency.P99Us <= 0 && tc.work != WorkWatch {
				t.Errorf("no measurement: ops %d, throughput %v, latency %+v", res.Ops, res.Throughput, res.Latency)
			}
			if res.Latency.P50Us > res.Latency.P99Us || res.Latency.P99Us > res.Latency.MaxUs {
				t.Errorf("percentiles out of order: %+v", res.Latency)
			}
			if len(res.Errors) != 0 {
				t.Errorf("errors: %v", res.Errors)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
			var text, js bytes.Buffer
			WriteText(&text, cfg, res)
			if !strings.Contains(text.String(), "errors      none") {
				t.Errorf("text output:\n%s", text.String())
			}
			if err := WriteJSON(&js, res); err != nil {
				t.Fatal(err)
			}
			var back map[string]any
			if err := json.Unmarshal(js.Bytes(), &back); err != nil || back["workload"] != tc.work {
				t.Errorf("json output: %v\n%s", err, js.String())
			}
			t.Logf("%s: %.0f %s/s, p99 %.0f µs", tc.name, res.Throughput, res.Unit, res.Latency.P99Us)
			assertGone(t, addr, cfg.Prefix)
		})
	}
}

func TestExistingPrefix(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	addr := startServer(t)
	c, err := Dial(addr, ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(5 * time.Second)
	for _, p := range []string{"/left", "/left/a", "/left/a/b", "/left/c"} {
		if err := c.Do(jute.OpCreate, &jute.CreateRequest{Path: p, ACL: openACL}, nil, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig(t, addr, WorkRead, "-prefix", "/left", "-duration", "300ms", "-warmup", "0s", "-keys", "5")
	if _, err := Run(context.Background(), cfg, io.Discard); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("existing prefix: %v", err)
	}
	cfg.DeleteExisting = true
	if _, err := Run(context.Background(), cfg, io.Discard); err != nil {
		t.Fatal(err)
	}
	assertGone(t, addr, "/left")
}

func TestCancelEndsEarly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	addr := startServer(t)
	cfg := testConfig(t, addr, WorkRead, "-duration", "1h", "-warmup", "100ms", "-keys", "5", "-inflight", "8")
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancelled run took %v", d)
	}
	if res.DurationS <= 0 || res.DurationS > 2 || res.Ops == 0 {
		t.Fatalf("measured %v s, %d ops", res.DurationS, res.Ops)
	}
	assertGone(t, addr, cfg.Prefix)
}

func TestConnErrorsAndOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	addr := startServer(t)
	c, err := Dial(addr, ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Replies arrive in order, error replies included.
	const n = 500
	got := make(chan jute.ErrCode, n)
	for i := 0; i < n; i++ {
		path := "/nope"
		if i%2 == 0 {
			path = "/"
		}
		if err := c.Send(jute.OpExists, &jute.ExistsRequest{Path: path}, func(r *Reply) { got <- r.Err }); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		code := <-got
		want := jute.ErrNoNode
		if i%2 == 0 {
			want = jute.ErrOK
		}
		if code != want {
			t.Fatalf("reply %d: %v, want %v", i, code, want)
		}
	}
	if err := c.Close(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(jute.OpExists, &jute.ExistsRequest{Path: "/"}, nil); err == nil {
		t.Fatal("Send after Close succeeded")
	}
	// A closed session cannot be re-attached.
	if _, err := Dial(addr, ConnOptions{SessionID: c.SessionID, Passwd: c.Passwd}); !errors.Is(err, jute.ErrSessionExpired) {
		t.Fatalf("re-attach to a closed session: %v", err)
	}
	// Pending requests fail with connection loss when the connection drops.
	c2, err := Dial(addr, ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan jute.ErrCode, 1)
	c2.mu.Lock() // keep the request from being written
	c2.push(pending{xid: 99, sent: nanotime(), cb: func(r *Reply) { lost <- r.Err }})
	c2.mu.Unlock()
	c2.Abort()
	if code := <-lost; code != jute.ErrConnectionLoss {
		t.Fatalf("pending after abort: %v", code)
	}
}
