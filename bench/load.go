package bench

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkraft/zkraft/jute"
)

// Operation classes of the closed-loop load workloads.
const (
	classRead = iota
	classWrite
	numClasses
)

// load is a closed-loop run: every session keeps its share of -inflight
// requests outstanding; each reply issues the next request of its slot.
type load struct {
	r      *runner
	cfg    *Config
	win    *window
	keys   []string
	value  []byte
	dir    string // parent of created znodes
	issued atomic.Int64
	active sync.WaitGroup // slots still issuing
	names  [numClasses]string
}

// loadSession is one session's share; its fields are written only on the
// session's reader goroutine (or before the first request).
type loadSession struct {
	id    int
	c     *Conn
	hist  [numClasses]Histogram
	ops   [numClasses]int64
	errs  map[jute.ErrCode]int64
	slots []*slot
}

// slot is one request kept in flight: only one of its requests is
// outstanding at a time, so its state needs no lock.
type slot struct {
	l     *load
	s     *loadSession
	id    int
	rng   *rand.Rand
	seq   int64
	class int
	cb    Callback

	get     jute.GetDataRequest
	set     jute.SetDataRequest
	create  jute.CreateRequest
	multi   jute.MultiRequest
	setOps  []jute.SetDataRequest
	created []string // create-seq: the names the server gave
}

// runLoad runs write, read, mixed, create-seq or multi. It returns the
// znodes it knows it created, for the clean-up.
func (r *runner) runLoad() ([]string, error) {
	cfg := r.cfg
	l := &load{r: r, cfg: cfg, value: make([]byte, cfg.ValueSize)}
	for i := range l.value {
		l.value[i] = 'a' + byte(i%26)
	}
	r.res.InFlight = cfg.InFlight
	r.res.Params["value_size"] = cfg.ValueSize
	r.res.Unit = "requests"
	setup := time.Now()
	switch cfg.Workload {
	case WorkWrite:
		r.res.Params["write_op"] = cfg.WriteOp
		if cfg.WriteOp == "create" {
			l.names[classWrite] = "create"
			l.dir = cfg.Prefix + "/w"
		} else {
			l.names[classWrite] = "setData"
		}
	case WorkRead:
		l.names[classRead] = "getData"
	case WorkMixed:
		l.names[classRead], l.names[classWrite] = "getData", "setData"
		r.res.Params["read_ratio"] = cfg.ReadRatio
	case WorkCreateSeq:
		l.names[classWrite] = "create"
		l.dir = cfg.Prefix + "/seq"
	case WorkMulti:
		l.names[classWrite] = "multi"
		r.res.Params["multi_ops"] = cfg.MultiOps
		r.res.Unit = "multis"
	}
	if cfg.Workload != WorkCreateSeq && !(cfg.Workload == WorkWrite && cfg.WriteOp == "create") {
		r.res.Params["keys"] = cfg.Keys
		if err := r.createKeys(l); err != nil {
			return nil, err
		}
	}
	if l.dir != "" {
		if err := r.create(l.dir, nil, jute.FlagPersistent); err != nil {
			return nil, err
		}
		if cfg.Workload == WorkWrite {
			for i := 0; i < cfg.Sessions; i++ {
				if err := r.create(l.dir+"/s"+strconv.Itoa(i), nil, jute.FlagPersistent); err != nil {
					return nil, err
				}
			}
		}
	}

	conns, failed, _, err := r.dialAll(cfg.Sessions, func(int) ConnOptions { return ConnOptions{} })
	sessions := make([]*loadSession, 0, cfg.Sessions)
	for i, c := range conns {
		if c != nil {
			sessions = append(sessions, &loadSession{id: i, c: c, errs: map[jute.ErrCode]int64{}})
		}
	}
	if failed > 0 {
		for _, s := range sessions {
			s.c.Close(cfg.OpTimeout)
		}
		return nil, fmt.Errorf("%d of %d sessions failed to open: %w", failed, cfg.Sessions, err)
	}
	r.res.SetupS = time.Since(setup).Seconds()
	r.logf("%s: %d sessions, %d in flight, warm-up %v, duration %v", cfg.describe(), cfg.Sessions, cfg.InFlight, cfg.Warmup, cfg.Duration)

	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
	for _, s := range sessions {
		for j := 0; j < cfg.perSession(s.id); j++ {
			sl := &slot{l: l, s: s, id: j, rng: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))}
			sl.cb = sl.done
			sl.create.ACL = openACL
			sl.create.Data = l.value
			sl.set.Data = l.value
			sl.set.Version = -1
			if cfg.Workload == WorkCreateSeq {
				sl.create.Flags = jute.FlagPersistentSequential
				sl.create.Path = l.dir + "/n-"
			}
			if cfg.Workload == WorkMulti {
				sl.setOps = make([]jute.SetDataRequest, cfg.MultiOps)
				sl.multi.Ops = make([]jute.MultiOp, cfg.MultiOps)
				for k := range sl.setOps {
					sl.setOps[k] = jute.SetDataRequest{Data: l.value, Version: -1}
					sl.multi.Ops[k] = jute.MultiOp{Type: jute.OpSetData, Req: &sl.setOps[k]}
				}
			}
			s.slots = append(s.slots, sl)
		}
	}

	l.win = r.newWindow()
	for _, s := range sessions {
		for _, sl := range s.slots {
			l.active.Add(1)
			sl.issue()
		}
	}
	r.wait(l.win)
	r.logf("draining")
	if !waitGroup(&l.active, cfg.OpTimeout) {
		r.addErr("requests unanswered at the end", 1)
		for _, s := range sessions {
			s.c.Abort() // fails what is pending, which ends the slots
		}
		waitGroup(&l.active, cfg.OpTimeout)
	}
	r.closeAll(connsOf(sessions))

	// Sum up (the reader goroutines have exited).
	var all Histogram
	byOp := map[string]OpStats{}
	var ops int64
	var perClass [numClasses]Histogram
	var classOps [numClasses]int64
	errs := map[jute.ErrCode]int64{}
	var tracked []string
	for _, s := range sessions {
		for k := 0; k < numClasses; k++ {
			perClass[k].Merge(&s.hist[k])
			classOps[k] += s.ops[k]
			all.Merge(&s.hist[k])
			ops += s.ops[k]
		}
		for code, n := range s.errs {
			errs[code] += n
		}
		for _, sl := range s.slots {
			tracked = append(tracked, sl.created...)
			if cfg.Workload == WorkWrite && cfg.WriteOp == "create" {
				for q := int64(0); q < sl.seq; q++ {
					tracked = append(tracked, l.createPath(sl, q))
				}
			}
		}
	}
	for code, n := range errs {
		r.addErr(code.Error(), n)
	}
	secs := l.win.measured()
	r.res.DurationS = secs
	r.res.Ops = ops
	r.res.Latency = all.Summary()
	if secs > 0 {
		r.res.Throughput = float64(ops) / secs
	}
	for k := 0; k < numClasses; k++ {
		if l.names[k] == "" {
			continue
		}
		st := OpStats{Ops: classOps[k], Latency: perClass[k].Summary()}
		if secs > 0 {
			st.Throughput = float64(classOps[k]) / secs
		}
		byOp[l.names[k]] = st
	}
	if len(byOp) > 1 {
		r.res.ByOp = byOp
	}
	return tracked, nil
}

