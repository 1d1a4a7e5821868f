package operator

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Version is what zkraft reports as its ZooKeeper version.
const Version = "3.9.3-zkraft, built on unknown"

// NotServing is ZooKeeper's reply to most words while it has no quorum.
const NotServing = "This ZooKeeper instance is not currently serving requests\n"

// IsWord says whether the first four bytes of a connection are a
// four-letter word rather than the length of a ConnectRequest.
func (r *Registry) IsWord(w string) bool {
	_, ok := r.ByWord(w)
	return ok
}

// enabled says whether 4lw.commands.whitelist (its words, or "*") lets w
// run.
func enabled(whitelist []string, w string) bool {
	for _, e := range whitelist {
		if e == "*" || e == w {
			return true
		}
	}
	return false
}

// Word is the answer to the four-letter word w (IsWord) as ZooKeeper's
// NIOServerCnxn.checkFourLetterWord gives it: plain text (ruok, isro and
// gtmk end without a newline), the whitelist's refusal for a word it does
// not list, NotServing for one that needs a serving member without one. A
// word that takes an argument (stmk) reads it from arg; ok is false when
// it does not come, and the word is then not answered. m is the cell of
// the port the word came in on.
func (r *Registry) Word(w string, whitelist []string, arg io.Reader, m Member) (out []byte, ok bool) {
	cmd, known := r.ByWord(w)
	if !known || !enabled(whitelist, w) {
		return []byte(w + " is not executed because it is not in the whitelist.\n"), true
	}
	a := make([]byte, cmd.Arg)
	if _, err := io.ReadFull(arg, a); err != nil {
		return nil, false
	}
	if cmd.NeedsServing(true) && !m.Serving() {
		return []byte(NotServing), true
	}
	return []byte(cmd.Text(m, a)), true
}

// DefaultLinger is how long Answer waits, by default, for the client of an
// answered four-letter word to close its side. A client that reads the
// answer closes at once; one that neither reads nor closes holds the
// connection's goroutine this long, no longer.
const DefaultLinger = 5 * time.Second

const (
	// answerWriteTimeout bounds the write of the answer to a client that
	// does not read it.
	answerWriteTimeout = 30 * time.Second
	// answerDrainLimit bounds what is read and dropped after the word.
	answerDrainLimit = 64 << 10
)

// Answer writes a four-letter word's answer to nc and ends the connection
// output first, as ZooKeeper's closeSock does: the answer, then a FIN (on
// a TLS connection a close_notify, then the FIN); sent is called once the
// answer is written. ZooKeeper closes the socket right after; when the
// client has sent more than the word (the newline of `echo ruok | nc host
// 2181`) that close makes Linux send a reset, and a client that sees the
// reset before it reads (OpenBSD nc polls, gets an error and drops the
// socket) loses the answer. So what the client still sends is read and
// dropped until it closes its side, at most 64 KiB for at most linger.
// The caller closes nc after.
//
// Nothing else may write to nc meanwhile.
func Answer(nc net.Conn, out []byte, linger time.Duration, sent func()) {
	nc.SetWriteDeadline(time.Now().Add(answerWriteTimeout))
	if _, err := nc.Write(out); err != nil {
		return
	}
	sent()
	if err := closeWrite(nc); err != nil {
		return
	}
	nc.SetReadDeadline(time.Now().Add(linger))
	io.CopyN(io.Discard, nc, answerDrainLimit)
}

