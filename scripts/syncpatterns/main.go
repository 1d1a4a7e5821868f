// Command syncpatterns measures how long the kernel takes to make a small
// append durable in each of the ways a Raft log store can do it, one
// pattern after the other on the same disk, so that a disk load started
// beside it (dd, another engineer's suite) hits every pattern alike:
//
//	tan-fallocate-fsync          Dragonboat's tan: a new file preallocated with
//	                             fallocate(FALLOC_FL_KEEP_SIZE), appended to, fsync
//	tan-fallocate-fdatasync      the same with fdatasync
//	overwrite-written-fdatasync  Pebble's recycled WAL (the Raft log store of
//	                             main): a file already written, overwritten in
//	                             place, fdatasync
//	overwrite-written-fsync      the same with fsync
//	append-fdatasync             a plain growing file, fdatasync (Pebble's first
//	                             WAL, before one can be recycled)
//
// Each pattern writes -chunk bytes (32 KiB: about 30 entries of 1 KiB, what
// one Raft step writes at 64 requests in flight) and syncs, -n times, and
// prints p50/p90/p99/max of the sync. A debugging aid for the Raft log
// store (docs/performance.md, "Raft log store"); it asserts nothing, and its
// loops are bounded by -n and -rounds.
//
//	go run ./scripts/syncpatterns -dir /tmp/me/syncpatterns
//	go run ./scripts/syncpatterns -dir /tmp/me/syncpatterns -only tan-fallocate-fsync -n 1000
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// patterns in the order they run.
var patterns = []string{
	"tan-fallocate-fsync",
	"tan-fallocate-fdatasync",
	"overwrite-written-fdatasync",
	"overwrite-written-fsync",
	"append-fdatasync",
}

// preallocated is the size tan preallocates for a log file (64 MiB).
const preallocated = 64 << 20

func main() {
	dir := flag.String("dir", "", "scratch directory on the disk to measure (created; its files are removed after each pattern)")
	n := flag.Int("n", 300, "syncs per pattern")
	chunk := flag.Int("chunk", 32<<10, "bytes written before each sync")
	rounds := flag.Int("rounds", 1, "times to run every pattern")
	only := flag.String("only", "", "run only this pattern")
	flag.Parse()
	if *dir == "" || *n <= 0 || *chunk <= 0 || int64(*n)*int64(*chunk) > preallocated {
		log.Fatalf("syncpatterns: need -dir, and 0 < -n x -chunk <= %d", preallocated)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Fatal(err)
	}
	for range *rounds {
		for _, p := range patterns {
			if *only != "" && p != *only {
				continue
			}
			lat, total, err := run(filepath.Join(*dir, p), p, *n, *chunk)
			if err != nil {
				log.Fatalf("syncpatterns: %s: %v", p, err)
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			q := func(x float64) float64 { return float64(lat[int(float64(len(lat)-1)*x)].Microseconds()) / 1000 }
			fmt.Printf("%-28s n %d  p50 %6.2f  p90 %6.2f  p99 %7.2f  max %7.2f ms  total %v\n",
				p, len(lat), q(.5), q(.9), q(.99), q(1), total.Round(time.Millisecond))
		}
	}
}

// run prepares the file as pattern p does and times n syncs of a chunk each.
func run(name, p string, n, chunk int) (lat []time.Duration, total time.Duration, err error) {
	_ = os.Remove(name)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		err = firstErr(err, f.Close())
		err = firstErr(err, os.Remove(name))
	}()
	switch p {
	case "tan-fallocate-fsync", "tan-fallocate-fdatasync":
		if err := preallocate(f, preallocated); err != nil {
			return nil, 0, err
		}
	case "overwrite-written-fdatasync", "overwrite-written-fsync":
		zero := make([]byte, 1<<20)
		for off := int64(0); off < int64(n*chunk); off += int64(len(zero)) {
			if _, err := f.WriteAt(zero, off); err != nil {
				return nil, 0, err
			}
		}
	}
	if err := f.Sync(); err != nil {
		return nil, 0, err
	}
	buf := make([]byte, chunk)
	for i := range buf {
		buf[i] = byte(i)
	}
	full := p == "tan-fallocate-fsync" || p == "overwrite-written-fsync"
	start := time.Now()
	for i := range n {
		if _, err := f.WriteAt(buf, int64(i*chunk)); err != nil {
			return nil, 0, err
		}
		t := time.Now()
		if full {
			err = f.Sync()
		} else {
			err = datasync(f)
		}
		if err != nil {
			return nil, 0, err
		}
		lat = append(lat, time.Since(t))
	}
	return lat, time.Since(start), nil
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
