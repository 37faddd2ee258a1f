package admission

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
)

// TestSetModelConcurrencyAppliesAtRunTime: a cap set at run time gates the
// model at once, a raised cap admits a waiter, a removed cap lets every
// request through; other models and connections are not gated.
func TestSetModelConcurrencyAppliesAtRunTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := newManager(gateSettings(), apikey("p", "a"), apikey("p", "b"))
		if err := m.SetModelConcurrency("p", "a", "m1", 1); err != nil {
			t.Fatal(err)
		}
		if caps, _ := m.ModelConcurrency("p", "a"); caps["m1"] != 1 || len(caps) != 1 {
			t.Fatalf("caps = %v, want m1: 1", caps)
		}
		first := mustAcquire(t, m, "p", "a", "m1")
		second := acquireAsync(context.Background(), m, "p", "a", "m1")
		synctest.Wait()
		pending(t, second, "second m1 request over a cap of 1")
		other := mustAcquire(t, m, "p", "a", "m2") // another model: no gate
		elsewhere := mustAcquire(t, m, "p", "b", "m1")
		gates := m.Gates()
		if len(gates) != 1 || gates[0] != (GateStats{Level: GateModel, Provider: "p", Connection: "a", Model: "m1", Cap: 1, Held: 1, Waiting: 1}) {
			t.Fatalf("gates = %+v: want the m1 gate 1/1 with one waiter", gates)
		}

		if err := m.SetModelConcurrency("p", "a", "m1", 2); err != nil { // raising the cap admits the waiter
			t.Fatal(err)
		}
		r := <-second
		if r.err != nil {
			t.Fatal(r.err)
		}
		if g := m.Gates(); len(g) != 1 || g[0].Held != 2 || g[0].Cap != 2 || g[0].Waiting != 0 {
			t.Fatalf("after raising: %+v", g)
		}

		if err := m.SetModelConcurrency("p", "a", "m1", 0); err != nil { // removing the cap
			t.Fatal(err)
		}
		third := mustAcquire(t, m, "p", "a", "m1")
		if caps, _ := m.ModelConcurrency("p", "a"); len(caps) != 0 {
			t.Fatalf("caps after removal = %v", caps)
		}
		for _, tk := range []*Ticket{first, r.tk, other, elsewhere, third} {
			tk.Release()
		}
		if g := m.Gates(); len(g) != 0 {
			t.Fatalf("no cap and nothing held: gates = %+v", g)
		}
	})
}

func TestSetModelConcurrencyRefusesUnknown(t *testing.T) {
	m, _ := newManager(gateSettings(), apikey("p", "a"))
	if err := m.SetModelConcurrency("p", "zz", "m1", 1); !errors.Is(err, ErrUnknownConnection) {
		t.Fatalf("unknown connection: err = %v", err)
	}
	if _, err := m.ModelConcurrency("q", "a"); !errors.Is(err, ErrUnknownConnection) {
		t.Fatalf("unknown provider: err = %v", err)
	}
	if err := m.SetModelConcurrency("p", "a", "", 1); err == nil {
		t.Fatal("an empty model must be refused")
	}
}

// TestGatesListsEveryLevel: global, provider, account and model gates with
// their caps, in that order.
func TestGatesListsEveryLevel(t *testing.T) {
	s := gateSettings()
	s.GlobalConcurrency = 8
	s.ProviderConcurrency = map[string]int{"p": 4}
	a := apikey("p", "a")
	a.Overrides.MaxConcurrent = 2
	a.ModelConcurrency = map[string]int{"m1": 1}
	m, _ := newManager(s, a)
	tk := mustAcquire(t, m, "p", "a", "m1")
	defer tk.Release()
	want := []GateStats{
		{Level: GateGlobal, Cap: 8, Held: 1},
		{Level: GateProvider, Provider: "p", Cap: 4, Held: 1},
		{Level: GateAccount, Provider: "p", Connection: "a", Cap: 2, Held: 1},
		{Level: GateModel, Provider: "p", Connection: "a", Model: "m1", Cap: 1, Held: 1},
	}
	got := m.Gates()
	if len(got) != len(want) {
		t.Fatalf("gates = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("gate %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
