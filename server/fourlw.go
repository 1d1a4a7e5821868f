package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zkraft/zkraft/raftsm"
)

// Version is what zkraft reports as its ZooKeeper version.
const Version = "3.9.3-zkraft, built on unknown"

// isFourLetterWord says whether the first four bytes of a connection are
// a four-letter word rather than the length of a ConnectRequest.
func isFourLetterWord(w string) bool {
	_, ok := commandByWord(w)
	return ok
}

func (s *Server) fourLetterWordEnabled(w string) bool {
	for _, e := range s.cfg.FourLetterWords {
		if e == "*" || e == w {
			return true
		}
	}
	return false
}

// notServing is ZooKeeper's reply to most words while it has no quorum.
const notServing = "This ZooKeeper instance is not currently serving requests\n"

// fourLetterWord answers a four-letter word (the commands registry's text)
// and closes the connection, as ZooKeeper's
// NIOServerCnxn.checkFourLetterWord does: the reply is plain text; ruok,
// isro and gtmk end without a newline. A word that takes an argument (stmk)
// and does not get it is not answered. answerAndClose ends the connection.
func (c *conn) fourLetterWord(w string) {
	s := c.srv
	s.stats.received.Add(1)
	c.st.recved.Add(1)
	c.log().Debug("four-letter word", "word", w)
	cmd, _ := commandByWord(w)
	out := w + " is not executed because it is not in the whitelist.\n"
	if s.fourLetterWordEnabled(w) {
		arg := make([]byte, cmd.arg)
		if _, err := io.ReadFull(c.nc, arg); err != nil {
			return
		}
		out = notServing
		if !cmd.needsServing(true) || c.cell.serving() {
			// The word answers for the cell of the port it came in on.
			out = cmd.text(&cellView{Server: s, cell: c.cell}, arg)
		}
	}
	c.answerAndClose([]byte(out))
}

// fourLetterLinger bounds how long the connection of an answered
// four-letter word waits for the client to close its side. A client that
// reads the answer closes at once; one that neither reads nor closes holds
// the connection's goroutine this long, no longer. A variable for tests.
var fourLetterLinger = 5 * time.Second

const (
	// fourLetterWriteTimeout bounds the write of the answer to a client
	// that does not read it.
	fourLetterWriteTimeout = handshakeTimeout
	// fourLetterDrainLimit bounds what is read and dropped after the word.
	fourLetterDrainLimit = 64 << 10
)

// answerAndClose writes a four-letter word's answer and ends the connection
// output first, as ZooKeeper's closeSock does: the answer, then a FIN (on
// the secure port a TLS close_notify, then the FIN). ZooKeeper closes the
// socket right after; when the client has sent more than the word (the
// newline of `echo ruok | nc host 2181`) that close makes Linux send a
// reset, and a client that sees the reset before it reads (OpenBSD nc polls,
// gets an error and drops the socket) loses the answer. So what the client
// still sends is read and dropped until it closes its side, at most
// fourLetterDrainLimit bytes for at most fourLetterLinger, and only then is
// the socket closed.
//
// It runs on the handshake's goroutine and writes directly: nothing else
// writes to a connection that has no session.
func (c *conn) answerAndClose(out []byte) {
	defer c.close()
	c.nc.SetWriteDeadline(time.Now().Add(fourLetterWriteTimeout))
	if _, err := c.nc.Write(out); err != nil {
		return
	}
	c.srv.stats.sent.Add(1)
	c.st.sent.Add(1)
	if err := closeWrite(c.nc); err != nil {
		return
	}
	c.nc.SetReadDeadline(time.Now().Add(fourLetterLinger))
	io.CopyN(io.Discard, c.nc, fourLetterDrainLimit)
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
func (s *cellView) writeSrvr(b *strings.Builder, clients bool) {
	f := s.figures()
	fmt.Fprintf(b, "Zookeeper version: %s\n", Version)
	if clients {
		b.WriteString("Clients:\n")
		for _, ci := range s.connInfos() {
			b.WriteString(ci.line(false))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "Latency min/avg/max: %d/%s/%d\n", f.minLat, javaDouble(f.avgLat), f.maxLat)
	fmt.Fprintf(b, "Received: %d\n", f.received)
	fmt.Fprintf(b, "Sent: %d\n", f.sent)
	fmt.Fprintf(b, "Connections: %d\n", f.connections)
	fmt.Fprintf(b, "Outstanding: %d\n", f.outstanding)
	fmt.Fprintf(b, "Zxid: 0x%x\n", f.zxid)
	fmt.Fprintf(b, "Mode: %s\n", f.mode)
	fmt.Fprintf(b, "Node count: %d\n", f.nodeCount)
	if f.mode == "leader" {
		fmt.Fprintf(b, "Proposal sizes last/min/max: %s\n", s.proposalSizes())
	}
}

func (s *cellView) proposalSizes() string {
	c := &s.counters
	if c.proposals.last.Load() == 0 {
		return "-1/-1/-1"
	}
	return fmt.Sprintf("%d/%d/%d", c.proposals.last.Load(), c.proposals.min.Load(), c.proposals.max.Load())
}

// conns lists the live connections.
func (s *cellView) conns() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		if c.cell == s.cell {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].owner < out[j].owner })
	return out
}

