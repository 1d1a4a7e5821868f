package faulttest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-zookeeper/zk"
)

// The register workload: each key is a znode that may or may not exist;
// clients create, set (version -1), delete and read it, with a unique value
// per write. Each round of faults uses fresh keys, so that the history of
// one key stays short whatever the length of a soak.

type regOp uint8

const (
	opGet regOp = iota
	opSet
	opCreate
	opDelete
)

func (o regOp) String() string {
	return [...]string{"get", "set", "create", "delete"}[o]
}

type regInput struct {
	op    regOp
	key   string
	value string // set and create
}

// regOutput is an operation's result. Failed reads are not recorded at
// all; a write whose outcome is unknown (connection loss, timeout, expired
// session) is recorded with unknown set and an open-ended return time: it
// may have taken effect at any point after its call, or never.
type regOutput struct {
	unknown bool
	ok      bool   // set/create/delete succeeded (else NoNode/NodeExists)
	exists  bool   // get: the node existed
	value   string // get: its data
}

type regState struct {
	exists bool
	value  string
}

// registerModel is a register per key that may be absent.
var registerModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(regInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		switch in.op {
		case opGet:
			return out.exists == s.exists && out.value == s.value, s
		case opSet:
			if out.unknown {
				if s.exists {
					return true, regState{true, in.value}
				}
				return true, s
			}
			if out.ok {
				return s.exists, regState{true, in.value}
			}
			return !s.exists, s
		case opCreate:
			if out.unknown {
				if !s.exists {
					return true, regState{true, in.value}
				}
				return true, s
			}
			if out.ok {
				return !s.exists, regState{true, in.value}
			}
			return s.exists, s
		case opDelete:
			if out.unknown {
				return true, regState{}
			}
			if out.ok {
				return s.exists, regState{}
			}
			return !s.exists, s
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		res := "?"
		switch {
		case out.unknown:
			res = "unknown"
		case in.op == opGet && !out.exists:
			res = "NoNode"
		case in.op == opGet:
			res = out.value
		case out.ok:
			res = "ok"
		case in.op == opCreate:
			res = "NodeExists"
		default:
			res = "NoNode"
		}
		if in.op == opGet {
			return fmt.Sprintf("get(%s) -> %s", in.key, res)
		}
		if in.op == opDelete {
			return fmt.Sprintf("delete(%s) -> %s", in.key, res)
		}
		return fmt.Sprintf("%s(%s, %s) -> %s", in.op, in.key, in.value, res)
	},
	DescribeState: func(state any) string {
		s := state.(regState)
		if !s.exists {
			return "(absent)"
		}
		return s.value
	},
}

// history collects operations from all workers.
type history struct {
	mu  sync.Mutex
	ops []porcupine.Operation
	// errs counts results by operation and outcome, for the summary.
	errs map[string]int
}

func (h *history) add(op porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

func (h *history) count(kind string) {
	h.mu.Lock()
	if h.errs == nil {
		h.errs = map[string]int{}
	}
	h.errs[kind]++
	h.mu.Unlock()
}

func (h *history) snapshot() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// errName names an error for the summary.
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	for _, e := range []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrConnectionClosed, zk.ErrSessionExpired,
		zk.ErrSessionMoved, zk.ErrNoServer, zk.ErrClosing} {
		if errors.Is(err, e) {
			return strings.TrimPrefix(e.Error(), "zk: ")
		}
	}
	return err.Error()
}

// ackLog is the acknowledged-write check: each worker creates znodes of
// unique paths under /acked/r<round>; every one acknowledged must be there
// at the end, and nothing that was never attempted.
type ackLog struct {
	mu      sync.Mutex
	acked   map[string]bool // path -> acknowledged
	unknown map[string]bool // path -> outcome unknown
	failed  map[string]string
}

func newAckLog() *ackLog {
	return &ackLog{acked: map[string]bool{}, unknown: map[string]bool{}, failed: map[string]string{}}
}

// writeEvent is an acknowledged write, for failover figures.
type writeEvent struct{ call, ret int64 }

// workload runs the register and ack-log clients.
type workload struct {
	clk     clock
	keys    int          // keys per round
	round   atomic.Int32 // current round: keys are /reg/r<round>/k<i>
	hist    *history
	acks    *ackLog
	writesM sync.Mutex
	writes  []writeEvent // acknowledged writes (register and ack log)
}

