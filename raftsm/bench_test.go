package raftsm

import (
	"fmt"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// BenchmarkUpdateSetData measures the apply path: batches of 64 setData
// commands (1 KiB values over 1,000 znodes) through Update on Pebble.
func BenchmarkUpdateSetData(b *testing.B) {
	h := newHarness(b, b.TempDir())
	const s1 = 7
	h.apply(createSession(s1, 30000))
	for i := 0; i < 1000; i++ {
		h.apply(request(s1, jute.OpCreate, &jute.CreateRequest{Path: fmt.Sprintf("/k%04d", i), ACL: znode.OpenACL}))
	}
	data := make([]byte, 1024)
	const batch = 64
	entries := make([]sm.Entry, batch)
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += batch {
		for j := range entries {
			h.index++
			entries[j] = sm.Entry{Index: h.index, Cmd: EncodeCommand(request(s1, jute.OpSetData,
				&jute.SetDataRequest{Path: fmt.Sprintf("/k%04d", (n+j)%1000), Data: data, Version: -1}))}
		}
		if _, err := h.sm.Update(entries); err != nil {
			b.Fatal(err)
		}
	}
}
