package strategy

import (
	"math"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
)

func TestCostOptimized(t *testing.T) {
	ts := mk("a", "b", "c", "d", "e")
	prices := [][2]float64{{3, 15}, {1, 2}, {0.5, 2.5}, {0, 0}, {2, 1}}
	for i, p := range prices {
		ts[i].PriceIn, ts[i].PriceOut = p[0], p[1]
	}
	s := mustNew(t, NameCostOptimized, Options{})
	// Costs a 18, b 3, c 3, d 0, e 3: free first, the 3s in configured order.
	if got := keysOf(ts, s.Order(Request{}, ts, nil)); got != "d,b,c,e,a" {
		t.Errorf("order %s, want d,b,c,e,a", got)
	}
	if got := keysOf(ts, s.Order(Request{}, ts, except(ts, "d", "b"))); got != "c,e,a" {
		t.Errorf("d,b excluded: %s, want c,e,a", got)
	}
	same := mk("x", "y", "z")
	if got := keysOf(same, s.Order(Request{}, same, nil)); got != "x,y,z" {
		t.Errorf("all tied: %s", got)
	}
}

func TestContextOptimized(t *testing.T) {
	ts := mk("big", "small", "mid", "unknown", "tiny")
	for i, w := range []int{200000, 8000, 32000, 0, 4000} {
		ts[i].ContextWindow = w
	}
	s := mustNew(t, NameContextOptimized, Options{})
	tests := []struct {
		prompt int
		want   string
	}{
		{0, "tiny,small,mid,big,unknown"},
		{6000, "small,mid,big,unknown,tiny"},
		{8000, "small,mid,big,unknown,tiny"},
		{8001, "mid,big,unknown,small,tiny"},
		{500000, "unknown,big,mid,small,tiny"},
	}
	for _, tc := range tests {
		if got := keysOf(ts, s.Order(Request{PromptTokens: tc.prompt}, ts, nil)); got != tc.want {
			t.Errorf("prompt %d: %s, want %s", tc.prompt, got, tc.want)
		}
	}
	if got := keysOf(ts, s.Order(Request{PromptTokens: 6000}, ts, except(ts, "small"))); got != "mid,big,unknown,tiny" {
		t.Errorf("small excluded: %s", got)
	}
}

func TestCacheOptimized(t *testing.T) {
	ts := mk("a", "b", "c", "d", "e")
	s := mustNew(t, NameCacheOptimized, Options{})
	if got := keysOf(ts, s.Order(Request{}, ts, nil)); got != "a,b,c,d,e" {
		t.Errorf("no prefix: %s", got)
	}
	leads := map[string]int{}
	for p := uint64(1); p <= 2000; p++ {
		req := Request{PrefixHash: p * 0x9e3779b97f4a7c15}
		full := s.Order(req, ts, nil)
		if again := s.Order(req, ts, nil); keysOf(ts, again) != keysOf(ts, full) {
			t.Fatalf("prefix %d not stable", p)
		}
		leads[ts[full[0]].Key]++
		// Excluding any target keeps the others' relative order
		// (rendezvous), so only its own prefixes move.
		for _, x := range []int{0, 2} {
			ex := ts[full[x]].Key
			want := []int{}
			for _, i := range full {
				if ts[i].Key != ex {
					want = append(want, i)
				}
			}
			if got := s.Order(req, ts, except(ts, ex)); keysOf(ts, got) != keysOf(ts, want) {
				t.Fatalf("prefix %d, %s excluded: %s, want %s", p, ex, keysOf(ts, got), keysOf(ts, want))
			}
		}
	}
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if f := float64(leads[k]) / 2000; math.Abs(f-0.2) > 0.04 {
			t.Errorf("%s leads %.3f of prefixes, want 0.20 ± 0.04", k, f)
		}
	}
	// Removing a target from the combo only moves the prefixes it led.
	four := ts[:4]
	for p := uint64(1); p <= 500; p++ {
		req := Request{PrefixHash: p}
		before := ts[s.Order(req, ts, nil)[0]].Key
		after := four[s.Order(req, four, nil)[0]].Key
		if before != "e" && before != after {
			t.Fatalf("prefix %d moved from %s to %s when e was removed", p, before, after)
		}
	}
}

// quotaSignals returns Signals with the given quotas observed.
func quotaSignals(clock engine.Clock, qs map[string]Quota) *Signals {
	sig := NewSignals(clock)
	for k, q := range qs {
		sig.ObserveQuota(k, q)
	}
	return sig
}

