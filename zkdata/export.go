package zkdata

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Exported names the files WriteDataDir wrote.
type Exported struct {
	Snapshot string
	Log      string
}

// WriteDataDir writes t into a ZooKeeper dataDir so that Apache ZooKeeper
// 3.8 loads it: <dataDir>/version-2/snapshot.<zxid>[.gz|.snappy] and, in
// <logDir>/version-2 ("" means the dataDir), an empty log
// log.<zxid+1> (a header and nothing else: the next transaction ZooKeeper
// logs starts that file again). It refuses directories that already hold
// snapshots or logs. Files are written under temporary names, synced and
// then renamed.
func WriteDataDir(dataDir, logDir string, t *Tree, c Compression) (*Exported, error) {
	if logDir == "" {
		logDir = dataDir
	}
	snapDir := filepath.Join(dataDir, "version-2")
	logVDir := filepath.Join(logDir, "version-2")
	for _, d := range []string{snapDir, logVDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		for _, prefix := range []string{"snapshot", "log"} {
			files, err := listFiles(d, prefix, true)
			if err != nil {
				return nil, err
			}
			if len(files) > 0 {
				return nil, fmt.Errorf("%w: %s", ErrExists, files[0].path)
			}
		}
	}
	snap := filepath.Join(snapDir, "snapshot."+strconv.FormatInt(t.Zxid, 16)+c.suffix())
	if err := writeFileAtomic(snap, func(f *os.File) error { return WriteSnapshot(f, t, c) }); err != nil {
		return nil, err
	}
	log := filepath.Join(logVDir, "log."+strconv.FormatInt(t.Zxid+1, 16))
	if err := writeFileAtomic(log, func(f *os.File) error {
		_, err := f.Write(logHeader())
		return err
	}); err != nil {
		os.Remove(snap)
		return nil, err
	}
	for _, d := range []string{snapDir, logVDir} {
		syncDir(d)
	}
	return &Exported{Snapshot: snap, Log: log}, nil
}

// writeFileAtomic writes path through a temporary file in the same
// directory, synced before the rename.
func writeFileAtomic(path string, write func(f *os.File) error) error {
	// Not "snapshot.<zxid>.tmp": ZooKeeper would take that for a snapshot.
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
