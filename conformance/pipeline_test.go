package conformance

import (
	"bytes"
	"fmt"
	"testing"
)

// Pipelining: requests sent back to back on one connection are answered in
// order, each read seeing the writes sent before it on the same connection.

func TestPipelining(t *testing.T) {
	base := uniquePath(t)
	c := rawSession(t, 10000)
	const n = 100

	type sent struct {
		xid  int32
		op   int32
		path string
		data string
	}
	var reqs []sent
	var wire bytes.Buffer
	add := func(op int32, path, data string, body []byte) {
		c.xid++
		reqs = append(reqs, sent{c.xid, op, path, data})
		wire.Write(frame(append(new(jw).i32(c.xid).i32(op).bytes(), body...)))
	}
	for i := 0; i < n; i++ {
		p, d := fmt.Sprintf("%s/n%03d", base, i), fmt.Sprintf("data-%d", i)
		add(opCreate, p, d, createReq(p, []byte(d), 0))
		if i%10 == 9 {
			// A read of a node created just before, in the same burst.
			add(opGetData, p, d, pathWatchReq(p, false))
		}
	}
	// A failing write in the middle of the burst does not disturb the order.
	dup := fmt.Sprintf("%s/n%03d", base, 0)
	add(opCreate, dup, "", createReq(dup, nil, 0))
	for i := 0; i < n; i++ {
		p, d := fmt.Sprintf("%s/n%03d", base, i), fmt.Sprintf("data-%d", i)
		add(opGetData, p, d, pathWatchReq(p, false))
	}
	add(opGetChildren, base, "", pathWatchReq(base, false))

	// All of it in one write.
	if err := c.writeRaw(wire.Bytes()); err != nil {
		t.Fatalf("writing %d pipelined requests: %v", len(reqs), err)
	}

	var lastWrite, lastZxid int64
	for i, r := range reqs {
		rep, err := c.readReply(rawIOTimeout)
		if err != nil {
			t.Fatalf("reply %d of %d: %v", i, len(reqs), err)
		}
		if rep.Xid != r.xid {
			t.Fatalf("reply %d has xid %d, want %d (replies must come in request order)", i, rep.Xid, r.xid)
		}
		if rep.Zxid < lastZxid {
			t.Fatalf("reply %d zxid %#x went back from %#x", i, rep.Zxid, lastZxid)
		}
		lastZxid = rep.Zxid
		switch {
		case r.op == opCreate && r.path == dup && i > n:
			if rep.Err != errNodeExists {
				t.Fatalf("duplicate create in the burst: %v, want NODEEXISTS", rep)
			}
			lastWrite = rep.Zxid
		case r.op == opCreate:
			got := (&jr{b: rep.Body}).str()
			if rep.Err != errOK || got != r.path {
				t.Fatalf("create %s: %v path %q", r.path, rep, got)
			}
			// Each write takes the next zxid.
			if lastWrite != 0 && rep.Zxid != lastWrite+1 {
				t.Fatalf("create %s at zxid %#x, want %#x", r.path, rep.Zxid, lastWrite+1)
			}
			lastWrite = rep.Zxid
		case r.op == opGetData:
			rd := &jr{b: rep.Body}
			data, st := rd.buf(), rd.stat()
			if rep.Err != errOK || rd.end() != nil || string(data) != r.data || st.Czxid > rep.Zxid {
				t.Fatalf("getData %s: %v data %q czxid %#x, want %q", r.path, rep, data, st.Czxid, r.data)
			}
			if rep.Zxid < lastWrite {
				t.Fatalf("getData %s reply zxid %#x is older than the write before it (%#x)", r.path, rep.Zxid, lastWrite)
			}
		case r.op == opGetChildren:
			rd := &jr{b: rep.Body}
			if names := rd.strs(); rep.Err != errOK || len(names) != n {
				t.Fatalf("getChildren: %v, %d names, want %d", rep, len(names), n)
			}
		}
	}
}
