// Command zkraft is the one binary: serve (the default), and later import,
// export, bench and operator commands.
//
//	zkraft [serve] [--config zoo.cfg] [--client-addr 127.0.0.1:2181] [--data-dir ./zkraft-data] ...
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/zkraft/zkraft/bench"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/server"
)

func main() {
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(args)
	case "version":
		fmt.Println(server.Version)
	case "bench":
		err = bench.Main(args)
	case "import":
		err = runImport(args)
	case "export":
		err = runExport(args)
	default:
		err = fmt.Errorf("unknown command %q (commands: serve, version)", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "zkraft:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var (
		configPath = fs.String("config", "", "Apache ZooKeeper zoo.cfg to read (flags given explicitly override it)")
		clientAddr = fs.String("client-addr", "127.0.0.1:2181", "client listener address")
		dataDir    = fs.String("data-dir", "./zkraft-data", "data directory")
		logDir     = fs.String("data-log-dir", "", "directory for the Raft log (default: data dir)")
		raftAddr   = fs.String("raft-addr", "127.0.0.1:2888", "Raft address of this member")
		tick       = fs.Duration("tick-time", 2*time.Second, "ZooKeeper tickTime")
		minTO      = fs.Duration("min-session-timeout", 0, "minimum session timeout (default 2 ticks)")
		maxTO      = fs.Duration("max-session-timeout", 0, "maximum session timeout (default 20 ticks)")
		maxCnxns   = fs.Int("max-client-cnxns", 0, "connections allowed per client IP (0: no limit)")
		maxBuffer  = fs.Int("jute-maxbuffer", 0xfffff, "largest request accepted, in bytes (ZooKeeper's jute.maxbuffer)")
		blockCache = fs.Int64("block-cache-size", raftsm.DefaultBlockCacheBytes, "bytes of the state store's block cache (Pebble)")
		readMode   = fs.String("read-mode", "linearizable", "linearizable or sequential (ZooKeeper's own consistency)")
		extended   = fs.Bool("extended-types", false, "enable TTL nodes (zookeeper.extendedTypesEnabled)")
		superDig   = fs.String("super-digest", "", "super user digest, user:base64(sha1(user:password)) (zookeeper.DigestAuthenticationProvider.superDigest)")
		contCheck  = fs.Duration("container-check-interval", time.Minute, "how often empty containers and expired TTL nodes are removed (znode.container.checkIntervalMs)")
		enforceQ   = fs.Bool("enforce-quota", false, "fail writes over hard quota limits with QUOTAEXCEEDED (zookeeper.enforceQuota)")
		fourLW     = fs.String("4lw", "", "comma-separated four-letter words to enable, * for all (default srvr)")
		logLevel   = fs.String("log-level", "info", "debug, info, warn or error")
		join       = fs.Bool("join", false, "start as a new member of a running ensemble that already added it (reconfig -add)")
		reconfig   = fs.Bool("reconfig-enabled", false, "allow the reconfig op (ZooKeeper's reconfigEnabled)")
		myID       = fs.Uint64("myid", 0, "this member's id in the ensemble (default: dataDir/myid when the config has server.N lines)")
	)
	ops := defineOpsFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	cfg := server.Config{Logger: logger}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *configPath != "" {
		f, err := os.Open(*configPath)
		if err != nil {
			return err
		}
		ignored, err := applyZooCfg(f, &cfg)
		f.Close()
		if err != nil {
			return err
		}
		sort.Strings(ignored)
		if len(ignored) > 0 {
			logger.Info("zoo.cfg keys not used yet", "keys", ignored)
		}
	}
	override := func(name string, apply func()) {
		if set[name] || *configPath == "" {
			apply()
		}
	}
	override("client-addr", func() { cfg.ClientAddr = *clientAddr })
	override("data-dir", func() { cfg.DataDir = *dataDir })
	override("data-log-dir", func() { cfg.LogDir = *logDir })
	override("tick-time", func() { cfg.TickTime = *tick })
	override("min-session-timeout", func() { cfg.MinSessionTimeout = *minTO })
	override("max-session-timeout", func() { cfg.MaxSessionTimeout = *maxTO })
	override("max-client-cnxns", func() { cfg.MaxClientCnxns = *maxCnxns })
	if cfg.DataDir == "" {
		cfg.DataDir = *dataDir
	}
	cfg.RaftAddr = *raftAddr
	if len(cfg.Members) > 0 {
		if *myID != 0 {
			cfg.ReplicaID = *myID
		} else {
			id, err := readMyID(cfg.DataDir)
			if err != nil {
				return fmt.Errorf("the config lists an ensemble, so this member needs its id: %w", err)
			}
			cfg.ReplicaID = id
		}
		for _, m := range cfg.Members {
			if m.ID == cfg.ReplicaID && m.ClientAddr != "" && !set["client-addr"] {
				cfg.ClientAddr = m.ClientAddr // from the member's server.N line
			}
		}
	} else if *myID != 0 {
		cfg.ReplicaID = *myID
	}
	cfg.MaxBuffer = *maxBuffer
	cfg.BlockCacheBytes = *blockCache
	cfg.ExtendedTypes = *extended
	cfg.Join = *join
	if set["reconfig-enabled"] {
		cfg.ReconfigEnabled = *reconfig
	}
	cfg.SuperDigest = *superDig
	cfg.ContainerCheckInterval = *contCheck
	cfg.EnforceQuota = *enforceQ
	if *fourLW != "" {
		cfg.FourLetterWords = strings.Split(*fourLW, ",")
	}
	switch *readMode {
	case "linearizable":
		cfg.ReadMode = server.ReadLinearizable
	case "sequential":
		cfg.ReadMode = server.ReadSequential
	default:
		return errors.New("--read-mode must be linearizable or sequential")
	}

	ops.apply(&cfg, set, *configPath != "")
	if err := checkServeImported(&cfg, logger); err != nil {
		return err
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	got := <-sig
	logger.Info("stopping", "signal", got.String())
	return srv.Close()
}
