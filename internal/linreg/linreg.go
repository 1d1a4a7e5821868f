package linreg

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-zookeeper/zk"
)

// Op is a register operation.
type Op uint8

const (
	Get Op = iota
	Set
	Create
	Delete
)

func (o Op) String() string {
	return [...]string{"get", "set", "create", "delete"}[o]
}

// Input is an operation as called.
type Input struct {
	Op    Op
	Key   string
	Value string // Set and Create
}

// Output is an operation's result. Failed reads are not recorded at all;
// a write whose outcome is unknown is recorded with Unknown set and an
// open-ended return time (Never): it may have taken effect at any point
// after its call, or never.
type Output struct {
	Unknown bool
	OK      bool   // set/create/delete succeeded (else NoNode/NodeExists)
	Exists  bool   // get: the node existed
	Value   string // get: its data
}

// Never is the return time of an operation whose outcome is unknown.
const Never = math.MaxInt64

type state struct {
	exists bool
	value  string
}

// Model is a register per key that may be absent.
var Model = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(Input).Key
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
	Init: func() any { return state{} },
	Step: func(st, input, output any) (bool, any) {
		s, in, out := st.(state), input.(Input), output.(Output)
		switch in.Op {
		case Get:
			return out.Exists == s.exists && out.Value == s.value, s
		case Set:
			if out.Unknown {
				if s.exists {
					return true, state{true, in.Value}
				}
				return true, s
			}
			if out.OK {
				return s.exists, state{true, in.Value}
			}
			return !s.exists, s
		case Create:
			if out.Unknown {
				if !s.exists {
					return true, state{true, in.Value}
				}
				return true, s
			}
			if out.OK {
				return !s.exists, state{true, in.Value}
			}
			return s.exists, s
		case Delete:
			if out.Unknown {
				return true, state{}
			}
			if out.OK {
				return s.exists, state{}
			}
			return !s.exists, s
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(Input), output.(Output)
		var res string
		switch {
		case out.Unknown:
			res = "unknown"
		case in.Op == Get && !out.Exists:
			res = "NoNode"
		case in.Op == Get:
			res = out.Value
		case out.OK:
			res = "ok"
		case in.Op == Create:
			res = "NodeExists"
		default:
			res = "NoNode"
		}
		switch in.Op {
		case Get, Delete:
			return fmt.Sprintf("%s(%s) -> %s", in.Op, in.Key, res)
		}
		return fmt.Sprintf("%s(%s, %s) -> %s", in.Op, in.Key, in.Value, res)
	},
	DescribeState: func(st any) string {
		s := st.(state)
		if !s.exists {
			return "(absent)"
		}
		return s.value
	},
}

// Clock gives every recorded time as nanoseconds since T0, on the
// monotonic clock.
type Clock struct{ T0 time.Time }

func (c Clock) Now() int64           { return int64(time.Since(c.T0)) }
func (c Clock) At(t time.Time) int64 { return int64(t.Sub(c.T0)) }
func (c Clock) Fmt(ns int64) string  { return time.Duration(ns).Round(time.Millisecond).String() }
func (c Clock) Dur(from, to int64) string {
	return time.Duration(to - from).Round(time.Millisecond).String()
}
func (c Clock) Since(ns int64) time.Duration {
	return time.Duration(c.Now() - ns)
}

// History collects operations from all workers, and counts results by
// operation and outcome for a summary.
type History struct {
	mu     sync.Mutex
	ops    []porcupine.Operation
	counts map[string]int
}

// Add records an operation.
func (h *History) Add(op porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// Count counts one result of kind ("set ok", "get connection closed"...).
func (h *History) Count(kind string) {
	h.mu.Lock()
	if h.counts == nil {
		h.counts = map[string]int{}
	}
	h.counts[kind]++
	h.mu.Unlock()
}

// Ops is a copy of the operations recorded so far.
func (h *History) Ops() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// Counts is a copy of the result counts.
func (h *History) Counts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.counts))
	for k, v := range h.counts {
		out[k] = v
	}
	return out
}