// connInfo is one connection as cons and the connections command show it.
type connInfo struct {
	remote     string
	interest   int
	queued     int
	recved     int64
	sent       int64
	session    int64
	lop        string
	est        int64
	timeout    int64
	lcxid      int64
	lzxid      int64
	lresp      int64
	llat       int64
	minlat     int64
	avglat     int64
	maxlat     int64
	hasSession bool
	secure     bool
}

func (s *cellView) connInfos() []connInfo {
	var out []connInfo
	for _, c := range s.conns() {
		ci := connInfo{
			remote:  c.nc.RemoteAddr().String(),
			queued:  c.queued(),
			recved:  c.st.recved.Load(),
			sent:    c.st.sent.Load(),
			session: c.sessionID,
			est:     c.st.established.UnixMilli(),
			timeout: c.timeout.Milliseconds(),
			secure:  c.secure,
		}
		if c.sessionID != 0 {
			ci.hasSession, ci.interest = true, 1
			c.st.mu.Lock()
			ci.lop, ci.lcxid, ci.lzxid, ci.lresp, ci.llat = c.st.mu.lop, c.st.mu.lcxid, c.st.mu.lzxid, c.st.mu.lresp, c.st.mu.llat
			var cnt, sum int64
			ci.minlat, _, ci.maxlat, cnt, sum = c.st.mu.lat.get()
			c.st.mu.Unlock()
			if cnt > 0 {
				ci.avglat = sum / cnt
			}
		}
		out = append(out, ci)
	}
	return out
}

// line formats a connection as ZooKeeper's ServerCnxn.dumpConnectionInfo:
// brief for stat, full for cons.
func (ci connInfo) line(full bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, " /%s[%d](queued=%d,recved=%d,sent=%d", ci.remote, ci.interest, ci.queued, ci.recved, ci.sent)
	if full && ci.hasSession {
		fmt.Fprintf(&b, ",sid=%s,lop=%s,est=%d,to=%d", hexID(ci.session), ci.lop, ci.est, ci.timeout)
		if ci.lcxid >= 0 {
			fmt.Fprintf(&b, ",lcxid=0x%x", ci.lcxid)
		}
		fmt.Fprintf(&b, ",lzxid=0x%x,lresp=%d,llat=%d,minlat=%d,avglat=%d,maxlat=%d",
			uint64(ci.lzxid), ci.lresp, ci.llat, ci.minlat, ci.avglat, ci.maxlat)
	}
	b.WriteString(")\n")
	return b.String()
}

// kv is one key and value of conf, envi or mntr, in order.
type kv struct {
	k string
	v any
}

// text formats a value as ZooKeeper prints it.
func (p kv) text() string {
	switch v := p.v.(type) {
	case float64:
		return javaDouble(v)
	default:
		return fmt.Sprint(v)
	}
}

func portOf(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return -1
	}
	return n
}

func (s *cellView) confPairs() []kv {
	c := &s.cfg
	logDir := c.LogDir
	if logDir == "" {
		logDir = c.DataDir
	}
	dsize, lsize := s.dirSizes()
	secure := -1
	if s.ops.secureLn != nil {
		secure = portOf(s.ops.secureLn.Addr().String())
	}
	var serverID uint64
	if !s.standalone() {
		serverID = c.ReplicaID
	}
	out := []kv{
		{"clientPort", portOf(s.cellAddr().String())},
		{"secureClientPort", secure},
		{"dataDir", c.DataDir},
		{"dataDirSize", dsize},
		{"dataLogDir", logDir},
		{"dataLogSize", lsize},
		{"tickTime", c.TickTime.Milliseconds()},
		{"maxClientCnxns", c.MaxClientCnxns},
		{"minSessionTimeout", c.MinSessionTimeout.Milliseconds()},
		{"maxSessionTimeout", c.MaxSessionTimeout.Milliseconds()},
		{"clientPortListenBacklog", -1},
		{"serverId", serverID},
	}
	if !s.standalone() {
		self := s.self()
		peerType := 0
		if self.Observer {
			peerType = 1
		}
		out = append(out,
			kv{"initLimit", 10}, kv{"syncLimit", 5}, kv{"electionAlg", 3},
			kv{"electionPort", portOf(self.ElectionAddr)}, kv{"quorumPort", portOf(self.RaftAddr)},
			kv{"peerType", peerType})
	}
	return out
}

