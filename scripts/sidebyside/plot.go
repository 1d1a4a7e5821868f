package main

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/zkraft/zkraft/internal/launch"
)

// The HTML report: per ensemble size and shape, a throughput chart and a
// latency chart (p50, p99, p99.9) with ZooKeeper's bar beside zkraft's for
// every workload, drawn as inline SVG from the summary of results.json. It
// is one self-contained file: no script, no style sheet or font fetched
// from anywhere, so it opens from a CI artifact or an e-mail as it is.

// plotColors are the systems' colours, the same in every chart.
var plotColors = map[string]string{string(launch.ZooKeeper): "#d9822b", string(launch.Zkraft): "#2b6cb0"}

// plotGroup is one chart's set of bars: the cells of one ensemble size and
// shape.
type plotGroup struct {
	members int
	shape   string
	cells   []*Summary // in workload order
}

// groupsOf splits the summary by ensemble size and shape, in the order the
// cells first appear.
func groupsOf(sum []*Summary) []*plotGroup {
	var out []*plotGroup
	idx := map[string]*plotGroup{}
	for _, s := range sum {
		k := fmt.Sprintf("%d/%s", s.Members, s.Shape)
		g := idx[k]
		if g == nil {
			g = &plotGroup{members: s.Members, shape: s.Shape}
			idx[k] = g
			out = append(out, g)
		}
		g.cells = append(g.cells, s)
	}
	return out
}

