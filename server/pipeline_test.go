package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/fleet"
	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/znode"
)

// localReplica is a test double of the replication layer: the real state
// machine (raftsm over Pebble), applied in process, in proposal order, by
// one applier goroutine, with no Raft. It keeps what replica promises the
// pipeline: a command's events reach the cell before its proposal
// completes (Update calls the sink), and a read sees every completed
// proposal.
type localReplica struct {
	sm    *raftsm.StateMachine
	queue chan *localProposal
	index uint64 // the applier's
	done  chan struct{}
}

var _ replica = (*localReplica)(nil)

type localProposal struct {
	cmd  []byte
	done chan struct{}
	rep  *raftsm.Reply
	err  error
}

func (p *localProposal) ready() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *localProposal) wait(done <-chan struct{}) (*raftsm.Reply, error) {
	select {
	case <-p.done:
		return p.rep, p.err
	case <-done:
		return nil, net.ErrClosed
	}
}

func newLocalReplica(t *testing.T, sink raftsm.EventSink) *localReplica {
	r := &localReplica{
		sm:    raftsm.New(raftsm.Config{Dir: t.TempDir(), Sink: sink, Options: znode.Options{}}, 1, 1),
		queue: make(chan *localProposal, 1024),
		done:  make(chan struct{}),
	}
	idx, err := r.sm.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	r.index = idx
	go r.apply()
	t.Cleanup(func() {
		close(r.queue)
		<-r.done
		r.sm.Close()
	})
	return r
}

// apply applies the queued proposals in order, those queued together in
// one Update (as Dragonboat batches committed entries).
func (r *localReplica) apply() {
	defer close(r.done)
	for p := range r.queue {
		batch := []*localProposal{p}
	more:
		for len(batch) < 64 {
			select {
			case q, ok := <-r.queue:
				if !ok {
					break more
				}
				batch = append(batch, q)
			default:
				break more
			}
		}
		entries := make([]sm.Entry, len(batch))
		for i, p := range batch {
			r.index++
			entries[i] = sm.Entry{Index: r.index, Cmd: p.cmd}
		}
		out, err := r.sm.Update(entries)
		for i, p := range batch {
			if err != nil {
				p.err = err
			} else {
				p.rep = new(raftsm.Reply)
				p.err = jute.Unmarshal(out[i].Result.Data, p.rep)
			}
			close(p.done)
		}
	}
}

func (r *localReplica) propose(cmd *raftsm.Command) (proposal, error) {
	p := &localProposal{cmd: raftsm.EncodeCommand(cmd), done: make(chan struct{})}
	r.queue <- p
	return p, nil
}

func (r *localReplica) proposeRetry(cmd *raftsm.Command, done <-chan struct{}) (*raftsm.Reply, bool, error) {
	rep, err := proposeWait(r, cmd, done)
	return rep, false, err
}

func (r *localReplica) startRead() readTicket { return nil }

// read runs q at once: every completed proposal is applied here.
func (r *localReplica) read(_ readTicket, q readQuery) error {
	_, err := r.sm.Lookup(q.lookup())
	return err
}

func (r *localReplica) membership(context.Context) (shardMembers, error) {
	return shardMembers{voters: map[uint64]string{1: "local"}}, nil
}

func (r *localReplica) addReplica(context.Context, uint64, string, bool, uint64) error {
	return errors.New("localReplica: one replica")
}

func (r *localReplica) removeReplica(context.Context, uint64, uint64) error {
	return errors.New("localReplica: one replica")
}

// startOverLocalReplica starts the connection pipeline (listener,
// connections, watch registry, sessions as the cell sees them) over a
// localReplica: no NodeHost, no Raft.
func startOverLocalReplica(t *testing.T, mode ReadMode) *Server {
	s, err := newServer(Config{ClientAddr: "127.0.0.1:0", DataDir: t.TempDir(), TickTime: 200 * time.Millisecond,
		ReadMode: mode, Logger: testLogger(t, 1)})
	if err != nil {
		t.Fatal(err)
	}
	c := newCell(s, fleet.DefaultCell, 1, 1)
	c.rep = newLocalReplica(t, c)
	c.leaderID.Store(1)
	c.leader.Store(true)
	s.cell = c
	ln, err := net.Listen("tcp", s.cfg.ClientAddr)
	if err != nil {
		t.Fatal(err)
	}
	s.ln = ln
	s.routines.start(func() { s.acceptLoop(ln, c) })
	t.Cleanup(func() {
		s.mu.Lock()
		s.mu.closed = true
		conns := make([]*conn, 0, len(s.mu.conns))
		for cn := range s.mu.conns {
			conns = append(conns, cn)
		}
		s.mu.Unlock()
		s.routines.stop()
		s.cancel()
		ln.Close()
		for _, cn := range conns {
			cn.close()
		}
		s.routines.wait()
	})
	return s
}

