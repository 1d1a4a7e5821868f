package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	xproc "github.com/zkraft/zkraft/internal/proc"
	"github.com/zkraft/zkraft/jute"
)

// A load process is this program re-executed with -load. Its sessions are
// minimal Jute clients (handshake, a ping every third of the timeout, one
// getData watch on request), read by one event loop (loop.go), so a load
// process costs far less per session than a full client library. Its first -ephemerals
// sessions each create an ephemeral znode, ephemeralDir/<session id>,
// right after their handshake. It talks to its parent in lines: it prints
// "ready OPENED FAILED EPHEMERALS" once every handshake (and create) is
// done, then answers commands read from stdin:
//
//	watch PATH     every connected session sends getData(PATH, watch), at
//	               most -watches at a time (each read goes up to the
//	               cell: 100,000 at once timed out there); answers
//	               "watching N" once the replies are in (at most 3 min)
//	report NANOS   waits (at most 60 s) until every watching session got its
//	               notification, then answers "notified N of M" and
//	               "lat L1 L2 ...": each notification's arrival in µs after
//	               NANOS (Unix time: the write's acknowledgement; negative
//	               when it came first)
//	count          answers "lost L moved M expired E" (E of the L lost
//	               were told expired; the others found no address that
//	               took them back within their timeout)
//
// and at the end of stdin closes every session and answers the same.

// loadSession is one session of a load process.
type loadSession struct {
	l *loadProc
	// wmu serializes writes to the connection and guards its
	// replacement: nc while the session handshakes or reconnects (nil
	// once attached), fd while the loop has it (-1 before and after).
	wmu sync.Mutex
	nc  net.Conn
	fd  int
	to  time.Duration // the negotiated timeout
	// The loop's (loop.go), while it has the session: the bytes of a
	// frame half read, the next ping, the oldest ping unanswered (zero:
	// none), and the attachment its timers were set for (under loop.mu).
	partial  []byte
	nextPing time.Time
	pingSent time.Time
	gen      uint64
	// order is the session's own list of address indexes, as a client's
	// connect string: its first address (the one the sessions are
	// spread over), then the others shuffled (reconnect); at is the
	// position in it of the address it is connected to.
	order []int
	at    int
	// eph: the session created an ephemeral.
	eph  bool
	resp *jute.ConnectResponse
	// lastZxid is the highest zxid the session has seen (run only): a
	// reconnect carries it, and so does a setWatches.
	lastZxid int64
	// wantWatch: the watch command came; watchOK: a getData watch was
	// answered; acked: the watch command's wait was told (once).
	wantWatch atomic.Bool
	watchOK   atomic.Bool
	acked     sync.Once
	// notified is the Unix time in ns the watch's notification came, 0
	// before.
	notified atomic.Int64
	// gone: the session was lost (its run ended); its watch, if sent, is
	// never answered, and its slot is given back (watchDone).
	gone atomic.Bool
}

// watchDone counts the session's watch as answered (or never to be) and
// gives its slot back; once per session, through acked.
func (s *loadSession) watchDone() {
	s.l.watchAck.Done()
	<-s.l.watchSlots
}

type loadProc struct {
	addrs   []string
	timeout time.Duration
	lost    atomic.Int64
	expired atomic.Int64 // of lost: told expired by a server
	lostEph atomic.Int64 // of lost: sessions that had created an ephemeral
	moved   atomic.Int64
	// starved counts the times a session found its ping's answer
	// waiting in its socket after its deadline (the load process, not
	// the proxy, was late: the clients share the proxies' machine).
	starved atomic.Int64
	// resumes are how long each reconnect took, from the connection's
	// failure to the session's handshake answered elsewhere (ms).
	resumeMu sync.Mutex
	resumes  []int64
	stopped  atomic.Bool
	watchAck sync.WaitGroup
	// watchSlots bounds the watches in flight (-watches); set, like path,
	// before any wantWatch.
	watchSlots chan struct{}
	watches    int
	path       string // the watch command's path, set before any wantWatch
	// naive: -naive-reconnect (reconnect).
	naive bool

	mu       sync.Mutex
	sessions []*loadSession

	// loop reads the connected sessions (loop.go); wg counts its
	// reconnecting sessions' goroutines.
	loop *loop
	wg   sync.WaitGroup
}

