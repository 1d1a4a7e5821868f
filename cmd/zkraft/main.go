// Command zkraft is the one binary:
//
//	zkraft [serve] [--config zoo.cfg] [--client-addr 127.0.0.1:2181] [--data-dir ./zkraft-data] ...
//	zkraft import ...   an Apache ZooKeeper data directory into a stopped zkraft
//	zkraft export ...   a stopped zkraft as an Apache ZooKeeper data directory
//	zkraft bench ...    a workload against ZooKeeper-compatible servers
//	zkraft cell ...     list, show, create, change or delete the fleet's cells (a member's AdminServer)
//	zkraft member ...   promote, leave or remove a member of the fleet (a member's AdminServer)
//	zkraft proxy ...    a proxy in front of members (docs/proxy.md)
//	zkraft version
//
// zkraft COMMAND -h prints a command's flags.
package main

import (
	"errors"
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
	case "cell":
		err = runCell(args, os.Stdout)
	case "member":
		err = runMember(args, os.Stdout)
	case "proxy":
		err = runProxy(args)
	default:
		err = fmt.Errorf("unknown command %q (commands: %s)", cmd, commandNames)
	}
	if err != nil {
		// One line: a library's message may have several (Pebble lists
		// each missing table on its own line).
		fmt.Fprintln(os.Stderr, "zkraft:", strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; "))
		os.Exit(1)
	}
}

func serve(args []string) error {
	cfg, notes, err := serveConfig(args, os.Getenv)
	if err != nil {
		return err
	}
	logger := cfg.Logger
	if addr := os.Getenv(pprofEnv); addr != "" {
		startPprof(addr, logger)
	}
	for _, n := range notes {
		n.log(logger)
	}
	if err := checkServeImported(&cfg, logger); err != nil {
		return err
	}
	// Before New: a signal while the member starts (its client port may
	// already be open) stops it once it has started, instead of killing
	// the process half-way.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	got := <-sig
	logger.Info("stopping", "signal", got.String())
	return srv.Close()
}

