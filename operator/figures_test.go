package operator

import (
	"strings"
	"testing"
	"time"
)

// still is a Member whose every look gives the same values: the figures
// of an idle leader with one session, watch and connection. It stands
// for no real part; it shows what the tables and formats do with what an
// implementer returns.
type still struct{ replica *Replica }

func (still) Serving() bool { return true }
func (still) Figures() Figures {
	return Figures{Mode: "leader", Zxid: 0x10, NodeCount: 6, Watches: 1, Connections: 1, Sessions: 1,
		AvgLat: 2, Reads: Latency{Min: 1, Avg: 1.5, Max: 2, Count: 2, Sum: 3}, Proposals: Sizes{Last: 40, Min: 30, Max: 50}}
}
func (s still) Replica() *Replica { return s.replica }
func (still) Conf() Conf {
	return Conf{ClientPort: 2181, SecureClientPort: -1, DataDir: "/d", DataLogDir: "/d", TickTime: 2000,
		MinSessionTimeout: 4000, MaxSessionTimeout: 40000, ServerID: 1,
		Ensemble: &Ensemble{ElectionPort: 3888, QuorumPort: 2888, Members: "server.1=h:2888:3888:participant;0.0.0.0:2181", IsLeader: true, LeaderID: 1, LeaderIP: "h"}}
}
func (still) DirSizes() (int64, int64) { return 10, 10 }
func (still) Connections() []Connection {
	return []Connection{{Remote: "127.0.0.1:5000", Interest: 1, Received: 3, Sent: 3, Session: 0x1f, LastOp: "GETD", LastCxid: 2, HasSession: true}}
}
func (still) ResetConnections() {}
func (still) ResetStats()       {}
func (still) Sessions() Sessions {
	at := time.Unix(100, 0)
	return Sessions{Started: at.Add(-time.Second), Expiry: map[time.Time][]int64{at: {0x1f}}, Count: 1,
		Owners: []int64{0x1f}, Ephemerals: [][]string{{"/e"}}, Conns: []ConnExpiry{{Remote: "127.0.0.1:5000", Session: 0x1f, Expire: at}}}
}
func (still) WatchCount() (int, int, int) { return 1, 1, 1 }
func (still) WatchesBySession() []SessionWatches {
	return []SessionWatches{{ID: 0x1f, Paths: []string{"/w"}}}
}
func (still) WatchesByPath() []PathWatches { return []PathWatches{{Path: "/w", IDs: []int64{0x1f}}} }

var _ Member = still{}

// TestFigureTable: each name is shown once per surface, every Prometheus
// figure has a type and help, and every value is of a type that mntr
// prints as ZooKeeper does and Prometheus can take, with and without a
// replica.
func TestFigureTable(t *testing.T) {
	seen := map[shownIn]map[string]bool{inMntr: {}, inProm: {}}
	for _, fg := range figureTable {
		if fg.in&inBoth == 0 || fg.value == nil {
			t.Errorf("%s: shown nowhere, or no value", fg.name)
		}
		for _, in := range []shownIn{inMntr, inProm} {
			if fg.in&in != 0 {
				if seen[in][fg.name] {
					t.Errorf("%s is shown twice on surface %d", fg.name, in)
				}
				seen[in][fg.name] = true
			}
		}
		if prom := fg.in&inProm != 0; prom != (fg.help != "") || prom != (fg.typ == gauge || fg.typ == counter) {
			t.Errorf("%s: in Prometheus %v, help %q, type %v", fg.name, prom, fg.help, fg.typ)
		}
	}
	withReplica := still{replica: &Replica{LeaderID: 1, ApplyLagKnown: true, Store: &Store{LevelBytes: []int64{1, 2}}}}
	for _, m := range []Member{still{}, withReplica} {
		r := newReading(m)
		for _, fg := range figureTable {
			v := fg.value(r)
			switch v.(type) {
			case int, int64, float64:
			case string:
				if fg.in&inProm != 0 {
					t.Errorf("%s: a string in Prometheus", fg.name)
				}
			case nil: // not known now: Prometheus only
				if fg.in&inMntr != 0 {
					t.Errorf("%s: no value for mntr", fg.name)
				}
			case uint64, bool:
				if fg.in&inMntr != 0 {
					t.Errorf("%s: %T in mntr", fg.name, v)
				}
			case []float64:
				if fg.label == "" {
					t.Errorf("%s: several series and no label", fg.name)
				}
			default:
				t.Errorf("%s: value %v of type %T", fg.name, v, v)
			}
		}
	}
}

