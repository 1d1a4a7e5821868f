package main

import (
	"os"
	"syscall"
)

// fallocKeepSize is FALLOC_FL_KEEP_SIZE: allocate without changing the
// file's size, as tan does.
const fallocKeepSize = 0x1

func preallocate(f *os.File, size int64) error {
	return syscall.Fallocate(int(f.Fd()), fallocKeepSize, 0, size)
}

func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
