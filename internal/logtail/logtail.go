// Package logtail reads the end of a child process's log files, for the
// test harnesses that start servers as processes (internal/launch for
// zkraft, internal/zktest for Apache ZooKeeper) and report what a server
// said before it failed. It imports the standard library only.
package logtail

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// Tail returns the last n lines of the files names in dir, read in order
// as one log, joined by newlines. A file that cannot be opened is skipped;
// a line longer than 1 MiB ends the reading of its file.
func Tail(dir string, n int, names ...string) string {
	var lines []string
	for _, name := range names {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if len(lines) > 4*n {
				lines = lines[len(lines)-n:]
			}
		}
		f.Close()
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
