// Package slowload is the load of issue 12 item 2, for a test and for
// scripts/slowreaders: connections that pipeline getData of a large znode
// and never read their replies (stalled), or read them slowly, beside
// normal go-zookeeper clients whose latencies, errors and disconnects it
// measures. It talks to a server only over TCP, so the same load runs
// against zkraft and against Apache ZooKeeper.
//
// It imports jute for the wire records of its raw connections and nothing
// of the server.
package slowload

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/jute"
)

// Config is one run. Zero values take the defaults of the issue's
// reproduction (in brackets).
type Config struct {
	Addr string // the server, host:port

	Stalled         int           // connections that never read; negative: none [5]
	Slow            int           // connections that read at SlowRate; negative: none [1]
	SlowRate        int           // bytes per second a slow connection reads [300 KB]
	Requests        int           // getData each stalled or slow connection pipelines [2000]
	BigSize         int           // bytes of the znode they read [1,000,000]
	RawTimeout      time.Duration // session timeout the raw connections ask for [30 s]
	NoReconnect     bool          // a stalled connection the server closes is not opened again
	Normal          int           // normal clients [16]
	NormalTimeout   time.Duration // their session timeout [4 s, as the kazoo clients of the report]
	Duration        time.Duration // how long the normal clients are measured [20 s]
	Warmup          time.Duration // stalled connections' head start [2 s]
	MntrEvery       time.Duration // how often mntr is sampled [1 s]
	Logf            func(format string, args ...any)
	SkipSetupCreate bool // the znodes exist already
}

func (c *Config) defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Stalled, 5)
	def(&c.Slow, 1)
	def(&c.SlowRate, 300_000)
	def(&c.Requests, 2000)
	def(&c.BigSize, 1_000_000)
	def(&c.Normal, 16)
	defd(&c.RawTimeout, 30*time.Second)
	defd(&c.NormalTimeout, 4*time.Second)
	defd(&c.Duration, 20*time.Second)
	defd(&c.Warmup, 2*time.Second)
	defd(&c.MntrEvery, time.Second)
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.Stalled < 0 {
		c.Stalled = 0
	}
	if c.Slow < 0 {
		c.Slow = 0
	}
}

// Result is what a run measured.
type Result struct {
	Ops                int           // normal clients' operations that completed
	Errors             int           // normal clients' operations that failed
	P50, P99, Max      time.Duration // their latencies
	Disconnects        int           // StateDisconnected events of the normal clients
	Expired            int           // StateExpired events (sessions lost)
	StalledConnections int           // stalled connections opened (more than Stalled: the server closed some)
	SlowReplies        int           // replies the slow connections read
	SlowClosed         int           // slow connections the server closed
	MaxOutstanding     int64         // highest zk_outstanding_requests seen in mntr, -1 if none
	FirstErr           string        // the first error of a normal client
}

func (r Result) String() string {
	return fmt.Sprintf("normal clients: ops %d errors %d p50 %v p99 %v max %v disconnects %d expired %d; "+
		"stalled connections opened %d; slow replies read %d (closed %d); max zk_outstanding_requests %d",
		r.Ops, r.Errors, r.P50.Round(100*time.Microsecond), r.P99.Round(100*time.Microsecond), r.Max.Round(100*time.Microsecond),
		r.Disconnects, r.Expired, r.StalledConnections, r.SlowReplies, r.SlowClosed, r.MaxOutstanding)
}

const (
	bigPath   = "/slowload-big"
	smallPath = "/slowload-n"
)

