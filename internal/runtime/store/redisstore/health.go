package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// probeInterval is how often, while Redis is unreachable, one call is let
// through to find out whether it is back; the others fail at once.
const probeInterval = time.Second

// Status is the store's view of its Redis server(s).
type Status struct {
	// Up is false while Redis is unreachable.
	Up bool `json:"up"`
	// Since is when Up last changed (the store's start when it never did).
	Since time.Time `json:"since"`
	// LastError is why Redis is unreachable ("" while up). It never holds
	// credentials.
	LastError string `json:"last_error,omitempty"`
	// Outages counts the transitions to unreachable.
	Outages int `json:"outages"`
}

// health tracks whether Redis answers, logs each change once, and lets
// calls fail fast while it does not. It is goroutine-safe.
type health struct {
	log    hclog.Logger
	target string // the server(s), for the log

	mu       sync.Mutex
	st       Status
	lastTry  time.Time
	probing  bool
	onChange func() // nudges Watch; must not block
}

func newHealth(log hclog.Logger, target string) *health {
	return &health{log: log, target: target, st: Status{Up: true, Since: time.Now()}}
}

// admit reports whether a call may go to Redis now: always while up; while
// down, one probe per probeInterval. A refused call gets the outage error.
func (h *health) admit() (probe bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.st.Up {
		return false, nil
	}
	if h.probing || time.Since(h.lastTry) < probeInterval {
		return false, fmt.Errorf("%w: %s (since %s)", engine.ErrStoreUnavailable, h.st.LastError, h.st.Since.Format(time.RFC3339))
	}
	h.probing = true
	h.lastTry = time.Now()
	return true, nil
}

// done records the outcome of an admitted call: err is nil or the
// classified error (see classify).
func (h *health) done(probe bool, err error) {
	down := err != nil && errors.Is(err, engine.ErrStoreUnavailable)
	var cause string
	if down {
		cause = strings.TrimPrefix(err.Error(), engine.ErrStoreUnavailable.Error()+": ")
	}
	h.mu.Lock()
	if probe {
		h.probing = false
	}
	var fn func()
	switch {
	case down && h.st.Up:
		h.st = Status{Up: false, Since: time.Now(), LastError: cause, Outages: h.st.Outages + 1}
		h.lastTry = time.Now()
		h.log.Error("Redis is unreachable: serving from the local view; session leases are refused until it is back",
			"redis", h.target, "error", cause)
		fn = h.onChange
	case down:
		h.st.LastError = cause
	case err == nil && !h.st.Up:
		h.log.Info("Redis is reachable again: resynchronising the local view", "redis", h.target,
			"down_for", time.Since(h.st.Since).Round(time.Millisecond).String())
		h.st = Status{Up: true, Since: time.Now(), Outages: h.st.Outages}
		fn = h.onChange
	}
	h.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// status returns the current status.
func (h *health) status() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.st
}

// setOnChange installs the change hook.
func (h *health) setOnChange(fn func()) {
	h.mu.Lock()
	h.onChange = fn
	h.mu.Unlock()
}

// classify wraps the errors that mean Redis cannot serve (network errors,
// timeouts, a server loading, failing over or refusing our credentials)
// with engine.ErrStoreUnavailable. redis.Nil and other replies pass as is.
func classify(err error) error {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return err
	}
	if isUnavailable(err) {
		return fmt.Errorf("%w: %w", engine.ErrStoreUnavailable, err)
	}
	return err
}

// unavailableReplies are the error reply prefixes of a server that cannot
// serve now or refuses this client.
var unavailableReplies = []string{"LOADING", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "READONLY",
	"NOAUTH", "WRONGPASS", "NOPERM", "NOREPLICAS", "BUSY"}

func isUnavailable(err error) bool {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		for _, p := range unavailableReplies {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, redis.ErrPoolTimeout) ||
		strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "i/o timeout")
}
