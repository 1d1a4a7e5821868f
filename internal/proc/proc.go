// Package proc starts the child processes of the measuring scripts
// (scripts/proxyscale, scripts/proxyfanout) and reads what Linux's /proc
// says of them: CPU time, resident memory, the load average.
//
// It must never import the server or the proxy: the scripts drive them as
// separate processes. Its caller stops every Proc it started (Stop), and
// reads figures only of processes that are still running.
package proc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is a started child process.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
}

// Start runs args with stdout and stderr in logPath. The child dies with
// this process (the kernel sends it SIGKILL when we exit, however we exit),
// so an interrupted run leaves nothing behind.
func Start(name, logPath string, args ...string) (*Proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = Orphanless()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	return &Proc{Name: name, Cmd: cmd}, nil
}

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Stop sends SIGTERM and waits; after 10 s it kills the child.
func (p *Proc) Stop() {
	if p.Cmd.Process == nil {
		return
	}
	p.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.Cmd.Process.Kill()
		<-done
	}
}

// WaitPort waits at most d for something to accept connections on addr.
func WaitPort(addr string, d time.Duration) error {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			nc.Close()
			return nil
		}
	}
	return fmt.Errorf("nothing listens on %s after %v", addr, d)
}

// CPUTicks is a process's user and system time in clock ticks (1/100 s),
// 0 if it cannot be read.
func CPUTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

// RSSKB is a process's resident set in KiB, 0 if it cannot be read.
func RSSKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			if f := strings.Fields(l); len(f) >= 2 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
	}
	return 0
}

// LoadAvg is the 1-, 5- and 15-minute load averages, "?" if unknown.
func LoadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// MachineTicks is the whole machine's CPU time from /proc/stat in clock
// ticks (1/100 s), summed over its cores: busy (user, nice, system, irq,
// softirq: every process's and the kernel's, guests counted in user),
// idle (idle and iowait) and steal (taken by the hypervisor); zeros if it
// cannot be read.
func MachineTicks() (busy, idle, steal int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, 0
	}
	v := make([]int64, 8)
	for i := range v {
		v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
	}
	return v[0] + v[1] + v[2] + v[5] + v[6], v[3] + v[4], v[7]
}

// Orphanless is the SysProcAttr of a child that dies with this process, for
// a caller that starts its own exec.Cmd.
func Orphanless() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