// closeWrite shuts down the sending side of nc: a TLS connection sends its
// close_notify, then the TCP connection under it (or nc itself) its FIN.
func closeWrite(nc net.Conn) error {
	if tc, ok := nc.(*tls.Conn); ok {
		if err := tc.CloseWrite(); err != nil {
			return err
		}
		nc = tc.NetConn()
	}
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// writeSrvr writes srvr (and, with clients, stat), as ZooKeeper's
// StatCommand does.
func writeSrvr(b *strings.Builder, m Member, clients bool) {
	f := m.Figures()
	fmt.Fprintf(b, "Zookeeper version: %s\n", Version)
	if clients {
		b.WriteString("Clients:\n")
		for _, ci := range m.Connections() {
			b.WriteString(connLine(ci, false))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "Latency min/avg/max: %d/%s/%d\n", f.MinLat, JavaDouble(f.AvgLat), f.MaxLat)
	fmt.Fprintf(b, "Received: %d\n", f.Received)
	fmt.Fprintf(b, "Sent: %d\n", f.Sent)
	fmt.Fprintf(b, "Connections: %d\n", f.Connections)
	fmt.Fprintf(b, "Outstanding: %d\n", f.Outstanding)
	fmt.Fprintf(b, "Zxid: 0x%x\n", f.Zxid)
	fmt.Fprintf(b, "Mode: %s\n", f.Mode)
	fmt.Fprintf(b, "Node count: %d\n", f.NodeCount)
	if f.Mode == "leader" {
		fmt.Fprintf(b, "Proposal sizes last/min/max: %s\n", proposalSizes(f.Proposals))
	}
}

func proposalSizes(z Sizes) string {
	if z.Last == 0 {
		return "-1/-1/-1"
	}
	return fmt.Sprintf("%d/%d/%d", z.Last, z.Min, z.Max)
}

// connLine formats a connection as ZooKeeper's
// ServerCnxn.dumpConnectionInfo: brief for stat, full for cons.
func connLine(ci Connection, full bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, " /%s[%d](queued=%d,recved=%d,sent=%d", ci.Remote, ci.Interest, ci.Queued, ci.Received, ci.Sent)
	if full && ci.HasSession {
		fmt.Fprintf(&b, ",sid=%s,lop=%s,est=%d,to=%d", hexID(ci.Session), ci.LastOp, ci.Established, ci.Timeout)
		if ci.LastCxid >= 0 {
			fmt.Fprintf(&b, ",lcxid=0x%x", ci.LastCxid)
		}
		fmt.Fprintf(&b, ",lzxid=0x%x,lresp=%d,llat=%d,minlat=%d,avglat=%d,maxlat=%d",
			uint64(ci.LastZxid), ci.LastResponse, ci.LastLatency, ci.MinLat, ci.AvgLat, ci.MaxLat)
	}
	b.WriteString(")\n")
	return b.String()
}

// valueText formats a value of conf, envi or mntr as ZooKeeper prints it.
func valueText(v any) string {
	switch v := v.(type) {
	case float64:
		return JavaDouble(v)
	default:
		return fmt.Sprint(v)
	}
}

// JavaDouble formats v as Java's Double.toString does for ordinary values:
// at least one digit after the point.
func JavaDouble(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if strings.IndexByte(s, '.') >= 0 {
		return s
	}
	return s + ".0"
}

// confPairs are conf's keys and values, in ZooKeeper's order.
func confPairs(m Member) Object {
	c := m.Conf()
	dsize, lsize := m.DirSizes()
	out := Object{
		{"clientPort", c.ClientPort},
		{"secureClientPort", c.SecureClientPort},
		{"dataDir", c.DataDir},
		{"dataDirSize", dsize},
		{"dataLogDir", c.DataLogDir},
		{"dataLogSize", lsize},
		{"tickTime", c.TickTime},
		{"maxClientCnxns", c.MaxClientCnxns},
		{"minSessionTimeout", c.MinSessionTimeout},
		{"maxSessionTimeout", c.MaxSessionTimeout},
		{"clientPortListenBacklog", -1},
		{"serverId", c.ServerID},
	}
	if e := c.Ensemble; e != nil {
		peerType := 0
		if e.Observer {
			peerType = 1
		}
		out = append(out,
			KV{"initLimit", 10}, KV{"syncLimit", 5}, KV{"electionAlg", 3},
			KV{"electionPort", e.ElectionPort}, KV{"quorumPort", e.QuorumPort},
			KV{"peerType", peerType})
	}
	return out
}

// environment is envi: ZooKeeper's keys where they mean something for a Go
// process (go.* in place of java.*).
func environment() Object {
	host, _ := os.Hostname()
	u, _ := user.Current()
	var uname, uhome string
	if u != nil {
		uname, uhome = u.Username, u.HomeDir
	}
	wd, _ := os.Getwd()
	osVersion := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		osVersion = strings.TrimSpace(string(b))
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mb := func(n uint64) string { return strconv.FormatUint(n>>20, 10) + "MB" }
	exe, _ := os.Executable()
	return Object{
		{"zookeeper.version", Version},
		{"host.name", host},
		{"go.version", runtime.Version()},
		{"go.maxprocs", strconv.Itoa(runtime.GOMAXPROCS(0))},
		{"go.executable", exe},
		{"os.name", runtime.GOOS},
		{"os.arch", runtime.GOARCH},
		{"os.version", osVersion},
		{"user.name", uname},
		{"user.home", uhome},
		{"user.dir", wd},
		{"os.memory.free", mb(ms.HeapIdle)},
		{"os.memory.max", mb(ms.Sys)},
		{"os.memory.total", mb(ms.HeapSys)},
	}
}

// writeDump is dump: sessions by expiry bucket, ephemerals by session,
// then connections, as ZooKeeper 3.8 prints them.
func writeDump(b *strings.Builder, ss Sessions) {
	const javaDate = "Mon Jan 02 15:04:05 MST 2006"
	times := make([]time.Time, 0, len(ss.Expiry))
	for t := range ss.Expiry {
		times = append(times, t)
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	b.WriteString("SessionTracker dump:\n")
	fmt.Fprintf(b, "Session Sets (%d)/(%d):\n", len(times), ss.Count)
	for _, t := range times {
		fmt.Fprintf(b, "%d expire at %s:\n", len(ss.Expiry[t]), t.UTC().Format(javaDate))
		for _, id := range ss.Expiry[t] {
			fmt.Fprintf(b, "\t%s\n", hexID(id))
		}
	}
	b.WriteString("ephemeral nodes dump:\n")
	fmt.Fprintf(b, "Sessions with Ephemerals (%d):\n", len(ss.Owners))
	for i, o := range ss.Owners {
		fmt.Fprintf(b, "%s:\n", hexID(o))
		for _, p := range ss.Ephemerals[i] {
			fmt.Fprintf(b, "\t%s\n", p)
		}
	}
	b.WriteString("Connections dump:\n")
	fmt.Fprintf(b, "Connections Sets (%d)/(%d):\n", len(ss.Conns), len(ss.Conns))
	for _, c := range ss.Conns {
		fmt.Fprintf(b, "1 expire at %s:\n\tip: /%s sessionId: %s\n", c.Expire.UTC().Format(javaDate), c.Remote, hexID(c.Session))
	}
}
