package session

import "errors"

// ErrLost is the cause of every context a session cancels: errors.Is(err,
// ErrLost) holds for ErrExpired, ErrGraceExpired and ErrClosed alike.
var ErrLost = errors.New("session: lost")

var (
	// ErrExpired: the server said the session had expired.
	ErrExpired = &lostError{"session: expired (the server ended it)"}
	// ErrGraceExpired: no server confirmed the session within the grace
	// period, after which the server may expire it at any moment.
	ErrGraceExpired = &lostError{"session: no server confirmed the session within the grace period"}
	// ErrClosed: the Session was closed.
	ErrClosed = &lostError{"session: closed"}
)

type lostError struct{ msg string }

func (e *lostError) Error() string        { return e.msg }
func (e *lostError) Is(target error) bool { return target == ErrLost }
