package config

import (
	"fmt"
	"strings"
)

// FieldError is one problem found in a configuration: where it is and what is
// wrong. Line and Column are 1-based and zero when the value did not come from
// the file (a default or an environment override). Messages never contain
// secret values. A FieldError is an immutable value, safe to share.
type FieldError struct {
	File    string
	Line    int
	Column  int
	Path    string // dotted field path, e.g. "providers[0].kind"; empty for the document root
	Message string
}

// Error formats the error as "file:line:col: path: message", leaving out the
// parts that are unknown.
func (e FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
			if e.Column > 0 {
				fmt.Fprintf(&b, ":%d", e.Column)
			}
		}
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// ValidationError holds every problem found in one configuration, in file
// order (errors without a line come last). It is returned by Parse, Load and
// Validate; use errors.As to reach the individual FieldErrors.
type ValidationError struct {
	Errors []FieldError
}

// Error prints one FieldError per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		lines[i] = fe.Error()
	}
	return strings.Join(lines, "\n")
}
