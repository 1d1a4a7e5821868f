package server

import (
	"bytes"
	"log/slog"
	"os"
	"sync"
	"testing"
)

// failLogKeep is how many of a member's last log lines a failed test
// prints.
const failLogKeep = 300

// tailLog keeps the last failLogKeep lines written to it.
type tailLog struct {
	mu    sync.Mutex
	lines [][]byte
	next  int
	full  bool
}

func (l *tailLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := bytes.Clone(p)
	if len(l.lines) < failLogKeep {
		l.lines = append(l.lines, line)
		return len(p), nil
	}
	l.lines[l.next] = line
	l.next = (l.next + 1) % failLogKeep
	l.full = true
	return len(p), nil
}

func (l *tailLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b bytes.Buffer
	for i := range l.lines {
		b.Write(l.lines[(l.next+i)%len(l.lines)])
	}
	return b.String()
}

// testLogger is member id's logger in test t. With ZKRAFT_TEST_LOG set it
// writes to stderr; otherwise it keeps the member's last lines and prints
// them if the test fails, so a failure in CI says what the member did.
func testLogger(t *testing.T, id uint64) *slog.Logger {
	if os.Getenv("ZKRAFT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil)).With("test", t.Name())
	}
	tail := new(tailLog)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("member %d's last log lines:\n%s", id, tail.String())
		}
	})
	return slog.New(slog.NewTextHandler(tail, nil))
}
