package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/proxy/wire"
)

const (
	// upstreamQueueBytes bounds the frames queued for the member before a
	// client's reader waits for the writer.
	upstreamQueueBytes = 8 << 20
	// upstreamWriteTimeout closes an upstream connection that does not
	// take what is written to it.
	upstreamWriteTimeout = 10 * time.Second
	// frameTimeout bounds the wait for the rest of a frame whose first
	// byte came.
	frameTimeout = 10 * time.Second
)

// upConn is one upstream connection to a member, carrying every client's
// channel.
type upConn struct {
	p    *Proxy
	nc   net.Conn
	addr string
	br   *bufio.Reader
	// idle is how long the member may stay silent: it answers every
	// keep-alive frame.
	idle time.Duration
	// zxid is the highest zxid the connection carried (Progress frames,
	// replies, notifications): a ping's answer.
	zxid atomic.Int64
	// version is the protocol version the connection speaks; sw its
	// shared watches, from version 2 on (nil before).
	version int32
	sw      *sharedWatches

	// mu guards the channel table.
	mu struct {
		sync.Mutex
		chans  map[int64]*client
		next   int64
		closed bool
	}
	// out is the writer's queue, in order.
	out       *wire.Outbox // frames for the writer
	closeOnce sync.Once
}

// dialUpstream connects to a member's proxy port and says hello in the
// newest version the proxy speaks (Config.UpstreamVersion); a member that
// refuses it but speaks an older one the proxy also speaks is greeted
// again in that one (a version 1 member: no shared watches).
func dialUpstream(p *Proxy, addr string) (*upConn, error) {
	u, err := dialVersion(p, addr, p.cfg.UpstreamVersion)
	var refused *wire.RefusedError
	if errors.As(err, &refused) && refused.Version >= wire.MinVersion && refused.Version < p.cfg.UpstreamVersion {
		p.log.Info("member speaks an older upstream protocol: saying hello in it", "member", addr, "version", refused.Version)
		u, err = dialVersion(p, addr, refused.Version)
	}
	return u, err
}

