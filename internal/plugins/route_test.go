package plugins

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/memstore"
	"github.com/breakwater-dev/breakwater/plugins/abi"
)

// routeTargets are a combo's targets: priority picks openai.
func routeTargets() []strategy.Target {
	return []strategy.Target{
		{Key: "openai/gpt-4o-mini", Provider: "openai", Model: "gpt-4o-mini", PriceIn: 0.15, PriceOut: 0.6},
		{Key: "anthropic/claude-haiku-4", Provider: "anthropic", Model: "claude-haiku-4", PriceIn: 0.8, PriceOut: 4},
		{Key: "google/flash", Provider: "google", Model: "flash", PriceIn: 0.1, PriceOut: 0.4},
	}
}

func targetKeys(ts []strategy.Target, order []int) string {
	ks := make([]string, len(order))
	for n, i := range order {
		ks[n] = ts[i].Provider
	}
	return strings.Join(ks, ",")
}

// TestRoutePluginChangesTheChosenTarget runs the example routing plugin
// under wazero behind the "plugin:tod" strategy: the header, the peak
// hours and the off-peak hours each change the target priority would
// pick (openai).
func TestRoutePluginChangesTheChosenTarget(t *testing.T) {
	skipUnderRace(t)
	th := newTestHost(t, Options{})
	ctx := context.Background()
	if err := th.Load(ctx, []Spec{{Name: "tod", Path: guest(t, "route"), Hooks: []string{"route"}}}); err != nil {
		t.Fatal(err)
	}
	st := th.status(t, "tod")
	if st.ABIVersion != "1.2" || strings.Join(st.Hooks, ",") != "route" || strings.Join(st.Features, ",") != "binary,route" {
		t.Fatalf("status %+v", st)
	}
	sig := strategy.NewSignals(th.clock)
	ts := routeTargets()
	// Latencies: google fastest, then anthropic, openai slowest.
	for key, d := range map[string]time.Duration{"google/flash": 200 * time.Millisecond,
		"anthropic/claude-haiku-4": 400 * time.Millisecond, "openai/gpt-4o-mini": 900 * time.Millisecond} {
		a := sig.Start(key)
		th.clock.Advance(d)
		a.Done(true)
	}
	health := map[string]string{"google": "degraded"}
	s, known := strategy.New("plugin:tod", strategy.Options{Signals: sig, Clock: th.clock, Route: th.RouteFunc(),
		CandidateState: func(tg strategy.Target) strategy.CandidateState {
			return strategy.CandidateState{Health: health[tg.Provider]}
		}})
	if !known {
		t.Fatal("plugin:tod unknown")
	}
	p := s.(*strategy.Plugin)
	if got := targetKeys(ts, (&strategy.Priority{}).Order(strategy.Request{}, ts, nil)); got != "openai,anthropic,google" {
		t.Fatalf("priority %s", got)
	}

	// 12:00 UTC is peak: fastest first, the degraded google left out.
	order, res := p.Route(ctx, strategy.RouteRequest{Request: strategy.Request{Combo: "smart"}, Model: "smart"}, ts, nil)
	if got := targetKeys(ts, order); got != "anthropic,openai" || res.RuleID != "route.peak.fastest" ||
		!reflect.DeepEqual(res.Excluded, []strategy.RouteExclusion{{Index: 2, Reason: "breaker degraded during peak hours"}}) {
		t.Errorf("peak: order %s, result %+v", got, res)
	}
	// The header wins over the hour.
	req := strategy.RouteRequest{Request: strategy.Request{Combo: "smart"}, Model: "smart",
		Headers: map[string]string{"X-Route-Provider": "google", "Authorization": "Bearer sk-secret"}}
	if order, res = p.Route(ctx, req, ts, nil); targetKeys(ts, order) != "google,openai,anthropic" || res.RuleID != "route.header" {
		t.Errorf("header: order %s, result %+v", targetKeys(ts, order), res)
	}
	// 22:00 UTC is off-peak: cheapest first.
	th.clock.Advance(10 * time.Hour)
	if order, res = p.Route(ctx, strategy.RouteRequest{Request: strategy.Request{Combo: "smart"}}, ts, nil); targetKeys(ts, order) != "google,openai,anthropic" ||
		res.RuleID != "route.offpeak.cheapest" || len(res.Excluded) != 0 {
		t.Errorf("off-peak: order %s, result %+v", targetKeys(ts, order), res)
	}
	if ps := p.Stats(); ps != (strategy.PluginStats{Calls: 3}) {
		t.Errorf("strategy stats %+v", ps)
	}
	if st := th.status(t, "tod"); st.Calls != 3 || st.Errors != 0 {
		t.Errorf("plugin calls, errors = %d, %d (last error %q)", st.Calls, st.Errors, st.LastError)
	}
}

