// Package config loads, defaults and validates the Breakwater configuration
// file (docs/api.md "Config file"). Parse and Load report every problem at
// once, each with file, line, column and dotted field path; secrets written
// as env:NAME or file:/path are resolved; BREAKWATER_* environment variables
// override settings. The package holds no global mutable state: Parse, Load
// and Validate are safe for concurrent use; a returned *Config is a plain
// value owned by the caller, with no locking.
package config

import (
	"cmp"
	"fmt"
	"os"
	"slices"

	"github.com/breakwater-dev/breakwater/internal/regfile"
)

// Bounds of the files the configuration reads.
const (
	// MaxConfigBytes bounds the configuration file.
	MaxConfigBytes = 4 << 20
	// MaxSecretBytes bounds a file: secret.
	MaxSecretBytes = 64 << 10
)

// Options controls Parse and Load. The zero value reads no environment and
// reads secret files with ReadSecretFile.
type Options struct {
	// LookupEnv looks up environment variables, for env: secrets and the
	// BREAKWATER_* overrides (see EnvVars). Nil means an empty environment.
	LookupEnv func(name string) (string, bool)
	// ReadFile reads file: secrets. Nil means ReadSecretFile. Relative
	// paths are relative to the working directory.
	ReadFile func(path string) ([]byte, error)
}

// Parse decodes, overrides from the process environment, defaults and
// validates a configuration read from filename (used only in messages). It
// is ParseWithOptions with os.LookupEnv.
func Parse(data []byte, filename string) (*Config, error) {
	return ParseWithOptions(data, filename, Options{LookupEnv: os.LookupEnv})
}

// Load reads the configuration file at path and parses it with the process
// environment. A file that cannot be read is a plain wrapped error; problems
// in its content are a *ValidationError.
func Load(path string) (*Config, error) {
	return LoadWithOptions(path, Options{LookupEnv: os.LookupEnv})
}

// LoadWithOptions is Load with explicit options. The file must be a
// regular file of at most MaxConfigBytes.
func LoadWithOptions(path string, opts Options) (*Config, error) {
	data, err := regfile.Read(path, MaxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return ParseWithOptions(data, path, opts)
}

// ReadSecretFile reads a file: secret: a regular file (links followed) of
// at most MaxSecretBytes. A device (file:/dev/zero), a named pipe or a
// directory fails at once with an error saying what the path is; nothing
// blocks.
func ReadSecretFile(path string) ([]byte, error) {
	return regfile.Read(path, MaxSecretBytes)
}

// ParseWithOptions decodes data, applies the environment overrides (the
// BREAKWATER_* settings, and the plain variables of Env), fills
// defaults (ApplyDefaults) and validates. Steps: unknown keys, wrong types and
// unresolvable secrets are collected while decoding; the overrides apply
// after the file and before validation; empty override variables are
// ignored. Validation still runs when decoding found problems, but says
// nothing about values that failed to decode. On any problem it returns nil and a *ValidationError listing all
// of them.
func ParseWithOptions(data []byte, filename string, opts Options) (*Config, error) {
	if opts.LookupEnv == nil {
		opts.LookupEnv = func(string) (string, bool) { return "", false }
	}
	if opts.ReadFile == nil {
		opts.ReadFile = ReadSecretFile
	}
	d := newDecoder(filename, opts)
	c := &Config{}
	d.decodeDocument(data, c)
	d.applyEnv(c)
	d.readEnv(c)
	if d.fatal {
		return nil, finish(d.errs)
	}
	ApplyDefaults(c)
	v := &validator{file: filename, pos: d.pos, skip: d.bad}
	v.config(c)
	if err := finish(append(d.errs, v.errs...)); err != nil {
		return nil, err
	}
	return c, nil
}

// finish sorts errors into file order (errors without a line last, in the
// order found) and wraps them, or returns nil when there are none.
func finish(errs []FieldError) error {
	if len(errs) == 0 {
		return nil
	}
	slices.SortStableFunc(errs, func(a, b FieldError) int {
		if (a.Line == 0) != (b.Line == 0) {
			if a.Line == 0 {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	return &ValidationError{Errors: errs}
}
