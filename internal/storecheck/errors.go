package storecheck

import (
	"errors"
	"strings"
)

// ErrDamaged is matched (errors.Is) by every *Damage.
var ErrDamaged = errors.New("damaged data file")

// Damage is a file of a data directory that cannot be used as it is.
type Damage struct {
	// File is the damaged file, or the store's directory when no single
	// file can be blamed.
	File string
	// Problem says what is wrong with it, in a few words.
	Problem string
	// Err is the library's error, if there is one.
	Err error
}

// Error is one line: the file, the problem and the library's error.
func (d *Damage) Error() string {
	s := "damaged data file " + d.File + ": " + d.Problem
	if d.Err != nil {
		s += ": " + OneLine(d.Err.Error())
	}
	return s
}

func (d *Damage) Unwrap() error { return d.Err }

// Is makes errors.Is(err, ErrDamaged) true for a *Damage.
func (d *Damage) Is(target error) bool { return target == ErrDamaged }

// OneLine joins the lines of a library's message (Pebble reports several
// missing tables one per line) so that an error stays one line.
func OneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
