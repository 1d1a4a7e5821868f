package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// Cell is one cell (or server) of a several-cell run: a name for the
// report and its addresses.
type Cell struct {
	Name  string   `json:"name"`
	Addrs []string `json:"addrs"`
}

// CellsResult is a several-cell run: each cell's result, in the order
// given, and the sum of their throughputs over the same window.
type CellsResult struct {
	Cells []CellResult `json:"cells"`
	// Throughput is the cells' throughputs summed (each measured over its
	// own window; they run at once).
	Throughput float64 `json:"aggregate_throughput"`
	Ops        int64   `json:"aggregate_ops"`
}

// CellResult is one cell's result.
type CellResult struct {
	Cell   string  `json:"cell"`
	Result *Result `json:"result"`
}

// RunCells runs cfg's workload against every cell of cfg.Cells at once,
// each with its own sessions and in-flight requests (cfg's, per cell),
// and waits for all. The first error ends the report.
func RunCells(ctx context.Context, cfg *Config, log io.Writer) (*CellsResult, error) {
	out := &CellsResult{Cells: make([]CellResult, len(cfg.Cells))}
	errs := make([]error, len(cfg.Cells))
	var wg sync.WaitGroup
	var logMu sync.Mutex
	for i, c := range cfg.Cells {
		one := *cfg
		one.Cells = nil
		one.Addrs = c.Addrs
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := Run(ctx, &one, &prefixWriter{w: log, mu: &logMu, prefix: "[" + c.Name + "] "})
			out.Cells[i] = CellResult{Cell: c.Name, Result: res}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("cell %s: %w", cfg.Cells[i].Name, err)
		}
		out.Throughput += out.Cells[i].Result.Throughput
		out.Ops += out.Cells[i].Result.Ops
	}
	return out, nil
}

// WriteCellsText prints each cell's report, then the aggregate.
func WriteCellsText(w io.Writer, cfg *Config, res *CellsResult) {
	for _, c := range res.Cells {
		fmt.Fprintf(w, "== cell %s\n", c.Cell)
		WriteText(w, cfg, c.Result)
	}
	fmt.Fprintf(w, "== aggregate over %d cells: %d ops, %.1f ops/s\n", len(res.Cells), res.Ops, res.Throughput)
	for _, c := range res.Cells {
		fmt.Fprintf(w, "   %-20s %10.1f ops/s  p99 %s\n", c.Cell, c.Result.Throughput, ms(c.Result.Latency.P99Us))
	}
}

// prefixWriter prefixes each write (progress lines) with the cell's name.
type prefixWriter struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	if p.w == nil {
		return len(b), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.w.Write(append([]byte(p.prefix), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}
