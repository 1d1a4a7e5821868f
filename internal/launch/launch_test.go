package launch

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestCPUSecondsReadsProcStat(t *testing.T) {
	// Burn a little CPU so that both clocks have something to show: 100
	// ms of it by getrusage (10 ticks of /proc's), however long that takes
	// on a loaded machine (a 50 ms wall-clock burn once got one tick's
	// worth of CPU and /proc showed 0).
	for start := SelfCPUSeconds(); SelfCPUSeconds()-start < 0.1; {
		for x := 0; x < 1_000_000; x++ {
			_ = x * x
		}
	}
	proc, err := CPUSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	self := SelfCPUSeconds()
	// /proc counts 10 ms ticks; getrusage microseconds. They describe the
	// same process a moment apart.
	if proc <= 0 || proc > self+0.05 || self-proc > 0.1 {
		t.Fatalf("CPUSeconds %v, getrusage %v", proc, self)
	}
	if _, err := CPUSeconds(1 << 30); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}

func TestBothSystemsReadTheSameZooCfg(t *testing.T) {
	for _, members := range []int{1, 3} {
		cfgs := map[System][]string{}
		for _, sys := range []System{ZooKeeper, Zkraft} {
			e, err := New(Config{System: sys, Members: members, Dir: t.TempDir(), ZkraftBin: "/bin/true"})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, l := range strings.Split(strings.TrimSpace(e.ZooCfg()), "\n") {
				k, _, _ := strings.Cut(l, "=")
				keys = append(keys, k)
			}
			cfgs[sys] = keys
			if members > 1 {
				for _, m := range e.Members {
					b, err := os.ReadFile(m.DataDir() + "/myid")
					if err != nil || strings.TrimSpace(string(b)) != string(rune('0'+m.ID)) {
						t.Fatalf("member %d: myid %q, %v", m.ID, b, err)
					}
				}
			}
		}
		if !slices.Equal(cfgs[ZooKeeper], cfgs[Zkraft]) {
			t.Fatalf("%d members: zoo.cfg keys differ:\nZooKeeper %v\nzkraft    %v", members, cfgs[ZooKeeper], cfgs[Zkraft])
		}
		servers := 0
		for _, k := range cfgs[Zkraft] {
			if strings.HasPrefix(k, "server.") {
				servers++
			}
		}
		if want := map[int]int{1: 0, 3: 3}[members]; servers != want {
			t.Fatalf("%d members: %d server lines", members, servers)
		}
	}
}

func TestCommands(t *testing.T) {
	e, err := New(Config{System: ZooKeeper, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	zk := strings.Join(e.Members[0].Command(), " ")
	for _, want := range []string{"-Xmx1000m", "-Dzookeeper.forceSync=yes", "QuorumPeerMain", e.Members[0].CfgPath()} {
		if !strings.Contains(zk, want) {
			t.Errorf("ZooKeeper command %q lacks %q", zk, want)
		}
	}
	e, err = New(Config{System: Zkraft, Dir: t.TempDir(), ZkraftBin: "/x/zkraft"})
	if err != nil {
		t.Fatal(err)
	}
	zr := strings.Join(e.Members[0].Command(), " ")
	for _, want := range []string{"/x/zkraft serve --config", "--log-level warn", "--raft-addr 127.0.0.1:"} {
		if !strings.Contains(zr, want) {
			t.Errorf("zkraft command %q lacks %q", zr, want)
		}
	}
	if _, err := New(Config{System: "etcd", Dir: t.TempDir()}); err == nil {
		t.Error("no error for an unknown system")
	}
}