// Run runs the load until cfg.Duration has passed (plus set-up and the
// warm-up) or ctx ends.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg.defaults()
	if err := setup(cfg); err != nil {
		return Result{}, fmt.Errorf("slowload: setup: %w", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var res Result
	var wg sync.WaitGroup
	var stalledOpened atomic.Int64
	for i := 0; i < cfg.Stalled; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				stalledOpened.Add(1)
				err := rawConn(runCtx, cfg, 0, nil)
				if runCtx.Err() != nil {
					return
				}
				cfg.Logf("stalled connection ended: %v", err)
				if cfg.NoReconnect {
					return
				}
				sleep(runCtx, 100*time.Millisecond)
			}
		}()
	}
	var slowReplies, slowClosed atomic.Int64
	for i := 0; i < cfg.Slow; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := rawConn(runCtx, cfg, cfg.SlowRate, &slowReplies)
			if runCtx.Err() == nil {
				slowClosed.Add(1)
				cfg.Logf("slow connection ended: %v", err)
			}
		}()
	}
	var maxOut atomic.Int64
	maxOut.Store(-1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(cfg.MntrEvery)
		defer t.Stop()
		for {
			if n, err := outstanding(cfg.Addr); err == nil && n > maxOut.Load() {
				maxOut.Store(n)
			}
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	sleep(runCtx, cfg.Warmup)

	type clientResult struct {
		lat             []time.Duration
		errs, disc, exp int
		firstErr        string
	}
	results := make([]clientResult, cfg.Normal)
	measureCtx, endMeasure := context.WithTimeout(runCtx, cfg.Duration)
	defer endMeasure()
	var nwg sync.WaitGroup
	for i := 0; i < cfg.Normal; i++ {
		nwg.Add(1)
		go func() {
			defer nwg.Done()
			r := &results[i]
			zc, ev, err := zk.Connect([]string{cfg.Addr}, cfg.NormalTimeout, zk.WithLogger(nopLogger{}))
			if err != nil {
				r.errs++
				r.firstErr = err.Error()
				return
			}
			defer zc.Close()
			connected := false
			evDone := make(chan struct{})
			go func() {
				defer close(evDone)
				for e := range ev {
					switch e.State {
					case zk.StateHasSession:
						connected = true
					case zk.StateDisconnected:
						if connected && measureCtx.Err() == nil {
							r.disc++
						}
					case zk.StateExpired:
						if measureCtx.Err() == nil {
							r.exp++
						}
					}
				}
			}()
			path := smallPath + "/" + strconv.Itoa(i)
			val := []byte("value-" + strconv.Itoa(i))
			for k := 0; measureCtx.Err() == nil; k++ {
				start := time.Now()
				var err error
				if k%2 == 0 {
					_, _, err = zc.Get(path)
				} else {
					_, err = zc.Set(path, val, -1)
				}
				d := time.Since(start)
				if err != nil {
					if measureCtx.Err() != nil {
						break
					}
					r.errs++
					if r.firstErr == "" {
						r.firstErr = err.Error()
					}
					sleep(measureCtx, 50*time.Millisecond)
					continue
				}
				r.lat = append(r.lat, d)
			}
			zc.Close()
			<-evDone // r's event counts are written there
		}()
	}
	nwg.Wait()
	stop()
	wg.Wait()

	var all []time.Duration
	for _, r := range results {
		all = append(all, r.lat...)
		res.Errors += r.errs
		res.Disconnects += r.disc
		res.Expired += r.exp
		if res.FirstErr == "" {
			res.FirstErr = r.firstErr
		}
	}
	slices.Sort(all)
	res.Ops = len(all)
	if len(all) > 0 {
		res.P50 = all[len(all)/2]
		res.P99 = all[len(all)*99/100]
		res.Max = all[len(all)-1]
	}
	res.StalledConnections = int(stalledOpened.Load())
	res.SlowReplies = int(slowReplies.Load())
	res.SlowClosed = int(slowClosed.Load())
	res.MaxOutstanding = maxOut.Load()
	return res, nil
}

// nopLogger keeps go-zookeeper's reconnect lines out of the output (the
// disconnects are counted from its events).
type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// setup creates the large znode and the normal clients' nodes.
func setup(cfg Config) error {
	zc, _, err := zk.Connect([]string{cfg.Addr}, 10*time.Second, zk.WithLogger(nopLogger{}))
	if err != nil {
		return err
	}
	defer zc.Close()
	acl := zk.WorldACL(zk.PermAll)
	create := func(p string, data []byte) error {
		_, err := zc.Create(p, data, 0, acl)
		if errors.Is(err, zk.ErrNodeExists) {
			_, err = zc.Set(p, data, -1)
		}
		return err
	}
	if err := create(bigPath, make([]byte, cfg.BigSize)); err != nil {
		return err
	}
	if err := create(smallPath, nil); err != nil {
		return err
	}
	for i := 0; i < cfg.Normal; i++ {
		if err := create(smallPath+"/"+strconv.Itoa(i), []byte("v")); err != nil {
			return err
		}
	}
	return nil
}

// rawConn opens a session and pipelines cfg.Requests getData of the large
// znode, then pings every third of its session timeout. With rate 0 it
// never reads; otherwise it reads at rate bytes a second and counts the
// replies in replies. It returns when ctx ends or the server closes.
func rawConn(ctx context.Context, cfg Config, rate int, replies *atomic.Int64) error {
	nc, err := net.DialTimeout("tcp", cfg.Addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: int32(cfg.RawTimeout / time.Millisecond), Passwd: make([]byte, 16)})); err != nil {
		return err
	}
	body, err := jute.ReadFrame(nc, nil, maxFrame)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	resp := new(jute.ConnectResponse)
	if err := jute.Unmarshal(body, resp); err != nil || resp.SessionID == 0 {
		return fmt.Errorf("connect refused: %v", err)
	}
	nc.SetDeadline(time.Time{})
	errc := make(chan error, 2)
	go func() {
		req := jute.AppendFrame(nil, &jute.RequestHeader{Type: jute.OpGetData}, &jute.GetDataRequest{Path: bigPath})
		for i := 1; i <= cfg.Requests; i++ {
			binary.BigEndian.PutUint32(req[4:], uint32(i)) // the xid
			if _, err := nc.Write(req); err != nil {
				errc <- err
				return
			}
		}
		ping := jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing})
		interval := time.Duration(resp.TimeOut) * time.Millisecond / 3
		for {
			sleep(ctx, interval)
			if ctx.Err() != nil {
				errc <- ctx.Err()
				return
			}
			if _, err := nc.Write(ping); err != nil {
				errc <- err
				return
			}
		}
	}()
	if rate > 0 {
		go func() { errc <- slowRead(ctx, nc, rate, replies) }()
	}
	return <-errc
}

