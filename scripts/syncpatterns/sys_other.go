//go:build !linux

package main

import "os"

// Elsewhere the patterns degrade to what the OS offers: no preallocation,
// and a full sync for fdatasync.
func preallocate(*os.File, int64) error { return nil }

func datasync(f *os.File) error { return f.Sync() }
