package raftsm

import (
	"fmt"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// benchUpdate measures the apply path: Updates of batch entries, each made
// by cmd from the running entry number, over 1,000 znodes /k0000.. made
// first. The commands are encoded before the timer runs; ns/op is per
// entry.
func benchUpdate(b *testing.B, batch int, cmd func(i int) *Command) {
	h := newHarness(b, b.TempDir())
	h.apply(createSession(7, 30000))
	for i := 0; i < 1000; i++ {
		h.apply(request(7, jute.OpCreate, &jute.CreateRequest{Path: fmt.Sprintf("/k%04d", i), ACL: znode.OpenACL}))
	}
	const distinct = 4096
	cmds := make([][]byte, distinct)
	for i := range cmds {
		cmds[i] = EncodeCommand(cmd(i))
	}
	entries := make([]sm.Entry, batch)
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += batch {
		for j := range entries {
			h.index++
			entries[j] = sm.Entry{Index: h.index, Cmd: cmds[(n+j)%distinct]}
		}
		if _, err := h.sm.Update(entries); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdateSetData: setData of 1 KiB values, in Updates of 1, 8 and
// 64 entries (what Dragonboat hands over at one to many requests per
// fsync).
func BenchmarkUpdateSetData(b *testing.B) {
	data := make([]byte, 1024)
	for _, batch := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			benchUpdate(b, batch, func(i int) *Command {
				return request(7, jute.OpSetData, &jute.SetDataRequest{Path: fmt.Sprintf("/k%04d", i%1000), Data: data, Version: -1})
			})
		})
	}
}

// BenchmarkUpdateMulti4: multi of 4 setData of 1 KiB values (the
// harness's multi4), in Updates of 1, 8 and 64 entries.
func BenchmarkUpdateMulti4(b *testing.B) {
	data := make([]byte, 1024)
	for _, batch := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			benchUpdate(b, batch, func(i int) *Command {
				ops := make([]jute.MultiOp, 4)
				for k := range ops {
					ops[k] = jute.MultiOp{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: fmt.Sprintf("/k%04d", (4*i+k)%1000), Data: data, Version: -1}}
				}
				return multi(7, ops...)
			})
		})
	}
}