// ephemeralDir holds the load sessions' ephemerals (the parent creates it).
const ephemeralDir = "/proxyscale-eph"

func runLoad(addrs []string, n int, timeout time.Duration, inFlight, ephemerals, watches int) {
	if a := os.Getenv("PROXYSCALE_LOAD_PPROF"); a != "" {
		go http.ListenAndServe(a, nil) // net/http/pprof's handlers, for PROXYSCALE_PPROF
	}
	l := &loadProc{addrs: addrs, timeout: timeout, watches: max(watches, 1), naive: os.Getenv("PROXYSCALE_NAIVE") != ""}
	lp, err := newLoop(l)
	if err != nil {
		fmt.Fprintln(os.Stderr, "event loop:", err)
		os.Exit(1)
	}
	l.loop = lp
	go lp.run()
	wg := &l.wg
	var ready sync.WaitGroup
	var failed, created atomic.Int64
	sem := make(chan struct{}, max(inFlight, 1)) // handshakes in flight
	for i := range n {
		ready.Add(1)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			order := sessionOrder(i%len(addrs), len(addrs), l.naive)
			nc, resp, err := handshake(addrs[order[0]], &jute.ConnectRequest{TimeOut: int32(timeout / time.Millisecond), Passwd: make([]byte, 16)}, 30*time.Second)
			eph := false
			if err == nil && i < ephemerals {
				if err = createEphemeral(nc, resp.SessionID); err != nil {
					nc.Close()
				} else {
					created.Add(1)
					eph = true
				}
			}
			<-sem
			if err != nil {
				fmt.Fprintln(os.Stderr, "handshake:", err)
				failed.Add(1)
				ready.Done()
				return
			}
			s := &loadSession{l: l, nc: nc, fd: -1, to: time.Duration(resp.TimeOut) * time.Millisecond, order: order, eph: eph, resp: resp}
			l.mu.Lock()
			l.sessions = append(l.sessions, s)
			l.mu.Unlock()
			ready.Done()
			if err := lp.attach(s); err != nil {
				fmt.Fprintf(os.Stderr, "session %#x: not attached: %v: reconnecting\n", resp.SessionID, err)
				lp.resume(s)
			}
		}()
	}
	ready.Wait()
	fmt.Printf("ready %d %d %d\n", n-int(failed.Load()), failed.Load(), created.Load())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch {
		case len(f) == 2 && f[0] == "watch":
			fmt.Printf("watching %d\n", l.watch(f[1]))
		case len(f) == 2 && f[0] == "report":
			at, _ := strconv.ParseInt(f[1], 10, 64)
			l.report(at)
		case len(f) == 1 && f[0] == "count":
			l.printCount()
		case len(f) == 1 && f[0] == "resumes":
			l.resumeMu.Lock()
			ms := make([]string, len(l.resumes))
			for i, v := range l.resumes {
				ms[i] = strconv.FormatInt(v, 10)
			}
			l.resumeMu.Unlock()
			fmt.Printf("resumes %s\n", strings.Join(ms, " "))
		}
	}
	l.stopped.Store(true)
	lp.stop()
	l.mu.Lock()
	for _, s := range l.sessions {
		s.wmu.Lock()
		if s.nc != nil {
			s.nc.Close()
		}
		if s.fd >= 0 {
			unix.Close(s.fd)
			s.fd = -1
		}
		s.wmu.Unlock()
	}
	l.mu.Unlock()
	wg.Wait()
	l.printCount()
}

// printCount answers count.
func (l *loadProc) printCount() {
	fmt.Printf("lost %d moved %d expired %d eph %d starved %d\n", l.lost.Load(), l.moved.Load(), l.expired.Load(), l.lostEph.Load(), l.starved.Load())
}

