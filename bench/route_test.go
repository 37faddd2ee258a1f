package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/bench/internal/load"
)

func TestParseRouteBench(t *testing.T) {
	out := `goos: linux
goarch: amd64
pkg: github.com/breakwater-dev/breakwater/internal/plugins
BenchmarkRoute/targets=3-2     2000   12663 ns/op   8003 median-ns   7621 p10-ns   28512 p99-ns   8413 B/op   8 allocs/op
BenchmarkRoute/targets=20-2    2000   53418 ns/op  39012 median-ns  33514 p10-ns  135500 p99-ns  16683 B/op   8 allocs/op
BenchmarkRouteOther/x-2        2000   1 ns/op
PASS
`
	cs := parseRouteBench(out)
	if len(cs) != 2 {
		t.Fatalf("%d cases, want 2: %+v", len(cs), cs)
	}
	want := RouteBenchCase{Name: "targets=3", NsPerOp: 12663, MedianNs: 8003, P10Ns: 7621, P99Ns: 28512, BytesPerOp: 8413, AllocsPerOp: 8}
	if cs[0] != want {
		t.Errorf("case 1 = %+v, want %+v", cs[0], want)
	}
	if cs[1].Name != "targets=20" || cs[1].MedianNs != 39012 || cs[1].AllocsPerOp != 8 {
		t.Errorf("case 2 = %+v", cs[1])
	}
	if got := parseRouteBench("FAIL\n"); len(got) != 0 {
		t.Errorf("no benchmark lines, got %+v", got)
	}
}

// routeLoad is a load in which both combos were routed as they should be:
// n requests each, the priority combo answered by bench, the plugin combo
// by other-2, with a plugin call for each.
func routeLoad(n int, p, q Latency, pCPU, qCPU, pRPS, qRPS float64) RouteLoad {
	pr, pl := okRun(routePriorityCombo, n, p), okRun(routePluginCombo, n, q)
	pr.ProxyCPUMS, pl.ProxyCPUMS, pr.RPS, pl.RPS = pCPU, qCPU, pRPS, qRPS
	return RouteLoad{Priority: pr, Plugin: pl,
		PriorityServed: map[string]int{routeDefault: n}, PluginServed: map[string]int{routeChosen: n},
		PluginCounters: RouteCounters{Calls: uint64(n), PluginCalls: uint64(n)}}
}

func TestRouteLoadCheck(t *testing.T) {
	l := routeLoad(10000, lat(0.50, 1.20), lat(0.53, 1.30), 800, 900, 6000, 5700)
	l.check()
	if l.Err != "" || l.Cost == nil {
		t.Fatalf("a load routed as it should be: error %q", l.Err)
	}
	c := *l.Cost
	if !near(c.P50DeltaMS, 0.03) || !near(c.P99DeltaMS, 0.10) || !near(c.CPUDeltaUS, 10) || !near(c.ThroughputRatio, 0.95) {
		t.Errorf("cost %+v, want p50 +0.03 ms, p99 +0.10 ms, CPU +10 µs, ×0.95", c)
	}

	tests := []struct {
		name, want string
		mutate     func(l *RouteLoad)
	}{
		{"priority answered by the plugin's choice", "priority: 9999 of 10000 successes answered by bench", func(l *RouteLoad) {
			l.PriorityServed = map[string]int{routeDefault: 9999, routeChosen: 1}
		}},
		{"plugin called by the priority combo", "priority: 0 strategy calls, 3 plugin calls", func(l *RouteLoad) {
			l.PriorityCounters.PluginCalls = 3
		}},
		{"plugin combo not routed by the plugin", "plugin: 0 of 10000 successes answered by other-2", func(l *RouteLoad) {
			l.PluginServed = map[string]int{routeDefault: 10000}
		}},
		{"a success without the header", "(bench ×1; no X-Breakwater-Provider ×1", func(l *RouteLoad) {
			l.PluginServed = map[string]int{routeChosen: 9998, routeDefault: 1, "": 1}
		}},
		{"fewer plugin calls than requests", "plugin: 10000 requests sent, but 10000 strategy calls (0 declined), 9999 plugin calls", func(l *RouteLoad) {
			l.PluginCounters.PluginCalls = 9999
		}},
		{"declined", "(1 declined)", func(l *RouteLoad) { l.PluginCounters.Declined = 1 }},
		{"fallbacks above 0.1 %", "plugin: 11 of 10000 requests fell back to the priority order (11 plugin errors)", func(l *RouteLoad) {
			l.PluginServed = map[string]int{routeChosen: 9989, routeDefault: 11}
			l.PluginCounters.Fallbacks, l.PluginCounters.PluginErrors = 11, 11
		}},
		{"no success", "no success (priority 0, plugin 10000)", func(l *RouteLoad) {
			l.Priority.OK, l.PriorityServed = 0, nil
		}},
	}
	for _, tt := range tests {
		l := routeLoad(10000, lat(0.50, 1.20), lat(0.53, 1.30), 800, 900, 6000, 5700)
		tt.mutate(&l)
		l.check()
		if l.Cost != nil || !strings.Contains(l.Err, tt.want) {
			t.Errorf("%s: cost %+v, error %q; want no cost and an error with %q", tt.name, l.Cost, l.Err, tt.want)
		}
	}

	// Ten fallbacks in 10,000 requests (0.1 %), each answered by the
	// priority order's target: the plugin routed the load.
	l = routeLoad(10000, lat(0.50, 1.20), lat(0.53, 1.30), 800, 900, 6000, 5700)
	l.PluginServed = map[string]int{routeChosen: 9990, routeDefault: 10}
	l.PluginCounters.Fallbacks = 10
	if l.check(); l.Err != "" || l.Cost == nil {
		t.Errorf("10 fallbacks in 10000: error %q", l.Err)
	}
}

