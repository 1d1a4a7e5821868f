// Package bench is the load generator behind `zkraft bench`: it runs a
// workload against any ZooKeeper-compatible address list with a small
// pipelined client of its own (package jute's codec) and reports throughput
// and latency percentiles as text or JSON.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// Main is `zkraft bench`: it parses args, runs the workload and prints the
// result to stdout. SIGINT or SIGTERM ends the measurement early (the
// clean-up still runs).
func Main(args []string) error {
	cfg, err := ParseArgs(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(cfg.Cells) > 0 {
		res, err := RunCells(ctx, cfg, os.Stderr)
		if err != nil {
			return err
		}
		if cfg.JSON {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		}
		WriteCellsText(os.Stdout, cfg, res)
		return nil
	}
	res, err := Run(ctx, cfg, os.Stderr)
	if err != nil {
		return err
	}
	if cfg.JSON {
		return WriteJSON(os.Stdout, res)
	}
	WriteText(os.Stdout, cfg, res)
	return nil
}

// WriteJSON prints res as indented JSON.
func WriteJSON(w io.Writer, res *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

func ms(us float64) string { return fmt.Sprintf("%.3f ms", us/1000) }

func latLine(l Latency) string {
	if l.Count == 0 {
		return "(no samples)"
	}
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (mean %s, %d samples)",
		ms(l.P50Us), ms(l.P90Us), ms(l.P99Us), ms(l.P999Us), ms(l.MaxUs), ms(l.MeanUs), l.Count)
}

// WriteText prints res for people.
func WriteText(w io.Writer, cfg *Config, res *Result) {
	fmt.Fprintf(w, "workload    %s\n", cfg.describe())
	fmt.Fprintf(w, "servers     %s\n", strings.Join(res.Addrs, ","))
	switch {
	case cfg.isLoad():
		fmt.Fprintf(w, "sessions    %d, %d requests in flight in total\n", res.Sessions, res.InFlight)
	default:
		fmt.Fprintf(w, "sessions    %d\n", res.Sessions)
	}
	if cfg.Workload == WorkSessions {
		fmt.Fprintf(w, "opened      %d sessions in %.2f s: %.1f sessions/s, %d failed\n", res.Opened, res.SetupS, res.Throughput, res.OpenFailed)
		fmt.Fprintf(w, "handshake   %s\n", latLine(res.Latency))
		fmt.Fprintf(w, "held        %.2f s: %d unexpected expiries, %d unexpected disconnects\n", res.DurationS, deref(res.Expired), res.Disconnected)
		if res.PingLatency != nil {
			fmt.Fprintf(w, "ping        %s\n", latLine(*res.PingLatency))
		}
		if cfg.ServerPID != 0 {
			fmt.Fprintf(w, "server RSS  before %d KiB, opened %d KiB, end %d KiB, max %d KiB: %d bytes per session\n",
				res.RSSBeforeKB, res.RSSOpenKB, res.RSSEndKB, res.RSSMaxKB, res.RSSPerSessionB)
		}
	} else {
		fmt.Fprintf(w, "measured    %.2f s after %.2f s warm-up\n", res.DurationS, res.WarmupS)
		fmt.Fprintf(w, "throughput  %.1f %s/s (%d %s)\n", res.Throughput, res.Unit, res.Ops, res.Unit)
		fmt.Fprintf(w, "latency     %s\n", latLine(res.Latency))
		if cfg.Workload == WorkMulti {
			fmt.Fprintf(w, "ops         %.1f setData/s inside multis\n", res.Throughput*float64(cfg.MultiOps))
		}
		names := make([]string, 0, len(res.ByOp))
		for k := range res.ByOp {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			st := res.ByOp[k]
			fmt.Fprintf(w, "  %-9s %.1f/s  %s\n", k, st.Throughput, latLine(st.Latency))
		}
	}
	if cfg.Workload == WorkWatch {
		fmt.Fprintf(w, "rounds      %d measured; %d lost notifications, %d late\n", res.Rounds, deref(res.Lost), res.Late)
		if res.FromSend != nil {
			fmt.Fprintf(w, "from send   %s\n", latLine(*res.FromSend))
		}
	}
	if cfg.Workload == WorkLock {
		fmt.Fprintf(w, "exclusion   %d violations\n", deref(res.Violations))
	}
	if len(res.Errors) == 0 {
		fmt.Fprintf(w, "errors      none\n")
	} else {
		keys := make([]string, 0, len(res.Errors))
		for k := range res.Errors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "errors      %d × %s\n", res.Errors[k], k)
		}
	}
	fmt.Fprintf(w, "set-up      %.2f s, clean-up %.2f s\n", res.SetupS, res.CleanupS)
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
