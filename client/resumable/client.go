package resumable

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/zkraft/zkraft/jute"
)

// Change is one change of a transaction.
type Change struct {
	Type jute.EventType
	Path string
}

// Txn is the changes of one transaction under the watched path.
type Txn struct {
	Zxid    int64
	Changes []Change
}

// ErrCompacted means the history no longer reaches back to the requested
// zxid; every change after Oldest is still available.
type ErrCompacted struct{ Oldest int64 }

func (e *ErrCompacted) Error() string {
	return fmt.Sprintf("resumable: history compacted: oldest available zxid 0x%x", e.Oldest)
}

// ErrUnsupported means the server does not offer the extension.
var ErrUnsupported = errors.New("resumable: server does not support watchFrom")

// Options configure WatchFrom.
type Options struct {
	// SessionTimeout requested for the stream's own session. Default 10s.
	SessionTimeout time.Duration
	// DialTimeout per connection attempt. Default 3s.
	DialTimeout time.Duration
	// Buffer is the capacity of the Txns channel. Default 1024.
	Buffer int
}

// Watch is a running resumable watch.
type Watch struct {
	// Txns delivers transactions in strictly increasing zxid order. It is
	// closed when the watch ends; Err says why.
	Txns <-chan Txn

	txns    chan Txn
	addrs   []string
	path    string
	mode    int32
	opts    Options
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	err     error
	last    int64 // zxid up to which everything was delivered
	resumes int
}

// WatchFrom starts streaming every change under path (the path itself
// only, or the whole subtree) with zxid > from. It returns once the first
// server accepted the watch.
func WatchFrom(ctx context.Context, addrs []string, path string, from int64, subtree bool, opts Options) (*Watch, error) {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 10 * time.Second
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 3 * time.Second
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 1024
	}
	w := &Watch{addrs: addrs, path: path, opts: opts, last: from, done: make(chan struct{})}
	if subtree {
		w.mode = jute.WatchModeSubtree
	}
	w.txns = make(chan Txn, opts.Buffer)
	w.Txns = w.txns
	runCtx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	first := make(chan error, 1)
	go w.run(runCtx, first)
	select {
	case err := <-first:
		if err != nil {
			cancel()
			<-w.done
			return nil, err
		}
		return w, nil
	case <-ctx.Done():
		cancel()
		<-w.done
		return nil, ctx.Err()
	}
}

// Close stops the watch.
func (w *Watch) Close() error {
	w.cancel()
	<-w.done
	return nil
}

// Err is why the watch ended (nil after Close).
func (w *Watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// LastZxid is the zxid up to which every change has been delivered.
func (w *Watch) LastZxid() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Resumes counts the reconnections the watch survived.
func (w *Watch) Resumes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resumes
}

func (w *Watch) run(ctx context.Context, first chan<- error) {
	defer close(w.done)
	defer close(w.txns)
	reported := false
	report := func(err error) {
		if !reported {
			reported = true
			first <- err
		}
	}
	backoff := 50 * time.Millisecond
	for i := 0; ctx.Err() == nil; i++ {
		addr := w.addrs[i%len(w.addrs)]
		err := w.stream(ctx, addr, func() { report(nil); backoff = 50 * time.Millisecond })
		var compacted *ErrCompacted
		if errors.As(err, &compacted) || errors.Is(err, ErrUnsupported) || errors.Is(err, errFatal) {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			report(err)
			return
		}
		if ctx.Err() != nil {
			break
		}
		if reported {
			w.mu.Lock()
			w.resumes++
			w.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		if backoff < time.Second {
			backoff *= 2
		}
	}
	report(ctx.Err())
}

var errFatal = errors.New("resumable: server refused the watch")

// stream runs one connection: handshake, watchFrom from the last
// delivered zxid, then events until the connection fails.
func (w *Watch) stream(ctx context.Context, addr string, started func()) error {
	d := net.Dialer{Timeout: w.opts.DialTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	br := bufio.NewReaderSize(nc, 64<<10)
	timeout := int32(w.opts.SessionTimeout / time.Millisecond)
	if err := writeFrame(nc, &jute.ConnectRequest{TimeOut: timeout, Passwd: make([]byte, 16), HasReadOnly: true}); err != nil {
		return err
	}
	nc.SetReadDeadline(time.Now().Add(w.opts.DialTimeout))
	body, err := jute.ReadFrame(br, nil, maxFrame)
	if err != nil {
		return err
	}
	cr := new(jute.ConnectResponse)
	if err := jute.Unmarshal(body, cr); err != nil || cr.SessionID == 0 {
		return fmt.Errorf("resumable: handshake with %s failed", addr)
	}
	negotiated := time.Duration(cr.TimeOut) * time.Millisecond
	// The stream's session ends with the connection: close it politely.
	defer writeFrame(nc, &jute.RequestHeader{Xid: 2, Type: jute.OpCloseSession})

	from := w.LastZxid()
	if err := writeFrame(nc, &jute.RequestHeader{Xid: 1, Type: jute.OpWatchFrom},
		&jute.WatchFromRequest{Path: w.path, FromZxid: from, Mode: w.mode}); err != nil {
		return err
	}
	// Pings keep the session alive while events are quiet.
	var wmu sync.Mutex
	pingDone := make(chan struct{})
	defer close(pingDone)
	go func() {
		t := time.NewTicker(negotiated / 3)
		defer t.Stop()
		for {
			select {
			case <-pingDone:
				return
			case <-t.C:
				wmu.Lock()
				err := writeFrame(nc, &jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing})
				wmu.Unlock()
				if err != nil {
					return
				}
			}
		}
	}()
	accepted := false
	for {
		nc.SetReadDeadline(time.Now().Add(negotiated))
		body, err := jute.ReadFrame(br, nil, maxFrame)
		if err != nil {
			return err
		}
		r := jute.NewReader(body)
		var hdr jute.ReplyHeader
		hdr.Decode(r)
		if r.Err() != nil {
			return r.Err()
		}
		switch hdr.Xid {
		case jute.XidPing:
			continue
		case 1:
			switch hdr.Err {
			case jute.ErrOK:
				accepted = true
				started()
			case jute.ErrHistoryCompacted:
				var c jute.CompactedResponse
				c.Decode(r)
				return &ErrCompacted{Oldest: c.OldestZxid}
			case jute.ErrUnimplemented:
				return ErrUnsupported
			default:
				return fmt.Errorf("%w: %v", errFatal, hdr.Err)
			}
		case jute.XidResumableEvents:
			if !accepted {
				return errors.New("resumable: event before the watch was accepted")
			}
			var ev jute.ResumableEvents
			ev.Decode(r)
			if r.Err() != nil {
				return r.Err()
			}
			if ev.Zxid <= w.LastZxid() {
				return fmt.Errorf("resumable: server sent zxid 0x%x after 0x%x", ev.Zxid, w.LastZxid())
			}
			t := Txn{Zxid: ev.Zxid, Changes: make([]Change, len(ev.Events))}
			for i, e := range ev.Events {
				t.Changes[i] = Change{Type: e.Type, Path: e.Path}
			}
			select {
			case w.txns <- t:
			case <-ctx.Done():
				return ctx.Err()
			}
			w.mu.Lock()
			w.last = ev.Zxid
			w.mu.Unlock()
		}
	}
}

func writeFrame(wr io.Writer, recs ...jute.Record) error {
	_, err := wr.Write(jute.AppendFrame(nil, recs...))
	return err
}

// maxFrame bounds a frame read from the server.
const maxFrame = 64 << 20
