package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/linreg"
)

// regLoad is internal/linreg's register workload on one cell of the fleet
// test: a few clients, each with its own session on the cell's connect
// string, reading and writing a few keys. The keys are renewed every
// regEpoch (/reg-<phase>-e<epoch>-k<i>), so each key's history stays short
// enough for porcupine whatever the phase's length, and each client pauses
// between operations. It runs until finish, or for at most regMaxOps
// operations per client.
type regLoad struct {
	cell, phase string
	clk         linreg.Clock
	hist        linreg.History
	stop        chan struct{}
	wg          sync.WaitGroup
	conns       []*zk.Conn
}

const (
	regClients = 3
	regKeys    = 3
	regEpoch   = 2 * time.Second
	regMaxOps  = 4000
)

func startRegLoad(t *testing.T, cell, phase string, addrs []string, clk linreg.Clock) *regLoad {
	t.Helper()
	r := &regLoad{cell: cell, phase: phase, clk: clk, stop: make(chan struct{})}
	for i := 0; i < regClients; i++ {
		zc, _, err := zk.Connect(addrs, 10*time.Second, zk.WithLogger(quiet{}))
		if err != nil {
			t.Fatalf("cell %s: register client %d: %v", cell, i, err)
		}
		r.conns = append(r.conns, zc)
	}
	for i, zc := range r.conns {
		r.wg.Add(1)
		go r.run(i, zc, rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(i))))
	}
	return r
}

func (r *regLoad) run(id int, zc *zk.Conn, rng *rand.Rand) {
	defer r.wg.Done()
	for seq := 1; seq <= regMaxOps; seq++ {
		select {
		case <-r.stop:
			return
		default:
		}
		epoch := r.clk.Now() / int64(regEpoch)
		key := fmt.Sprintf("/reg-%s-e%d-k%d", r.phase, epoch, rng.IntN(regKeys))
		value := fmt.Sprintf("%s-c%d-%d", r.cell, id, seq)
		var err error
		switch x := rng.Float64(); {
		case x < 0.45:
			err = r.hist.Get(r.clk, id, zc, key)
		case x < 0.75:
			_, _, err = r.hist.Write(r.clk, id, zc, linreg.Input{Op: linreg.Set, Key: key, Value: value})
		case x < 0.92:
			_, _, err = r.hist.Write(r.clk, id, zc, linreg.Input{Op: linreg.Create, Key: key, Value: value})
		default:
			_, _, err = r.hist.Write(r.clk, id, zc, linreg.Input{Op: linreg.Delete, Key: key})
		}
		pause := time.Duration(3+rng.IntN(8)) * time.Millisecond
		if err != nil && !linreg.IsDefinite(linreg.Set, err) && !linreg.IsDefinite(linreg.Create, err) {
			pause = 50 * time.Millisecond // lost with the connection: the client reconnects
		}
		time.Sleep(pause)
	}
}

// answeredAfter counts the operations called after at that the cell
// answered (their outcome is known).
func (r *regLoad) answeredAfter(at int64) int {
	n := 0
	for _, op := range r.hist.Ops() {
		if op.Call >= at && op.Return != linreg.Never {
			n++
		}
	}
	return n
}

// finish stops the clients, closes their sessions and checks the cell's
// history for linearizability; a key whose history is not linearizable is
// reported with its operations (written to a directory kept after the
// test).
func (r *regLoad) finish(t *testing.T) {
	t.Helper()
	close(r.stop)
	r.wg.Wait()
	for _, zc := range r.conns {
		zc.Close()
	}
	ops := r.hist.Ops()
	start := time.Now()
	res, info, bad := linreg.Check(ops, 2*time.Minute)
	t.Logf("cell %s, %s: porcupine on %d operations over %d keys: %s in %v; results:\n%s", r.cell, r.phase, len(ops),
		len(linreg.Model.Partition(ops)), res, time.Since(start).Round(time.Millisecond), r.hist.Summary())
	switch res {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		t.Errorf("cell %s, %s: porcupine could not decide within its time limit (%d operations)", r.cell, r.phase, len(ops))
		return
	}
	dir, err := os.MkdirTemp("", "fleet-histories-")
	if err != nil {
		dir = t.TempDir()
	}
	vis := filepath.Join(dir, fmt.Sprintf("linearizability-%s-%s.html", r.cell, r.phase))
	if err := porcupine.VisualizePath(linreg.Model, info, vis); err != nil {
		t.Logf("visualization: %v", err)
	}
	for _, part := range bad {
		dump := linreg.Dump(part, r.clk)
		file := filepath.Join(dir, fmt.Sprintf("history-%s%s.txt", r.cell, strings.ReplaceAll(linreg.Key(part), "/", "_")))
		os.WriteFile(file, []byte(dump), 0o644)
		lines := strings.Split(dump, "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		t.Errorf("cell %s: the history of %s (%d operations) is not linearizable (%s, %s); its last operations:\n%s",
			r.cell, linreg.Key(part), len(part), file, vis, strings.Join(lines, "\n"))
	}
}