// reportSystems are the systems a summary has, ZooKeeper first.
func reportSystems(sum []*Summary) []string {
	seen := map[string]bool{}
	for _, s := range sum {
		for k := range s.Systems {
			seen[k] = true
		}
	}
	var out []string
	for _, sys := range []string{string(launch.ZooKeeper), string(launch.Zkraft)} {
		if seen[sys] {
			out = append(out, sys)
			delete(seen, sys)
		}
	}
	var rest []string
	for k := range seen {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// bar is one bar of a chart.
type bar struct {
	system, workload, series string
	value                    float64 // NaN: no figure (no bar, a dash)
}

// chart is a grouped bar chart: one group per workload, one bar per
// (series, system) in each.
type chart struct {
	title, unit string
	groups      []string // workloads
	bars        []bar
	scale       func(float64) string // the value as a label
}

const (
	chartW, chartH                      = 760, 300
	padLeft, padRight, padTop, padBotom = 64, 16, 34, 58
)

// svg draws the chart. Every bar carries data-system, data-workload,
// data-series and data-value, and its height is value/max of the plot
// height: the test reads them back.
func (c *chart) svg() string {
	var b strings.Builder
	maxV := 0.0
	for _, x := range c.bars {
		if !math.IsNaN(x.value) && x.value > maxV {
			maxV = x.value
		}
	}
	top := niceCeil(maxV)
	plotH := float64(chartH - padTop - padBotom)
	plotW := float64(chartW - padLeft - padRight)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		chartW, chartH, chartW, chartH, html.EscapeString(c.title))
	fmt.Fprintf(&b, `<text x="%d" y="20" class="title">%s</text>`, padLeft, html.EscapeString(c.title))
	// Axis with five ticks.
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		y := float64(padTop) + plotH - plotH*float64(i)/4
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="grid"/>`, padLeft, y, chartW-padRight, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="tick" text-anchor="end">%s</text>`, padLeft-6, y+4, html.EscapeString(c.scale(v)))
	}
	fmt.Fprintf(&b, `<text x="14" y="%d" class="unit" transform="rotate(-90 14 %d)" text-anchor="middle">%s</text>`,
		padTop+int(plotH/2), padTop+int(plotH/2), html.EscapeString(c.unit))
	if len(c.groups) == 0 {
		b.WriteString(`</svg>`)
		return b.String()
	}
	groupW := plotW / float64(len(c.groups))
	perGroup := map[string][]bar{}
	for _, x := range c.bars {
		perGroup[x.workload] = append(perGroup[x.workload], x)
	}
	for gi, g := range c.groups {
		bars := perGroup[g]
		x0 := float64(padLeft) + groupW*float64(gi)
		inner := groupW * 0.8
		bw := inner / float64(max(len(bars), 1))
		for i, x := range bars {
			bx := x0 + groupW*0.1 + bw*float64(i)
			if math.IsNaN(x.value) {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="none" text-anchor="middle" data-system="%s" data-workload="%s" data-series="%s" data-value="none">no figure</text>`,
					bx+bw/2, float64(padTop)+plotH-4, x.system, html.EscapeString(x.workload), x.series)
				continue
			}
			h := 0.0
			if top > 0 {
				h = plotH * x.value / top
			}
			fill := plotColors[x.system]
			if fill == "" {
				fill = "#888888"
			}
			opacity := 1.0
			switch x.series {
			case "p99":
				opacity = 0.7
			case "p99.9":
				opacity = 0.45
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.2f" width="%.1f" height="%.2f" fill="%s" fill-opacity="%.2f" data-system="%s" data-workload="%s" data-series="%s" data-value="%g" data-height="%.4f"><title>%s %s %s: %s</title></rect>`,
				bx, float64(padTop)+plotH-h, math.Max(bw-2, 1), h, fill, opacity, x.system, html.EscapeString(x.workload), x.series, x.value, h,
				x.system, html.EscapeString(x.workload), x.series, html.EscapeString(c.scale(x.value)+" "+c.unit))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="group" text-anchor="middle">%s</text>`, x0+groupW/2, chartH-padBotom+18, html.EscapeString(g))
	}
	// Legend.
	lx := padLeft
	seen := map[string]bool{}
	for _, x := range c.bars {
		key := x.system + " " + x.series
		if seen[key] {
			continue
		}
		seen[key] = true
		label := x.system
		if x.series != "" && x.series != "throughput" {
			label += " " + x.series
		}
		opacity := map[string]float64{"p99": 0.7, "p99.9": 0.45}[x.series]
		if opacity == 0 {
			opacity = 1
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s" fill-opacity="%.2f"/><text x="%d" y="%d" class="legend">%s</text>`,
			lx, chartH-22, plotColors[x.system], opacity, lx+16, chartH-12, html.EscapeString(label))
		lx += 24 + 7*len(label)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (the axis top).
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// html is the report as one HTML document (well-formed XML too).
func (res *Results) html() string {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><title>zkraft beside Apache ZooKeeper</title>\n<style>\n")
	b.WriteString(`body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:20px}h2{font-size:16px;margin-top:32px}
.chart{background:#fff;border:1px solid #ddd;margin:8px 8px 8px 0}
.chart .title{font-weight:600;font-size:13px}.chart .tick,.chart .group,.chart .legend,.chart .unit{font-size:11px;fill:#444}
.chart .grid{stroke:#eee}.chart .none{fill:#999}
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}th{background:#f5f5f5}
td.l,th.l{text-align:left}.meta{color:#555;font-size:12px}
`)
	b.WriteString("</style></head><body>\n")
	b.WriteString("<h1>zkraft beside Apache ZooKeeper (scripts/sidebyside)</h1>\n")
	if m := res.Meta; m != nil {
		b.WriteString(`<p class="meta">`)
		fmt.Fprintf(&b, "%s UTC; %s, %d CPUs; ", html.EscapeString(m.Started.Format("2006-01-02 15:04")), html.EscapeString(m.Machine.CPU), m.Machine.CPUs)
		if m.Commit.Hash != "" {
			fmt.Fprintf(&b, "zkraft commit %.10s (%s)", html.EscapeString(m.Commit.Hash), html.EscapeString(m.Commit.Subject))
			if m.Commit.Dirty {
				b.WriteString(", with uncommitted changes")
			}
			b.WriteString("; ")
		}
		if v := m.Versions.Srvr[string(launch.ZooKeeper)]; v != "" {
			fmt.Fprintf(&b, "ZooKeeper %s; ", html.EscapeString(v))
		}
		fmt.Fprintf(&b, "%d pair(s), %gs measured after %gs warm-up, medians over the pairs.", m.Settings.Pairs, m.Settings.DurationS, m.Settings.WarmupS)
		b.WriteString("</p>\n")
	}
	if res.Interrupted {
		fmt.Fprintf(&b, "<p class=\"meta\">Interrupted after %d runs.</p>\n", len(res.Runs))
	}
	systems := reportSystems(res.Summary)
	if len(res.Summary) == 0 {
		b.WriteString("<p>No summary: no run finished.</p>\n")
	}
	for _, g := range groupsOf(res.Summary) {
		who := "standalone"
		if g.members > 1 {
			who = fmt.Sprintf("%d members", g.members)
		}
		fmt.Fprintf(&b, "<h2 id=\"m%d-%s\">%s, shape %s</h2>\n", g.members, html.EscapeString(g.shape), who, html.EscapeString(g.shape))
		var workloads []string
		unit := ""
		for _, c := range g.cells {
			workloads = append(workloads, c.Workload)
			if unit == "" {
				unit = c.Unit
			} else if unit != c.Unit {
				unit = "ops"
			}
		}
		tp := &chart{title: "Throughput (higher is better)", unit: unit + "/s", groups: workloads, scale: num}
		lat := &chart{title: "Latency p50 / p99 / p99.9 (lower is better)", unit: "ms", groups: workloads,
			scale: func(v float64) string { return ms(v * 1000) }}
		for _, c := range g.cells {
			for _, sys := range systems {
				s := c.Systems[sys]
				val := func(f func(*SysSummary) float64) float64 {
					if s == nil || s.Runs == s.Failed {
						return math.NaN()
					}
					return f(s)
				}
				tp.bars = append(tp.bars, bar{system: sys, workload: c.Workload, series: "throughput", value: val(func(s *SysSummary) float64 { return s.Throughput })})
				for _, q := range []struct {
					name string
					f    func(*SysSummary) float64
				}{{"p50", func(s *SysSummary) float64 { return s.P50Us }}, {"p99", func(s *SysSummary) float64 { return s.P99Us }},
					{"p99.9", func(s *SysSummary) float64 { return s.P999Us }}} {
					v := val(q.f)
					if !math.IsNaN(v) {
						v /= 1000 // µs to ms
					}
					lat.bars = append(lat.bars, bar{system: sys, workload: c.Workload, series: q.name, value: v})
				}
			}
		}
		b.WriteString("<div>")
		b.WriteString(tp.svg())
		b.WriteString(lat.svg())
		b.WriteString("</div>\n")
		// The figures as a table too.
		b.WriteString("<table><tr><th class=\"l\">workload</th>")
		for _, sys := range systems {
			fmt.Fprintf(&b, "<th>%s /s</th><th>%s p50 / p99 / p99.9 ms</th>", sys, sys)
		}
		b.WriteString("<th>throughput ratio</th></tr>\n")
		for _, c := range g.cells {
			fmt.Fprintf(&b, "<tr><td class=\"l\">%s</td>", html.EscapeString(c.Workload))
			for _, sys := range systems {
				s := c.Systems[sys]
				if s == nil || s.Runs == s.Failed {
					b.WriteString("<td>-</td><td>-</td>")
					continue
				}
				fmt.Fprintf(&b, "<td>%s</td><td>%s / %s / %s</td>", num(s.Throughput), ms(s.P50Us), ms(s.P99Us), ms(s.P999Us))
			}
			r := math.NaN()
			if c.Ratio != nil {
				r = c.Ratio.Throughput
			}
			fmt.Fprintf(&b, "<td>%s</td></tr>\n", ratioStr(r))
		}
		b.WriteString("</table>\n")
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

// writeHTMLReport renders the JSON results at path into html at out.
func writeHTMLReport(path, out string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	res := new(Results)
	if err := json.Unmarshal(data, res); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(res.Summary) == 0 && len(res.Runs) > 0 && res.Meta != nil {
		// An interrupted run's JSON has no summary yet: make it from the
		// runs and the settings they were made with.
		o := &options{systems: res.Meta.Settings.Systems, members: res.Meta.Settings.Members, shapes: res.Meta.Settings.Shapes}
		for _, n := range res.Meta.Settings.Workloads {
			if w := workloadByName(n); w != nil {
				o.workloads = append(o.workloads, w)
			}
		}
		res.Summary = summarize(o, res.Runs)
	}
	return os.WriteFile(out, []byte(res.html()), 0o644)
}
