package proxy_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/proxy"
)

// startProxyWith starts a proxy in front of m with cfg's operator settings.
func startProxyWith(t *testing.T, cfg proxy.Config, members ...*member) *proxy.Proxy {
	t.Helper()
	cfg.ClientAddr, cfg.KeepAliveInterval, cfg.Logger = "127.0.0.1:0", 250*time.Millisecond, logger()
	if len(members) > 0 {
		cfg.Members = nil
	}
	for _, m := range members {
		cfg.Members = append(cfg.Members, m.cfg.ProxyAddr)
	}
	p, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// scrape returns the value of the series whose line starts with series
// (name and labels), -1 if it is missing.
func scrape(t *testing.T, p *proxy.Proxy, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// TestProxyMetrics: the proxy's Prometheus endpoint shows its sessions,
// its clients' watches (set, then fired), its upstream connection and its
// keep-alive batches.
func TestProxyMetrics(t *testing.T) {
	m := startMember(t, nil)
	p := startProxyWith(t, proxy.Config{MetricsAddr: "127.0.0.1:0"}, m)
	c, _ := connect(t, 4*time.Second, p.Addr().String())
	if _, err := c.Create("/metered", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, _, wch, err := c.GetW("/metered")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c.ChildrenW("/metered"); err != nil {
		t.Fatal(err)
	}
	for series, want := range map[string]float64{
		"zkraft_proxy_sessions":                                             1,
		"zkraft_proxy_client_connections":                                   1,
		`zkraft_proxy_watches{table="data"}`:                                1,
		`zkraft_proxy_watches{table="child"}`:                               1,
		`zkraft_proxy_upstream_connected{member="` + m.cfg.ProxyAddr + `"}`: 1,
		"zkraft_proxy_upstream_connects_total":                              1,
		"zkraft_proxy_outstanding_requests":                                 0,
	} {
		if got := scrape(t, p, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if _, err := c.Set("/metered", []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	<-wch
	if got := scrape(t, p, `zkraft_proxy_watches{table="data"}`); got != 0 {
		t.Errorf("data watches after the event: %v, want 0 (one-shot)", got)
	}
	if got := scrape(t, p, `zkraft_proxy_watches{table="child"}`); got != 1 {
		t.Errorf("child watches after a data event: %v, want 1", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for scrape(t, p, "zkraft_proxy_keepalive_sessions_total") < 1 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if got := scrape(t, p, "zkraft_proxy_keepalive_sessions_total"); got < 1 {
		t.Errorf("keep-alive session ids sent: %v, want at least 1", got)
	}
}

// TestProxyWords: the proxy answers four-letter words about itself, with
// ZooKeeper's whitelist (srvr only by default): its client port, its
// connections and sessions, the watches its clients hold; and without an
// upstream connection it is not serving.
func TestProxyWords(t *testing.T) {
	m := startMember(t, nil)
	def := startProxyWith(t, proxy.Config{}, m)
	connect(t, 4*time.Second, def.Addr().String()) // the proxy serves once it has an upstream connection
	if out := fourLetter(t, def.Addr().String(), "srvr"); !strings.Contains(out, "Mode: proxy\n") || !strings.HasPrefix(out, "Zookeeper version: ") {
		t.Errorf("srvr with the default whitelist: %q", out)
	}
	if out := fourLetter(t, def.Addr().String(), "ruok"); out != "ruok is not executed because it is not in the whitelist.\n" {
		t.Errorf("ruok with the default whitelist: %q", out)
	}

	p := startProxyWith(t, proxy.Config{FourLetterWords: []string{"*"}}, m)
	addr := p.Addr().String()
	c, _ := connect(t, 4*time.Second, addr)
	if _, err := c.Create("/worded", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c.GetW("/worded"); err != nil {
		t.Fatal(err)
	}
	sid := "0x" + strconv.FormatInt(c.SessionID(), 16)
	_, port, _ := net.SplitHostPort(addr)
	for word, want := range map[string][]string{
		"ruok": {"imok"},
		"isro": {"rw"},
		"conf": {"clientPort=" + port + "\n"},
		"cons": {",sid=" + sid + ",", "(queued=0,recved=1,sent=0)"},
		"stat": {"Mode: proxy\n", "Clients:\n /127.0.0.1:", "(queued=0,recved=1,sent=0)\n"},
		"mntr": {"zk_server_state\tproxy\n", "zk_watch_count\t1\n"},
		"wchs": {"1 connections watching 1 paths\nTotal watches:1\n"},
		"wchc": {sid + "\n\t/worded\n"},
		"wchp": {"/worded\n\t" + sid + "\n"},
		"dump": {"sessionId: " + sid + "\n"},
	} {
		out := fourLetter(t, addr, word)
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: %q lacks %q", word, out, w)
			}
		}
	}

	// A proxy with no upstream connection is not serving.
	lone := startProxyWith(t, proxy.Config{FourLetterWords: []string{"*"}, Members: []string{freeport.Addr(t)}})
	if out := fourLetter(t, lone.Addr().String(), "srvr"); out != "This ZooKeeper instance is not currently serving requests\n" {
		t.Errorf("srvr without an upstream connection: %q", out)
	}
	if out := fourLetter(t, lone.Addr().String(), "ruok"); out != "imok" {
		t.Errorf("ruok without an upstream connection: %q", out)
	}
}

// TestProxyAdminServer: the proxy's AdminServer answers ZooKeeper's
// commands about the proxy and its own upstream command.
func TestProxyAdminServer(t *testing.T) {
	m := startMember(t, nil)
	p := startProxyWith(t, proxy.Config{AdminAddr: "127.0.0.1:0"}, m)
	c, _ := connect(t, 4*time.Second, p.Addr().String())
	get := func(cmd string) string {
		resp, err := http.Get("http://" + p.AdminAddr().String() + "/commands/" + cmd)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for cmd, want := range map[string][]string{
		"upstream":    {`"connected" : true`, `"member" : "` + m.cfg.ProxyAddr + `"`, `"sessions" : 1`, `"protocol_version" : 2`, `"session_watches" : 0`},
		"monitor":     {`"server_state" : "proxy"`},
		"connections": {fmt.Sprintf(`"session_id" : %d,`, c.SessionID())},
	} {
		out := get(cmd)
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: %s lacks %s", cmd, out, w)
			}
		}
	}
}
