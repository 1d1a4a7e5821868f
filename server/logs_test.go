package server

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/zkraft/zkraft/internal/testlog"
)

// TestLifecycleLogs: one structured line per session event and per leader
// change, at the configured level.
func TestLifecycleLogs(t *testing.T) {
	var buf testlog.Buffer
	s := startStandalone(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		c.MinSessionTimeout = 400 * time.Millisecond
		c.MaxSessionTimeout = 600 * time.Millisecond
	})
	addr := s.Addr().String()
	c := connectZK(t, addr)
	c.Close() // closeSession
	// A session whose client goes silent expires.
	dialRaw(t, addr)
	deadline := time.Now().Add(10 * time.Second)
	// "expiring sessions" is logged when the expiry is proposed and
	// "session expired" once it is applied: wait for the later one.
	for !strings.Contains(buf.String(), "msg=\"session expired\"") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	out := buf.String()
	for _, want := range []string{"msg=\"leader changed\"", "msg=\"session created\"", "msg=\"session closed\"",
		"msg=\"expiring sessions\"", "msg=\"session expired\""} {
		if strings.Count(out, want) < 1 {
			t.Errorf("no %s line in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "level=DEBUG") {
		t.Error("debug lines at info level")
	}
}