// TestRouteFaultyPluginFallsBackToPriority checks that a routing plugin
// that traps, overruns its deadline, answers garbage or excludes every
// target leaves the combo in priority order, and that each failure is
// counted by the strategy and by the plugin's status; a plugin that
// declines is not a failure.
func TestRouteFaultyPluginFallsBackToPriority(t *testing.T) {
	th := newTestHost(t, Options{CallTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	if err := th.Load(ctx, []Spec{{Name: "faulty", Path: guest(t, "faulty"), Hooks: []string{"route"}}}); err != nil {
		t.Fatal(err)
	}
	s, _ := strategy.New("plugin:faulty", strategy.Options{Route: th.RouteFunc(), Clock: th.clock})
	p := s.(*strategy.Plugin)
	ts := routeTargets()
	tests := []struct {
		model    string
		order    string
		fallback string // prefix
		failed   bool
	}{
		{"plain", "google,anthropic,openai", "", false}, // reversed: the plugin answered
		{"pass", "openai,anthropic,google", strategy.FallbackDeclined, false},
		{"panic", "openai,anthropic,google", `plugin "faulty": breakwater_route trapped`, true},
		{"plain", "google,anthropic,openai", "", false},
		{"loop", "openai,anthropic,google", `plugin "faulty": breakwater_route timed out after 300ms`, true},
		{"garbage", "openai,anthropic,google", `plugin "faulty": breakwater_route answered an invalid binary answer`, true},
		{"excludeall", "openai,anthropic,google", `plugin "faulty": breakwater_route answered an invalid binary answer`, true},
		{"plain", "google,anthropic,openai", "", false},
	}
	var failures, declined uint64
	for i, tt := range tests {
		order, res := p.Route(ctx, strategy.RouteRequest{Model: tt.model}, ts, nil)
		if got := targetKeys(ts, order); got != tt.order || !strings.HasPrefix(res.Fallback, tt.fallback) || (tt.fallback == "") != (res.Fallback == "") {
			t.Errorf("%d %s: order %s, fallback %q; want %s, %q", i, tt.model, got, res.Fallback, tt.order, tt.fallback)
		}
		if tt.failed {
			failures++
		}
		if tt.fallback == strategy.FallbackDeclined {
			declined++
		}
		if ps := p.Stats(); ps.Fallbacks != failures || ps.Declined != declined || ps.Calls != uint64(i+1) {
			t.Errorf("%d %s: strategy stats %+v, want %d fallbacks, %d declined", i, tt.model, ps, failures, declined)
		}
		if st := th.status(t, "faulty"); st.Errors != failures {
			t.Errorf("%d %s: plugin errors %d, want %d (last %q)", i, tt.model, st.Errors, failures, st.LastError)
		}
	}
	if last := th.status(t, "faulty").LastError; !strings.Contains(last, "the exclusions leave no eligible candidate") {
		t.Errorf("last error %q", last)
	}
	// A plugin not loaded with the route hook: an error, priority order.
	s2, _ := strategy.New("plugin:absent", strategy.Options{Route: th.RouteFunc()})
	order, res := s2.(*strategy.Plugin).Route(ctx, strategy.RouteRequest{}, ts, nil)
	if targetKeys(ts, order) != "openai,anthropic,google" || res.Fallback != `plugin "absent" is not loaded with the route hook` {
		t.Errorf("absent plugin: %s, %+v", targetKeys(ts, order), res)
	}
}

// TestRouteInputThroughGuest sends every field of a RouteInput through
// the echo guest (SDK decode) and checks its answer (SDK encode, abi
// decode), and the host's input hygiene: credentials removed, header
// names lower-cased.
func TestRouteInputThroughGuest(t *testing.T) {
	skipUnderRace(t)
	th := newTestHost(t, Options{Store: memstore.New(clocktest.NewClock(testNow))})
	ctx := context.Background()
	if err := th.Load(ctx, []Spec{{Name: "echo", Path: guest(t, "echo"), Hooks: []string{"route"}}}); err != nil {
		t.Fatal(err)
	}
	in := abi.RouteInput{
		Request: abi.RouteRequest{Model: "smart", Combo: "c", Stream: true, KeyID: "k7",
			Headers: map[string]string{"X-Tier": "gold", "authorization": "Bearer sk-x", "Cookie": "s=1"}, ToolCount: 3, PromptTokens: 4096},
		Candidates: []abi.RouteCandidate{
			{Provider: "a", Model: "m", Connection: "c1", Eligible: true, Health: "degraded", CooldownMS: 1, LockoutMS: 2,
				Headroom: 0.5, LatencyMS: 3, InFlight: 4, PriceIn: 1.25, PriceOut: 2},
			{Provider: "b", Model: "n", Eligible: true, Headroom: -1},
		},
	}
	a, ok, err := th.Route(ctx, "echo", in)
	want := "smart|c|true|k7|x-tier=gold|3|4096|a|m|c1|true|degraded|1|2|0.5|3|4|1.25|2|b|n||true||0|0|-1|0|0|0|0"
	if err != nil || !ok || a.RuleID != "echo.route" || !reflect.DeepEqual(a.Order, []int{1}) || len(a.Exclude) != 1 || a.Exclude[0].Reason != want {
		t.Fatalf("Route = %+v, %v, %v\nwant reason %s", a, ok, err, want)
	}
}

func TestRouteHeaders(t *testing.T) {
	h := map[string]string{"x-a": "1", "user-agent": "curl"}
	if got := routeHeaders(h); fmt.Sprintf("%p", got) != fmt.Sprintf("%p", h) {
		t.Error("clean headers were copied")
	}
	many := map[string]string{"Authorization": "Bearer x", "X-API-Key": "k", "X-Long": strings.Repeat("é", abi.MaxRouteHeaderBytes)}
	for i := range abi.MaxRouteHeaders + 5 {
		many["x-h"+strconv.Itoa(100+i)] = "v"
	}
	got := routeHeaders(many)
	if len(got) != abi.MaxRouteHeaders || got["authorization"] != "" || got["x-api-key"] != "" {
		t.Errorf("%d headers, credentials %q %q", len(got), got["authorization"], got["x-api-key"])
	}
	if _, ok := got["x-h100"]; !ok {
		t.Error("the first names in sorted order were not kept")
	}
	if _, ok := got["x-long"]; ok {
		t.Error("x-long sorts after the kept names and was kept")
	}
	if v := routeHeaders(map[string]string{"X-Long": strings.Repeat("é", abi.MaxRouteHeaderBytes)})["x-long"]; len(v) != abi.MaxRouteHeaderBytes {
		t.Errorf("long value cut to %d bytes, want %d", len(v), abi.MaxRouteHeaderBytes)
	}
}

// BenchmarkRoute is one route hook call per request on the example
// routing plugin, end to end through the strategy: candidates from
// Signals, host encode, pinned instance, guest decode and sort, guest
// encode, host decode and validation, and the order applied — the cost a
// combo with strategy "plugin:<name>" adds to every request it routes.
func BenchmarkRoute(b *testing.B) {
	th := newTestHost(b, Options{Clock: engine.SystemClock{}})
	if err := th.Load(context.Background(), []Spec{{Name: "tod", Path: guest(b, "route"), Hooks: []string{"route"}}}); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{3, 20} {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			sig := strategy.NewSignals(engine.SystemClock{})
			ts := make([]strategy.Target, n)
			for i := range ts {
				ts[i] = strategy.Target{Key: fmt.Sprint("p", i, "/m"), Provider: fmt.Sprint("p", i), Model: "m",
					PriceIn: float64(n - i), PriceOut: 1}
				sig.Start(ts[i].Key).Done(true)
			}
			s, _ := strategy.New("plugin:tod", strategy.Options{Signals: sig, Route: th.RouteFunc()})
			p := s.(*strategy.Plugin)
			req := strategy.RouteRequest{Request: strategy.Request{Combo: "bench", PromptTokens: 1000}, Model: "bench",
				Headers: map[string]string{"user-agent": "bench"}}
			ctx := context.Background()
			benchCalls(b, func() {
				if _, res := p.Route(ctx, req, ts, nil); res.Fallback != "" {
					b.Fatal(res.Fallback)
				}
			})
		})
	}
}