// serveConfig builds the member's configuration from the serve flags and,
// with --config, from zoo.cfg and the JVM flags (getenv is the
// environment); flags given explicitly win. The notes name the ZooKeeper
// settings that have no effect.
func serveConfig(args []string, getenv func(string) string) (server.Config, []note, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usageServe); fs.PrintDefaults() }
	var (
		configPath = fs.String("config", "", "Apache ZooKeeper zoo.cfg to read, with the -D flags of SERVER_JVMFLAGS/JVMFLAGS from the environment and from java.env or zookeeper-env.sh beside it (flags given explicitly override them)")
		clientAddr = fs.String("client-addr", "127.0.0.1:2181", "client listener address")
		dataDir    = fs.String("data-dir", "./zkraft-data", "data directory")
		logDir     = fs.String("data-log-dir", "", "directory for the Raft log (default: data dir)")
		logStore   = fs.String("raft-log-store", "auto", "Raft log store: tan, pebble, or auto (a data directory keeps the store it has, a new one gets pebble; docs/operations.md, Raft log store)")
		raftTrans  = fs.String("raft-transport", "dragonboat", "Raft transport between members: zkraft (one write per message batch, a buffered reader) or dragonboat (Dragonboat's TCP transport); same wire format, members with either talk to each other (docs/operations.md, Raft transport)")
		raftAddr   = fs.String("raft-addr", "", "Raft address of this member; a standalone member without one opens no Raft port (an ensemble takes it from its server.N line)")
		tick       = fs.Duration("tick-time", 3*time.Second, "ZooKeeper tickTime")
		minTO      = fs.Duration("min-session-timeout", 0, "minimum session timeout (default 2 ticks)")
		maxTO      = fs.Duration("max-session-timeout", 0, "maximum session timeout (default 20 ticks)")
		maxCnxns   = fs.Int("max-client-cnxns", 60, "connections allowed per client IP (0: no limit)")
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
		auditLog   = fs.String("audit-log", "", "write ZooKeeper's audit log (zookeeper.audit.enable) to this file, appending; - for stderr")
		proxyPort  = fs.Int("proxy-port", 0, "port, on the client address's host, where zkraft proxies connect (docs/proxy.md; 0: none)")
		singleHS   = fs.Bool("single-handshakes", false, "propose each proxied session's handshake on its own, not in batches (during a rolling upgrade from a version without them; docs/proxy.md)")
		electionTO = fs.Duration("election-timeout", 0, "Raft election timeout: how long a follower waits for its leader, and a leader for a quorum, before an election (default 1s; raise it on slow or shared disks; every member should use the same)")
	)
	ops := defineOpsFlags(fs)
	if err := fs.Parse(args); err != nil {
		return server.Config{}, nil, err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return server.Config{}, nil, fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	cfg := server.Config{Logger: logger}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var notes []note
	if *configPath != "" {
		zs, err := loadZooCfg(*configPath, getenv)
		if err != nil {
			return server.Config{}, nil, err
		}
		if set["data-dir"] {
			// The flag names the data directory that myid is read from.
			zs.cfg = append(zs.cfg, property{key: "dataDir", value: *dataDir})
		}
		if err := zs.apply(&cfg); err != nil {
			return server.Config{}, nil, err
		}
		notes = zs.notes
		if cfg.DataDir == "" {
			return server.Config{}, nil, fmt.Errorf("%s has no dataDir (ZooKeeper refuses it too): add one or give --data-dir", *configPath)
		}
	}
	// Flags given explicitly win; without --config every flag applies.
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
	override("jute-maxbuffer", func() { cfg.MaxBuffer = *maxBuffer })
	override("extended-types", func() { cfg.ExtendedTypes = *extended })
	override("super-digest", func() { cfg.SuperDigest = *superDig })
	override("container-check-interval", func() { cfg.ContainerCheckInterval = *contCheck })
	override("enforce-quota", func() { cfg.EnforceQuota = *enforceQ })
	if *fourLW != "" {
		cfg.FourLetterWords = strings.Split(*fourLW, ",")
	}
	if set["raft-addr"] {
		cfg.RaftAddr = *raftAddr
	}
	if len(cfg.Members) > 0 {
		if *myID != 0 {
			cfg.ReplicaID = *myID
		} else {
			id, err := readMyID(cfg.DataDir)
			if err != nil {
				return server.Config{}, nil, fmt.Errorf("the config lists an ensemble, so this member needs its id: %w", err)
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
	cfg.BlockCacheBytes = *blockCache              // zkraft's own: no zoo.cfg key
	ls, err := server.ParseLogStoreKind(*logStore) // zkraft's own too
	if err != nil {
		return server.Config{}, nil, fmt.Errorf("--raft-log-store: %w", err)
	}
	cfg.RaftLogStore = ls
	rt, err := server.ParseRaftTransportKind(*raftTrans) // zkraft's own too
	if err != nil {
		return server.Config{}, nil, fmt.Errorf("--raft-transport: %w", err)
	}
	cfg.RaftTransport = rt
	if *electionTO != 0 {
		// zkraft's own too: in RTT units, as Dragonboat takes it; the
		// heartbeat stays a tenth of it.
		if *electionTO < 100*time.Millisecond {
			return server.Config{}, nil, fmt.Errorf("--election-timeout %v: at least 100ms", *electionTO)
		}
		cfg.RTT = 10 * time.Millisecond
		cfg.ElectionRTT = uint64(*electionTO / cfg.RTT)
		cfg.HeartbeatRTT = max(cfg.ElectionRTT/10, 1)
	}
	if *proxyPort > 0 {
		// zkraft's own: no zoo.cfg key yet.
		host, _, err := net.SplitHostPort(cfg.ClientAddr)
		if err != nil {
			return server.Config{}, nil, fmt.Errorf("--proxy-port: client address %q: %w", cfg.ClientAddr, err)
		}
		cfg.ProxyAddr = net.JoinHostPort(host, strconv.Itoa(*proxyPort))
	}
	cfg.SingleHandshakes = *singleHS
	cfg.Join = *join
	if set["reconfig-enabled"] {
		cfg.ReconfigEnabled = *reconfig
	}
	switch *readMode {
	case "linearizable":
		cfg.ReadMode = server.ReadLinearizable
	case "sequential":
		cfg.ReadMode = server.ReadSequential
	default:
		return server.Config{}, nil, errors.New("--read-mode must be linearizable or sequential")
	}

	ops.apply(&cfg, set, *configPath != "")
	switch *auditLog {
	case "":
	case "-":
		cfg.AuditLog = os.Stderr
	default:
		f, err := os.OpenFile(*auditLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
		if err != nil {
			return server.Config{}, nil, fmt.Errorf("--audit-log: %w", err)
		}
		cfg.AuditLog = f // open while the process runs
	}
	cfg.Admin.WriteSnapshot = writeZooKeeperSnapshot // adminsnapshot.go
	return cfg, notes, nil
}

// commandNames are the commands main dispatches, for its error message.
const commandNames = "serve, import, export, bench, cell, member, proxy, version"

const usageServe = `usage: zkraft [serve] [flags]    run a member (the default command)
       zkraft import [flags]     read an Apache ZooKeeper data directory into a stopped zkraft
       zkraft export [flags]     write a stopped zkraft as an Apache ZooKeeper data directory
       zkraft bench [flags]      run a workload against ZooKeeper-compatible servers
       zkraft cell SUBCOMMAND    list, show, create, release, limits, move, abort, delete or purge the fleet's cells
       zkraft member SUBCOMMAND  promote, leave or remove a member of the fleet (its map and system shard)
       zkraft proxy [flags]      a proxy in front of members' --proxy-port (docs/proxy.md)
       zkraft version            print the version

zkraft COMMAND -h prints a command's flags. The flags of serve (with
--config, zoo.cfg and the JVM flags are read first and flags given
explicitly win):
`
