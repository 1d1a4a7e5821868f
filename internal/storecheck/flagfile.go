package storecheck

import (
	"bytes"
	"crypto/md5"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// flagSumLen is the length of the checksum that starts a Dragonboat flag
// file. Dragonboat (v4, internal/fileutil) writes a flag file as the second
// half of the MD5 digest of a marshalled protobuf message followed by the
// message, and panics, rather than return an error, when it reads one whose
// checksum does not match or that is shorter than the checksum. So the
// member checks its flag files before Dragonboat reads them.
const flagSumLen = 8

// FlagFile checks one of Dragonboat's flag files. A file that does not
// exist is not damaged (Dragonboat creates it).
func FlagFile(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(b) < flagSumLen {
		return &Damage{File: path, Problem: fmt.Sprintf("%d bytes, shorter than the checksum a Dragonboat flag file starts with", len(b))}
	}
	sum := md5.Sum(b[flagSumLen:])
	if !bytes.Equal(b[:flagSumLen], sum[md5.Size-flagSumLen:]) {
		return &Damage{File: path, Problem: "checksum mismatch (a Dragonboat flag file, damaged or cut short)"}
	}
	return nil
}
