package faulttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/linreg"
)

// The register workload: each key is a znode that may or may not exist;
// clients create, set (version -1), delete and read it, with a unique value
// per write. Each round of faults uses fresh keys, so that the history of
// one key stays short whatever the length of a soak.

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
	clk     linreg.Clock
	keys    int          // keys per round
	round   atomic.Int32 // current round: keys are /reg/r<round>/k<i>
	hist    *linreg.History
	acks    *ackLog
	writesM sync.Mutex
	writes  []writeEvent // acknowledged writes (register and ack log)
}

func keyPath(round int32, k int) string { return fmt.Sprintf("/reg/r%d/k%d", round, k) }

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
			w.write(id, c, linreg.Input{Op: linreg.Set, Key: key, Value: value})
		case r < 0.75:
			w.write(id, c, linreg.Input{Op: linreg.Create, Key: key, Value: value})
		case r < 0.82:
			w.write(id, c, linreg.Input{Op: linreg.Delete, Key: key})
		default:
			w.ack(c, fmt.Sprintf("/acked/r%d/c%d-%06d", round, id, seq))
		}
		// A short pause keeps the history of a key small enough to check.
		time.Sleep(time.Duration(2+rng.IntN(6)) * time.Millisecond)
	}
}

func (w *workload) get(id int, c *client, key string) {
	w.hist.Get(w.clk, id, c.conn, key)
}

func (w *workload) write(id int, c *client, in linreg.Input) {
	if call, ret, err := w.hist.Write(w.clk, id, c.conn, in); err == nil {
		w.noteWrite(call, ret)
	}
}

func (w *workload) ack(c *client, path string) {
	call := w.clk.Now()
	_, err := c.conn.Create(path, []byte(path), 0, zk.WorldACL(zk.PermAll))
	ret := w.clk.Now()
	w.hist.Count("ack-create " + linreg.ErrName(err))
	w.acks.mu.Lock()
	switch {
	case err == nil:
		w.acks.acked[path] = true
	case errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode):
		// A unique path cannot exist yet and its parent is made before the
		// round starts: either answer is wrong.
		w.acks.failed[path] = linreg.ErrName(err)
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