// Summary is the result counts, one "kind n" per line, sorted.
func (h *History) Summary() string {
	c := h.Counts()
	kinds := make([]string, 0, len(c))
	for k := range c {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "%-40s %d\n", k, c[k])
	}
	return b.String()
}

// ErrName names an error for the summary.
func ErrName(err error) string {
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

// IsDefinite reports whether err is an answer from the server that says
// the operation did not take effect.
func IsDefinite(op Op, err error) bool {
	switch op {
	case Set, Delete:
		return errors.Is(err, zk.ErrNoNode)
	case Create:
		return errors.Is(err, zk.ErrNodeExists)
	}
	return false
}

// Get reads key through conn and records the read unless it failed.
func (h *History) Get(clk Clock, client int, conn *zk.Conn, key string) error {
	call := clk.Now()
	data, _, err := conn.Get(key)
	ret := clk.Now()
	h.Count("get " + ErrName(err))
	in := Input{Op: Get, Key: key}
	switch {
	case err == nil:
		h.Add(porcupine.Operation{ClientId: client, Input: in, Call: call, Return: ret, Output: Output{Exists: true, Value: string(data)}})
	case errors.Is(err, zk.ErrNoNode):
		h.Add(porcupine.Operation{ClientId: client, Input: in, Call: call, Return: ret, Output: Output{}})
	}
	// A failed read tells nothing: not recorded.
	return err
}

// Write runs a set, create or delete through conn and records it: with its
// return time when the server answered, open-ended when the outcome is
// unknown. It returns the call and return times and the error.
func (h *History) Write(clk Clock, client int, conn *zk.Conn, in Input) (call, ret int64, err error) {
	call = clk.Now()
	switch in.Op {
	case Set:
		_, err = conn.Set(in.Key, []byte(in.Value), -1)
	case Create:
		_, err = conn.Create(in.Key, []byte(in.Value), 0, zk.WorldACL(zk.PermAll))
	case Delete:
		err = conn.Delete(in.Key, -1)
	default:
		panic("linreg: Write of a " + in.Op.String())
	}
	ret = clk.Now()
	h.Count(in.Op.String() + " " + ErrName(err))
	out := Output{OK: err == nil}
	recorded := ret
	if err != nil && !IsDefinite(in.Op, err) {
		out.Unknown, recorded = true, Never
	}
	h.Add(porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: recorded})
	return call, ret, err
}

// Check runs porcupine on ops within timeout. When the whole history is
// not linearizable it returns the keys' histories that are not (each
// checked alone, within timeout too), for the caller to report.
func Check(ops []porcupine.Operation, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo, [][]porcupine.Operation) {
	res, info := porcupine.CheckOperationsVerbose(Model, ops, timeout)
	if res != porcupine.Illegal {
		return res, info, nil
	}
	var bad [][]porcupine.Operation
	for _, part := range Model.Partition(ops) {
		if porcupine.CheckOperationsTimeout(Model, part, timeout) != porcupine.Ok {
			bad = append(bad, part)
		}
	}
	return res, info, bad
}

// Key is the key of a partition Check returned.
func Key(part []porcupine.Operation) string { return part[0].Input.(Input).Key }

// Dump writes ops, sorted by call time, one a line: call .. return,
// client, operation and result.
func Dump(ops []porcupine.Operation, clk Clock) string {
	ops = append([]porcupine.Operation(nil), ops...)
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	var b strings.Builder
	for _, op := range ops {
		ret := "never"
		if op.Return != Never {
			ret = clk.Fmt(op.Return)
		}
		fmt.Fprintf(&b, "%s .. %s client %d: %s\n", clk.Fmt(op.Call), ret, op.ClientId, Model.DescribeOperation(op.Input, op.Output))
	}
	return b.String()
}