// sessionOrder is a session's list of address indexes: first, then the
// other n-1 shuffled, as ZooKeeper's clients shuffle their connect
// string (the Java client's StaticHostProvider, go-zookeeper's
// DNSHostProvider); the first is fixed so that the sessions spread
// evenly over the addresses. naive: the others in order after it
// (-naive-reconnect).
func sessionOrder(first, n int, naive bool) []int {
	order := []int{first}
	if naive {
		for k := 1; k < n; k++ {
			order = append(order, (first+k)%n)
		}
		return order
	}
	for _, k := range rand.Perm(n) {
		if k != first {
			order = append(order, k)
		}
	}
	return order
}

// createEphemeral creates the session's ephemeral, ephemeralDir/<id>, on
// nc right after its handshake (nothing else reads nc yet).
func createEphemeral(nc net.Conn, id int64) error {
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	defer nc.SetDeadline(time.Time{})
	req := jute.AppendFrame(nil, &jute.RequestHeader{Xid: 1, Type: jute.OpCreate},
		&jute.CreateRequest{Path: fmt.Sprintf("%s/%x", ephemeralDir, id), ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}, Flags: jute.FlagEphemeral})
	if _, err := nc.Write(req); err != nil {
		return err
	}
	var lenBuf [4]byte
	if _, err := io.ReadFull(nc, lenBuf[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(lenBuf[:]))
	if len(body) < 16 {
		return errors.New("short reply to create")
	}
	if _, err := io.ReadFull(nc, body); err != nil {
		return err
	}
	if e := int32(binary.BigEndian.Uint32(body[12:])); e != 0 {
		return fmt.Errorf("create: error %d", e)
	}
	return nil
}

// watchXid is the xid of the watch's getData.
const watchXid = 1

// watch sends every session's getData watch and waits for the replies. A
// session whose connection fails before its reply sends it again after it
// reconnects, as a client retries after a connection loss; one that
// reconnects after its reply re-sets its watch with setWatches, as a
// client does.
func (l *loadProc) watch(path string) int {
	l.path = path
	l.mu.Lock()
	ss := slices.Clone(l.sessions)
	l.mu.Unlock()
	l.watchSlots = make(chan struct{}, l.watches)
	l.watchAck.Add(len(ss))
	deadline := time.Now().Add(3 * time.Minute)
	sent := 0
send:
	for _, s := range ss {
		select {
		case l.watchSlots <- struct{}{}:
		case <-time.After(time.Until(deadline)):
			fmt.Fprintf(os.Stderr, "watch: %d of %d sent within 3 min\n", sent, len(ss))
			break send
		}
		sent++
		s.wantWatch.Store(true)
		if s.gone.Load() {
			s.acked.Do(s.watchDone)
			continue
		}
		s.wmu.Lock()
		s.sendWatch()
		s.wmu.Unlock()
	}
	for range len(ss) - sent {
		l.watchAck.Done() // never sent
	}
	done := make(chan struct{})
	go func() { l.watchAck.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(deadline)):
		fmt.Fprintln(os.Stderr, "watch: not every reply within 3 min")
	}
	n := 0
	for _, s := range ss {
		if s.watchOK.Load() {
			n++
		}
	}
	return n
}