// orderChecker reads one connection's frames and checks the pipeline's
// ordering invariants: replies come in request order, and the
// notification of a change (zxid z) comes before any reply that reflects
// it (a reply with zxid >= z).
type orderChecker struct {
	t        *testing.T
	name     string
	maxReply int64
	nextXid  int32
	notes    int
}

func (o *orderChecker) frame(b []byte) {
	r := jute.NewReader(b)
	h := new(jute.ReplyHeader)
	h.Decode(r)
	if r.Err() != nil {
		o.t.Errorf("%s: reply header: %v", o.name, r.Err())
		return
	}
	if h.Xid == jute.XidNotification {
		ev := new(jute.WatcherEvent)
		ev.Decode(r)
		if h.Zxid <= o.maxReply {
			o.t.Errorf("%s: notification %v %s of zxid %d after a reply with zxid %d reflected it", o.name, ev.Type, ev.Path, h.Zxid, o.maxReply)
		}
		o.notes++
		return
	}
	o.nextXid++
	if h.Xid != o.nextXid {
		o.t.Errorf("%s: reply to xid %d, want %d (out of order)", o.name, h.Xid, o.nextXid)
		o.nextXid = h.Xid
	}
	if h.Err != jute.ErrOK {
		o.t.Errorf("%s: xid %d failed: %v", o.name, h.Xid, h.Err)
	}
	o.maxReply = max(o.maxReply, h.Zxid)
}

// TestPipelineOrderOverReplica drives the connection pipeline over a
// replica without Raft and checks its ordering invariant: on each
// connection a change's notification is queued before any reply that
// reflects the change, and replies keep request order. A writer pipelines
// a watch on its own node before each setData of it (each notification
// must come before that setData's reply). A reader sets a watch, another
// connection changes the node and the reader reads it again at once, the
// read racing the change (its notification must come before the first
// read reply that shows it); a last read after every change is
// acknowledged shows them all.
func TestPipelineOrderOverReplica(t *testing.T) {
	for name, mode := range map[string]ReadMode{"linearizable": ReadLinearizable, "sequential": ReadSequential} {
		t.Run(name, func(t *testing.T) {
			s := startOverLocalReplica(t, mode)
			addr := s.Addr().String()
			setup := dialRaw(t, addr)
			for _, p := range []string{"/own", "/shared"} {
				if h, _, err := setup.call(jute.OpCreate, &jute.CreateRequest{Path: p, ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}}); err != nil || h.Err != jute.ErrOK {
					t.Fatalf("create %s: %+v %v", p, h, err)
				}
			}
			const rounds = 300
			send := func(rc *rawClient, op jute.OpCode, req jute.Record) {
				rc.xid++
				if _, err := rc.nc.Write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: rc.xid, Type: op}, req)); err != nil {
					t.Error(err)
				}
			}
			// untilReply reads rc's frames into o until the reply to rc's
			// last request; false on a read error.
			untilReply := func(rc *rawClient, o *orderChecker) bool {
				rc.nc.SetReadDeadline(time.Now().Add(60 * time.Second))
				for o.nextXid < rc.xid {
					b, err := rc.frame()
					if err != nil {
						t.Errorf("%s: after reply %d: %v", o.name, o.nextXid, err)
						return false
					}
					o.frame(b)
				}
				return true
			}

			writer := dialRaw(t, addr)
			wo := &orderChecker{t: t, name: "writer"}
			wrote := make(chan struct{})
			go func() {
				defer close(wrote)
				for i := range rounds {
					send(writer, jute.OpGetData, &jute.GetDataRequest{Path: "/own", Watch: true})
					send(writer, jute.OpSetData, &jute.SetDataRequest{Path: "/own", Data: []byte(fmt.Sprint(i)), Version: -1})
				}
			}()
			read := make(chan struct{})
			go func() {
				defer close(read)
				<-wrote
				untilReply(writer, wo)
			}()

			reader, other := dialRaw(t, addr), dialRaw(t, addr)
			ro, oo := &orderChecker{t: t, name: "reader"}, &orderChecker{t: t, name: "other"}
			send(reader, jute.OpGetData, &jute.GetDataRequest{Path: "/shared", Watch: true})
			for i := 0; i < rounds && untilReply(reader, ro); i++ {
				send(other, jute.OpSetData, &jute.SetDataRequest{Path: "/shared", Data: []byte(fmt.Sprint(i)), Version: -1})
				send(reader, jute.OpGetData, &jute.GetDataRequest{Path: "/shared", Watch: true})
			}
			untilReply(other, oo)
			send(reader, jute.OpGetData, &jute.GetDataRequest{Path: "/shared"})
			untilReply(reader, ro)
			<-read

			// Each setData changed a node the getData before it watched.
			if wo.notes != rounds {
				t.Errorf("writer: %d notifications, want %d", wo.notes, rounds)
			}
			// The first change fired the watch set before it was sent; the
			// last read's reply shows it.
			if ro.notes == 0 {
				t.Errorf("reader: no notification")
			}
			t.Logf("reader: %d notifications for %d changes", ro.notes, rounds)
		})
	}
}
