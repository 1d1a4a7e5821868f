package server

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

func TestPrometheusMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := startStandalone(t, func(c *Config) {
		c.Metrics = MetricsConfig{Enabled: true, Addr: "127.0.0.1:0", Registerer: reg}
	})
	c := connectZK(t, s.Addr().String())
	if _, err := c.Create("/m", []byte("data"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get("/m"); err != nil {
		t.Fatal(err)
	}
	code, ctype, body := httpGet(t, "http://"+s.MetricsAddr().String()+"/metrics")
	if code != 200 || !strings.HasPrefix(ctype, "text/plain") {
		t.Fatalf("%d %s", code, ctype)
	}
	for _, want := range []string{
		"\nznode_count{cell=\"default\"} 7\n", "\nephemerals_count{cell=\"default\"} 0\n", "\nnum_alive_connections{cell=\"default\"} 1\n", "\nglobal_sessions{cell=\"default\"} 1\n",
		"\nreadlatency_count 1\n", "\nupdatelatency_count 1\n", "readlatency{quantile=\"0.5\"}",
		"\nzkraft_proposal_commit_seconds_count 1\n", "zkraft_requests_total{op=\"create\"} 1",
		"\nzkraft_is_leader{cell=\"default\"} 1\n", "\nzkraft_pebble_disk_bytes{cell=\"default\"} ", "zkraft_pebble_level_bytes{cell=\"default\",level=\"0\"}",
		"\nzkraft_raft_apply_lag_entries{cell=\"default\"} ", "\napproximate_data_size{cell=\"default\"} ", "\npackets_received{cell=\"default\"} ",
		"dragonboat_raftnode_has_leader",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// The owner's registry holds the member's collectors.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "znode_count" {
			found = true
		}
	}
	if !found {
		t.Error("znode_count not in the handed-in registry")
	}
}

// TestRequestCountersByOp checks the cached per-op counters (metrics.byOp)
// against the vector they stand for, inside and outside the cached range.
func TestRequestCountersByOp(t *testing.T) {
	m := &metrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "r"}, []string{"op"}),
		readLatency:   prometheus.NewSummary(prometheus.SummaryOpts{Name: "rl"}),
		updateLatency: prometheus.NewSummary(prometheus.SummaryOpts{Name: "ul"}),
		commit:        prometheus.NewHistogram(prometheus.HistogramOpts{Name: "c"})}
	ops := map[jute.OpCode]int{jute.OpSetData: 3, jute.OpGetData: 2, jute.OpCloseSession: 1, jute.OpWatchFrom: 2}
	for op, n := range ops {
		for range n {
			m.request(op, znode.IsWrite(op), time.Millisecond)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.requests)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			got[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
		}
	}
	for op, n := range ops {
		if got[opLabel(op)] != float64(n) {
			t.Errorf("%v: %v requests counted, want %d", op, got[opLabel(op)], n)
		}
	}
	if len(got) != len(ops) {
		t.Errorf("counted %v, want the %d ops only", got, len(ops))
	}
}
