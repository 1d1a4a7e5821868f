// Package testlog holds what tests use to read a log a server writes while
// it runs: a buffer safe for concurrent writes. It imports the standard
// library only, so that any package's tests (the server's own included)
// may use it; nothing outside tests should.
package testlog
