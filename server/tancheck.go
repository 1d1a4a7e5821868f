package server

import (
	"log/slog"
	"path/filepath"

	dbconfig "github.com/lni/dragonboat/v4/config"

	"github.com/zkraft/zkraft/internal/storecheck"
)

// tanStores lists the tandb directories of Dragonboat's log store tan that
// exist in the data directory: HOST/DEPLOYMENT/tandb under the NodeHost's
// directory (DataDir/raft) and under the WAL directory (LogDir/raft-wal),
// where a data directory on tan keeps it when dataLogDir is set.
func tanStores(nhc dbconfig.NodeHostConfig) []string {
	var out []string
	seen := map[string]bool{}
	for _, root := range []string{nhc.NodeHostDir, nhc.WALDir} {
		if root == "" {
			continue
		}
		dirs, _ := filepath.Glob(filepath.Join(root, "*", "*", "tandb"))
		for _, d := range dirs {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	return out
}

// checkTanStores reads every tan file of the data directory before
// Dragonboat opens it (storecheck.CheckTan): tan itself cuts a log short
// at the first record it cannot read, anywhere in the file, and panics on
// a checksum mismatch. The error is a *storecheck.Damage naming the file;
// the torn tails a crash leaves at the end of a replica's newest log are
// accepted (tan drops them) and logged; the Raft log's end is compared with
// the state machine's applied mark once tan has opened it (checkStores).
func checkTanStores(nhc dbconfig.NodeHostConfig, log *slog.Logger) error {
	for _, dir := range tanStores(nhc) {
		r, err := storecheck.CheckTan(dir)
		if err != nil {
			return err
		}
		for _, t := range r.Torn {
			// Info, not Warn: a crash leaves one, and whether it cost
			// applied entries is decided after tan opened the log (the
			// applied mark), which refuses the start if it did.
			log.Info("accepted the torn tail of a tan log, as a crash in the middle of a write leaves it (tan drops it)",
				"file", t.File, "tail", t.Problem)
		}
	}
	return nil
}
