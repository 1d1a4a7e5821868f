package zktest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// StartPeer starts a member of an Apache ZooKeeper 3.8 ensemble
// (QuorumPeerMain) from the zoo.cfg at cfgPath, which lists the ensemble in
// server.N lines; clients reach the member at addr. It returns at once: a
// member serves only once a quorum is up (see WaitQuorum). It is stopped
// when the test ends.
func StartPeer(t testing.TB, cfgPath, addr string) *Server {
	t.Helper()
	Require(t)
	s, err := launch(t.TempDir(), "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath, addr, nil)
	if err != nil {
		t.Fatalf("start ZooKeeper %s: %v", cfgPath, err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Exited reports whether the server's process has ended.
func (s *Server) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Mode is the "Mode:" srvr reports at addr ("leader", "follower",
// "standalone"), or "" when it does not answer or does not serve.
func Mode(addr string) string {
	w, err := FourLetter(addr, "srvr")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(w, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

// WaitQuorum waits until every address answers srvr as the leader or a
// follower, with one leader, and returns the leader's index. servers, if
// given (same order), are checked for an early exit.
func WaitQuorum(addrs []string, servers []*Server, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	var modes []string
	for {
		modes = modes[:0]
		leader, followers := -1, 0
		for i, a := range addrs {
			if i < len(servers) && servers[i] != nil && servers[i].Exited() {
				return -1, fmt.Errorf("the member at %s exited:\n%s", a, servers[i].Log(30))
			}
			m := Mode(a)
			modes = append(modes, a+"="+m)
			switch m {
			case "leader":
				if leader >= 0 {
					leader = -2 // two leaders: not settled yet
				} else if leader == -1 {
					leader = i
				}
			case "follower":
				followers++
			}
		}
		if leader >= 0 && followers == len(addrs)-1 {
			return leader, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("no settled quorum within %v: %s", timeout, strings.Join(modes, " "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