func keyPath(round int32, k int) string { return fmt.Sprintf("/reg/r%d/k%d", round, k) }

// isDefinite reports whether err is an answer from the ensemble that says
// the operation did not take effect.
func isDefinite(op regOp, err error) bool {
	switch op {
	case opSet, opDelete:
		return errors.Is(err, zk.ErrNoNode)
	case opCreate:
		return errors.Is(err, zk.ErrNodeExists)
	}
	return false
}

// run is one worker's loop until ctx ends.
func (w *workload) run(ctx context.Context, id int, c *client, rng *rand.Rand) {
	seq := 0
	for ctx.Err() == nil {
		seq++
		round := w.round.Load()
		key := keyPath(round, rng.IntN(w.keys))
		value := fmt.Sprintf("c%d-%d", id, seq)
		r := rng.Float64()
		switch {
		case r < 0.40:
			w.get(id, c, key)
		case r < 0.65:
			w.write(id, c, regInput{op: opSet, key: key, value: value})
		case r < 0.75:
			w.write(id, c, regInput{op: opCreate, key: key, value: value})
		case r < 0.82:
			w.write(id, c, regInput{op: opDelete, key: key})
		default:
			w.ack(c, fmt.Sprintf("/acked/r%d/c%d-%06d", round, id, seq))
		}
		// A short pause keeps the history of a key small enough to check.
		time.Sleep(time.Duration(2+rng.IntN(6)) * time.Millisecond)
	}
}

func (w *workload) get(id int, c *client, key string) {
	call := w.clk.now()
	data, _, err := c.conn.Get(key)
	ret := w.clk.now()
	w.hist.count("get " + errName(err))
	switch {
	case err == nil:
		w.hist.add(porcupine.Operation{ClientId: id, Input: regInput{op: opGet, key: key}, Call: call, Return: ret,
			Output: regOutput{exists: true, value: string(data)}})
	case errors.Is(err, zk.ErrNoNode):
		w.hist.add(porcupine.Operation{ClientId: id, Input: regInput{op: opGet, key: key}, Call: call, Return: ret,
			Output: regOutput{}})
	}
	// A failed read tells nothing: not recorded.
}

func (w *workload) write(id int, c *client, in regInput) {
	call := w.clk.now()
	var err error
	switch in.op {
	case opSet:
		_, err = c.conn.Set(in.key, []byte(in.value), -1)
	case opCreate:
		_, err = c.conn.Create(in.key, []byte(in.value), 0, zk.WorldACL(zk.PermAll))
	case opDelete:
		err = c.conn.Delete(in.key, -1)
	}
	ret := w.clk.now()
	w.hist.count(in.op.String() + " " + errName(err))
	out := regOutput{ok: err == nil}
	switch {
	case err == nil:
		w.noteWrite(call, ret)
	case isDefinite(in.op, err):
	default:
		out.unknown, ret = true, math.MaxInt64
	}
	w.hist.add(porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
}

func (w *workload) ack(c *client, path string) {
	call := w.clk.now()
	_, err := c.conn.Create(path, []byte(path), 0, zk.WorldACL(zk.PermAll))
	ret := w.clk.now()
	w.hist.count("ack-create " + errName(err))
	w.acks.mu.Lock()
	switch {
	case err == nil:
		w.acks.acked[path] = true
	case errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode):
		// A unique path cannot exist yet and its parent is made before the
		// round starts: either answer is wrong.
		w.acks.failed[path] = errName(err)
	default:
		w.acks.unknown[path] = true
	}
	w.acks.mu.Unlock()
	if err == nil {
		w.noteWrite(call, ret)
	}
}

func (w *workload) noteWrite(call, ret int64) {
	w.writesM.Lock()
	w.writes = append(w.writes, writeEvent{call, ret})
	w.writesM.Unlock()
}

// firstWriteAfter returns the earliest acknowledgement of a write called at
// or after t, or -1.
func (w *workload) firstWriteAfter(t int64) int64 {
	w.writesM.Lock()
	defer w.writesM.Unlock()
	best := int64(-1)
	for _, e := range w.writes {
		if e.call >= t && (best < 0 || e.ret < best) {
			best = e.ret
		}
	}
	return best
}
