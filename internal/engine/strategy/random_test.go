package strategy

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

func TestRandomSeededAndUniform(t *testing.T) {
	ts := mk("a", "b", "c", "d")
	orders := func(seed int64) []string {
		s := mustNew(t, NameRandom, Options{Seed: seed})
		var out []string
		for r := 0; r < 20; r++ {
			out = append(out, keysOf(ts, s.Order(Request{}, ts, nil)))
		}
		return out
	}
	a, b := orders(5), orders(5)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different orders:\n%v\n%v", a, b)
	}
	if slices.Equal(a, orders(6)) {
		t.Error("different seeds gave the same 20 orders")
	}
	s := mustNew(t, NameRandom, Options{Seed: 11})
	first := map[string]int{}
	for r := 0; r < 8000; r++ {
		first[ts[s.Order(Request{}, ts, nil)[0]].Key]++
	}
	for _, k := range []string{"a", "b", "c", "d"} {
		if f := float64(first[k]) / 8000; math.Abs(f-0.25) > 0.02 {
			t.Errorf("%s leads %.3f of requests, want 0.25 ± 0.02", k, f)
		}
	}
	// Failover order never contains an excluded target.
	for r := 0; r < 100; r++ {
		if o := keysOf(ts, s.Order(Request{}, ts, except(ts, "b", "d"))); o != "a,c" && o != "c,a" {
			t.Fatalf("b,d excluded: %s", o)
		}
	}
}

func TestStrictRandomDeck(t *testing.T) {
	ts := mk("a", "b", "c", "d", "e")
	s := mustNew(t, NameStrictRandom, Options{Seed: 3})
	req := Request{Combo: "d"}
	for round := 0; round < 4; round++ {
		seen := map[string]bool{}
		for r := 0; r < len(ts); r++ {
			order := s.Order(req, ts, nil)
			lead := ts[order[0]].Key
			if seen[lead] {
				t.Fatalf("round %d: %s led twice before the deck was exhausted", round, lead)
			}
			seen[lead] = true
			if len(order) != len(ts) {
				t.Fatalf("order dropped targets: %v", order)
			}
		}
	}
}

func TestStrictRandomExcludedCardStaysInDeck(t *testing.T) {
	ts := mk("a", "b", "c", "d")
	s := mustNew(t, NameStrictRandom, Options{Seed: 8})
	req := Request{Combo: "d"}
	var leads []string
	// Three deals with c excluded: c is never dealt.
	for r := 0; r < 3; r++ {
		leads = append(leads, ts[s.Order(req, ts, except(ts, "c"))[0]].Key)
	}
	if slices.Contains(leads, "c") {
		t.Fatalf("excluded c led: %v", leads)
	}
	// c is eligible again: it is the only card left in this round.
	if got := ts[s.Order(req, ts, nil)[0]].Key; got != "c" {
		t.Errorf("fourth deal %s, want c (the undealt card)", got)
	}
	// Only dealt cards eligible while undealt remain: an early reshuffle,
	// never an empty order.
	s.Order(req, ts, nil) // starts a new round, deals one card
	order := s.Order(req, ts, func(i int) bool { return i == 0 })
	if keysOf(ts, order) != "a" {
		t.Errorf("only a eligible: %s", keysOf(ts, order))
	}
}

func TestP2C(t *testing.T) {
	ts := mk("a", "b", "c", "d")
	clock := clocktest.NewClock(t0)
	sig := NewSignals(clock)
	// In flight: a 3, b 0, c 1, d 2.
	for k, n := range map[string]int{"a": 3, "c": 1, "d": 2} {
		for j := 0; j < n; j++ {
			sig.Start(k)
		}
	}
	s := mustNew(t, NameP2C, Options{Seed: 21, Signals: sig, Clock: clock})
	leads := map[string]int{}
	for r := 0; r < 3000; r++ {
		order := s.Order(Request{}, ts, nil)
		leads[ts[order[0]].Key]++
		// After the winner, the rest by load: b(0) c(1) d(2) a(3).
		want := slices.DeleteFunc([]string{"b", "c", "d", "a"}, func(k string) bool { return k == ts[order[0]].Key })
		if got := keysOf(ts, order[1:]); got != strings.Join(want, ",") {
			t.Fatalf("failover order %s after %s, want %v", got, ts[order[0]].Key, want)
		}
	}
	// The most loaded target loses every pair it is drawn in; the least
	// loaded wins every pair (probability 1/2 of being drawn with 4 targets).
	if leads["a"] != 0 {
		t.Errorf("the most loaded target led %d times", leads["a"])
	}
	if f := float64(leads["b"]) / 3000; math.Abs(f-0.5) > 0.03 {
		t.Errorf("the idle target led %.3f, want 0.50 ± 0.03", f)
	}
	// Equal in-flight: lower latency wins.
	two := mk("slow", "fast")
	for _, k := range []string{"slow", "fast"} {
		a := sig.Start(k)
		if k == "slow" {
			clock.Advance(900 * time.Millisecond)
		} else {
			clock.Advance(100 * time.Millisecond)
		}
		a.Done(true)
	}
	for r := 0; r < 20; r++ {
		if got := keysOf(two, s.Order(Request{}, two, nil)); got != "fast,slow" {
			t.Fatalf("latency tie-break: %s", got)
		}
	}
	if got := keysOf(two, s.Order(Request{}, two, except(two, "fast"))); got != "slow" {
		t.Errorf("fast excluded: %s", got)
	}
}

func TestLeastUsed(t *testing.T) {
	ts := mk("a", "b", "c", "d")
	sig := NewSignals(clocktest.NewClock(t0))
	s := mustNew(t, NameLeastUsed, Options{Signals: sig})
	if got := keysOf(ts, s.Order(Request{}, ts, nil)); got != "a,b,c,d" {
		t.Errorf("no load: %s", got)
	}
	// In flight a 2, b 1; c used once and done; d untouched.
	sig.Start("a")
	sig.Start("a")
	sig.Start("b")
	sig.Start("c").Done(true)
	if got := keysOf(ts, s.Order(Request{}, ts, nil)); got != "d,c,b,a" {
		t.Errorf("by in-flight then usage: %s, want d,c,b,a", got)
	}
	if got := keysOf(ts, s.Order(Request{}, ts, except(ts, "d"))); got != "c,b,a" {
		t.Errorf("d excluded: %s", got)
	}
}
