package main

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
)

// pprofEnv names the environment variable that, when set to an address,
// makes serve (and proxy) expose Go's profiler (net/http/pprof) there: a debugging aid
// for performance work (docs/performance.md), off unless set. It is an
// environment variable rather than a flag so that a harness that starts
// the binary with a fixed command line (scripts/sidebyside) can turn it on.
const pprofEnv = "ZKRAFT_PPROF_ADDR"

// startPprof serves the profiles on addr; the mutex and block profiles
// sample a small fraction of events.
func startPprof(addr string, log *slog.Logger) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Warn("pprof not started", "addr", addr, "err", err)
		return
	}
	runtime.SetMutexProfileFraction(100)
	runtime.SetBlockProfileRate(100000) // one blocking event per 100 µs blocked
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info("serving pprof", "addr", ln.Addr().String())
	go http.Serve(ln, mux)
}
