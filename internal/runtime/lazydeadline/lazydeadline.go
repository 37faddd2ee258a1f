// Package lazydeadline sets a socket's deadlines only when they move.
//
// A server or client that bounds every request sets a read and a write
// deadline on its connection for each one — a timer update in the runtime
// each time, though the new deadline is most often the last one moved on
// by the time between two requests. A Deadline keeps the deadline already
// on the socket when it is not later than the one asked for and earlier by
// at most three quarters of the time left until it (enough for a server
// whose idle and read timeouts alternate, the read timeout half the idle
// one, to keep one deadline across both): the socket then wakes up early at
// worst, and the connection, seeing its deadline pass (Early), moves it to
// the one asked for and goes on reading or writing. So the timer keeps its
// exact meaning — nothing is cut before the deadline asked for — while
// back-to-back requests cost no timer update.
//
// Only a connection whose reads and writes may go on after a deadline
// passed may use it: a plain TCP socket, not a TLS connection (whose
// state is broken by a write cut by its deadline); a wrapper below TLS may.
package lazydeadline

import (
	"errors"
	"os"
	"time"
)

// Deadline is one direction (reads or writes) of a connection: the
// deadline asked for and the one set on the socket. The zero value has
// neither. It is used by one goroutine at a time, as the connection's
// deadlines are.
type Deadline struct {
	// Want is the deadline asked for (zero: none), Set the one on the
	// socket.
	Want, Set time.Time
}

// Ask notes the deadline d asked for and reports whether it must be set
// on the socket now — it then counts as set. Otherwise the socket's
// deadline is kept (kept).
func (l *Deadline) Ask(d time.Time) bool {
	l.Want = d
	if kept(l.Set, d) {
		return false
	}
	l.Set = d
	return true
}

// kept reports whether the socket's deadline set may stand for want:
// neither is zero, set is not later than want, and earlier by at most
// three quarters of the time left until want.
func kept(set, want time.Time) bool {
	if set.IsZero() || want.IsZero() || set.After(want) {
		return false
	}
	return want.Sub(set) <= time.Until(want)/4*3
}

// Early reports whether err, from a read or write of the socket, is its
// kept deadline passing before the one asked for: the caller then sets
// Want on the socket (it counts as set) and goes on.
func (l *Deadline) Early(err error) bool {
	if l.Set.Equal(l.Want) || !errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(l.Want) {
		return false
	}
	l.Set = l.Want
	return true
}

// Exact reports whether the socket's deadline is not the one asked for,
// for a caller that needs it exact (one that waits on the socket other
// than through the connection): the caller then sets Want on the socket
// (it counts as set).
func (l *Deadline) Exact() bool {
	if l.Set.Equal(l.Want) {
		return false
	}
	l.Set = l.Want
	return true
}

// Forced notes that d was set on the socket and asked for, bypassing Ask.
func (l *Deadline) Forced(d time.Time) { l.Want, l.Set = d, d }
