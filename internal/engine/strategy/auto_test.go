package strategy

import (
	"math"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

// finish records one attempt on key lasting d.
func finish(sig *Signals, clock *clocktest.Clock, key string, d time.Duration, success bool) {
	a := sig.Start(key)
	clock.Advance(d)
	a.Done(success)
}

func TestAutoScoresAndExplains(t *testing.T) {
	clock := clocktest.NewClock(t0)
	sig := NewSignals(clock)
	ts := mk("cheap-slow", "fast", "small")
	ts[0].PriceIn, ts[0].PriceOut = 1, 1
	ts[1].PriceIn, ts[1].PriceOut = 2, 2
	ts[2].PriceIn, ts[2].PriceOut = 1, 1
	ts[0].ContextWindow, ts[1].ContextWindow, ts[2].ContextWindow = 100000, 100000, 1000
	finish(sig, clock, "cheap-slow", 400*time.Millisecond, true)
	finish(sig, clock, "fast", 100*time.Millisecond, true)
	finish(sig, clock, "small", 100*time.Millisecond, true)

	// Default weights, prompt 5000 (small does not fit):
	//   cheap-slow: .35·1 + .25·(1−300/400) + .15·1 + .15·1 + .10·1 = 0.8125
	//   fast:       .35·1 + .25·1 + .15·(1−2/4) + .15·1 + .10·1 = 0.925
	//   small:      .35·1 + .25·1 + .15·1 + .15·1 + .10·0 = 0.90
	s := mustNew(t, NameAuto, Options{Signals: sig, Clock: clock}).(*Auto)
	order, f := s.OrderExplain(Request{PromptTokens: 5000}, ts, nil)
	if got := keysOf(ts, order); got != "fast,small,cheap-slow" {
		t.Fatalf("order %s, want fast,small,cheap-slow", got)
	}
	want := Factors{Health: 0.35 / 0.925, Latency: 0.25 / 0.925, Cost: 0.075 / 0.925, Headroom: 0.15 / 0.925, Context: 0.10 / 0.925}
	if !closeFactors(f, want) {
		t.Errorf("factors %+v, want %+v", f, want)
	}
	if got := f.String(); got != "health=0.38,latency=0.27,headroom=0.16,context=0.11,cost=0.08" {
		t.Errorf("header %q", got)
	}

	// Cost-heavy weights flip the winner to the cheap ones.
	cs := mustNew(t, NameAuto, Options{Signals: sig, Clock: clock, AutoWeights: AutoWeights{Cost: 1}}).(*Auto)
	order, f = cs.OrderExplain(Request{PromptTokens: 5000}, ts, nil)
	if got := keysOf(ts, order); got != "cheap-slow,small,fast" {
		t.Errorf("cost only: %s", got)
	}
	if f.String() != "cost=1.00,health=0.00,latency=0.00,headroom=0.00,context=0.00" {
		t.Errorf("cost only header %q", f.String())
	}

	// Failures lower health: fast fails 5 times (EWMA 0.8^5 ≈ 0.33).
	for i := 0; i < 5; i++ {
		finish(sig, clock, "fast", time.Millisecond, false)
	}
	if h := sig.Health("fast"); math.Abs(h-math.Pow(0.8, 5)) > 1e-9 {
		t.Fatalf("health %v", h)
	}
	order, _ = s.OrderExplain(Request{PromptTokens: 5000}, ts, nil)
	if got := keysOf(ts, order); got != "small,cheap-slow,fast" {
		t.Errorf("after fast failed: %s", got)
	}
	// Exclusions: nothing eligible gives no explanation.
	order, f = s.OrderExplain(Request{}, ts, func(int) bool { return false })
	if len(order) != 0 || f.String() != "" {
		t.Errorf("nothing eligible: %v %q", order, f.String())
	}
	if got := keysOf(ts, s.Order(Request{PromptTokens: 5000}, ts, except(ts, "small"))); got != "cheap-slow,fast" {
		t.Errorf("small excluded: %s", got)
	}
}

func closeFactors(a, b Factors) bool {
	c := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return c(a.Health, b.Health) && c(a.Latency, b.Latency) && c(a.Cost, b.Cost) && c(a.Headroom, b.Headroom) && c(a.Context, b.Context)
}

func TestAutoWeightsNormalised(t *testing.T) {
	w := AutoWeights{Health: 2, Latency: 2, Cost: -1, Headroom: 0, Context: 0}.normalized()
	if w != (AutoWeights{Health: 0.5, Latency: 0.5}) {
		t.Errorf("normalised %+v", w)
	}
	if d := (AutoWeights{}).normalized(); math.Abs(d.Health-0.35) > 1e-12 || math.Abs(d.Context-0.10) > 1e-12 {
		t.Errorf("zero weights → %+v, want the defaults", d)
	}
}

func TestContextRelay(t *testing.T) {
	clock := clocktest.NewClock(t0)
	ts := mk("a", "b", "c")
	s := mustNew(t, NameContextRelay, Options{Clock: clock}).(*ContextRelay)
	req := Request{Combo: "r", Session: "s1"}
	if got := keysOf(ts, s.Order(req, ts, nil)); got != "a,b,c" {
		t.Errorf("order %s", got)
	}
	if _, moved := s.Moved(req, ts, 0); moved {
		t.Error("first request moved")
	}
	s.Report(req, ts, 0, true)
	if _, moved := s.Moved(req, ts, 0); moved {
		t.Error("same target moved")
	}
	// a excluded: the session moves to b, from a.
	order := s.Order(req, ts, except(ts, "a"))
	if from, moved := s.Moved(req, ts, order[0]); !moved || from != "a" || ts[order[0]].Key != "b" {
		t.Errorf("moved = %q %v to %s, want from a to b", from, moved, ts[order[0]].Key)
	}
	s.Report(req, ts, 1, false) // a failure does not re-pin
	if from, _ := s.Moved(req, ts, 1); from != "a" {
		t.Errorf("failure re-pinned: from %q", from)
	}
	s.Report(req, ts, 1, true)
	if _, moved := s.Moved(req, ts, 1); moved {
		t.Error("after success on b, b still moved")
	}
	// Other sessions and session-less requests are independent.
	if _, moved := s.Moved(Request{Combo: "r", Session: "s2"}, ts, 2); moved {
		t.Error("new session moved")
	}
	if _, moved := s.Moved(Request{Combo: "r"}, ts, 2); moved {
		t.Error("request without session moved")
	}
	// An idle session is forgotten.
	clock.Advance(relayTTL + time.Second)
	if _, moved := s.Moved(req, ts, 2); moved {
		t.Error("idle session still remembered")
	}
}

func TestContextRelayBounded(t *testing.T) {
	clock := clocktest.NewClock(t0)
	ts := mk("a")
	s := mustNew(t, NameContextRelay, Options{Clock: clock}).(*ContextRelay)
	for i := 0; i < relayMaxSessions+50; i++ {
		clock.Advance(time.Millisecond)
		s.Report(Request{Session: string(rune('A'+i%26)) + time.Duration(i).String()}, ts, 0, true)
	}
	if n := len(s.sessions); n > relayMaxSessions {
		t.Errorf("%d sessions remembered, cap %d", n, relayMaxSessions)
	}
}
