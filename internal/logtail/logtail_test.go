package logtail

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTail: the last lines of the files as one log, across files, with a
// missing file skipped.
func TestTail(t *testing.T) {
	dir := t.TempDir()
	var a, b strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&a, "a%d\n", i)
	}
	b.WriteString("b0\nb1\n")
	os.WriteFile(filepath.Join(dir, "a.log"), []byte(a.String()), 0o644)
	os.WriteFile(filepath.Join(dir, "b.log"), []byte(b.String()), 0o644)
	if got, want := Tail(dir, 3, "a.log", "missing.log", "b.log"), "a49\nb0\nb1"; got != want {
		t.Errorf("Tail = %q, want %q", got, want)
	}
	if got := Tail(dir, 100, "a.log"); strings.Count(got, "\n") != 49 || !strings.HasPrefix(got, "a0\n") {
		t.Errorf("Tail of all = %q", got)
	}
	if got := Tail(dir, 3, "missing.log"); got != "" {
		t.Errorf("Tail of nothing = %q", got)
	}
}
