package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func apikey(provider, connection string) ConnSpec {
	return ConnSpec{Provider: provider, Connection: connection, Profile: engine.ProfileAPIKey}
}

func oauth(provider, connection string) ConnSpec {
	return ConnSpec{Provider: provider, Connection: connection, Profile: engine.ProfileOAuth}
}

func newManager(s Settings, specs ...ConnSpec) (*Manager, *clocktest.Clock) {
	clk := clocktest.NewClock(t0)
	return NewManager(clk, s, specs), clk
}

// result is the outcome of an Acquire run on another goroutine.
type result struct {
	i   int
	tk  *Ticket
	err error
}

// acquireAsync runs Acquire on a new goroutine and reports on the returned
// channel.
func acquireAsync(ctx context.Context, m *Manager, provider, connection, model string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		tk, err := m.Acquire(ctx, provider, connection, model)
		ch <- result{tk: tk, err: err}
	}()
	return ch
}

// pending fails the test when ch already has a result.
func pending(t *testing.T, ch <-chan result, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: finished early: ticket %v, err %v", what, r.tk != nil, r.err)
	default:
	}
}

// wantCode asserts err is an *Error with code and status.
func wantCode(t *testing.T, err error, code string, status int) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want *Error %s", err, code)
	}
	if e.Code != code || e.Status != status {
		t.Fatalf("err = %s/%d (%s), want %s/%d", e.Code, e.Status, e.Message, code, status)
	}
	return e
}

func mustAcquire(t *testing.T, m *Manager, provider, connection, model string) *Ticket {
	t.Helper()
	tk, err := m.Acquire(context.Background(), provider, connection, model)
	if err != nil {
		t.Fatalf("Acquire(%s/%s %s): %v", provider, connection, model, err)
	}
	return tk
}

func statsOf(t *testing.T, m *Manager, provider, connection string) ConnStats {
	t.Helper()
	for _, s := range m.Snapshot() {
		if s.Provider == provider && s.Connection == connection {
			return s
		}
	}
	t.Fatalf("no stats for %s/%s", provider, connection)
	return ConnStats{}
}

// gateCounts returns held and waiting of the counters in set under the
// gate mutex.
func gateCounts(m *Manager, set ...*gateCounter) (held, waiting []int) {
	m.gates.mu.Lock()
	defer m.gates.mu.Unlock()
	for _, n := range set {
		held = append(held, n.held)
		waiting = append(waiting, n.waiting)
	}
	return held, waiting
}
