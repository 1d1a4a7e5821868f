package faulttest

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// netLab is the test's own small network: one namespace per member, each
// joined by a veth pair to a bridge in the test's namespace, which holds
// .1 of the lab's /24. The members are the only hosts on it; nothing else
// is ever addressed. A member is cut off by setting its host-side veth
// down, and reconnected by setting it up.
//
// Names carry the test process's pid so that concurrent runs do not meet;
// resources left by runs whose process is gone are removed at setup.
//
//	namespace   zkft-<pid>-<i>
//	bridge      zkb<pid>
//	veth        zkh<pid>-<i> (bridge side), eth0 inside the namespace
//	subnet      10.213.<s>.0/24, member i at .10+i
type netLab struct {
	pid     int
	subnet  int
	n       int
	created []func() error // teardown steps, run in reverse
}

const (
	labNet         = "10.213"
	labRouteMetric = "4242" // the lab's safety-net unreachable route
)

// ip runs ip(8).
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func ipOut(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (l *netLab) nsName(i int) string   { return fmt.Sprintf("zkft-%d-%d", l.pid, i) }
func (l *netLab) bridge() string        { return fmt.Sprintf("zkb%d", l.pid) }
func (l *netLab) hostVeth(i int) string { return fmt.Sprintf("zkh%d-%d", l.pid, i) }
func (l *netLab) peerVeth(i int) string { return fmt.Sprintf("zkp%d-%d", l.pid, i) }
func (l *netLab) addr(i int) string     { return fmt.Sprintf("%s.%d.%d", labNet, l.subnet, 10+i) }
func (l *netLab) cidr() string          { return fmt.Sprintf("%s.%d.0/24", labNet, l.subnet) }

// lockLab serializes lab setup and stale cleanup among concurrent runs.
func lockLab() (unlock func(), err error) {
	f, err := os.OpenFile("/run/zkraft-faulttest.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		f, err = os.OpenFile(os.TempDir()+"/zkraft-faulttest.lock", os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, err
		}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// ownerAlive reports whether pid is a live process that may own lab
// resources (a test binary).
func ownerAlive(pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return strings.Contains(string(cmdline), "faulttest")
}

var (
	staleNS     = regexp.MustCompile(`^zkft-(\d+)-\d+$`)
	staleLink   = regexp.MustCompile(`^(?:zkb(\d+)|zk[hp](\d+)-\d+)(?:@\S*)?$`)
	labRouteRE  = regexp.MustCompile(`^unreachable (` + regexp.QuoteMeta(labNet) + `\.(\d+)\.0/24) .*metric ` + labRouteMetric)
	bridgeAddrR = regexp.MustCompile(regexp.QuoteMeta(labNet) + `\.(\d+)\.1/24`)
)

// cleanStale removes namespaces, links and routes of lab runs whose test
// process is gone. Called with the lab lock held.
func cleanStale() {
	if out, err := ipOut("netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			name := f[0]
			if m := staleNS.FindStringSubmatch(name); m != nil {
				if pid, _ := strconv.Atoi(m[1]); !ownerAlive(pid) {
					ip("netns", "del", name)
				}
			}
		}
	}
	if out, err := ipOut("-o", "link", "show"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name := strings.TrimSuffix(f[1], ":")
			if m := staleLink.FindStringSubmatch(name); m != nil {
				p := m[1] + m[2]
				if pid, _ := strconv.Atoi(p); !ownerAlive(pid) {
					ip("link", "del", strings.SplitN(name, "@", 2)[0])
				}
			}
		}
	}
	// A lab route whose bridge address is gone is stale.
	used := map[string]bool{}
	if out, err := ipOut("-4", "-o", "addr", "show"); err == nil {
		for _, m := range bridgeAddrR.FindAllStringSubmatch(out, -1) {
			used[m[1]] = true
		}
	}
	if out, err := ipOut("-4", "route", "show", "type", "unreachable"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			if m := labRouteRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil && !used[m[2]] {
				ip("route", "del", "unreachable", m[1], "metric", labRouteMetric)
			}
		}
	}
}

// newNetLab builds the lab for n members. On error, whatever was built is
// removed.
func newNetLab(n int) (lab *netLab, err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("network namespaces need root (euid %d)", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("iproute2 (ip) not found: %v", err)
	}
	unlock, err := lockLab()
	if err != nil {
		return nil, fmt.Errorf("lab lock: %v", err)
	}
	defer unlock()
	cleanStale()

	l := &netLab{pid: os.Getpid(), n: n}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	// A /24 of 10.213.x that no route covers yet.
	routes, err := ipOut("-4", "route", "show", "table", "all")
	if err != nil {
		return nil, err
	}
	for s := 1; s < 255; s++ {
		if !strings.Contains(routes, fmt.Sprintf("%s.%d.", labNet, s)) {
			l.subnet = s
			break
		}
	}
	if l.subnet == 0 {
		return nil, fmt.Errorf("no free %s.x.0/24 for the lab", labNet)
	}
	// Safety net first: while the lab exists, its addresses can never be
	// routed off this machine, even if the bridge goes away.
	if err := ip("route", "add", "unreachable", l.cidr(), "metric", labRouteMetric); err != nil {
		return nil, err
	}
	l.created = append(l.created, func() error { return ip("route", "del", "unreachable", l.cidr(), "metric", labRouteMetric) })
	br := l.bridge()
	if err := ip("link", "add", "name", br, "type", "bridge", "forward_delay", "0"); err != nil {
		return nil, err
	}
	l.created = append(l.created, func() error { return ip("link", "del", br) })
	for _, args := range [][]string{
		{"addr", "add", fmt.Sprintf("%s.%d.1/24", labNet, l.subnet), "dev", br},
		{"link", "set", br, "up"},
	} {
		if err := ip(args...); err != nil {
			return nil, err
		}
	}
	for i := 1; i <= n; i++ {
		ns, hv, pv := l.nsName(i), l.hostVeth(i), l.peerVeth(i)
		if err := ip("netns", "add", ns); err != nil {
			return nil, err
		}
		l.created = append(l.created, func() error { return ip("netns", "del", ns) })
		if err := ip("link", "add", hv, "type", "veth", "peer", "name", pv); err != nil {
			return nil, err
		}
		l.created = append(l.created, func() error {
			if _, err := ipOut("link", "show", hv); err != nil {
				return nil // went with its namespace
			}
			return ip("link", "del", hv)
		})
		for _, args := range [][]string{
			{"link", "set", pv, "netns", ns},
			{"link", "set", hv, "master", br},
			{"link", "set", hv, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
			{"-n", ns, "link", "set", pv, "name", "eth0"},
			{"-n", ns, "addr", "add", l.addr(i) + "/24", "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
		} {
			if err := ip(args...); err != nil {
				return nil, err
			}
		}
	}
	return l, nil
}

// close removes everything the lab created, newest first.
func (l *netLab) close() error {
	var first error
	for i := len(l.created) - 1; i >= 0; i-- {
		if err := l.created[i](); err != nil && first == nil {
			first = err
		}
	}
	l.created = nil
	return first
}

// isolate cuts member i off from the bridge: from the other members and
// from the test's clients.
func (l *netLab) isolate(i int) error { return ip("link", "set", l.hostVeth(i), "down") }

// heal reconnects member i.
func (l *netLab) heal(i int) error { return ip("link", "set", l.hostVeth(i), "up") }
