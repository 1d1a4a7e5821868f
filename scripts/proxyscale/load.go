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
	"unsafe"

	xproc "github.com/zkraft/zkraft/internal/proc"
	"github.com/zkraft/zkraft/jute"
)

// A load process is this program re-executed with -load. Its sessions are
// minimal Jute clients (handshake, a ping every third of the timeout, one
// getData watch on request), one goroutine each, so a load process costs
// far less per session than a full client library. Its first -ephemerals
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
	l   *loadProc
	wmu sync.Mutex // serializes writes to nc; guards nc's replacement
	nc  net.Conn
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
}

// ephemeralDir holds the load sessions' ephemerals (the parent creates it).
const ephemeralDir = "/proxyscale-eph"

func runLoad(addrs []string, n int, timeout time.Duration, inFlight, ephemerals, watches int) {
	if a := os.Getenv("PROXYSCALE_LOAD_PPROF"); a != "" {
		go http.ListenAndServe(a, nil) // net/http/pprof's handlers, for PROXYSCALE_PPROF
	}
	l := &loadProc{addrs: addrs, timeout: timeout, watches: max(watches, 1), naive: os.Getenv("PROXYSCALE_NAIVE") != ""}
	var wg sync.WaitGroup
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
			s := &loadSession{l: l, nc: nc, order: order, eph: eph, resp: resp}
			l.mu.Lock()
			l.sessions = append(l.sessions, s)
			l.mu.Unlock()
			ready.Done()
			s.run()
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
	l.mu.Lock()
	for _, s := range l.sessions {
		s.wmu.Lock()
		s.nc.Close()
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
// is retried after the reconnect it leads to.
func (s *loadSession) sendWatch() {
	req := jute.AppendFrame(nil, &jute.RequestHeader{Xid: watchXid, Type: jute.OpGetData}, &jute.GetDataRequest{Path: s.l.path, Watch: true})
	s.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	s.nc.Write(req)
	s.nc.SetWriteDeadline(time.Time{}) // a passed deadline would refuse the pings' writes (writeNow)
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
		s.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		s.nc.Write(req)
		s.nc.SetWriteDeadline(time.Time{})
	}
}

// run reads the session's frames, pings when it has been quiet for a third
// of its timeout, and reconnects elsewhere with its id and password (as a
// client does when its server dies) when the connection fails or a ping
// goes unanswered for half the timeout.
func (s *loadSession) run() {
	to := time.Duration(s.resp.TimeOut) * time.Millisecond
	ping := jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing})
	buf := make([]byte, 128)
	// One read takes what came (most often a whole frame, or several),
	// not a read for the length and another for the body.
	br := bufio.NewReaderSize(s.nc, 256)
	nextPing := time.Now().Add(to / 3)
	var pingSent time.Time // zero: none outstanding
	rd, rc := &readDeadline{nc: s.nc}, rawConn(s.nc)
	for {
		body, err := readFrame(rd, br, buf, nextPing, to/2)
		if s.l.stopped.Load() {
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if !pingSent.IsZero() && time.Since(pingSent) > to/2 {
				if unread(rc) > 0 {
					// The answer came and this reader woke late: the
					// process's own starvation, not the server's
					// silence (a client on its own machine would have
					// read it in time). Read it.
					// The next read's deadline must be ahead, or Go
					// refuses the read before it looks (a loop).
					s.l.starved.Add(1)
					nextPing = time.Now().Add(to / 3)
					continue
				}
				err = errors.New("ping unanswered")
			} else {
				s.wmu.Lock()
				err = writeNow(rc, ping)
				s.wmu.Unlock()
				if pingSent.IsZero() {
					pingSent = time.Now()
				}
				nextPing = time.Now().Add(to / 3)
				if err == nil {
					continue
				}
			}
		}
		if err == nil && len(body) < 16 {
			err = errors.New("short reply")
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "session %#x on %s: %v: reconnecting\n", s.resp.SessionID, s.l.addrs[s.order[s.at]], err)
			if !s.reconnect(to) {
				s.gone.Store(true)
				if s.wantWatch.Load() {
					s.acked.Do(s.watchDone)
				}
				return
			}
			br.Reset(s.nc)
			rd, rc = &readDeadline{nc: s.nc}, rawConn(s.nc)
			pingSent, nextPing = time.Time{}, time.Now().Add(to/3)
			continue
		}
		xid := int32(binary.BigEndian.Uint32(body))
		if z := int64(binary.BigEndian.Uint64(body[4:])); z > s.lastZxid {
			s.lastZxid = z
		}
		switch xid {
		case jute.XidPing:
			pingSent = time.Time{}
		case jute.XidNotification:
			s.notified.CompareAndSwap(0, time.Now().UnixNano())
		case watchXid:
			if binary.BigEndian.Uint32(body[12:]) == 0 {
				s.watchOK.Store(true)
			}
			s.acked.Do(s.watchDone)
		}
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
	s.nc.Close()
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

