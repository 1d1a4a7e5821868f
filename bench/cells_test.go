package bench

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestRunCells drives two servers at once as two cells: each reports its
// own operations, and the aggregate is their sum.
func TestRunCells(t *testing.T) {
	a, b := startServer(t), startServer(t)
	cfg := testConfig(t, a, WorkWrite, "-cell", "one="+a, "-cell", "two="+b, "-inflight", "8")
	if len(cfg.Cells) != 2 || cfg.Cells[1].Name != "two" || cfg.Cells[1].Addrs[0] != b {
		t.Fatalf("cells %+v", cfg.Cells)
	}
	res, err := RunCells(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, c := range res.Cells {
		if c.Result.Ops == 0 || len(c.Result.Errors) > 0 {
			t.Errorf("cell %s: %d ops, errors %v", c.Cell, c.Result.Ops, c.Result.Errors)
		}
		sum += c.Result.Ops
	}
	if res.Ops != sum {
		t.Errorf("aggregate %d ops, cells sum to %d", res.Ops, sum)
	}
	var out bytes.Buffer
	WriteCellsText(&out, cfg, res)
	if !strings.Contains(out.String(), "== cell one") || !strings.Contains(out.String(), "== aggregate over 2 cells") {
		t.Errorf("report:\n%s", out.String())
	}
	assertGone(t, a, cfg.Prefix)
	assertGone(t, b, cfg.Prefix)
}
