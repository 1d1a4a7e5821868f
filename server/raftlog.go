package server

import (
	"errors"
	"fmt"
	"sync"

	dblogger "github.com/lni/dragonboat/v4/logger"
	sm "github.com/lni/dragonboat/v4/statemachine"
)

// RaftPanic is what Dragonboat raises, in a zkraft process, where it would
// log a critical message and panic (its loggers' Panicf): a condition it
// cannot go on from, such as a read error from its log store. Err is the
// first error among the message's arguments (Dragonboat passes the error
// it met), so that errors.Is can classify it, e.g. as Pebble's corruption
// error.
//
// Dragonboat's own logger prints the message, a stack trace of the error
// and then panics with it again, which turns a damaged file into several
// screens of trace; RaftPanic carries the message once, and New recovers it
// where Dragonboat runs on New's goroutine (raftCall).
type RaftPanic struct {
	Pkg string // the Dragonboat package that gave up
	Msg string // its message
	Err error
}

func (p *RaftPanic) Error() string {
	if p.Err != nil {
		// The error's own message: Dragonboat formats it with %+v,
		// which appends its stack.
		return "dragonboat " + p.Pkg + ": " + p.Err.Error()
	}
	return "dragonboat " + p.Pkg + ": " + p.Msg
}

func (p *RaftPanic) Unwrap() error { return p.Err }

// raftLogger is Dragonboat's default logger for one package, but for
// Panicf.
type raftLogger struct {
	dblogger.ILogger
	pkg string
}

// Errorf logs at warning level what is not an error in a zkraft member: a
// state machine's Open stopped by the member itself (openGate), which
// Dragonboat logs as an error before it sees that it is a stop.
func (l raftLogger) Errorf(format string, args ...interface{}) {
	for _, a := range args {
		if err, ok := a.(error); ok && errors.Is(err, sm.ErrOpenStopped) {
			l.ILogger.Warningf(format, args...)
			return
		}
	}
	l.ILogger.Errorf(format, args...)
}

func (l raftLogger) Panicf(format string, args ...interface{}) {
	p := &RaftPanic{Pkg: l.pkg, Msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if err, ok := a.(error); ok {
			p.Err = err
			break
		}
	}
	panic(p)
}

var raftLogs sync.Once

// QuietRaftLogs sets up Dragonboat's logging for the process, once: its
// packages log errors only, through raftLogger. It must run before
// anything else in the process uses a Dragonboat logger (Dragonboat keeps
// the first logger it makes for a package): New and the offline commands
// that start a replica call it first.
func QuietRaftLogs() {
	raftLogs.Do(func() {
		dblogger.SetLoggerFactory(func(pkg string) dblogger.ILogger {
			return raftLogger{ILogger: dblogger.CreateCapnsLog(pkg), pkg: pkg}
		})
		for _, name := range []string{"raft", "rsm", "transport", "grpc", "dragonboat", "logdb", "raftpb", "config", "settings", "tan", "registry"} {
			dblogger.GetLogger(name).SetLevel(dblogger.ERROR)
		}
	})
}

// raftCall runs a call into Dragonboat that opens the data directory
// (NewNodeHost, StartOnDiskReplica) and turns a panic on the way into a
// *recoveredPanic error. This is the one boundary at which the member
// recovers Dragonboat's panics; it is safe because a panic here ends the
// start-up: the caller returns the error, never uses the NodeHost again and
// does not even close it (the panic may have left one of its locks held,
// and Close could wait on it for ever); the process exits with the error.
// Dragonboat's panics in its own goroutines are not recovered: the member
// checks the files they would read before Dragonboat starts (checkDataDir)
// and holds the state machine's Open until it has checked what it opened
// (openGate).
func raftCall(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &recoveredPanic{value: r}
		}
	}()
	return f()
}

// recoveredPanic is a panic raftCall recovered.
type recoveredPanic struct{ value any }

func (p *recoveredPanic) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// Unwrap is the panic's value when it is an error (a *RaftPanic, or an
// error Dragonboat panicked with).
func (p *recoveredPanic) Unwrap() error {
	err, _ := p.value.(error)
	return err
}
