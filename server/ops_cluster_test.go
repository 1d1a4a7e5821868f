package server

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestFourLetterWordsEnsemble: srvr modes, the leader's mntr keys and the
// proposal-size line in a 3-member ensemble.
func TestFourLetterWordsEnsemble(t *testing.T) {
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader(20 * time.Second)
	c, _ := tc.connect(leader)
	if _, err := c.Create("/e", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	tc.mu.Lock()
	servers := map[uint64]*Server{}
	for id, s := range tc.servers {
		servers[id] = s
	}
	tc.mu.Unlock()
	for id, s := range servers {
		out := wordText(s, "srvr")
		want := "Mode: follower\n"
		if id == leader {
			want = "Mode: leader\n"
			if !strings.Contains(out, "Proposal sizes last/min/max: ") {
				t.Errorf("leader srvr lacks proposal sizes:\n%s", out)
			}
		}
		if !strings.Contains(out, want) {
			t.Errorf("member %d srvr:\n%s", id, out)
		}
		if conf := wordText(s, "conf"); !strings.Contains(conf, "membership: \nserver.1=") {
			t.Errorf("member %d conf:\n%s", id, conf)
		}
	}
	// Until the leader counts both followers synced (bounded for a slow
	// machine, not a speed claim).
	deadline := time.Now().Add(60 * time.Second)
	for {
		m := wordText(servers[leader], "mntr")
		if strings.Contains(m, "zk_server_state\tleader\n") && strings.Contains(m, "zk_synced_followers\t2\n") &&
			strings.Contains(m, "zk_learners\t2\n") && strings.Contains(m, "zk_quorum_size\t3\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader mntr:\n%s", m)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
