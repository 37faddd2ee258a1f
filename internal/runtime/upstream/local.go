package upstream

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// LocalError is an upstream call that failed before anything was sent,
// for a reason of the gateway's own: a header that cannot be sent (a
// control byte in a value an on_request plugin set, in a credential), a
// connection's route that cannot be built. It says nothing about the
// upstream's health: callers answer it as a local error and record
// nothing. Its message never holds a header value.
type LocalError struct{ Err error }

// Error implements error.
func (e *LocalError) Error() string { return "upstream request not sent: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *LocalError) Unwrap() error { return e.Err }

// IsLocal reports whether err is or wraps a *LocalError.
func IsLocal(err error) bool {
	var le *LocalError
	return errors.As(err, &le)
}

// CheckHeaders returns a *LocalError when headers h cannot be sent as
// they are: a name that is not a token, a value with a control byte. Do
// checks every request with it; DoBuffered makes the same checks as it
// copies the headers.
func CheckHeaders(h http.Header) error {
	for k, vs := range h {
		if !wire.ValidHeaderName(k) {
			return invalidHeaderName(k)
		}
		for _, v := range vs {
			if !wire.ValidHeaderValue(v) {
				return invalidHeaderValue(k)
			}
		}
	}
	return nil
}

// invalidHeaderName is CheckHeaders' error for the header name k.
func invalidHeaderName(k string) error {
	return &LocalError{Err: fmt.Errorf("invalid header name %q", wire.Clip(k))}
}

// invalidHeaderValue is CheckHeaders' error for a value of header k.
func invalidHeaderValue(k string) error {
	return &LocalError{Err: fmt.Errorf("the value of header %s has a control byte", k)}
}