// slowRead reads frames from r at about rate bytes a second, counting the
// replies that are not pings.
func slowRead(ctx context.Context, r io.Reader, rate int, replies *atomic.Int64) error {
	chunk := max(1, rate/20) // 20 reads a second
	br := bufio.NewReaderSize(&pacedReader{ctx: ctx, r: r, chunk: chunk, every: 50 * time.Millisecond}, chunk)
	for {
		b, err := jute.ReadFrame(br, nil, maxFrame)
		if err != nil {
			return err
		}
		if len(b) >= 4 && int32(binary.BigEndian.Uint32(b)) > 0 {
			replies.Add(1)
		}
	}
}

// pacedReader reads at most chunk bytes per interval.
type pacedReader struct {
	ctx   context.Context
	r     io.Reader
	chunk int
	every time.Duration
	next  time.Time
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if d := time.Until(p.next); d > 0 {
		sleep(p.ctx, d)
	}
	if p.ctx.Err() != nil {
		return 0, p.ctx.Err()
	}
	if len(b) > p.chunk {
		b = b[:p.chunk]
	}
	n, err := p.r.Read(b)
	p.next = time.Now().Add(time.Duration(float64(p.every) * float64(n) / float64(p.chunk)))
	return n, err
}

// outstanding asks mntr for zk_outstanding_requests.
func outstanding(addr string) (int64, error) {
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := nc.Write([]byte("mntr")); err != nil {
		return 0, err
	}
	b, err := io.ReadAll(nc)
	if err != nil && len(b) == 0 {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "zk_outstanding_requests\t"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("no zk_outstanding_requests in mntr")
}

// maxFrame bounds a frame read from the server.
const maxFrame = 64 << 20
