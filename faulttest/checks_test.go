package faulttest

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/linreg"
)

// The checkers must find what they are for: these histories are made up.

func TestCheckLocks(t *testing.T) {
	clk := linreg.Clock{T0: time.Now()}
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