// TestWordsOverAMember: the words format what a Member returns as
// ZooKeeper 3.8 does (its StatCommand, ConsCommand, DumpCommand and
// WatchCommand lines), the whitelist refuses what it does not list, and a
// word that needs a serving member says so without one.
func TestWordsOverAMember(t *testing.T) {
	reg := NewRegistry()
	word := func(w string, whitelist ...string) string {
		out, ok := reg.Word(w, whitelist, strings.NewReader("\x00\x00\x00\x00\x00\x00\x00\x07"), still{})
		if !ok {
			t.Fatalf("%s: not answered", w)
		}
		return string(out)
	}
	for w, want := range map[string]string{
		"ruok": "imok",
		"srvr": "Zookeeper version: " + Version + "\nLatency min/avg/max: 0/2.0/0\nReceived: 0\nSent: 0\nConnections: 1\nOutstanding: 0\nZxid: 0x10\nMode: leader\nNode count: 6\nProposal sizes last/min/max: 40/30/50\n",
		"cons": " /127.0.0.1:5000[1](queued=0,recved=3,sent=3,sid=0x1f,lop=GETD,est=0,to=0,lcxid=0x2,lzxid=0x0,lresp=0,llat=0,minlat=0,avglat=0,maxlat=0)\n\n",
		"wchc": "0x1f\n\t/w\n\n",
		"wchp": "/w\n\t0x1f\n\n",
		"wchs": "1 connections watching 1 paths\nTotal watches:1\n",
		"stmk": "7",
		"dump": "SessionTracker dump:\nSession Sets (1)/(1):\n1 expire at Thu Jan 01 00:01:40 UTC 1970:\n\t0x1f\n" +
			"ephemeral nodes dump:\nSessions with Ephemerals (1):\n0x1f:\n\t/e\nConnections dump:\nConnections Sets (1)/(1):\n" +
			"1 expire at Thu Jan 01 00:01:40 UTC 1970:\n\tip: /127.0.0.1:5000 sessionId: 0x1f\n",
	} {
		if got := word(w, "*"); got != want {
			t.Errorf("%s = %q, want %q", w, got, want)
		}
	}
	if got := word("gtmk", "gtmk"); got != "7" {
		t.Errorf("gtmk after stmk = %q", got)
	}
	if got, want := word("srvr", "ruok"), "srvr is not executed because it is not in the whitelist.\n"; got != want {
		t.Errorf("srvr off the whitelist = %q", got)
	}
	if _, ok := reg.Word("stmk", []string{"*"}, strings.NewReader("abc"), still{}); ok {
		t.Error("stmk answered without its 8 bytes")
	}
	if got := string(must(reg.Word("mntr", []string{"*"}, strings.NewReader(""), notServing{}))); got != NotServing {
		t.Errorf("mntr without a leader = %q", got)
	}
	if got := string(must(reg.Word("ruok", []string{"*"}, strings.NewReader(""), notServing{}))); got != "imok" {
		t.Errorf("ruok without a leader = %q", got)
	}
	mntr := word("mntr", "*")
	for _, want := range []string{"zk_version\t" + Version + "\n", "zk_server_state\tleader\n", "zk_avg_latency\t2.0\n", "zk_avg_readlatency\t1.5\n", "zk_max_proposal_size\t50\n"} {
		if !strings.Contains(mntr, want) {
			t.Errorf("mntr lacks %q:\n%s", want, mntr)
		}
	}
}

type notServing struct{ still }

func (notServing) Serving() bool { return false }

func must(out []byte, ok bool) []byte {
	if !ok {
		panic("not answered")
	}
	return out
}
