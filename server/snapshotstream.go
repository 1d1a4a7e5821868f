package server

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkraft/zkraft/raftsm"
)

// snapshot (ZooKeeper 3.9's SnapshotCommand): GET /commands/snapshot
// writes the member's tree as a ZooKeeper snapshot file and, unless
// streaming=false, streams it back as application/octet-stream, with the
// headers last_zxid (0x<hex>) and snapshot_size (bytes). The file is the
// one ZooKeeper's `zkraft import`, zkSnapShotToolkit.sh and a ZooKeeper
// server (as dataDir/version-2/snapshot.<zxid>) load.
//
// The tree is read as a client's read is (consoleRead: after a ReadIndex,
// on a Pebble snapshot, never under the state machine's lock) and held in
// memory while the file is written, as `zkraft export` does. The file is
// kept in <dataDir>/snapshots/snapshot.<zxid> (ZooKeeper writes it among
// its own snapshots in dataDir/version-2; zkraft keeps none there, so that
// its start never takes it for a ZooKeeper data directory to import); the
// previous one is removed when a new one is written.
//
// The package imports no snapshot writer (the on-disk formats are zkdata's,
// which the server must not import): cmd/zkraft hands one in as
// AdminConfig.WriteSnapshot. Without one the command answers 500.
//
// Refusals follow ZooKeeper: 503 with admin.snapshot.enabled=false, 429
// when the previous snapshot is less than admin.rateLimiterIntervalInMS old
// (one per interval; ZooKeeper documents 5 minutes, its 3.9 code counts
// the setting in microseconds), 500 when it cannot be written; the JSON
// carries error null, as ZooKeeper's does, and the reason goes to the log.

// SnapshotWriter writes a member's state as a ZooKeeper snapshot file.
type SnapshotWriter func(w io.Writer, st *raftsm.ImportedState) error

// snapshotDirName is the directory under DataDir the files are kept in.
const snapshotDirName = "snapshots"

// snapshotLimiter is ZooKeeper's RateLimiter with a rate of 1: one
// snapshot per interval, the first at once.
type snapshotLimiter struct {
	mu struct {
		sync.Mutex
		last    time.Time // start of the current interval
		allowed bool      // the interval's one snapshot is still allowed
	}
}

func (l *snapshotLimiter) allow(now time.Time, interval time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.last.IsZero() || now.Sub(l.mu.last) > interval {
		l.mu.last, l.mu.allowed = now, true
	}
	if !l.mu.allowed {
		return false
	}
	l.mu.allowed = false
	return true
}

func snapshotGet(s *Server, r *http.Request) adminReply {
	if s.cfg.Admin.SnapshotDisabled {
		s.log.Warn("admin: the snapshot command is disabled (admin.snapshot.enabled=false)")
		return adminReply{status: http.StatusServiceUnavailable}
	}
	if !s.ops.snapLimit.allow(time.Now(), s.cfg.Admin.SnapshotInterval) {
		s.log.Warn("admin: snapshot request rate limited", "interval", s.cfg.Admin.SnapshotInterval)
		return adminReply{status: http.StatusTooManyRequests}
	}
	streaming := queryBool(r, "streaming", true)
	path, zxid, size, err := s.writeAdminSnapshot()
	if err != nil {
		s.log.Warn("admin: snapshot failed", "err", err)
		return adminReply{status: http.StatusInternalServerError}
	}
	rep := adminReply{headers: [][2]string{{"last_zxid", hexZxid(zxid)}, {"snapshot_size", strconv.FormatInt(size, 10)}}}
	if streaming {
		f, err := os.Open(path)
		if err != nil {
			s.log.Warn("admin: snapshot failed", "err", err)
			return adminReply{status: http.StatusInternalServerError}
		}
		rep.body = f
	}
	return rep
}

// writeAdminSnapshot reads the state and writes it as a ZooKeeper
// snapshot file; it returns the file, the snapshot's zxid and its size.
func (s *Server) writeAdminSnapshot() (path string, zxid, size int64, err error) {
	write := s.cfg.Admin.WriteSnapshot
	if write == nil {
		return "", 0, 0, fmt.Errorf("no ZooKeeper snapshot writer (AdminConfig.WriteSnapshot; cmd/zkraft sets it)")
	}
	start := time.Now()
	st, err := consoleRead(s, func(v raftsm.View) (*raftsm.ImportedState, error) { return v.State() })
	if err != nil {
		return "", 0, 0, fmt.Errorf("read the state: %w", err)
	}
	dir := filepath.Join(s.cfg.DataDir, snapshotDirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, 0, err
	}
	name := "snapshot." + strconv.FormatInt(st.Zxid, 16)
	f, err := os.CreateTemp(dir, ".tmp-"+name+"-")
	if err != nil {
		return "", 0, 0, err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err = write(f, st); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, 0, fmt.Errorf("write the snapshot: %w", err)
	}
	path = filepath.Join(dir, name)
	if err = os.Rename(tmp, path); err != nil {
		return "", 0, 0, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", 0, 0, err
	}
	// Keep the newest only. A snapshot being streamed stays readable
	// through its open file after it is removed.
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if n := e.Name(); n != name && strings.HasPrefix(n, "snapshot.") {
				os.Remove(filepath.Join(dir, n))
			}
		}
	}
	s.log.Info("admin: snapshot written", "file", path, "zxid", hexZxid(st.Zxid), "nodes", len(st.Nodes),
		"bytes", fi.Size(), "took", time.Since(start).Round(time.Millisecond).String())
	return path, st.Zxid, fi.Size(), nil
}