func connsOf(sessions []*loadSession) []*Conn {
	cs := make([]*Conn, len(sessions))
	for i, s := range sessions {
		cs[i] = s.c
	}
	return cs
}

// createKeys creates the -keys znodes the read, write-set, mixed and multi
// workloads use.
func (r *runner) createKeys(l *load) error {
	dir := r.cfg.Prefix + "/k"
	if err := r.create(dir, nil, jute.FlagPersistent); err != nil {
		return err
	}
	l.keys = make([]string, r.cfg.Keys)
	for i := range l.keys {
		l.keys[i] = dir + "/" + strconv.Itoa(i)
	}
	r.logf("creating %d znodes", len(l.keys))
	req := &jute.CreateRequest{Data: l.value, ACL: openACL}
	return r.pipeline(r.admin, len(l.keys), 256, func(i int) (jute.OpCode, jute.Record) {
		req.Path = l.keys[i]
		return jute.OpCreate, req
	}, nil)
}

// createPath names the q-th znode slot sl creates in the write workload
// with -write-op create.
func (l *load) createPath(sl *slot, q int64) string {
	return l.dir + "/s" + strconv.Itoa(sl.s.id) + "/" + strconv.Itoa(sl.id) + "-" + strconv.FormatInt(q, 10)
}

// key picks a random key.
func (sl *slot) key() string { return sl.l.keys[sl.rng.IntN(len(sl.l.keys))] }

// next returns the slot's next request.
func (sl *slot) next() (jute.OpCode, jute.Record, int) {
	l := sl.l
	switch l.cfg.Workload {
	case WorkRead:
		sl.get.Path = sl.key()
		return jute.OpGetData, &sl.get, classRead
	case WorkMixed:
		if sl.rng.Float64() < l.cfg.ReadRatio {
			sl.get.Path = sl.key()
			return jute.OpGetData, &sl.get, classRead
		}
		sl.set.Path = sl.key()
		return jute.OpSetData, &sl.set, classWrite
	case WorkCreateSeq:
		return jute.OpCreate, &sl.create, classWrite
	case WorkMulti:
		for k := range sl.setOps {
			sl.setOps[k].Path = sl.key()
		}
		return jute.OpMulti, &sl.multi, classWrite
	}
	// write
	if l.cfg.WriteOp == "create" {
		sl.create.Path = l.createPath(sl, sl.seq)
		sl.seq++
		return jute.OpCreate, &sl.create, classWrite
	}
	sl.set.Path = sl.key()
	return jute.OpSetData, &sl.set, classWrite
}

// issue sends the slot's next request, or retires the slot when the run is
// over.
func (sl *slot) issue() {
	l := sl.l
	if l.win.over(nanotime()) || l.issued.Add(1) > l.cfg.MaxOps {
		l.active.Done()
		return
	}
	op, req, class := sl.next()
	sl.class = class
	if err := sl.s.c.Send(op, req, sl.cb); err != nil {
		l.active.Done()
	}
}

// done handles a reply on the session's reader goroutine.
func (sl *slot) done(rep *Reply) {
	s := sl.s
	if rep.Err != jute.ErrOK {
		s.errs[rep.Err]++
	} else {
		if sl.l.win.in(rep.At) {
			s.hist[sl.class].Record(rep.Latency)
			s.ops[sl.class]++
		}
		if sl.l.cfg.Workload == WorkCreateSeq {
			var resp jute.CreateResponse
			if jute.Unmarshal(rep.Body, &resp) == nil {
				sl.created = append(sl.created, resp.Path)
			}
		}
	}
	if rep.Err == jute.ErrConnectionLoss {
		sl.l.active.Done()
		return
	}
	sl.issue()
}
