package admission

import (
	"context"
	"errors"
	"testing"
)

// running is the number of requests c of provider p holds admitted.
func running(t *testing.T, m *Manager, p, c string) int {
	t.Helper()
	for _, s := range m.Snapshot() {
		if s.Provider == p && s.Connection == c {
			return s.Running
		}
	}
	t.Fatalf("no connection %s/%s", p, c)
	return 0
}

// AcquireInto admits into the caller's Ticket as AcquireFor does: the
// ticket holds the admission until released, once; one that failed
// holds nothing (its Release is a no-op); and a ticket released may take
// the next admission.
func TestAcquireIntoReusesTheCallersTicket(t *testing.T) {
	s := DefaultSettings()
	s.GlobalConcurrency = 1
	gated, _ := newManager(s, oauth("p", "c"))
	t.Run("gate", func(t *testing.T) { acquireIntoRounds(t, gated, false) })
	// benchManager's connection has a limiter, every gate and a quota
	// share, on a clock that always lets the limiter dispatch.
	t.Run("limiter, gates, quota share", func(t *testing.T) { acquireIntoRounds(t, benchManager(), true) })
}

// acquireIntoRounds admits into one ticket, fails two admissions into
// another, releases, twice; qs says the connection has a quota share.
func acquireIntoRounds(t *testing.T, m *Manager, qs bool) {
	ctx := context.Background()
	var tk, other Ticket
	for round := range 2 {
		if err := m.AcquireInto(ctx, &tk, "p", "c", "m", "k"); err != nil {
			t.Fatal(err)
		}
		if n := running(t, m, "p", "c"); n != 1 || tk.gates.empty() || tk.QuotaShareSlot() != qs {
			t.Fatalf("round %d: %d running, gates %v, quota-share slot %v: the ticket does not hold the admission", round, n, tk.gates, tk.QuotaShareSlot())
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if err := m.AcquireInto(cancelled, &other, "p", "c", "m", "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: cancelled admission: %v", round, err)
		}
		other.Release()
		if err := m.AcquireInto(ctx, &other, "p", "nope", "m", "k"); !errors.Is(err, ErrUnknownConnection) {
			t.Fatalf("round %d: unknown connection: %v", round, err)
		}
		other.Release()
		if n := running(t, m, "p", "c"); n != 1 {
			t.Fatalf("round %d: a failed admission's Release released another: %d running", round, n)
		}
		tk.Release()
		tk.Release()
		if n := running(t, m, "p", "c"); n != 0 {
			t.Fatalf("round %d: %d running after Release", round, n)
		}
	}
}

// Admitting into a kept Ticket allocates nothing on a connection with no
// limiter, gate or quota share.
func TestAcquireIntoAllocatesNothing(t *testing.T) {
	m, _ := newManager(DefaultSettings(), oauth("p", "c"))
	ctx := context.Background()
	var tk Ticket
	n := testing.AllocsPerRun(200, func() {
		if err := m.AcquireInto(ctx, &tk, "p", "c", "m", ""); err != nil {
			t.Fatal(err)
		}
		tk.Release()
	})
	if n != 0 {
		t.Fatalf("AcquireInto+Release allocates %v times, want 0", n)
	}
}
