package proxy

import (
	"fmt"
	"time"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/proxy/wire"
)

// Keeping clients across an upstream loss (protocol version 2).
//
// When its upstream connection ends, the proxy keeps every client whose
// session can be reattached on the next one: connected, with a session,
// and with nothing forwarded and unanswered. A client with a request in
// flight is closed, as when its ZooKeeper server dies: the request's
// outcome is unknown, and connection loss is how a client learns that.
// A kept client stays connected; the proxy answers its pings, and its
// next request waits (its reader waits in admit) until the session is
// reattached.
//
// Once a new upstream connection is up (to the same member or another),
// the proxy reattaches its kept sessions over it, at most reattachWindow
// at a time: each on a new channel, with a ConnectRequest carrying the
// session's id, password, timeout and the last zxid its client was given
// (the member reattaches it through the cell's log as a reconnecting
// client's, and refuses it if it cannot serve that zxid), then, on the
// same channel and ahead of any request of the client, one setWatches
// that re-sets the session's watches from that zxid (the member fires on
// the channel what changed since, before its reply, and registers the
// rest as the connection's shared watches). Neither the ConnectResponse
// nor the setWatches' reply reaches the client; the catch-up events do,
// in order. A session the member does not reattach (expired, or a member
// behind the client) has its client closed: it reconnects and learns its
// session's fate as from a dead server. A client whose session is not
// reattached within its timeout is closed too.
//
// A session of the cell lives while keep-alives reach the leader: during
// the gap the proxy sends none, so the gap's length is bounded by the
// session timeout, as for a client between two servers.

// reattachWindow bounds the reattaches in flight on a new upstream
// connection: a member serves them as reconnecting clients, and a
// proxy's thousands of sessions must not arrive as one storm. The member
// proposes the attaches of concurrent handshakes together (server's
// session batcher: up to 1,024 in one entry of the cell's log, 16
// entries in flight), so a window of 1,024 moves about that many
// sessions per round trip of the log (it was 256 when each attach was an
// entry of its own).
const reattachWindow = 1024

// detach keeps c while its upstream connection u is gone, if its session
// can be reattached: u speaks version 2 (the proxy knows the session's
// watches), c is connected with a session and has nothing in flight but
// the proxy's own requests. u's reader has ended.
func (c *client) detach(u *upConn) bool {
	if u.sw == nil || !c.connected.Load() || c.sessionID.Load() == 0 || c.reattaching.Load() || len(c.evq) > 0 || c.passwd == nil {
		return false
	}
	c.fl.Lock()
	for _, f := range c.fl.flights {
		if !f.internal {
			c.fl.Unlock()
			return false
		}
	}
	if c.fl.closed || isClosed(c.done) {
		c.fl.Unlock()
		return false
	}
	c.fl.flights, c.fl.bytes = nil, 0
	c.fl.detached = true
	timeout := time.Duration(c.timeout.Load()) * time.Millisecond
	if c.detachTimer != nil {
		c.detachTimer.Stop()
	}
	c.detachTimer = time.AfterFunc(timeout, func() {
		c.fl.Lock()
		still := c.fl.detached
		c.fl.Unlock()
		if still {
			c.p.stats.detachedExpired.Add(1)
			c.p.log.Info("session not reattached within its timeout: its client is closed", "session", hexID(c.sessionID.Load()))
			c.close()
		}
	})
	c.fl.Unlock()
	c.p.stats.detached.Add(1)
	return true
}

// releaseSlot gives back c's reattach slot, if it holds one.
func (c *client) releaseSlot() {
	if c.reattaching.CompareAndSwap(true, false) {
		<-c.p.reattachSlots
	}
}

// reattachAll reattaches the proxy's kept sessions on u, reattachWindow
// at a time, until none is left or u ends (the rest wait for the next
// connection).
func (p *Proxy) reattachAll(u *upConn) {
	p.mu.Lock()
	todo := make([]*client, 0, len(p.mu.detached))
	for c := range p.mu.detached {
		todo = append(todo, c)
	}
	clear(p.mu.detached)
	p.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	start := time.Now()
	p.log.Info("reattaching sessions on the new upstream connection", "member", u.addr, "sessions", len(todo))
	done := 0
	for i, c := range todo {
		select {
		case p.reattachSlots <- struct{}{}:
		case <-p.ctx.Done():
			return
		}
		if u.isClosed() {
			<-p.reattachSlots
			p.mu.Lock()
			for _, c := range todo[i:] {
				if _, ok := p.mu.clients[c]; ok {
					p.mu.detached[c] = struct{}{}
				}
			}
			p.mu.Unlock()
			return
		}
		if !c.reattach(u) {
			<-p.reattachSlots
			continue
		}
		done++
	}
	p.log.Info("sessions sent for reattachment", "member", u.addr, "sessions", done, "took", time.Since(start).Round(time.Millisecond).String())
}

// reattach sends c's session's reattach and the setWatches of its watches
// on a new channel of u, holding one reattach slot, and lets c's reader
// go on; false if c is gone.
func (c *client) reattach(u *upConn) bool {
	c.fl.Lock()
	if !c.fl.detached || c.fl.closed || isClosed(c.done) {
		c.fl.Unlock()
		return false
	}
	c.fl.Unlock()
	old := c.up.Load()
	told := max(c.told.Load(), c.zxid.Load())
	var sw2 *jute.SetWatches2
	if old != nil && old.sw != nil {
		sw2 = old.sw.takeClient(c, told)
	}
	connect := jute.Marshal(&jute.ConnectRequest{
		LastZxidSeen: told,
		TimeOut:      int32(c.timeout.Load()),
		SessionID:    c.sessionID.Load(),
		Passwd:       c.passwd,
	})
	c.connected.Store(false)
	c.reattaching.Store(true)
	c.swDropped = false // guarded by the new connection's sw.mu: c is in none of its lists yet
	c.up.Store(u)
	if _, err := u.open(c, connect); err != nil {
		c.releaseSlot()
		c.close()
		return false
	}
	var frame []byte
	if sw2 != nil && len(sw2.DataWatches)+len(sw2.ExistWatches)+len(sw2.ChildWatches)+len(sw2.PersistentWatches)+len(sw2.PersistentRecursiveWatches) > 0 {
		body := append(jute.Marshal(&jute.RequestHeader{Xid: jute.XidSetWatches, Type: jute.OpSetWatches2}), jute.Marshal(sw2)...)
		f := flight{size: len(body), op: jute.OpSetWatches2, at: time.Now(), xid: jute.XidSetWatches, internal: true,
			keys: sharedKeys(jute.OpSetWatches2, body[requestHeaderLen:]), exist: sw2.ExistWatches}
		frame = wire.AppendRecord(nil, wire.KindDataShared, c.ch.Load(), &wire.DataShared{Gen: u.sw.sendShared(f.keys), Request: body})
		c.fl.Lock()
		c.fl.flights = append(c.fl.flights, f)
		c.fl.bytes += f.size
		c.fl.Unlock()
	}
	if frame != nil {
		if err := u.send(true, frame); err != nil {
			c.close()
			return false
		}
	}
	c.fl.Lock()
	c.fl.detached = false
	if c.detachTimer != nil {
		c.detachTimer.Stop()
	}
	c.fl.cond.Broadcast()
	c.fl.Unlock()
	return true
}

func (u *upConn) isClosed() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.mu.closed
}

func hexID(id int64) string { return fmt.Sprintf("0x%x", uint64(id)) }