// TestRouteSideTotal checks that a combo's rounds add up to one run:
// latencies over every round's samples, counts, CPU and calls summed,
// the answering providers and the counters of every round.
func TestRouteSideTotal(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tally := func(provider string, n int) map[load.TallyKey]int {
		return map[load.TallyKey]int{{Header: headerProvider, Value: provider, OK: true}: n, {Header: headerProvider, Value: "", OK: false}: 1}
	}
	var s routeSide
	s.add(&load.Result{Scheduled: 4, Sent: 4, OK: 3, Elapsed: time.Second, Latency: ms(1, 1, 1), Lag: ms(0, 0, 0, 0),
		Errors: map[string]int{"timeout": 1}, Tally: tally(routeChosen, 3)},
		Run{ProxyCPUMS: 10, MockCPUMS: 4, UpstreamCalls: 3, GeneratorCPUPct: 20, ProxyMaxRSS: 100}, RouteCounters{Calls: 4, PluginCalls: 4})
	s.add(&load.Result{Scheduled: 4, Sent: 4, OK: 3, Elapsed: time.Second, Latency: ms(9, 9, 9), Lag: ms(0, 0, 0, 0),
		Errors: map[string]int{"timeout": 1}, Tally: tally(routeDefault, 3)},
		Run{ProxyCPUMS: 20, MockCPUMS: 6, UpstreamCalls: 3, GeneratorCPUPct: 40, ProxyMaxRSS: 300}, RouteCounters{Calls: 4, PluginCalls: 4, Fallbacks: 3, PluginErrors: 3})
	run, served, c := s.total(routePluginCombo, true)
	if run.Sent != 8 || run.OK != 6 || run.RPS != 3 || run.Latency.Count != 6 || run.Latency.MaxMS != 9 || run.SendLag.Count != 8 ||
		run.Errors["timeout"] != 2 {
		t.Errorf("run %+v", run)
	}
	if run.ProxyCPUMS != 30 || run.MockCPUMS != 10 || run.UpstreamCalls != 6 || run.GeneratorCPUPct != 30 || run.ProxyMaxRSS != 300 {
		t.Errorf("CPU, calls, RSS: %+v", run)
	}
	if served[routeChosen] != 3 || served[routeDefault] != 3 || len(served) != 2 {
		t.Errorf("served %v", served)
	}
	if c != (RouteCounters{Calls: 8, PluginCalls: 8, Fallbacks: 3, PluginErrors: 3}) {
		t.Errorf("counters %+v", c)
	}
	s.runs[1].UpstreamCalls = -1
	if run, _, _ := s.total(routePluginCombo, true); run.UpstreamCalls != -1 {
		t.Errorf("a round with unknown upstream calls: %d", run.UpstreamCalls)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestRouteMarkdownAndJSON(t *testing.T) {
	open := routeLoad(1500, lat(0.570, 2.456), lat(0.596, 2.500), 420, 450, 500, 500)
	open.RatePerS, open.Seconds, open.Rounds = 500, 3, 4
	open.check()
	closed := routeLoad(18000, lat(9.4, 31.9), lat(9.6, 32.5), 1584, 1710, 6000, 5850)
	closed.Connections, closed.Seconds, closed.Rounds = 64, 3, 4
	closed.PluginServed = map[string]int{routeDefault: 18000}
	closed.check()
	r := &Report{RoutePlugin: &RoutePluginResult{Plugin: routePluginName, Source: routePluginSource, Build: "GOOS=wasip1 GOARCH=wasm go build",
		Header: routeHeader + ": " + routeChosen, PriorityProvider: routeDefault, PluginProvider: routeChosen, Open: &open, Closed: &closed,
		InProcess: &RouteBench{Command: "go test -bench ^BenchmarkRoute$", Cases: []RouteBenchCase{
			{Name: "targets=3", NsPerOp: 12663, MedianNs: 8003, P10Ns: 7621, P99Ns: 28512, BytesPerOp: 8413, AllocsPerOp: 8}}}}}
	md := r.Markdown()
	for _, want := range []string{
		"## Routing plugin: the route hook's cost per request",
		"`route-priority` (strategy `priority`) and `route-plugin` (strategy `plugin:route`",
		"| p50 Δ | **+0.026 ms** | open loop, 500 req/s, 3 s each in 4 rounds |",
		"| p99 Δ | **+0.044 ms** |",
		// The closed loop's plugin combo was answered by bench: an error, not a number.
		"| gateway CPU / request Δ | **error** |", "| throughput, plugin / priority | **error** |",
		"**Error**: plugin: 0 of 18000 successes answered by other-2",
		"| answered by | bench ×1500 | other-2 ×1500 |  |",
		"| gateway CPU / request | 280.0 µs | 300.0 µs | +20.0 µs |",
		"| throughput | 6000 req/s | 5850 req/s | error |",
		"### In process", "| targets=3 | **8.0 µs** | 7.6 µs | 28.5 µs | 12663 ns | **8** | 8413 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
	if !r.RoutePlugin.failed() {
		t.Error("a report with a load in error is not failed")
	}
	data, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	rp := back.RoutePlugin
	if rp == nil || rp.Open.Cost == nil || !near(rp.Open.Cost.CPUDeltaUS, 20) || rp.Closed.Cost != nil || rp.Closed.Err == "" ||
		rp.Open.PluginServed[routeChosen] != 1500 || rp.InProcess.Cases[0].AllocsPerOp != 8 {
		t.Fatalf("JSON round trip lost data: %s", data)
	}
	for _, key := range []string{`"route_plugin"`, `"p50_delta_ms"`, `"cpu_per_request_delta_us"`, `"throughput_ratio"`, `"in_process"`, `"allocs_per_op"`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
	closed.Err, closed.Cost = "", &RouteCost{}
	if r.RoutePlugin.failed() || (*RoutePluginResult)(nil).failed() {
		t.Error("a report without errors is failed")
	}
}

func TestParseFlagsRoute(t *testing.T) {
	o, err := parseFlags([]string{"-quick", "-skip-route-plugin"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.skipRoutePlugin || o.routeDuration != 3*time.Second {
		t.Errorf("skip %v, quick duration %v; want true, 3s", o.skipRoutePlugin, o.routeDuration)
	}
	if o, _ := parseFlags(nil); o.routeDuration != 10*time.Second || o.skipRoutePlugin {
		t.Errorf("defaults: duration %v, skip %v", o.routeDuration, o.skipRoutePlugin)
	}
	if _, err := parseFlags([]string{"-route-duration", "0s"}); err == nil {
		t.Error("-route-duration 0s accepted")
	}
}

func TestRouteConfig(t *testing.T) {
	cfg := routeConfig("/tmp/x/route.wasm")
	for _, want := range []string{
		"plugins:\n  - {name: route, path: \"/tmp/x/route.wasm\", hooks: [route]}\n",
		"  - name: route-priority\n    strategy: priority\n    targets:\n      - {model: bench/bench-model}\n      - {model: other-2/other-model-2}\n",
		"  - name: route-plugin\n    strategy: plugin:route\n    targets:\n      - {model: bench/bench-model}\n      - {model: other-2/other-model-2}\n",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("configuration lacks %q:\n%s", want, cfg)
		}
	}
}
