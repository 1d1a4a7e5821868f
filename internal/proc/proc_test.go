package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStartReadStop(t *testing.T) {
	p, err := Start("sleep", filepath.Join(t.TempDir(), "sleep.log"), "sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	if rss := RSSKB(p.Pid()); rss <= 0 {
		t.Errorf("RSSKB of a running child: %d", rss)
	}
	if ticks := CPUTicks(p.Pid()); ticks < 0 {
		t.Errorf("CPUTicks: %d", ticks)
	}
	if CPUTicks(os.Getpid()) <= 0 && RSSKB(os.Getpid()) <= 0 {
		t.Error("nothing read of this process")
	}
	p.Stop()
	if RSSKB(p.Pid()) != 0 {
		t.Error("the child is still there after Stop")
	}
	if la := LoadAvg(); len(strings.Fields(la)) != 3 {
		t.Errorf("LoadAvg: %q", la)
	}
	if err := WaitPort("127.0.0.1:1", 300*time.Millisecond); err == nil {
		t.Error("WaitPort found a listener on port 1")
	}
}