// unread is how many bytes wait unread in rc's socket (SIOCINQ), 0 when
// it cannot tell.
func unread(rc syscall.RawConn) int {
	if rc == nil {
		return 0
	}
	n := 0
	rc.Control(func(fd uintptr) {
		var v int32
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&v))); e == 0 {
			n = int(v)
		}
	})
	return n
}

// readDeadline sets nc's read deadline, but not again to the one it has:
// a session waits for its next ping with the same deadline across the
// frames that come meanwhile (a ping's answer), and each change is a
// timer's.
type readDeadline struct {
	nc  net.Conn
	set time.Time
}

func (d *readDeadline) to(t time.Time) {
	if !t.Equal(d.set) {
		d.nc.SetReadDeadline(t)
		d.set = t
	}
}

// rawConn is nc's raw connection, for writeNow (taken once per
// connection: each SyscallConn is an allocation).
func rawConn(nc net.Conn) syscall.RawConn {
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return rc
		}
	}
	return nil
}

// writeNow writes a small frame (a ping) to rc without waiting and
// without a write deadline (a timer): a socket that does not take all of
// it at once is a connection that failed (the proxy or member stopped
// reading megabytes ago), which the session then leaves, as a client
// leaves one whose write times out.
func writeNow(rc syscall.RawConn, b []byte) error {
	if rc == nil {
		return errors.New("not a socket")
	}
	var n int
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		for {
			n, werr = syscall.Write(int(fd), b)
			if werr != syscall.EINTR {
				return true // never wait
			}
		}
	}); err != nil {
		return err
	}
	switch {
	case werr != nil:
		return werr
	case n != len(b):
		return fmt.Errorf("the socket took %d of a %d-byte frame", n, len(b))
	}
	return nil
}

// readFrame reads one frame's body from br (rd.nc's reader), into buf
// when it fits. It waits for the frame's first byte until deadline (a
// timeout then is clean: nothing was read) and for the rest of it at
// most grace more: a deadline in the middle of a frame must not cut it
// (the next read would start inside it). A deadline is set only before
// br reads the socket (most frames come whole in one read).
func readFrame(rd *readDeadline, br *bufio.Reader, buf []byte, deadline time.Time, grace time.Duration) ([]byte, error) {
	var lenBuf [4]byte
	if br.Buffered() < len(lenBuf) {
		rd.to(deadline)
	}
	got, err := io.ReadFull(br, lenBuf[:])
	if err != nil && got == 0 {
		return nil, err
	}
	if err != nil {
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, err
		}
		rd.to(time.Now().Add(grace))
		if _, err := io.ReadFull(br, lenBuf[got:]); err != nil {
			return nil, fmt.Errorf("in a frame: %v", err)
		}
	}
	n := int(binary.BigEndian.Uint32(lenBuf[:]))
	if n < 0 || n > 1<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	if n > len(buf) {
		buf = make([]byte, n)
	}
	if br.Buffered() < n {
		rd.to(time.Now().Add(grace))
	}
	if _, err := io.ReadFull(br, buf[:n]); err != nil {
		return nil, fmt.Errorf("in a frame: %v", err) // not a clean timeout
	}
	return buf[:n], nil
}

// loader is the parent's handle on a load process.
type loader struct {
	*proc
	out   *bufio.Scanner
	stdin io.WriteCloser
	n     int // sessions it was asked for
}

func startLoader(self string, addrs []string, n int, timeout time.Duration, handshakes, ephemerals, watches int, logPath string) (*loader, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-load", "-addrs", strings.Join(addrs, ","), "-sessions", strconv.Itoa(n), "-session-timeout", timeout.String(), "-handshakes", strconv.Itoa(handshakes), "-ephemerals", strconv.Itoa(ephemerals), "-watches", strconv.Itoa(watches))
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
