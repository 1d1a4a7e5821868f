package faulttest

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-zookeeper/zk"
)

// The checkers must find what they are for: these histories are made up.

func op(client int, call, ret int64, in regInput, out regOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Return: ret, Output: out}
}

func TestRegisterModel(t *testing.T) {
	const never = math.MaxInt64
	k, k2 := "/reg/r0/k0", "/reg/r0/k1"
	create := func(v string) regInput { return regInput{op: opCreate, key: k, value: v} }
	set := func(v string) regInput { return regInput{op: opSet, key: k, value: v} }
	get := regInput{op: opGet, key: k}
	del := regInput{op: opDelete, key: k}
	ok := regOutput{ok: true}
	unknown := regOutput{unknown: true}
	read := func(v string) regOutput { return regOutput{exists: true, value: v} }
	absent := regOutput{}
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"sequential", []porcupine.Operation{
			op(0, 0, 1, get, absent), op(0, 2, 3, create("a"), ok), op(1, 4, 5, get, read("a")),
			op(0, 6, 7, set("b"), ok), op(1, 8, 9, get, read("b")), op(0, 10, 11, del, ok),
			op(1, 12, 13, get, absent), op(1, 14, 15, set("c"), regOutput{}), op(0, 16, 17, del, regOutput{}),
		}, porcupine.Ok},
		{"concurrent write, either order read", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, 10, set("b"), ok), op(1, 3, 4, get, read("a")), op(1, 5, 6, get, read("b")),
		}, porcupine.Ok},
		{"stale read", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, 3, set("b"), ok), op(1, 4, 5, get, read("a")),
		}, porcupine.Illegal},
		{"read goes back", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, 10, set("b"), ok), op(1, 3, 4, get, read("b")), op(2, 5, 6, get, read("a")),
		}, porcupine.Illegal},
		{"lost acknowledged write", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, 3, set("b"), ok), op(1, 100, 101, get, read("a")),
		}, porcupine.Illegal},
		{"create over an existing node", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(1, 2, 3, create("b"), ok),
		}, porcupine.Illegal},
		{"unknown write applied late", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, never, set("b"), unknown), op(1, 4, 5, get, read("a")), op(1, 6, 7, get, read("b")),
		}, porcupine.Ok},
		{"unknown write never applied", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, never, set("b"), unknown), op(1, 100, 101, get, read("a")),
		}, porcupine.Ok},
		{"unknown write applied then undone", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, never, set("b"), unknown), op(1, 4, 5, get, read("b")), op(1, 6, 7, get, read("a")),
		}, porcupine.Illegal},
		{"unknown delete", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok), op(0, 2, never, del, unknown), op(1, 4, 5, get, read("a")), op(1, 6, 7, get, absent),
		}, porcupine.Ok},
		{"keys are independent", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok),
			op(1, 2, 3, regInput{op: opGet, key: k2}, absent),
			op(1, 4, 5, get, read("a")),
		}, porcupine.Ok},
		{"value read from another key", []porcupine.Operation{
			op(0, 0, 1, create("a"), ok),
			op(1, 2, 3, regInput{op: opGet, key: k2}, read("a")),
		}, porcupine.Illegal},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperationsTimeout(registerModel, c.ops, 10*time.Second); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestCheckLocks(t *testing.T) {
	clk := clock{t0: time.Now()}
	h := func(client string, token, start, end int64) holding {
		return holding{client: client, node: "n", token: token, start: start, end: end, accepted: true}
	}
	cases := []struct {
		name string
		held []holding
		want string // substring of the one expected problem; "" for none
	}{
		{"one after another", []holding{h("a", 10, 0, 5), h("b", 12, 6, 9), h("c", 20, 10, 11)}, ""},
		{"overlap without an expiry", []holding{h("a", 10, 0, 5), h("b", 12, 4, 9)}, "mutual exclusion"},
		{"overlap fenced after an expiry", []holding{
			func() holding { x := h("a", 10, 0, 5); x.expired = true; x.rejected = 1; return x }(),
			h("b", 12, 4, 9),
		}, ""},
		{"overlap, later token not greater", []holding{
			func() holding { x := h("a", 12, 0, 5); x.expired = true; return x }(),
			func() holding { x := h("b", 12, 4, 9); x.expired = true; return x }(),
		}, "fencing violated"},
		{"refused without an expiry", []holding{h("a", 12, 0, 5), func() holding { x := h("b", 10, 6, 9); x.accepted = false; x.rejected = 3; return x }()}, "refused"},
	}
	for _, c := range cases {
		got := checkLocks(c.held, clk)
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%s: unexpected problems %v", c.name, got)
		case c.want != "" && len(got) == 0:
			t.Errorf("%s: no problem found, want %q", c.name, c.want)
		case c.want != "":
			found := false
			for _, p := range got {
				found = found || strings.Contains(p, c.want)
			}
			if !found {
				t.Errorf("%s: problems %v, want one about %q", c.name, got, c.want)
			}
		}
	}
}

func TestResourceAcceptsMonotonicTokens(t *testing.T) {
	var r resource
	for _, c := range []struct {
		token int64
		want  bool
	}{{5, true}, {5, true}, {7, true}, {6, false}, {7, true}, {9, true}, {1, false}} {
		if got := r.access(c.token); got != c.want {
			t.Errorf("access(%d) = %v, want %v", c.token, got, c.want)
		}
	}
}

func TestExpiriesSeen(t *testing.T) {
	c := &client{name: "x"}
	c.events = append(c.events, []sessionEvent{
		{1, zk.StateConnecting, "m1"}, {2, zk.StateConnected, "m1"}, {3, zk.StateHasSession, "m1"},
		{10, zk.StateDisconnected, "m1"}, {11, zk.StateConnecting, "m2"}, {12, zk.StateDisconnected, "m2"},
		{13, zk.StateConnected, "m3"}, {14, zk.StateExpired, "m3"}, {15, zk.StateHasSession, "m3"},
	}...)
	got := c.expiriesSeen()
	if len(got) != 1 || got[0].lastServer != "m1" || got[0].disconnected != 10 || got[0].at != 14 {
		t.Fatalf("expiriesSeen = %+v", got)
	}
}
