package strategy

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
)

func TestPluginName(t *testing.T) {
	for in, want := range map[string]string{"plugin:tod": "tod", " plugin:a.b-c ": "a.b-c", "plugin:": "", "priority": "", "Plugin:x": "x"} {
		got, ok := PluginName(in)
		if got != want || ok != (want != "") {
			t.Errorf("PluginName(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	s, known := New("plugin:tod", Options{})
	if !known || s.Name() != "plugin:tod" || s.(*Plugin).PluginName() != "tod" {
		t.Fatalf("New(plugin:tod) = %T %q, %v", s, s.Name(), known)
	}
	if _, known := New("plugin:", Options{}); known {
		t.Error(`"plugin:" without a name is a known strategy`)
	}
}

// recordingRouter is a RouteFunc that records its input and answers a
// fixed answer.
type recordingRouter struct {
	plugin string
	req    RouteRequest
	cands  []RouteCandidate
	answer RouteAnswer
	ok     bool
	err    error
	calls  int
}

func (r *recordingRouter) route(_ context.Context, plugin string, req RouteRequest, cands []RouteCandidate) (RouteAnswer, bool, error) {
	r.calls++
	r.plugin, r.req, r.cands = plugin, req, cands
	return r.answer, r.ok, r.err
}

func TestPluginAppliesTheAnswer(t *testing.T) {
	clock := clocktest.NewClock(t0)
	sig := NewSignals(clock)
	ts := mk("a", "b", "c", "d")
	ts[2].PriceIn = 3
	finish(sig, clock, "b", 250*time.Millisecond, true)
	sig.Start("c") // one in flight
	sig.ObserveQuota("d", Quota{Remaining: 25, Limit: 100, ResetAt: t0.Add(time.Hour)})
	r := &recordingRouter{ok: true, answer: RouteAnswer{Order: []int{2, 0}, Exclude: []RouteExclusion{{Index: 3}}, RuleID: "tod.night"}}
	state := func(tg Target) CandidateState {
		if tg.Key == "b" {
			return CandidateState{Health: "open", Cooldown: 2 * time.Second}
		}
		return CandidateState{Health: "closed"}
	}
	p := mustNew(t, "plugin:tod", Options{Signals: sig, Clock: clock, Route: r.route, CandidateState: state}).(*Plugin)
	req := RouteRequest{Request: Request{Combo: "smart", PromptTokens: 900}, Model: "smart", Stream: true, KeyID: "app1",
		Headers: map[string]string{"x-tier": "gold"}, ToolCount: 2}
	order, res := p.Route(context.Background(), req, ts, except(ts, "b"))

	// c and a as ordered, then nothing else: b is ineligible, d excluded.
	if got := keysOf(ts, order); got != "c,a" {
		t.Errorf("order %s, want c,a", got)
	}
	want := RouteResult{Excluded: []RouteExclusion{{Index: 3, Reason: "excluded by plugin tod"}}, RuleID: "tod.night"}
	if !reflect.DeepEqual(res, want) {
		t.Errorf("result %+v, want %+v", res, want)
	}
	if r.plugin != "tod" || !reflect.DeepEqual(r.req, req) {
		t.Errorf("plugin %q saw request %+v", r.plugin, r.req)
	}
	// Every target is shown, with eligibility, engine state and signals.
	if len(r.cands) != 4 {
		t.Fatalf("%d candidates, want 4", len(r.cands))
	}
	b, c, d := r.cands[1], r.cands[2], r.cands[3]
	if b.Eligible || b.Health != "open" || b.Cooldown != 2*time.Second || b.Latency != 250*time.Millisecond || b.Headroom != -1 {
		t.Errorf("candidate b = %+v", b)
	}
	if !c.Eligible || c.InFlight != 1 || c.PriceIn != 3 || c.Health != "closed" {
		t.Errorf("candidate c = %+v", c)
	}
	if d.Headroom != 0.25 {
		t.Errorf("candidate d headroom %v, want 0.25", d.Headroom)
	}
	if st := p.Stats(); st != (PluginStats{Calls: 1}) {
		t.Errorf("stats %+v", st)
	}

	// Ordering or excluding an ineligible target changes nothing; the
	// rest keep their configured order.
	r.answer = RouteAnswer{Order: []int{1, 3}, Exclude: []RouteExclusion{{Index: 0, Reason: "no"}}}
	order, res = p.Route(context.Background(), req, ts, except(ts, "a"))
	if got := keysOf(ts, order); got != "b,d,c" || len(res.Excluded) != 0 {
		t.Errorf("order %s, excluded %+v; want b,d,c and none", got, res.Excluded)
	}
}

func TestPluginFallsBackToPriority(t *testing.T) {
	ts := mk("a", "b", "c")
	for _, tc := range []struct {
		name     string
		router   *recordingRouter
		fallback string
		stats    PluginStats
	}{
		{"declined", &recordingRouter{}, FallbackDeclined, PluginStats{Calls: 1, Declined: 1}},
		{"failed", &recordingRouter{err: errors.New("route trapped")}, "route trapped", PluginStats{Calls: 1, Fallbacks: 1}},
		{"out of range", &recordingRouter{ok: true, answer: RouteAnswer{Order: []int{3}}},
			"invalid answer: order names candidate 3 of 3", PluginStats{Calls: 1, Fallbacks: 1}},
		{"twice", &recordingRouter{ok: true, answer: RouteAnswer{Order: []int{2, 2}}},
			"invalid answer: order names candidate 2 twice", PluginStats{Calls: 1, Fallbacks: 1}},
		{"ordered and excluded", &recordingRouter{ok: true, answer: RouteAnswer{Order: []int{1}, Exclude: []RouteExclusion{{Index: 1}}}},
			"invalid answer: candidate 1 is both ordered and excluded", PluginStats{Calls: 1, Fallbacks: 1}},
		{"excludes everything", &recordingRouter{ok: true, answer: RouteAnswer{Exclude: []RouteExclusion{{0, "x"}, {1, "x"}, {2, "x"}}}},
			"invalid answer: the exclusions leave no eligible candidate", PluginStats{Calls: 1, Fallbacks: 1}},
		{"negative exclusion", &recordingRouter{ok: true, answer: RouteAnswer{Exclude: []RouteExclusion{{-1, "x"}}}},
			"invalid answer: exclude names candidate -1 of 3", PluginStats{Calls: 1, Fallbacks: 1}},
	} {
		p := mustNew(t, "plugin:x", Options{Route: tc.router.route}).(*Plugin)
		order, res := p.Route(context.Background(), RouteRequest{}, ts, nil)
		if got := keysOf(ts, order); got != "a,b,c" || res.Fallback != tc.fallback || len(res.Excluded) != 0 {
			t.Errorf("%s: order %s, result %+v; want a,b,c with fallback %q", tc.name, got, res, tc.fallback)
		}
		if st := p.Stats(); st != tc.stats {
			t.Errorf("%s: stats %+v, want %+v", tc.name, st, tc.stats)
		}
	}
	// No router: priority, counted. Nothing eligible: the plugin is not asked.
	p := mustNew(t, "plugin:x", Options{}).(*Plugin)
	if order := p.Order(Request{}, ts, except(ts, "a")); keysOf(ts, order) != "b,c" || p.Stats().Fallbacks != 1 {
		t.Errorf("no router: %s, %+v", keysOf(ts, order), p.Stats())
	}
	r := &recordingRouter{ok: true}
	p = mustNew(t, "plugin:x", Options{Route: r.route}).(*Plugin)
	if order := p.Order(Request{}, ts, func(int) bool { return false }); len(order) != 0 || r.calls != 0 {
		t.Errorf("nothing eligible: order %v, plugin called %d times", order, r.calls)
	}
}

func TestPluginCallsEligibleOncePerIndexInOrder(t *testing.T) {
	ts := mk("a", "b", "c")
	r := &recordingRouter{ok: true, answer: RouteAnswer{Order: []int{2}}}
	p := mustNew(t, "plugin:x", Options{Route: r.route})
	var calls []int
	order := p.Order(Request{}, ts, func(i int) bool { calls = append(calls, i); return true })
	if !reflect.DeepEqual(calls, []int{0, 1, 2}) || keysOf(ts, order) != "c,a,b" {
		t.Errorf("eligible calls %v, order %s", calls, keysOf(ts, order))
	}
}

func TestStateFromExclusion(t *testing.T) {
	now := t0
	for _, tc := range []struct {
		ex       engine.Exclusion
		excluded bool
		want     CandidateState
	}{
		{engine.Exclusion{}, false, CandidateState{}},
		{engine.Exclusion{Reason: engine.ExclusionCircuitOpen, Until: now.Add(time.Minute), Detail: "HALF_OPEN"}, true, CandidateState{Health: "half_open"}},
		{engine.Exclusion{Reason: engine.ExclusionCircuitOpen}, true, CandidateState{Health: "open"}},
		{engine.Exclusion{Reason: engine.ExclusionConnectionCooldown, Until: now.Add(3 * time.Second)}, true, CandidateState{Cooldown: 3 * time.Second}},
		{engine.Exclusion{Reason: engine.ExclusionProviderCooldown, Until: now.Add(-time.Second)}, true, CandidateState{}},
		{engine.Exclusion{Reason: engine.ExclusionModelLockout, Until: now.Add(2 * time.Minute)}, true, CandidateState{Lockout: 2 * time.Minute}},
	} {
		if got := StateFromExclusion(tc.ex, tc.excluded, now); got != tc.want {
			t.Errorf("StateFromExclusion(%+v, %v) = %+v, want %+v", tc.ex, tc.excluded, got, tc.want)
		}
	}
}

// BenchmarkPluginOrder20 is the strategy's own cost around the route call
// (candidates, signals, applying the answer) for a 20-target combo, with
// a router that answers at once.
func BenchmarkPluginOrder20(b *testing.B) {
	ts, sig, eligible := benchCombo()
	answer := RouteAnswer{Order: []int{19, 3}, Exclude: []RouteExclusion{{Index: 5, Reason: "x"}}}
	route := func(context.Context, string, RouteRequest, []RouteCandidate) (RouteAnswer, bool, error) {
		return answer, true, nil
	}
	p := mustNew(b, "plugin:x", Options{Signals: sig, Route: route})
	req := Request{Combo: "bench", PromptTokens: 12000}
	b.ReportAllocs()
	for b.Loop() {
		if order := p.Order(req, ts, eligible); len(order) != 18 || order[0] != 19 {
			b.Fatalf("order %v", order)
		}
	}
}