// dirSizes walks the data and log directories (dirs, conf): ZooKeeper's
// figures are likewise computed on demand.
func (s *cellView) dirSizes() (data, log int64) {
	size := func(dir string) int64 {
		var n int64
		filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					n += fi.Size()
				}
			}
			return nil
		})
		return n
	}
	data = size(s.cfg.DataDir)
	if s.cfg.LogDir == "" || s.cfg.LogDir == s.cfg.DataDir {
		return data, data
	}
	return data, size(s.cfg.LogDir)
}

// environment is envi: ZooKeeper's keys where they mean something for a Go
// process (go.* in place of java.*).
func environment() []kv {
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
	return []kv{
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
func (s *cellView) writeDump(b *strings.Builder) {
	const javaDate = "Mon Jan 02 15:04:05 MST 2006"
	buckets, ids := s.cell.tracker.Deadlines()
	times := make([]time.Time, 0, len(buckets))
	for t := range buckets {
		times = append(times, t)
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	b.WriteString("SessionTracker dump:\n")
	fmt.Fprintf(b, "Session Sets (%d)/(%d):\n", len(times), ids)
	for _, t := range times {
		fmt.Fprintf(b, "%d expire at %s:\n", len(buckets[t]), t.UTC().Format(javaDate))
		for _, id := range buckets[t] {
			fmt.Fprintf(b, "\t%s\n", hexID(id))
		}
	}
	owners, paths := s.ephemeralsByOwner()
	b.WriteString("ephemeral nodes dump:\n")
	fmt.Fprintf(b, "Sessions with Ephemerals (%d):\n", len(owners))
	for i, o := range owners {
		fmt.Fprintf(b, "%s:\n", hexID(o))
		for _, p := range paths[i] {
			fmt.Fprintf(b, "\t%s\n", p)
		}
	}
	b.WriteString("Connections dump:\n")
	cs := s.conns()
	fmt.Fprintf(b, "Connections Sets (%d)/(%d):\n", len(cs), len(cs))
	for _, c := range cs {
		exp := c.st.established.Add(handshakeTimeout)
		if c.sessionID != 0 {
			if t, ok := s.cell.tracker.Deadline(c.sessionID); ok {
				exp = t
			}
		}
		fmt.Fprintf(b, "1 expire at %s:\n\tip: /%s sessionId: %s\n", exp.UTC().Format(javaDate),
			c.nc.RemoteAddr().String(), hexID(c.sessionID))
	}
}

func (s *cellView) ephemeralsByOwner() ([]int64, [][]string) {
	type res struct {
		owners []int64
		paths  [][]string
	}
	r, err := readValue(s.cell.rep, nil, localRead, func(v raftsm.View) (res, error) {
		o, p, err := v.EphemeralsByOwner()
		return res{o, p}, err
	})
	if err != nil {
		return nil, nil
	}
	return r.owners, r.paths
}

// total is mntr's watch_count: data and child watches, one per
// connection and path in each table.
func (r *registry) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, t := range r.mu.tables {
		for _, set := range t {
			n += len(set)
		}
	}
	return n
}

type sessionPaths struct {
	id    int64
	paths []string
}

type pathSessions struct {
	path string
	ids  []int64
}

// bySession is wchc: the data-table paths each session watches.
func (r *registry) bySession() []sessionPaths {
	r.mu.Lock()
	m := map[int64][]string{}
	for p, set := range r.mu.tables[tableData] {
		for c := range set {
			m[c.sessionID] = append(m[c.sessionID], p)
		}
	}
	r.mu.Unlock()
	out := make([]sessionPaths, 0, len(m))
	for id, ps := range m {
		sort.Strings(ps)
		out = append(out, sessionPaths{id, ps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// byPath is wchp: the sessions watching each data-table path.
func (r *registry) byPath() []pathSessions {
	r.mu.Lock()
	out := make([]pathSessions, 0, len(r.mu.tables[tableData]))
	for p, set := range r.mu.tables[tableData] {
		e := pathSessions{path: p}
		for c := range set {
			e.ids = append(e.ids, c.sessionID)
		}
		sort.Slice(e.ids, func(i, j int) bool { return e.ids[i] < e.ids[j] })
		out = append(out, e)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}