func TestHeadroom(t *testing.T) {
	clock := clocktest.NewClock(t0)
	ts := mk("a", "b", "c", "d", "e")
	sig := quotaSignals(clock, map[string]Quota{
		"a": {Remaining: 10, Limit: 100, ResetAt: t0.Add(time.Minute)}, // 0.10
		"b": {Remaining: 90, Limit: 100, ResetAt: t0.Add(time.Minute)}, // 0.90
		"c": {Remaining: 0, Limit: 100, ResetAt: t0.Add(time.Minute)},  // 0
		"d": {Remaining: 50, Limit: 100},                               // 0.50
		// e: no data → 1
	})
	s := mustNew(t, NameHeadroom, Options{Signals: sig, Clock: clock})
	if got := keysOf(ts, s.Order(Request{}, ts, nil)); got != "e,b,d,a,c" {
		t.Errorf("order %s, want e,b,d,a,c", got)
	}
	// After the windows reset, a, b and c are full again (ties: configured order).
	if got := keysOf(ts, s.Order(Request{Now: t0.Add(time.Minute)}, ts, nil)); got != "a,b,c,e,d" {
		t.Errorf("after reset: %s, want a,b,c,e,d", got)
	}
	clock.Advance(2 * time.Minute)
	if got := keysOf(ts, s.Order(Request{}, ts, except(ts, "e"))); got != "a,b,c,d" {
		t.Errorf("clock past reset, e excluded: %s, want a,b,c,d", got)
	}
}

func TestQuotaWeighted(t *testing.T) {
	clock := clocktest.NewClock(t0)
	ts := mk("a", "b", "c")
	sig := quotaSignals(clock, map[string]Quota{
		"a": {Remaining: 75, Limit: 100}, // 0.75
		"b": {Remaining: 25, Limit: 100}, // 0.25
		"c": {Remaining: 0, Limit: 100},  // exhausted
	})
	s := mustNew(t, NameQuotaWeighted, Options{Seed: 4, Signals: sig, Clock: clock})
	counts := map[string]int{}
	for r := 0; r < 10000; r++ {
		order := s.Order(Request{}, ts, nil)
		counts[ts[order[0]].Key]++
		if ts[order[len(order)-1]].Key != "c" {
			t.Fatalf("exhausted c not last: %s", keysOf(ts, order))
		}
	}
	if f := float64(counts["a"]) / 10000; math.Abs(f-0.75) > 0.02 {
		t.Errorf("a drawn %.3f, want 0.75 ± 0.02", f)
	}
	if counts["c"] != 0 {
		t.Errorf("exhausted c drawn %d times", counts["c"])
	}
	if got := keysOf(ts, s.Order(Request{}, ts, except(ts, "a", "b"))); got != "c" {
		t.Errorf("only c eligible: %s", got)
	}
}

func TestResetWindowAndResetAware(t *testing.T) {
	clock := clocktest.NewClock(t0)
	ts := mk("late", "soon", "exhausted-soon", "unknown", "exhausted-late", "passed")
	sig := quotaSignals(clock, map[string]Quota{
		"late":           {Remaining: 50, Limit: 100, ResetAt: t0.Add(4 * time.Hour)},
		"soon":           {Remaining: 5, Limit: 100, ResetAt: t0.Add(10 * time.Minute)},
		"exhausted-soon": {Remaining: 0, Limit: 100, ResetAt: t0.Add(time.Minute)},
		"exhausted-late": {Remaining: 0, Limit: 100, ResetAt: t0.Add(5 * time.Hour)},
		"passed":         {Remaining: 0, Limit: 100, ResetAt: t0.Add(-time.Second)},
		// unknown: no data
	})
	rw := mustNew(t, NameResetWindow, Options{Signals: sig, Clock: clock})
	if got := keysOf(ts, rw.Order(Request{}, ts, nil)); got != "exhausted-soon,soon,late,exhausted-late,unknown,passed" {
		t.Errorf("reset-window: %s", got)
	}
	ra := mustNew(t, NameResetAware, Options{Signals: sig, Clock: clock})
	if got := keysOf(ts, ra.Order(Request{}, ts, nil)); got != "soon,late,unknown,passed,exhausted-soon,exhausted-late" {
		t.Errorf("reset-aware: %s", got)
	}
	// Two minutes later exhausted-soon has refilled (its reset passed).
	clock.Advance(2 * time.Minute)
	if got := keysOf(ts, ra.Order(Request{}, ts, nil)); got != "soon,late,exhausted-soon,unknown,passed,exhausted-late" {
		t.Errorf("reset-aware after refill: %s", got)
	}
	if got := keysOf(ts, rw.Order(Request{}, ts, except(ts, "soon"))); got != "late,exhausted-late,exhausted-soon,unknown,passed" {
		t.Errorf("reset-window, soon excluded: %s", got)
	}
}
