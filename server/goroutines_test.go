package server

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zkraft/zkraft/jute"
)

// TestGoroutinesHaveOneOwner: outside goroutines.go the package has no go
// statement and no time.AfterFunc; every goroutine it starts is counted.
func TestGoroutinesHaveOneOwner(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "goroutines.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: a go statement; start goroutines with Server.routines (goroutines.go)", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == "time" && n.Sel.Name == "AfterFunc" {
					t.Errorf("%s: time.AfterFunc; use Server.routines.afterFunc (goroutines.go)", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
}

// TestGoroutinesStop: stop refuses new goroutines and timers, cancels the
// timers that have not fired, and wait waits for what still runs.
func TestGoroutinesStop(t *testing.T) {
	var g goroutines
	release := make(chan struct{})
	ended := make(chan struct{})
	if !g.start(func() { <-release; close(ended) }) {
		t.Fatal("start refused before stop")
	}
	fired := make(chan struct{})
	if !g.afterFunc(time.Millisecond, func() { close(fired) }) {
		t.Fatal("afterFunc refused before stop")
	}
	<-fired
	never := make(chan struct{})
	if !g.afterFunc(time.Hour, func() { close(never) }) {
		t.Fatal("afterFunc refused before stop")
	}
	for g.count() != 2 { // the running goroutine and the hour's timer; the fired timer's count ends after fn
		runtime.Gosched()
	}
	g.stop()
	if g.count() != 1 {
		t.Errorf("after stop: %d counted, want 1 (the pending timer cancelled)", g.count())
	}
	if g.start(func() { t.Error("a goroutine started after stop") }) {
		t.Error("start accepted after stop")
	}
	if g.afterFunc(time.Millisecond, func() { t.Error("a timer ran after stop") }) {
		t.Error("afterFunc accepted after stop")
	}
	waited := make(chan struct{})
	go func() { g.wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("wait returned while a goroutine still ran")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-waited
	select {
	case <-ended:
	default:
		t.Error("wait returned before the goroutine ended")
	}
	select {
	case <-never:
		t.Error("the cancelled timer ran")
	default:
	}
}

// goroutineIDs returns the stacks of the running goroutines by their
// "goroutine N" header.
func goroutineIDs() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		hdr, _, _ := strings.Cut(string(g), " [")
		out[hdr] = string(g)
	}
	return out
}

// TestCloseLeavesNoGoroutine: a member that served clients (one still
// connected with a watch at Close), four-letter words, the AdminServer and
// the metrics endpoint leaves no goroutine behind once Close returns: of
// the server's, Dragonboat's or Pebble's.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	before := goroutineIDs()
	cfg := Config{
		ClientAddr:      "127.0.0.1:0",
		RaftAddr:        freeAddr(t),
		DataDir:         t.TempDir(),
		TickTime:        200 * time.Millisecond,
		FourLetterWords: []string{"*"},
		Logger:          testLogger(t, 1),
		Admin:           AdminConfig{Enabled: true, Addr: "127.0.0.1:0"},
		Metrics:         MetricsConfig{Enabled: true, Addr: "127.0.0.1:0", Registerer: prometheus.NewRegistry()},
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()

	c, _, err := zk.Connect([]string{s.Addr().String()}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a", "/a/b"} {
		if _, err := c.Create(p, []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := c.ChildrenW("/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set("/a/b", []byte("w"), -1); err != nil {
		t.Fatal(err)
	}
	c.Close()

	// A raw client stays connected, with a watch, through Close.
	rc := dialRaw(t, s.Addr().String())
	if h, _, err := rc.call(jute.OpGetData, &jute.GetDataRequest{Path: "/a", Watch: true}); err != nil || h.Err != jute.ErrOK {
		t.Fatalf("getData: %+v %v", h, err)
	}
	if got := fourLW(t, s.Addr().String(), "mntr"); !strings.Contains(got, "zk_znode_count") {
		t.Errorf("mntr: %q", got)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, url := range []string{"http://" + s.AdminAddr().String() + "/commands/mntr", "http://" + s.MetricsAddr().String() + "/metrics"} {
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %s", url, resp.Status)
		}
	}

	if n := s.routines.count(); n == 0 {
		t.Errorf("no goroutine counted while serving")
	}
	closed = true
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := s.routines.count(); n != 0 {
		t.Errorf("%d goroutines still counted after Close", n)
	}
	// The raw client's socket is closed by the server.
	rc.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.frame(); err == nil {
		t.Error("the raw client's connection is still open after Close")
	}

	// Goroutines that have been told to end may need a moment to be
	// gone (a closed socket's poller, a stopped timer's goroutine): a
	// bounded wait, then every goroutine not there before is a leak.
	var extra []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		extra = extra[:0]
		for id, stack := range goroutineIDs() {
			if _, ok := before[id]; !ok {
				extra = append(extra, stack)
			}
		}
		if len(extra) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, stack := range extra {
		t.Errorf("goroutine left after Close:\n%s", stack)
	}
}
