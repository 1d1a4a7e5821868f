package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zkraft/zkraft/proxy"
)

const usageProxy = `usage: zkraft proxy --members host:port,... [flags]

Serves ZooKeeper clients and forwards their sessions to the members'
proxy ports (zkraft --proxy-port). It holds no data; see docs/proxy.md.
`

// proxyConfig builds a proxy's configuration from its flags.
func proxyConfig(args []string) (proxy.Config, error) {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usageProxy); fs.PrintDefaults() }
	var (
		members    = fs.String("members", "", "comma-separated host:port of the members' proxy ports (required)")
		clientAddr = fs.String("client-addr", "127.0.0.1:2181", "client listener address")
		clientPort = fs.Int("client-port", 0, "client port on the client address's host (overrides its port)")
		name       = fs.String("name", "", "the proxy's name in the members' logs (default host name and client address)")
		keepAlive  = fs.Duration("keep-alive-interval", time.Second, "how often the proxy sends its sessions' keep-alive batch")
		maxPerIP   = fs.Int("max-client-cnxns", 0, "connections allowed per client IP (0: no limit)")
		maxCnxns   = fs.Int("max-cnxns", 0, "connections allowed in all (0: no limit; keep it below the open-file limit)")
		maxBuffer  = fs.Int("jute-maxbuffer", 0xfffff, "largest request accepted, in bytes (no more than the members')")
		logLevel   = fs.String("log-level", "info", "debug, info, warn or error")
		fourLW     = fs.String("4lw", "", "comma-separated four-letter words the proxy answers, * for all (default srvr; 4lw.commands.whitelist)")
		adminAddr  = fs.String("admin-addr", "", "serve the AdminServer's /commands about the proxy on this address (default: none)")
		metrics    = fs.String("metrics-addr", "", "serve Prometheus /metrics about the proxy on this address (default: none)")
		upVersion  = fs.Int("upstream-version", 0, "newest upstream protocol version to speak (0: this build's newest; 1: no shared watches)")
		fanOut     = fs.Int("fanout-workers", 0, "goroutines at most that write one shared watch's notifications (0: GOMAXPROCS)")
	)
	if err := fs.Parse(args); err != nil {
		return proxy.Config{}, err
	}
	if fs.NArg() > 0 {
		return proxy.Config{}, fmt.Errorf("proxy: unexpected arguments %q", fs.Args())
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return proxy.Config{}, fmt.Errorf("--log-level: %w", err)
	}
	cfg := proxy.Config{
		ClientAddr:        *clientAddr,
		Name:              *name,
		KeepAliveInterval: *keepAlive,
		MaxClientCnxns:    *maxPerIP,
		MaxCnxns:          *maxCnxns,
		MaxBuffer:         *maxBuffer,
		AdminAddr:         *adminAddr,
		MetricsAddr:       *metrics,
		UpstreamVersion:   int32(*upVersion),
		FanOutWorkers:     *fanOut,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	}
	for _, w := range strings.Split(*fourLW, ",") {
		if w = strings.TrimSpace(w); w != "" {
			cfg.FourLetterWords = append(cfg.FourLetterWords, w)
		}
	}
	for _, m := range strings.Split(*members, ",") {
		if m = strings.TrimSpace(m); m != "" {
			cfg.Members = append(cfg.Members, m)
		}
	}
	if *clientPort > 0 {
		host, _, err := net.SplitHostPort(cfg.ClientAddr)
		if err != nil {
			return proxy.Config{}, fmt.Errorf("--client-addr %q: %w", cfg.ClientAddr, err)
		}
		cfg.ClientAddr = net.JoinHostPort(host, strconv.Itoa(*clientPort))
	}
	return cfg, cfg.Validate()
}

func runProxy(args []string) error {
	cfg, err := proxyConfig(args)
	if err != nil {
		return err
	}
	if addr := os.Getenv(pprofEnv); addr != "" {
		startPprof(addr, cfg.Logger)
	}
	p, err := proxy.New(cfg)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	got := <-sig
	cfg.Logger.Info("stopping", "signal", got.String())
	return p.Close()
}