// report waits for the watching sessions' notifications and prints their
// arrival after at (ns).
func (l *loadProc) report(at int64) {
	l.mu.Lock()
	ss := slices.Clone(l.sessions)
	l.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		missing := 0
		for _, s := range ss {
			if s.watchOK.Load() && s.notified.Load() == 0 {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var lat []string
	watching := 0
	for _, s := range ss {
		if !s.watchOK.Load() {
			continue
		}
		watching++
		if t := s.notified.Load(); t != 0 {
			lat = append(lat, strconv.FormatInt((t-at)/1000, 10))
		}
	}
	fmt.Printf("notified %d of %d\n", len(lat), watching)
	fmt.Printf("lat %s\n", strings.Join(lat, " "))
}

// sendWatch writes the getData watch; the caller holds wmu. A failed write
// is retried after the reconnect it leads to (a session between its
// connection's failure and its reconnect has neither: rewatch sends it).
func (s *loadSession) sendWatch() {
	req := jute.AppendFrame(nil, &jute.RequestHeader{Xid: watchXid, Type: jute.OpGetData}, &jute.GetDataRequest{Path: s.l.path, Watch: true})
	s.write(req)
}

// write writes a small request on the session's connection, the loop's
// descriptor or (handshaking, reconnecting) its net.Conn; the caller
// holds wmu. A socket that does not take it whole has failed (writeFd):
// the loop finds out on its next read or ping.
func (s *loadSession) write(req []byte) {
	switch {
	case s.fd >= 0:
		writeFd(s.fd, req)
	case s.nc != nil:
		s.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		s.nc.Write(req)
		s.nc.SetWriteDeadline(time.Time{})
	}
}

// rewatch, after a reconnect (wmu held), sends the watch again if it was
// never answered, or re-sets it with setWatches from the last zxid seen if
// it was and has not fired (the member fires what changed meanwhile).
func (s *loadSession) rewatch() {
	switch {
	case !s.wantWatch.Load() || s.notified.Load() != 0:
	case !s.watchOK.Load():
		s.sendWatch()
	default:
		req := jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidSetWatches, Type: jute.OpSetWatches},
			&jute.SetWatches{RelativeZxid: s.lastZxid, DataWatches: []string{s.l.path}})
		s.write(req)
	}
}

// reconnect tries the session's other addresses in its own order
// within its timeout, as ZooKeeper's clients do: the Java client
// (ClientCnxn.SendThread.startConnect) sleeps a random time of up to 1 s
// before every connect that is not its first, gives each address a
// connect timeout of the session timeout over the number of addresses,
// and both it (StaticHostProvider's spin delay) and go-zookeeper
// (Conn.connect) wait 1 s more once they have tried every address. False
// if the session is lost (expired, or nothing took it) or the load
// process stops.
func (s *loadSession) reconnect(to time.Duration) bool {
	addrs := s.l.addrs
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.nc != nil {
		s.nc.Close() // the loop closed its descriptor (fail)
		s.nc = nil
	}
	failed := time.Now()
	deadline := failed.Add(to)
	perAddr := to / time.Duration(len(addrs))
	if s.l.naive {
		perAddr = 30 * time.Second
	}
	for try := 1; time.Now().Before(deadline); try++ {
		switch {
		case s.l.naive && try > 1:
			time.Sleep(100 * time.Millisecond)
		case s.l.naive:
		case try > 1 && (try-1)%len(addrs) == 0:
			time.Sleep(time.Second + rand.N(time.Second)) // a whole round of addresses failed
		default:
			time.Sleep(rand.N(time.Second))
		}
		if s.l.stopped.Load() {
			return false
		}
		at := (s.at + try) % len(s.order)
		c, r, err := handshake(addrs[s.order[at]], &jute.ConnectRequest{LastZxidSeen: s.lastZxid, TimeOut: s.resp.TimeOut, SessionID: s.resp.SessionID, Passwd: s.resp.Passwd}, min(perAddr, time.Until(deadline)))
		switch {
		case err == nil && r.SessionID == s.resp.SessionID:
			s.nc, s.at = c, at
			s.l.moved.Add(1)
			s.l.resumeMu.Lock()
			s.l.resumes = append(s.l.resumes, time.Since(failed).Milliseconds())
			s.l.resumeMu.Unlock()
			s.rewatch()
			return true
		case err == nil:
			c.Close()
			fmt.Fprintf(os.Stderr, "session %#x expired\n", s.resp.SessionID)
			s.lose()
			s.l.expired.Add(1)
			return false
		}
	}
	fmt.Fprintf(os.Stderr, "session %#x: no address took it back within %v\n", s.resp.SessionID, to)
	s.lose()
	return false
}

// lose counts the session lost.
func (s *loadSession) lose() {
	s.l.lost.Add(1)
	if s.eph {
		s.l.lostEph.Add(1)
	}
}

// rawConn is nc's raw connection (the loop takes its descriptor).
func rawConn(nc net.Conn) syscall.RawConn {
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return rc
		}
	}
	return nil
}

