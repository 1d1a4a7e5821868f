package faulttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/linreg"
)

// The lock recipe: ZooKeeper's, with the holder's fencing token the czxid
// of its lock znode. Each client creates an ephemeral-sequential znode
// under /lock (its name protected by a per-attempt prefix, so that a create
// whose answer was lost can be found again), holds the lock when its znode
// is the lowest, and otherwise watches only its predecessor.

// resource is the simulated guarded resource: it accepts a token only if
// it is at least the highest it has accepted.
type resource struct {
	mu   sync.Mutex
	max  int64
	seen int
}

func (r *resource) access(token int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen++
	if token < r.max {
		return false
	}
	r.max = token
	return true
}

// holding is one critical section.
type holding struct {
	client   string
	node     string
	token    int64
	start    int64 // when the holder learned it holds the lock
	end      int64 // when it stopped using the resource (before the release)
	accepted bool  // the resource accepted the token at the start
	rejected int   // accesses the resource refused during the section
	expired  bool  // the holder's session expired during the section
}

type lockRun struct {
	clk  linreg.Clock
	res  *resource
	mu   sync.Mutex
	held []holding
	errs map[string]int // failures seen by the recipe, by kind
}

func (l *lockRun) note(kind string) {
	l.mu.Lock()
	if l.errs == nil {
		l.errs = map[string]int{}
	}
	l.errs[kind]++
	l.mu.Unlock()
}

const lockDir = "/lock"

// seqOf is the sequence number a sequential znode's name ends with.
func seqOf(name string) string {
	if len(name) < 10 {
		return name
	}
	return name[len(name)-10:]
}

// retry runs fn until it succeeds, fails with an error in stop, or ctx
// ends; connection losses and other unknown outcomes are retried.
func retry(ctx context.Context, fn func() error, stop ...error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		for _, s := range stop {
			if errors.Is(err, s) {
				return err
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runLock runs the recipe on c until ctx ends.
func (l *lockRun) runLock(ctx context.Context, id int, c *client, rng *rand.Rand) {
	prefix := fmt.Sprintf("lock-c%d-", id)
	for attempt := 1; ctx.Err() == nil; attempt++ {
		l.once(ctx, c, rng, fmt.Sprintf("%sa%d-", prefix, attempt), prefix)
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
	}
}

// once makes one attempt: acquire, hold, release.
func (l *lockRun) once(ctx context.Context, c *client, rng *rand.Rand, mine, clientPrefix string) {
	expiriesAtStart := c.expiryCount()
	lost := func() bool { return c.expiryCount() != expiriesAtStart }

	// Create the lock znode; after an unknown outcome, look for it.
	path, err := c.conn.Create(lockDir+"/"+mine, nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		l.note("create " + linreg.ErrName(err))
		var kids []string
		if err := retry(ctx, func() (err error) { kids, _, err = c.conn.Children(lockDir); return }); err != nil {
			return
		}
		path = ""
		for _, k := range kids {
			if strings.HasPrefix(k, mine) {
				path = lockDir + "/" + k
			}
		}
		if path == "" {
			return // not created: try again with a new prefix
		}
	}
	node := path[len(lockDir)+1:]
	release := func() {
		// Retry until the znode is gone; give up only if the run is over
		// and the session is being closed anyway.
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := retry(rctx, func() error { return c.conn.Delete(path, -1) }, zk.ErrNoNode, zk.ErrClosing); err != nil && !errors.Is(err, zk.ErrNoNode) {
			l.note("release " + linreg.ErrName(err))
		}
	}
	var token int64
	if err := retry(ctx, func() error {
		ok, st, err := c.conn.Exists(path)
		if err == nil && !ok {
			return zk.ErrNoNode
		}
		if err == nil {
			token = st.Czxid
		}
		return err
	}, zk.ErrNoNode); err != nil {
		if !errors.Is(err, zk.ErrNoNode) {
			release()
		}
		return
	}

	// Wait for the lock.
	for {
		if ctx.Err() != nil {
			release()
			return
		}
		var kids []string
		if err := retry(ctx, func() (err error) { kids, _, err = c.conn.Children(lockDir); return }); err != nil {
			release()
			return
		}
		sort.Slice(kids, func(i, j int) bool { return seqOf(kids[i]) < seqOf(kids[j]) })
		idx := -1
		for i, k := range kids {
			if k == node {
				idx = i
			} else if strings.HasPrefix(k, clientPrefix) {
				// An earlier attempt's znode whose create was answered
				// with a connection loss: remove it.
				c.conn.Delete(lockDir+"/"+k, -1)
			}
		}
		if idx < 0 {
			l.note("lock znode vanished")
			return // our session expired
		}
		if idx == 0 {
			break
		}
		pred := lockDir + "/" + kids[idx-1]
		ok, _, ch, err := c.conn.ExistsW(pred)
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if !ok {
			continue
		}
		select {
		case <-ch:
		case <-time.After(2 * time.Second): // re-check; a watch can be lost with a session
		case <-ctx.Done():
		}
	}

	// Critical section: three accesses to the resource over a short hold.
	h := holding{client: c.name, node: node, token: token, start: l.clk.Now()}
	h.accepted = l.res.access(token)
	if !h.accepted {
		h.rejected++
	}
	for range 2 {
		time.Sleep(time.Duration(10+rng.IntN(40)) * time.Millisecond)
		if !l.res.access(token) {
			h.rejected++
		}
	}
	h.end = l.clk.Now()
	release()
	// A client learns that its session expired only when it reconnects,
	// which the release waits for; so whether the section ran on an
	// expired session is known only now.
	h.expired = lost()
	l.mu.Lock()
	l.held = append(l.held, h)
	l.mu.Unlock()
}

// checkLocks checks the recorded critical sections: no two overlap while
// both tokens were accepted unless the later-accepted token is strictly
// greater; and since no session is expected to expire, sections must not
// overlap at all, nor may the resource refuse a holder, unless the holder
// lost its session.
func checkLocks(held []holding, clk linreg.Clock) (problems []string) {
	hs := append([]holding(nil), held...)
	sort.Slice(hs, func(i, j int) bool { return hs[i].start < hs[j].start })
	seen := map[int64]string{}
	for _, h := range hs {
		if other, dup := seen[h.token]; dup {
			problems = append(problems, fmt.Sprintf("token %#x held twice: %s and %s/%s", h.token, other, h.client, h.node))
		}
		seen[h.token] = h.client + "/" + h.node
		if h.rejected > 0 && !h.expired {
			problems = append(problems, fmt.Sprintf("resource refused %d access(es) of %s/%s (token %#x, held %s..%s) though its session did not expire: an earlier holder had a higher token",
				h.rejected, h.client, h.node, h.token, clk.Fmt(h.start), clk.Fmt(h.end)))
		}
	}
	for i := range hs {
		for j := i + 1; j < len(hs) && hs[j].start <= hs[i].end; j++ {
			a, b := hs[i], hs[j] // b started while a held
			desc := fmt.Sprintf("%s/%s (token %#x, %s..%s) and %s/%s (token %#x, %s..%s)",
				a.client, a.node, a.token, clk.Fmt(a.start), clk.Fmt(a.end),
				b.client, b.node, b.token, clk.Fmt(b.start), clk.Fmt(b.end))
			switch {
			case a.accepted && b.accepted && b.token <= a.token:
				problems = append(problems, "fencing violated: overlapping holders both accepted, later token not greater: "+desc)
			case !a.expired && !b.expired:
				problems = append(problems, "mutual exclusion violated without an expired session: "+desc)
			}
		}
	}
	return problems
}
