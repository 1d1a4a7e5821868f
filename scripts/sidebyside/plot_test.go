package main

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// svgBar is a bar (or a dash for a missing figure) read back from the
// report.
type svgBar struct {
	system, workload, series, value string
	height                          float64
	svg                             int // which chart of the document
}

// readReport parses the report as XML (it must be well-formed) and returns
// its charts' bars and the number of charts; it fails on any script or
// reference to another file.
func readReport(t *testing.T, doc string) ([]svgBar, int) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	d.Strict = true
	var bars []svgBar
	charts := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the report is not well-formed: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := map[string]string{}
		for _, a := range se.Attr {
			attr[a.Name.Local] = a.Value
			if (a.Name.Local == "href" || a.Name.Local == "src") && a.Value != "" {
				t.Errorf("<%s> refers to %q: the report must be self-contained", se.Name.Local, a.Value)
			}
		}
		switch se.Name.Local {
		case "script", "link", "img", "iframe", "object":
			t.Errorf("the report has a <%s>", se.Name.Local)
		case "svg":
			charts++
		case "rect", "text":
			if attr["data-system"] == "" {
				continue
			}
			h, _ := strconv.ParseFloat(attr["data-height"], 64)
			bars = append(bars, svgBar{attr["data-system"], attr["data-workload"], attr["data-series"], attr["data-value"], h, charts})
		}
	}
	return bars, charts
}

func TestHTMLReportFromJSON(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/results-small.json")
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "results.json")
	if err := os.WriteFile(in, src, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results.html")
	if err := writeHTMLReport(in, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	bars, charts := readReport(t, doc)
	// Two shapes: a throughput and a latency chart each.
	if charts != 4 {
		t.Fatalf("%d charts, want 4 (2 shapes x throughput, latency)", charts)
	}
	for _, want := range []string{"standalone, shape 8x8", "standalone, shape 64x1", "Test CPU", "0123456789"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	find := func(chart int, sys, wl, series string) svgBar {
		t.Helper()
		for _, x := range bars {
			if x.svg == chart && x.system == sys && x.workload == wl && x.series == series {
				return x
			}
		}
		t.Fatalf("no bar for %s %s %s in chart %d", sys, wl, series, chart)
		return svgBar{}
	}
	// 8x8 throughput: the values, ZooKeeper beside zkraft, heights in
	// proportion (zkraft's set-own 10000 is 2.5 times ZooKeeper's 4000;
	// get 30000 is the tallest bar and the axis tops at 50000).
	zs, rs := find(1, "zookeeper", "set-own", "throughput"), find(1, "zkraft", "set-own", "throughput")
	if zs.value != "4000" || rs.value != "10000" {
		t.Fatalf("set-own throughput bars %q and %q, want 4000 and 10000", zs.value, rs.value)
	}
	if r := rs.height / zs.height; math.Abs(r-2.5) > 1e-3 {
		t.Errorf("zkraft's bar is %.3f times ZooKeeper's, want 2.5", r)
	}
	zg := find(1, "zookeeper", "get", "throughput")
	plotH := float64(chartH - padTop - padBotom)
	if math.Abs(zg.height-plotH*30000/50000) > 1e-3 {
		t.Errorf("the get bar of 30000 is %.2f high, want %.2f (axis top 50000)", zg.height, plotH*30000/50000)
	}
	// 8x8 latency in ms: zkraft's set-own p99 is 20 ms, ZooKeeper's p99.9 80.
	if v := find(2, "zkraft", "set-own", "p99").value; v != "20" {
		t.Errorf("zkraft set-own p99 %q ms, want 20", v)
	}
	if v := find(2, "zookeeper", "set-own", "p99.9").value; v != "80" {
		t.Errorf("ZooKeeper set-own p99.9 %q ms, want 80", v)
	}
	// 64x1: zkraft's only run failed: a dash, not a bar of 0.
	if v := find(3, "zkraft", "set-own", "throughput").value; v != "none" {
		t.Errorf("a failed cell is drawn as %q, want none", v)
	}
	if v := find(3, "zookeeper", "set-own", "throughput").value; v != "5000" {
		t.Errorf("64x1 ZooKeeper %q, want 5000", v)
	}

	// Without a summary (an interrupted run) the report is made from the
	// runs: the 8x8 set-own cell has one run of each system.
	var res Results
	if err := json.Unmarshal(src, &res); err != nil {
		t.Fatal(err)
	}
	res.Summary = nil
	res.Interrupted = true
	nb, err := json.Marshal(&res)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, nb, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeHTMLReport(in, out); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(out)
	bars, _ = readReport(t, string(b))
	if v := find(1, "zkraft", "set-own", "throughput").value; v != "10000" {
		t.Errorf("from the runs: zkraft set-own %q, want 10000", v)
	}
	if !strings.Contains(string(b), "Interrupted after 2 runs") {
		t.Error("the report of an interrupted run does not say so")
	}
}

func TestNiceCeil(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{{0, 1}, {3, 5}, {30000, 50000}, {10000, 10000}, {0.012, 0.02}, {101, 200}} {
		if got := niceCeil(c.in); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("niceCeil(%g) = %g, want %g", c.in, got, c.want)
		}
	}
}
