package main

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/zkraft/zkraft/bench"
	"github.com/zkraft/zkraft/internal/launch"
)

func TestParseShapes(t *testing.T) {
	got, err := parseShapes(defaultShapes)
	if err != nil {
		t.Fatal(err)
	}
	want := []shape{{64, 1}, {256, 1}, {8, 8}, {16, 16}, {4, 16}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"", "8", "8x", "x8", "0x1", "8x0", "axb", "1000x1000"} {
		if _, err := parseShapes(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSmokeDefaultsYieldToFlags(t *testing.T) {
	o, err := parseFlags([]string{"-smoke", "-workloads", "get"})
	if err != nil {
		t.Fatal(err)
	}
	if o.pairs != 1 || len(o.shapes) != 1 || o.shapes[0] != (shape{8, 8}) || len(o.workloads) != 1 || o.workloads[0].name != "get" {
		t.Fatalf("smoke options: pairs %d shapes %v workloads %v", o.pairs, o.shapes, o.workloads)
	}
	if _, err := parseFlags([]string{"-connect", "follower"}); err == nil {
		t.Fatal("-connect follower with a standalone member: no error")
	}
	if _, err := parseFlags([]string{"-workloads", "nope"}); err == nil {
		t.Fatal("unknown workload: no error")
	}
}

func TestCellsAndOrder(t *testing.T) {
	o, err := parseFlags([]string{"-members", "1,3", "-shapes", "64x1,8x8", "-workloads", "set-own,watch", "-watchers", "50", "-order", "abba"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range o.cells() {
		keys = append(keys, c.key())
	}
	want := []string{"1/64x1/set-own", "1/8x8/set-own", "1/50x1/watch", "3/64x1/set-own", "3/8x8/set-own", "3/50x1/watch"}
	if !slices.Equal(keys, want) {
		t.Fatalf("cells %v, want %v", keys, want)
	}
	if a, b := o.orderOf(1), o.orderOf(2); a[0] != launch.ZooKeeper || b[0] != launch.Zkraft {
		t.Fatalf("abba: pair 1 %v, pair 2 %v", a, b)
	}
}

func TestSummaryMediansAndRatios(t *testing.T) {
	o, err := parseFlags([]string{"-shapes", "8x8", "-workloads", "set-own"})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(pair int, sys launch.System, tput, p99, cpu float64, failed string) *Run {
		return &Run{Pair: pair, System: string(sys), Members: 1, Shape: "8x8", Workload: "set-own", Throughput: tput,
			Latency: bench.Latency{P99Us: p99}, ServerCPUPerKOp: cpu, Failed: failed, Errors: map[string]int64{"x": 1}}
	}
	runs := []*Run{
		mk(1, launch.ZooKeeper, 100, 10, 1, ""), mk(1, launch.Zkraft, 150, 5, 0.5, ""),
		mk(2, launch.ZooKeeper, 200, 30, 3, ""), mk(2, launch.Zkraft, 500, 20, 1, ""),
		mk(3, launch.ZooKeeper, 300, 20, 2, ""), mk(3, launch.Zkraft, 0, 0, 0, "start: boom"),
	}
	s := summarize(o, runs)
	if len(s) != 1 {
		t.Fatalf("%d summaries", len(s))
	}
	z, r := s[0].Systems["zookeeper"], s[0].Systems["zkraft"]
	if z.Throughput != 200 || z.P99Us != 20 || z.ServerCPUPerKOp != 2 || z.Errors != 3 || z.Failed != 0 {
		t.Fatalf("ZooKeeper %+v", z)
	}
	if r.Throughput != 325 || r.P99Us != 12.5 || r.Failed != 1 || r.Runs != 3 {
		t.Fatalf("zkraft %+v", r)
	}
	if math.Abs(s[0].Ratio.Throughput-1.625) > 1e-9 || math.Abs(s[0].Ratio.P99-0.625) > 1e-9 {
		t.Fatalf("ratio %+v", s[0].Ratio)
	}
	if !slices.Equal(s[0].PairRatios, []float64{1.5, 2.5}) {
		t.Fatalf("pair ratios %v", s[0].PairRatios)
	}
	res := &Results{Meta: &Meta{}, Summary: s, Runs: runs}
	md := res.markdown(o)
	for _, want := range []string{"| 1 | 8x8 | set-own | 200 ops/s | 325 | 1.62 | 1.50 2.50 |", "1 of 3 runs failed", "failed: start: boom"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
