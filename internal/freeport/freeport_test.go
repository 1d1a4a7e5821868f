package freeport

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

func TestPortsAreFreeAndBelowTheEphemeralRange(t *testing.T) {
	high := ephemeralLow()
	for range 20 {
		p := Port(t)
		if p < low || p >= high {
			t.Fatalf("port %d outside [%d, %d)", p, low, high)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		ln.Close()
	}
}

// picks is how many ports each picker takes in the tests below: with
// random picks in a range of about 22,000 ports and nothing bound, two
// sets of this size would share about ten ports, and one set of twice the
// size would hold about twenty twice (a test process picks its servers'
// ports before they bind; a member picks three). Small enough that
// -count=N does not use up the range (a process keeps what it picked).
const picks = 500

// TestNoPortTwiceInOneProcess: a port picked and not yet bound is not
// handed out again.
func TestNoPortTwiceInOneProcess(t *testing.T) {
	seen := map[int]bool{}
	for i := range 2 * picks {
		p := Port(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice (pick %d)", p, i+1)
		}
		seen[p] = true
	}
}

// pickerEnv makes the test binary a picker: it prints picks ports, one a
// line, then holds them until its stdin closes.
const pickerEnv = "FREEPORT_TEST_PICKER"

func TestMain(m *testing.M) {
	if os.Getenv(pickerEnv) != "" {
		w := bufio.NewWriter(os.Stdout)
		for range picks {
			p, err := Get()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			fmt.Fprintln(w, p)
		}
		w.Flush()
		os.Stdout.Close()
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestNoPortTwiceAcrossProcesses: two processes picking at once (as go
// test's test binaries do) never get the same port, and neither gets one
// this process holds.
func TestNoPortTwiceAcrossProcesses(t *testing.T) {
	mine := map[int]bool{}
	for range picks {
		mine[Port(t)] = true
	}
	type picker struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   io.ReadCloser
	}
	var ps []picker
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), pickerEnv+"=1")
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, picker{cmd, stdin, out})
	}
	owner := map[int]string{}
	for p := range mine {
		owner[p] = "this process"
	}
	for i, p := range ps {
		// Both run until every line is read: their picks overlap in time
		// and each holds its ports while the other picks.
		sc := bufio.NewScanner(p.out)
		n := 0
		for sc.Scan() {
			port, err := strconv.Atoi(sc.Text())
			if err != nil {
				t.Fatalf("picker %d: %q", i, sc.Text())
			}
			n++
			if o, dup := owner[port]; dup {
				t.Errorf("port %d handed to picker %d and to %s", port, i, o)
			}
			owner[port] = fmt.Sprintf("picker %d", i)
		}
		if n != picks {
			t.Errorf("picker %d printed %d ports, want %d", i, n, picks)
		}
	}
	for _, p := range ps {
		p.stdin.Close()
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("picker: %v", err)
		}
	}
}
