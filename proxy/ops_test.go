package proxy_test

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/proxy"
)

// startProxyWith starts a proxy in front of m with cfg's operator settings.
func startProxyWith(t *testing.T, cfg proxy.Config, members ...*member) *proxy.Proxy {
	t.Helper()
	cfg.ClientAddr, cfg.KeepAliveInterval, cfg.Logger = "127.0.0.1:0", 250*time.Millisecond, logger()
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
