// Command proxyscale measures the proxy tier at scale (docs/proxy.md,
// issue 15): it starts a 3-member zkraft ensemble with proxy ports on
// loopback and
//
//  1. measures the leader's CPU with no sessions, then with -cpu-sessions
//     idle sessions straight to the members, then with as many through
//     -proxies proxies (its keep-alive cost), and the resident memory per
//     idle session on the members and on the proxies;
//  2. opens -sessions sessions through the proxies from -loaders load
//     processes, holds them for -hold (counting every session lost: an
//     expiry, or no address taking it back within its timeout), then has
//     every session set a getData watch on one znode, writes it, and
//     counts the notifications and their latency from the write's
//     acknowledgement;
//  3. kills one proxy (SIGKILL) and counts the sessions lost and those that
//     reconnected elsewhere with their id and password; with -kill-member,
//     then kills the follower most proxies use, whose proxies reattach
//     their sessions on the other members (docs/proxy.md, Upstream loss);
//  4. with -zk, measures Apache ZooKeeper 3.8's resident memory per idle
//     session the same way (the same load processes, -cpu-sessions
//     sessions on a standalone server).
//
// Load process i dials from 127.0.0.(2+i) (dialFrom), as clients on
// several hosts would: from one address, 100,000 connections crowd its
// ephemeral ports and each connect costs milliseconds of kernel CPU
// (-one-source shows it).
//
// It asserts nothing; it prints figures and the load average. Bounded: a
// load process and a proxy each hold under 15,000 sessions (the open-file
// limit is about 20,000), every wait has a deadline, every process it
// started is stopped at the end.
//
//	go run ./scripts/proxyscale -sessions 10000 -proxies 6 -loaders 2 -hold 1m
//	go run ./scripts/proxyscale -sessions 20000 -proxies 6 -loaders 2 -hold 1m -watch-only
//	go run ./scripts/proxyscale -sessions 100000 -cpu-sessions 10000 -proxies 7 -loaders 7 -hold 10m -zk
package main

import (
	"errors"
	"flag"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zkraft/zkraft/internal/fourlw"
	xproc "github.com/zkraft/zkraft/internal/proc"
	"github.com/zkraft/zkraft/jute"
)

// perProcess is the most sessions one load process or proxy holds.
const perProcess = 15000

