package recipes

import "errors"

var (
	// ErrReleased is the cause of a lease's context after Release.
	ErrReleased = errors.New("recipes: released")
	// ErrNodeGone means the node a recipe waited with vanished while its
	// session was alive: someone deleted it.
	ErrNodeGone = errors.New("recipes: our node was deleted by someone else")
	// ErrUncertain means the connection failed while a write that cannot
	// be retried blindly (a queue take, a counter step) was in flight: it
	// may or may not have been applied.
	ErrUncertain = errors.New("recipes: connection lost during the write: its outcome is unknown")
	// ErrClosed is returned by the recipes that run in the background
	// (Latch, Registration, View, Observer) once they are closed.
	ErrClosed = errors.New("recipes: closed")
)