func dialVersion(p *Proxy, addr string, version int32) (*upConn, error) {
	nc, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(dialTimeout))
	if _, err := nc.Write(wire.AppendRecord(nil, wire.KindHello, 0, &wire.Hello{Magic: wire.Magic, Version: version, Name: p.cfg.Name})); err != nil {
		nc.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	kind, _, payload, err := wire.ReadFrame(br, wire.Overhead)
	var zxid int64
	var spoken int32
	if err == nil {
		spoken, zxid, err = wire.CheckReply(kind, payload)
	}
	if err == nil && spoken != version {
		err = fmt.Errorf("proxy: member %s answered a hello of version %d in version %d", addr, version, spoken)
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	u := &upConn{p: p, nc: nc, addr: addr, br: br, idle: max(3*p.cfg.KeepAliveInterval, 3*time.Second), version: version}
	u.zxid.Store(zxid)
	u.mu.chans = map[int64]*client{}
	u.out = wire.NewOutbox(upstreamQueueBytes)
	if version >= 2 {
		u.sw = newSharedWatches(u)
	}
	p.goTracked(u.writer)
	return u, nil
}

// run reads the member's frames until the connection ends, routing each
// to its channel's client in the order received.
func (u *upConn) run() error {
	max := u.p.cfg.MaxBuffer + wire.Overhead
	last := time.Now()
	for {
		if u.br.Buffered() == 0 {
			// The member is silent only when waitFrame, which tells a
			// starved reader from a silent member (liveness.go), says so.
			if err := u.waitFrame(last.Add(u.idle)); err != nil {
				return err
			}
			// The rest of a frame whose first byte came.
			u.nc.SetReadDeadline(time.Now().Add(frameTimeout))
		}
		kind, ch, payload, err := wire.ReadFrame(u.br, max)
		if err != nil {
			return err
		}
		last = time.Now()
		switch kind {
		case wire.KindData:
			if c := u.channel(ch); c != nil {
				c.fromUpstream(u, payload)
			}
		case wire.KindClose:
			if c := u.drop(ch); c != nil {
				c.closeAfterFlush()
			}
		case wire.KindEvent, wire.KindWatching:
			if u.sw == nil {
				return fmt.Errorf("proxy: member sent a %v frame on a version %d connection", kind, u.version)
			}
			if kind == wire.KindEvent {
				e := new(wire.Event)
				if err := jute.Unmarshal(payload, e); err != nil {
					return err
				}
				u.sw.event(e)
				continue
			}
			w := new(wire.Watching)
			if err := jute.Unmarshal(payload, w); err != nil {
				return err
			}
			if c := u.channel(ch); c != nil {
				u.sw.watching(c, w)
			}
		case wire.KindProgress:
			pr := new(wire.Progress)
			if err := jute.Unmarshal(payload, pr); err != nil {
				return err
			}
			u.seen(pr.Zxid)
		default:
			return fmt.Errorf("proxy: member sent a %v frame", kind)
		}
	}
}

// seen raises zxid to z.
func (u *upConn) seen(z int64) {
	for {
		cur := u.zxid.Load()
		if z <= cur || u.zxid.CompareAndSwap(cur, z) {
			return
		}
	}
}

// open gives c a channel and sends the member c's ConnectRequest. (The
// protocol's word channels are not used: the proxy answers four-letter
// words itself.)
func (u *upConn) open(c *client, connect []byte) (int64, error) {
	u.mu.Lock()
	if u.mu.closed {
		u.mu.Unlock()
		return 0, net.ErrClosed
	}
	u.mu.next++
	ch := u.mu.next
	u.mu.chans[ch] = c
	c.ch.Store(ch)
	u.mu.Unlock()
	return ch, u.send(true, wire.AppendRecord(nil, wire.KindOpen, ch, &wire.Open{ClientAddr: c.nc.RemoteAddr().String(), Connect: connect}))
}

func (u *upConn) channel(ch int64) *client {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.mu.chans[ch]
}

// drop removes a channel and returns its client, nil if it was gone.
func (u *upConn) drop(ch int64) *client {
	u.mu.Lock()
	defer u.mu.Unlock()
	c := u.mu.chans[ch]
	delete(u.mu.chans, ch)
	return c
}

// closeChannel tells the member that a client went away.
func (u *upConn) closeChannel(ch int64) {
	if u.drop(ch) != nil {
		u.send(false, wire.AppendFrame(nil, wire.KindClose, ch))
	}
}

// send queues whole frames for the writer; with block it waits while the
// queue is over its bound.
func (u *upConn) send(block bool, frames ...[]byte) error {
	if u.out.Send(block, frames...) != nil {
		return net.ErrClosed
	}
	return nil
}

func (u *upConn) writer() {
	for {
		frames, ok := u.out.Take()
		if !ok {
			return
		}
		u.nc.SetWriteDeadline(time.Now().Add(upstreamWriteTimeout))
		bufs := net.Buffers(frames)
		if _, err := bufs.WriteTo(u.nc); err != nil {
			// The reader then ends, and the proxy decides what becomes of
			// the clients (lose).
			u.out.Close()
			u.nc.Close()
			return
		}
	}
}

// close ends the connection and closes every client on it: they see
// Disconnected and reconnect (to this proxy once it has a new upstream
// connection, or to their next address).
func (u *upConn) close() { u.lose(false) }

// lose ends the connection. With keep, a client whose session can be
// reattached on the next connection is kept (detach, reattach.go), and
// the others are closed; without, all are. It returns the clients kept.
func (u *upConn) lose(keep bool) []*client {
	var kept []*client
	u.closeOnce.Do(func() {
		u.out.Close()
		u.nc.Close()
		u.mu.Lock()
		u.mu.closed = true
		chans := u.mu.chans
		u.mu.chans = nil
		u.mu.Unlock()
		for _, c := range chans {
			if keep && c.detach(u) {
				kept = append(kept, c)
				continue
			}
			c.close()
		}
	})
	return kept
}

// replyHeader decodes a downstream frame's header.
func replyHeader(body []byte) (jute.ReplyHeader, error) {
	var h jute.ReplyHeader
	err := jute.Unmarshal(body, &h)
	return h, err
}