func main() {
	load := flag.Bool("load", false, "run as a load process (internal)")
	addrs := flag.String("addrs", "", "load: comma-separated addresses to spread sessions over")
	sessions := flag.Int("sessions", 2000, "sessions held through the proxies in the scale phase")
	cpuSessions := flag.Int("cpu-sessions", 0, "idle sessions in the direct and proxied CPU windows (default: -sessions, at most 10,000)")
	proxies := flag.Int("proxies", 6, "proxies")
	loaders := flag.Int("loaders", 2, "load processes")
	idle := flag.Duration("idle", 20*time.Second, "each CPU window")
	hold := flag.Duration("hold", time.Minute, "how long the scale phase holds its sessions before the watch")
	timeout := flag.Duration("session-timeout", 10*time.Second, "the sessions' timeout")
	bin := flag.String("zkraft", "", "zkraft binary (default: built into the work directory)")
	proxiedFirst := flag.Bool("proxied-first", false, "the proxied CPU window before the direct one (a member's memory, once grown, stays: alternate the order)")
	withZK := flag.Bool("zk", false, "also measure Apache ZooKeeper 3.8's memory per idle session (Debian zookeeper jar)")
	handshakes := flag.Int("handshakes", 64, "handshakes in flight per load process while the sessions open")
	single := flag.Bool("single-handshakes", false, "start the members with --single-handshakes (each proxied handshake its own proposal, as before the session batcher)")
	killMember := flag.Bool("kill-member", false, "after the proxy's kill, kill (SIGKILL) the follower most proxies use, and count the sessions lost")
	ephemerals := flag.Int("ephemerals", 1000, "sessions per load process in the scale phase that each create an ephemeral (counted after the kills)")
	watches := flag.Int("watches", 64, "getData watches in flight per load process in the watch phase (each goes up to the cell)")
	perfOut := flag.String("perf", "", "record the whole machine with perf (perf record -a -g) from a second before the watch's write to its last notification, into this file")
	watchOnly := flag.Bool("watch-only", false, "skip the CPU windows (phase 1) and the kills (phase 3): open the sessions, hold them, measure the watch")
	killOnly := flag.Bool("kill-only", false, "skip the CPU windows (phase 1) and the watch: open the sessions, hold them, kill a proxy (and with -kill-member a member)")
	source := flag.String("source", "", "load: the local address to dial from (internal: each load process has its own loopback address)")
	oneSource := flag.Bool("one-source", false, "every load process dials from 127.0.0.1, as before 2026-12-02 06:40 (then 100,000 connections share one address's 28,232 ephemeral ports and each connect spends milliseconds in the kernel's port search: docs/proxy.md)")
	proxyProcs := flag.Int("proxy-procs", 0, "GOMAXPROCS of each proxy (0: Go's default, the machine's cores)")
	loadProcs := flag.Int("load-procs", 0, "GOMAXPROCS of each load process (0: Go's default, the machine's cores)")
	naive := flag.Bool("naive-reconnect", false, "load sessions reconnect as this script's did before 2026-12-02 (not as ZooKeeper's clients): the next address in one fixed order, at once, a 30 s handshake deadline, 100 ms after a failure; to show what a burst onto one proxy does")
	flag.Parse()
	if *naive {
		os.Setenv("PROXYSCALE_NAIVE", "1") // the load processes inherit it
	}
	if *load {
		if *source != "" {
			if err := dialFrom(*source); err != nil {
				log.Fatal(err)
			}
		}
		runLoad(strings.Split(*addrs, ","), *sessions, *timeout, *handshakes, *ephemerals, *watches)
		return
	}
	if *cpuSessions <= 0 {
		*cpuSessions = min(*sessions, 10000)
	}
	biggest := max(*sessions, *cpuSessions)
	if ceilDiv(biggest, max(*loaders, 1)) > perProcess || ceilDiv(biggest, max(*proxies, 1)) > perProcess || ceilDiv(*cpuSessions, 3) > perProcess {
		log.Fatalf("proxyscale: keep each load process, proxy and member under %d sessions (the open-file limit is about 20,000): more -loaders or -proxies", perProcess)
	}
	c := &cfg{sessions: *sessions, cpuSessions: *cpuSessions, proxies: *proxies, loaders: *loaders, idle: *idle, hold: *hold, timeout: *timeout, bin: *bin, proxiedFirst: *proxiedFirst, zk: *withZK, killMember: *killMember, handshakes: *handshakes, ephemerals: *ephemerals, watches: *watches, single: *single, watchOnly: *watchOnly, killOnly: *killOnly, oneSource: *oneSource, proxyProcs: *proxyProcs, loadProcs: *loadProcs, perf: *perfOut}
	if err := c.run(); err != nil {
		log.Fatal(err)
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

type cfg struct {
	sessions, cpuSessions, proxies, loaders int
	handshakes, ephemerals, watches         int
	// proxyProcs and loadProcs are the proxies' and the load processes'
	// GOMAXPROCS, 0 for Go's default (withProcs).
	proxyProcs, loadProcs                           int
	idle, hold, timeout                             time.Duration
	bin                                             string
	proxiedFirst, zk, killMember, single, watchOnly bool
	perf                                            string // perf record's output over the watch (-perf)
	killOnly, oneSource                             bool
}

// withProcs runs start with GOMAXPROCS set to n in the environment the
// child inherits (n 0: as it is), and restores it.
func withProcs[T any](n int, start func() (T, error)) (T, error) {
	if n <= 0 {
		return start()
	}
	old, had := os.LookupEnv("GOMAXPROCS")
	os.Setenv("GOMAXPROCS", strconv.Itoa(n))
	defer func() {
		if had {
			os.Setenv("GOMAXPROCS", old)
		} else {
			os.Unsetenv("GOMAXPROCS")
		}
	}()
	return start()
}

// proc is a child process (internal/proc).
type proc = xproc.Proc

func fourLetter(addr, word string) string {
	s, _ := fourlw.Ask(addr, word, 5*time.Second)
	return s
}

// dialer dials the load sessions' connections: from 127.0.0.1 unless
// dialFrom gave it a source address.
var dialer net.Dialer

// dialFrom makes dialer dial from ip (a loopback address of its own per
// load process), its port chosen at connect time
// (IP_BIND_ADDRESS_NO_PORT), so that one source port serves connections
// to different destinations as an unbound connect's does.
//
// Why: all 100,000 sessions dialled from 127.0.0.1, whose ephemeral
// ports (32768-60999, 28,232) they shared, about 3.5 connections a port.
// A connect then searches that range for a port whose 4-tuple is free
// (the kernel's __inet_hash_connect and __inet_check_established), and
// at that density the search took 56% of both cores during the
// reconnect burst after a proxy kill (perf record -a, 2026-12-02 06:21):
// the machine made about 300 connects a second, members and proxies sat
// at 2 to 4% of a core with nothing to do, and the sessions expired
// waiting for their clients' connect calls. Real clients come from many
// hosts; a source address per load process gives each its own ports.
func dialFrom(ip string) error {
	a := net.ParseIP(ip)
	if a == nil {
		return errors.New("proxyscale: -source " + ip + " is not an address")
	}
	dialer.LocalAddr = &net.TCPAddr{IP: a}
	dialer.Control = func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}
	return nil
}

// handshake connects and sends req, within d; the response, whose
// session id 0 means expired.
func handshake(addr string, req *jute.ConnectRequest, d time.Duration) (net.Conn, *jute.ConnectResponse, error) {
	dl := dialer
	dl.Timeout = min(d, 5*time.Second)
	nc, err := dl.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	nc.SetDeadline(time.Now().Add(d))
	if _, err := nc.Write(jute.AppendFrame(nil, req)); err != nil {
		nc.Close()
		return nil, nil, err
	}
	var lenBuf [4]byte
	if _, err := io.ReadFull(nc, lenBuf[:]); err != nil {
		nc.Close()
		return nil, nil, err
	}
	body := make([]byte, int(lenBuf[0])<<24|int(lenBuf[1])<<16|int(lenBuf[2])<<8|int(lenBuf[3]))
	if _, err := io.ReadFull(nc, body); err != nil {
		nc.Close()
		return nil, nil, err
	}
	resp := new(jute.ConnectResponse)
	if err := jute.Unmarshal(body, resp); err != nil {
		nc.Close()
		return nil, nil, err
	}
	if req.SessionID == 0 && resp.SessionID == 0 {
		nc.Close()
		return nil, nil, errors.New("connect refused")
	}
	nc.SetDeadline(time.Time{}) // the session sets its own (load.go); a passed one would refuse its pings
	return nc, resp, nil
}
