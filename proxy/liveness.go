package proxy

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"runtime/metrics"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Telling a silent member from a starved reader.
//
// The member answers every KeepAlive (one per interval) with Progress, so
// an upstream connection that carries no frame for the idle bound looks
// dead. But on a loaded machine the proxy's own reader may not run for
// seconds: the read deadline's timer fires, and the read reports a
// timeout, while the member's frames wait in the socket's receive queue.
// (At load average 40-60 on two cores, the 100,000-session run of
// docs/proxy.md lost its upstream connections that way or because the
// member was starved; the two were not told apart.) So a deadline that
// passes is not the verdict: the reader then asks the kernel how many
// bytes wait on the socket (SIOCINQ), and finds the member silent only
// when none does, its bufio buffer is empty too, and a second, fresh
// wait of two intervals, started once the reader runs again, brings
// nothing either. Each deadline that passed with bytes waiting is
// counted (starvedWakeups) and logged with how late the reader woke and
// the scheduler's recent latency (runtime/metrics /sched/latencies), the
// evidence of which side was slow.

// errUpstreamSilent: the member sent nothing for the idle bound and the
// grace after it.
var errUpstreamSilent = errors.New("proxy: member silent")

// pendingBytes is how many received bytes wait unread in nc's socket
// receive queue; -1 when it cannot be told.
func pendingBytes(nc net.Conn) int {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	if err := rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = v
		}
	}); err != nil {
		return -1
	}
	return n
}

func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// schedLatency reads the Go scheduler's latency histogram (the time
// goroutines waited to run) and reports its p99 and max over the samples
// since the previous call: the proxy's own starvation.
type schedLatency struct {
	mu   sync.Mutex
	prev []uint64
}

const schedLatencyMetric = "/sched/latencies:seconds"

func (s *schedLatency) since() (p99, maxWait time.Duration) {
	sample := []metrics.Sample{{Name: schedLatencyMetric}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0, 0
	}
	h := sample[0].Value.Float64Histogram()
	s.mu.Lock()
	defer s.mu.Unlock()
	delta := make([]uint64, len(h.Counts))
	var total uint64
	for i, c := range h.Counts {
		if i < len(s.prev) {
			c -= s.prev[i]
		}
		delta[i] = c
		total += c
	}
	s.prev = append(s.prev[:0], h.Counts...)
	if total == 0 {
		return 0, 0
	}
	bound := func(i int) time.Duration {
		b := h.Buckets[i+1] // bucket i is [Buckets[i], Buckets[i+1])
		if math.IsInf(b, 1) {
			b = h.Buckets[i]
		}
		return time.Duration(b * float64(time.Second))
	}
	var seen uint64
	for i, c := range delta {
		if c == 0 {
			continue
		}
		seen += c
		if p99 == 0 && seen*100 >= total*99 {
			p99 = bound(i)
		}
		maxWait = bound(i)
	}
	return p99, maxWait
}

// livenessStats are the upstream reader's judgements, for the upstream
// command and logs.
type livenessStats struct {
	mu struct {
		sync.Mutex
		starved  int64         // deadlines passed with bytes waiting
		graced   int64         // deadlines passed with nothing waiting, then a frame within the grace
		silent   int64         // connections closed as silent
		lateMax  time.Duration // the latest a reader woke after its deadline
		lastNote string
	}
}

func (l *livenessStats) note(kind string, late time.Duration, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch kind {
	case "starved":
		l.mu.starved++
	case "graced":
		l.mu.graced++
	case "silent":
		l.mu.silent++
	}
	l.mu.lateMax = max(l.mu.lateMax, late)
	l.mu.lastNote = msg
}

// waitFrame waits until a frame's first byte can be read: until deadline,
// then, if the member looks silent, judges it (above). It returns nil
// when a byte is there, errUpstreamSilent when the member is silent, or
// the read's error.
func (u *upConn) waitFrame(deadline time.Time) error {
	u.nc.SetReadDeadline(deadline)
	_, err := u.br.Peek(1)
	if err == nil || !isTimeout(err) {
		return err
	}
	now := time.Now()
	late := now.Sub(deadline)
	pending := pendingBytes(u.nc)
	p := u.p
	if pending > 0 || u.br.Buffered() > 0 {
		p99, mx := p.sched.since()
		msg := fmt.Sprintf("read deadline passed with %d bytes waiting: the proxy's reader was late by %v (scheduler latency p99 %v, max %v since the last look)", pending, late.Round(time.Millisecond), p99, mx)
		p.liveness.note("starved", late, msg)
		p.log.Info("upstream reader starved, member not silent", "member", u.addr, "pending", pending, "late", late.Round(time.Millisecond).String(), "schedP99", p99.String(), "schedMax", mx.String())
		return nil
	}
	// Nothing waits: give the member one more interval from now, when
	// this reader demonstrably runs.
	grace := 2 * p.cfg.KeepAliveInterval
	u.nc.SetReadDeadline(now.Add(grace))
	_, err = u.br.Peek(1)
	if err == nil {
		p99, mx := p.sched.since()
		msg := fmt.Sprintf("a frame came %v after the idle bound (reader late by %v, scheduler latency p99 %v, max %v)", time.Since(deadline).Round(time.Millisecond), late.Round(time.Millisecond), p99, mx)
		p.liveness.note("graced", late, msg)
		p.log.Info("upstream slow, not silent", "member", u.addr, "late", late.Round(time.Millisecond).String(), "after", time.Since(deadline).Round(time.Millisecond).String(), "schedP99", p99.String())
		return nil
	}
	if !isTimeout(err) {
		return err
	}
	if pendingBytes(u.nc) > 0 || u.br.Buffered() > 0 {
		p.liveness.note("starved", time.Since(now.Add(grace)), "read deadline passed twice with bytes waiting")
		return nil
	}
	p99, mx := p.sched.since()
	msg := fmt.Sprintf("no byte for %v and %v more (reader late by %v, scheduler latency p99 %v, max %v)", u.idle, grace, late.Round(time.Millisecond), p99, mx)
	p.liveness.note("silent", late, msg)
	return fmt.Errorf("%w: %s", errUpstreamSilent, msg)
}