// loader is the parent's handle on a load process.
type loader struct {
	*proc
	out   *bufio.Scanner
	stdin io.WriteCloser
	n     int // sessions it was asked for
}

func startLoader(self string, addrs []string, n int, timeout time.Duration, handshakes, ephemerals, watches int, source, logPath string) (*loader, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-load", "-addrs", strings.Join(addrs, ","), "-sessions", strconv.Itoa(n), "-session-timeout", timeout.String(), "-handshakes", strconv.Itoa(handshakes), "-ephemerals", strconv.Itoa(ephemerals), "-watches", strconv.Itoa(watches))
	if source != "" {
		cmd.Args = append(cmd.Args, "-source", source)
	}
	cmd.Stderr = f
	cmd.SysProcAttr = xproc.Orphanless()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20) // a lat line holds one number per session
	return &loader{proc: &proc{Name: "load", Cmd: cmd}, out: sc, stdin: stdin, n: n}, nil
}

// line waits at most d for the next line starting with prefix, skipping
// others.
func (l *loader) line(prefix string, d time.Duration) (string, error) {
	got := make(chan string, 1)
	go func() {
		for l.out.Scan() {
			if t := l.out.Text(); strings.HasPrefix(t, prefix) {
				got <- t
				return
			}
		}
		close(got)
	}()
	select {
	case t, ok := <-got:
		if !ok {
			return "", fmt.Errorf("a load process ended before it said %q", prefix)
		}
		return t, nil
	case <-time.After(d):
		return "", fmt.Errorf("a load process did not say %q within %v", prefix, d)
	}
}

func (l *loader) send(cmd string) { fmt.Fprintln(l.stdin, cmd) }

// waitReady returns the sessions the load process opened and failed to,
// and the ephemerals they created.
func (l *loader) waitReady(d time.Duration) (opened, failed, ephemerals int, err error) {
	t, err := l.line("ready ", d)
	if err != nil {
		return 0, 0, 0, err
	}
	_, err = fmt.Sscanf(t, "ready %d %d %d", &opened, &failed, &ephemerals)
	return opened, failed, ephemerals, err
}

// count returns the sessions lost and the reconnects made so far.
func (l *loader) count() (lost, moved int) {
	lost, moved, _ = l.counts()
	return lost, moved
}

// counts is count with the expiries among the lost.
func (l *loader) counts() (lost, moved, expired int) {
	l.send("count")
	t, err := l.line("lost ", 30*time.Second)
	if err != nil {
		return -1, -1, -1
	}
	fmt.Sscanf(t, "lost %d moved %d expired %d", &lost, &moved, &expired)
	return lost, moved, expired
}

// loadCount is a load process's count answer.
type loadCount struct{ lost, moved, expired, eph, starved int }

// countAll is counts with the ephemeral owners among the lost and the
// pings the load process itself read late.
func (l *loader) countAll() loadCount {
	var c loadCount
	l.send("count")
	t, err := l.line("lost ", 30*time.Second)
	if err != nil {
		return loadCount{-1, -1, -1, -1, -1}
	}
	fmt.Sscanf(t, "lost %d moved %d expired %d eph %d starved %d", &c.lost, &c.moved, &c.expired, &c.eph, &c.starved)
	return c
}

// resumes is how long each of the load process's reconnects took, in
// order (ms).
func (l *loader) resumes() []int64 {
	l.send("resumes")
	t, err := l.line("resumes", 30*time.Second)
	if err != nil {
		return nil
	}
	var out []int64
	for _, f := range strings.Fields(t)[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		out = append(out, v)
	}
	return out
}

// finish ends the load process and returns the sessions it lost and the
// reconnects it made.
func (l *loader) finish() (lost, moved int) {
	l.stdin.Close()
	t, err := l.line("lost ", 60*time.Second)
	if err != nil {
		l.Stop()
		return -1, -1
	}
	fmt.Sscanf(t, "lost %d moved %d", &lost, &moved)
	l.Cmd.Wait()
	return lost, moved
}
