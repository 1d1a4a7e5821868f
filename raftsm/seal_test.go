package raftsm

import (
	"bytes"
	"testing"

	"github.com/zkraft/zkraft/jute"
)

// TestSeal: a sealed namespace refuses every write and every new session
// with NOTREADONLY and no zxid, in the same Update as the seal too; reads,
// keep-alives and closing a session (its ephemerals go) go on; the seal
// survives a reopen and travels in a snapshot; unseal takes writes again.
func TestSeal(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.apply(createSession(0x1, 1000), createSession(0x2, 1000))
	h.apply(create(0x1, "/a", 0), create(0x2, "/e", jute.FlagEphemeral))
	before, aData := h.zxid(), string(h.node("/a").Data)
	sealed := func() bool {
		return h.view(func(v View) (any, error) { return v.Sealed() }).(bool)
	}
	if sealed() {
		t.Fatal("a new namespace is sealed")
	}
	// The write after the seal in the same batch is refused already.
	reps := h.apply(&Command{Kind: KindSeal}, create(0x1, "/b", 0), setData(0x1, "/a", "x", -1), createSession(0x3, 1000),
		&Command{Kind: KindSeal})
	for i, r := range reps[1:4] {
		if r.Err != jute.ErrNotReadOnly || r.Zxid != before {
			t.Errorf("command %d after the seal: %v zxid %#x, want NOTREADONLY at %#x", i+1, r.Err, r.Zxid, before)
		}
	}
	if reps[0].Err != jute.ErrOK || reps[4].Err != jute.ErrOK || h.zxid() != before || !sealed() {
		t.Fatalf("seal: %v %v, zxid %#x (was %#x), sealed %v", reps[0].Err, reps[4].Err, h.zxid(), before, sealed())
	}
	if h.node("/b") != nil || string(h.node("/a").Data) != aData {
		t.Errorf("a write after the seal changed the tree:\n%s", h.tree())
	}
	// Sessions can still end, and their ephemerals with them.
	h.apply(keepAlive(0x1))
	if r := h.apply1(closeSession(0x2)); r.Err != jute.ErrOK || h.node("/e") != nil {
		t.Errorf("close a session of a sealed namespace: %v, /e %v", r.Err, h.node("/e"))
	}
	// Kept across a reopen and in a snapshot.
	h.reopen()
	if !sealed() || h.apply1(create(0x1, "/c", 0)).Err != jute.ErrNotReadOnly {
		t.Errorf("the seal did not survive a reopen")
	}
	snap := h.save()
	dst := newHarness(t, t.TempDir())
	if err := dst.sm.RecoverFromSnapshot(bytes.NewReader(snap), make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	dst.index = dst.sm.mu.applied
	if r := dst.apply1(create(0x1, "/c", 0)); r.Err != jute.ErrNotReadOnly {
		t.Errorf("a replica recovered from a sealed snapshot took a write: %v", r.Err)
	}
	// Unsealed, it takes writes again.
	if r := h.apply1(&Command{Kind: KindUnseal}); r.Err != jute.ErrOK || sealed() {
		t.Fatalf("unseal: %v, sealed %v", r.Err, sealed())
	}
	if r := h.apply1(create(0x1, "/c", 0)); r.Err != jute.ErrOK || r.Zxid != h.zxid() || h.node("/c") == nil {
		t.Errorf("create after unseal: %v", r.Err)
	}
	h.reopen()
	if sealed() {
		t.Errorf("sealed again after a reopen")
	}
}
