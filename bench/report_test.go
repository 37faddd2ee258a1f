package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/bench/internal/load"
)

// lat is a latency summary with the given p50 and p99.
func lat(p50, p99 float64) Latency {
	return Latency{Count: 100, P50MS: p50, P90MS: p50, P99MS: p99, MaxMS: p99}
}

// okRun is a successful run of n requests with latency l.
func okRun(target string, n int, l Latency) Run {
	return Run{Target: target, Scheduled: n, Sent: n, OK: n, SuccessPct: 100, Latency: l}
}

// fullReport is a report in which every target and kept budget holds
// with a little room.
func fullReport() *Report {
	open := func(rate float64, n int, d, b, g Latency) OpenLoopResult {
		return OpenLoopResult{RatePerS: rate, WarmRounds: 2, Rounds: 10, Trio: Trio{Direct: okRun("direct", n, d), Bare: okRun("bare", n, b), Gateway: okRun("gateway", n, g)}}
	}
	r := &Report{
		Settings: Settings{CurveRatePerS: 500, CurveSeconds: 5, SliceSeconds: 1},
		Gateway:  GatewaySetup{Requests: 1000, AccessLines: 1002, ConfigChanges: []string{"`x: y`"}},
		OpenLoop: []OpenLoopResult{
			open(500, 5000, lat(0.30, 0.80), lat(0.40, 1.00), lat(0.44, 1.25)),
			open(2000, 20000, lat(0.30, 1.50), lat(0.40, 2.00), lat(0.45, 4.20)),
		},
		Throughput: &ThroughputResult{Connections: 64, Trio: Trio{
			Direct: Run{OK: 1, RPS: 40000}, Bare: Run{OK: 1, RPS: 20000, Sent: 1000, ProxyCPUMS: 40},
			Gateway: Run{OK: 1, RPS: 19000, Sent: 1000, ProxyCPUMS: 44}}},
		Streaming: &StreamingResult{Workers: 8, Trio: Trio{
			Direct: Run{OK: 10, FirstData: &Latency{P50MS: 0.30}}, Bare: Run{OK: 10, FirstData: &Latency{P50MS: 0.40}},
			Gateway: Run{OK: 10, FirstData: &Latency{P50MS: 0.48}}}},
		Memory: &MemoryResult{GatewayPeak: 60 << 20},
	}
	r.OpenLoop[1].Gateway.RPS = 1999
	configCurve := func(what string) *ConfigCurve {
		return &ConfigCurve{What: what, SliceSeconds: 1, WarmRounds: 2, Rounds: 5, Rows: []ConfigRow{
			{Size: 1, Trio: Trio{Direct: okRun("direct", 100, lat(0.30, 1)), Bare: okRun("bare", 100, lat(0.40, 1)), Gateway: okRun("gateway", 100, lat(0.50, 1))}},
			{Size: 1000, Trio: Trio{Direct: okRun("direct", 100, lat(0.30, 1)), Bare: okRun("bare", 100, lat(0.40, 1)), Gateway: okRun("gateway", 100, lat(0.51, 1))}},
		}}
	}
	body := func(size int, bare, gw float64) BodyRow {
		return BodyRow{Bytes: size, Trio: Trio{Direct: okRun("direct", 100, lat(1, 2)), Bare: okRun("bare", 100, lat(1+bare, 2)), Gateway: okRun("gateway", 100, lat(1+gw, 2))}}
	}
	slow := SlowStreamRow{Asked: 10000, Streams: 10000,
		Trio: Trio{Direct: Run{OK: 10000, FirstData: &Latency{P99MS: 5}}, Bare: Run{OK: 10000, FirstData: &Latency{P99MS: 6}, ProxyMaxRSS: 200e6},
			Gateway: Run{OK: 10000, FirstData: &Latency{P99MS: 7.5}, ProxyMaxRSS: 440e6}},
		BareRSSBefore: 10e6, GatewayRSSBefore: 40e6, Before: Census{Goroutines: 30, FDs: 20}, After: Census{Goroutines: 40, FDs: 24}}
	r.Curves = &Curves{
		Providers: configCurve(curveProviders), Connections: configCurve(curveConnections), Combos: configCurve(curveCombos),
		// 1 KB → 1 MB + 1 KB: bare adds 0.4 ms, the gateway 0.7 ms.
		BodySize:    &BodyCurve{RatePerS: 50, CopyUSPerMB: 60, Rows: []BodyRow{body(1024, 0.1, 0.2), body(1024+1<<20, 0.5, 0.9)}},
		SlowStreams: &SlowStreamCurve{Chunks: 10, ChunkIntervalMS: 1000, RampSeconds: 5, FileLimit: 1 << 20, MaxStreams: 500000, Rows: []SlowStreamRow{slow}},
		FailurePath: &FailurePath{Command: "go test", Rules: 100, Cases: []FailurePathCase{{Name: "restated_403", MedianNs: 35000, Rules: 100}}},
	}
	r.UnderFire = &UnderFireResult{
		Setup: FireSetup{RatePerS: 50, StreamShare: 0.5, Seconds: 20, Providers: []string{"down", "up"}, ConnectionsPerProvider: 2, RetryHeader: "Retry-After: 1", CapacityBoundRPS: 4.5, CallSuccessP: 0.675,
			BreakerOpenAfter: 12},
		Direct:             FireSide{Target: "direct", OK: 660, Scheduled: 1000, SuccessPct: 66},
		Bare:               FireSide{Target: "bare", OK: 661, Scheduled: 1000, SuccessPct: 66.1},
		Gateway:            FireSide{Target: "gateway", OK: 996, Scheduled: 1000, SuccessPct: 99.6},
		UpstreamCalls:      1500,
		AttemptsPerSuccess: 1500.0 / 996, // 1.506, floor 1.481 + 14/996 = 1.496: ×1.007
		RequiredDownCalls:  14,           // 12 to open, 2 probes (3 OPEN periods)
		Breakers: []BreakerWatch{
			{Provider: "down", OpenPeriods: 3, OpenSeconds: 17.2, UnattributedCalls: 15},
			{Provider: "up", ClosedCalls: 1425},
		},
		CallsByKey: map[string]int64{"bench-up-key-1": 700},
	}
	r.Recovery = &RecoveryResult{Provider: "down", BreakerResetMS: 5000, StateAtSwitch: "OPEN", RetryAfterAtSwitchMS: 1800,
		ExpectedS: 1.8, Called: true, FirstCallS: 1.84, FirstCallLowS: 1.79, Closed: true, ClosedS: 1.9}
	rlSide := func(target string, ok int, p99 float64) FireSide {
		return FireSide{Target: target, OK: ok, Scheduled: 1000, SuccessPct: float64(ok) / 10,
			NonStream: Run{OK: ok / 2, Scheduled: 500, Sent: 500, Latency: lat(1, p99)}, Stream: Run{OK: ok / 2, Scheduled: 500, Sent: 500}}
	}
	r.RateLimited = &RateLimitedResult{
		Setup:  RateLimitedSetup{Keys: 2, RequestsPerSecond: 5, Burst: 5, CapacityRPS: 10, OfferedRPS: 7, StreamShare: 0.5, Seconds: 20},
		Direct: rlSide("direct", 700, 2), Bare: rlSide("bare", 700, 3), Gateway: rlSide("gateway", 1000, 40),
		UpstreamCalls: 1020, CallsPerSuccess: 1.02, CallsByKey: map[string]int64{"bench-upstream-key-1": 510, "bench-upstream-key-2": 510},
	}
	return r
}

func statuses(bs []Budget) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Status)
	}
	return out
}

// statusOf returns the status of the budget whose name starts with name.
func statusOf(bs []Budget, name string) string {
	for _, b := range bs {
		if strings.HasPrefix(b.Name, name) {
			return b.Status
		}
	}
	return "missing"
}

func TestEvaluateTargets(t *testing.T) {
	r := fullReport()
	for _, b := range evaluateTargets(r) {
		if b.Status != statusPass {
			t.Errorf("target %q = %s (%s) in a report that meets it", b.Name, b.Status, b.Figure)
		}
	}
	tests := []struct {
		name, target, want string
		mutate             func(r *Report)
	}{
		{"throughput exactly 90 % of bare", "max throughput", "PASS", func(r *Report) { r.Throughput.Gateway.RPS = 18000 }},
		{"throughput 89.9 % of bare", "max throughput", "FAIL", func(r *Report) { r.Throughput.Gateway.RPS = 17980 }},
		{"throughput at 32 connections", "max throughput", "N/A", func(r *Report) { r.Throughput.Connections = 32 }},
		{"p50 exactly +0.05 over bare", "added p50", "PASS", func(r *Report) { r.OpenLoop[0].Gateway.Latency.P50MS = 0.45 }},
		{"p50 +0.051 over bare", "added p50", "FAIL", func(r *Report) { r.OpenLoop[0].Gateway.Latency.P50MS = 0.451 }},
		{"p50 judged against bare, not direct", "added p50", "PASS", func(r *Report) { r.OpenLoop[0].Direct.Latency.P50MS = 0.1 }},
		{"p99 +0.31 over bare", "added p99", "FAIL", func(r *Report) { r.OpenLoop[0].Gateway.Latency.P99MS = 1.31 }},
		{"no 500 req/s run", "added p50", "N/A", func(r *Report) { r.OpenLoop = r.OpenLoop[1:] }},
		{"gateway answered nothing", "added p50", "N/A", func(r *Report) { r.OpenLoop[0].Gateway.OK = 0 }},
		{"first byte +0.11 over bare", "stream first-byte", "FAIL", func(r *Report) { r.Streaming.Gateway.FirstData.P50MS = 0.51 }},
		{"CPU ×1.15 exactly", "gateway CPU", "PASS", func(r *Report) { r.Throughput.Gateway.ProxyCPUMS = 46 }},
		{"CPU ×1.16", "gateway CPU", "FAIL", func(r *Report) { r.Throughput.Gateway.ProxyCPUMS = 46.4 }},
		{"access lines missing", "access logging", "FAIL", func(r *Report) { r.Gateway.AccessLines = 999 }},
		{"log level warn", "access logging", "FAIL", func(r *Report) { r.Gateway.LogLevel = "warn" }},
		{"providers overhead +10 %", "p50 overhead, 1 → many providers", "PASS", func(r *Report) {
			r.Curves.Providers.Rows[1].Gateway.Latency.P50MS = 0.52
		}},
		{"providers overhead +15 %", "p50 overhead, 1 → many providers", "FAIL", func(r *Report) {
			r.Curves.Providers.Rows[1].Gateway.Latency.P50MS = 0.53
		}},
		{"combos curve of one row", "p50 overhead, 1 → many combos", "N/A", func(r *Report) { r.Curves.Combos.Rows = r.Curves.Combos.Rows[:1] }},
		{"51 KB per stream", "gateway RSS per open slow stream", "FAIL", func(r *Report) { r.Curves.SlowStreams.Rows[0].Gateway.ProxyMaxRSS = 550e6 }},
		{"streams that did not complete", "gateway RSS per open slow stream", "FAIL", func(r *Report) { r.Curves.SlowStreams.Rows[0].Gateway.OK = 9000 }},
		{"TTFB p99 +2.1 ms", "slow streams: first-byte p99", "FAIL", func(r *Report) { r.Curves.SlowStreams.Rows[0].Gateway.FirstData.P99MS = 8.1 }},
		{"fewer streams than 10,000", "slow streams: first-byte p99", "N/A", func(r *Report) { r.Curves.SlowStreams.Rows[0].Streams = 9900 }},
		{"51 goroutines left", "no goroutine", "FAIL", func(r *Report) { r.Curves.SlowStreams.Rows[0].After.Goroutines = 81 }},
		{"26 fds left", "no goroutine", "FAIL", func(r *Report) { r.Curves.SlowStreams.Rows[0].After.FDs = 46 }},
		{"census unreadable", "no goroutine", "FAIL", func(r *Report) { r.Curves.SlowStreams.Rows[0].After.Goroutines = -1 }},
		{"a pool filled by the row before is no leak", "no goroutine", "PASS", func(r *Report) {
			s := r.Curves.SlowStreams
			first := SlowStreamRow{Streams: 1000, Before: Census{Goroutines: 30, FDs: 20}, After: Census{Goroutines: 540, FDs: 280}}
			s.Rows[0].Before, s.Rows[0].After = first.After, Census{Goroutines: 560, FDs: 290}
			s.Rows = append([]SlowStreamRow{first}, s.Rows...)
		}},
		{"growing past the row before is", "no goroutine", "FAIL", func(r *Report) {
			s := r.Curves.SlowStreams
			first := SlowStreamRow{Streams: 1000, Before: Census{Goroutines: 30, FDs: 20}, After: Census{Goroutines: 540, FDs: 280}}
			s.Rows[0].Before, s.Rows[0].After = first.After, Census{Goroutines: 1540, FDs: 290}
			s.Rows = append([]SlowStreamRow{first}, s.Rows...)
		}},
		{"body: gateway grows faster than two passes", "overhead per MB", "FAIL", func(r *Report) {
			r.Curves.BodySize.Rows[1].Gateway.Latency.P50MS = 2.1 // +1.1 − 0.2 = 0.9 ms/MB > 2 × 0.4
		}},
		{"body: the bare proxy's slope at or below zero is not resolved", "overhead per MB", "N/A", func(r *Report) {
			r.Curves.BodySize.Rows[1].Bare.Latency.P50MS = 1.05 // +0.05 − 0.1: the bare proxy's cost fell with the body
		}},
		{"body: the gateway's slope at or below zero is not resolved", "overhead per MB", "N/A", func(r *Report) {
			r.Curves.BodySize.Rows[1].Gateway.Latency.P50MS = 1.1 // +0.1 − 0.2: the gateway's cost fell with the body
		}},
		{"failure path 50.1 µs", "failure path", "FAIL", func(r *Report) { r.Curves.FailurePath.Cases[0].MedianNs = 50100 }},
		{"failure path with 10 rules", "failure path", "FAIL", func(r *Report) { r.Curves.FailurePath.Rules = 10 }},
		{"failure path benchmark failed", "failure path", "FAIL", func(r *Report) { r.Curves.FailurePath.Err = "exit status 1" }},
		{"random 429s: ×1.06 the floor", "under fire (random 429s): upstream calls", "FAIL", func(r *Report) {
			r.UnderFire.AttemptsPerSuccess = 1.06 * (1/0.675 + 14.0/996)
		}},
		{"random 429s: ×1.04 the floor with the down provider's required calls", "under fire (random 429s): upstream calls", "PASS", func(r *Report) {
			r.UnderFire.AttemptsPerSuccess = 1.04 * (1/0.675 + 14.0/996) // ×1.054 of 1/p alone
		}},
		{"random 429s: the breaker never opened, no required calls", "under fire (random 429s): upstream calls", "FAIL", func(r *Report) {
			r.UnderFire.RequiredDownCalls = 0
			r.UnderFire.AttemptsPerSuccess = 1.06 / 0.675
		}},
		{"random 429s: no success", "under fire (random 429s): upstream calls", "FAIL", func(r *Report) { r.UnderFire.Gateway.OK = 0 }},
		{"rate-limited 99.8 %", "rate-limited: client success", "FAIL", func(r *Report) { r.RateLimited.Gateway.SuccessPct = 99.8 }},
		{"rate-limited 1.06 calls", "rate-limited: upstream calls", "FAIL", func(r *Report) { r.RateLimited.CallsPerSuccess = 1.06 }},
		{"rate-limited p99 +51 ms", "rate-limited: p99", "FAIL", func(r *Report) { r.RateLimited.Gateway.NonStream.Latency.P99MS = 54.1 }},
		{"rate-limited not run", "rate-limited: client success", "N/A", func(r *Report) { r.RateLimited = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fullReport()
			tt.mutate(r)
			if got := statusOf(evaluateTargets(r), tt.target); got != tt.want {
				t.Fatalf("%s = %s, want %s", tt.target, got, tt.want)
			}
		})
	}
	if got := statuses(evaluateTargets(&Report{})); len(got) != 18 || slices.ContainsFunc(got, func(s string) bool { return s != statusNA }) {
		t.Errorf("an empty report's targets = %v, want 18 × N/A", got)
	}
}

func TestEvaluateBudgets(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(r *Report)
		want   string // 2000 req/s, RSS, fire success, OPEN calls
	}{
		{"all within", func(*Report) {}, "PASS,PASS,PASS,PASS"},
		{"one failure at 2000 req/s", func(r *Report) { r.OpenLoop[1].Gateway.OK = 19999 }, "FAIL,PASS,PASS,PASS"},
		{"1031 req/s achieved", func(r *Report) { r.OpenLoop[1].Gateway.RPS = 1031 }, "FAIL,PASS,PASS,PASS"},
		{"2000 req/s p99 5.01 ms", func(r *Report) { r.OpenLoop[1].Gateway.Latency.P99MS = 5.01 }, "FAIL,PASS,PASS,PASS"},
		{"peak RSS 100 MiB + 1 page", func(r *Report) { r.Memory.GatewayPeak = 100<<20 + 4096 }, "PASS,FAIL,PASS,PASS"},
		{"under fire 99.4 %", func(r *Report) { r.UnderFire.Gateway.SuccessPct = 99.4 }, "PASS,PASS,FAIL,PASS"},
		{"one call to an OPEN breaker", func(r *Report) { r.UnderFire.WastedCalls = 1 }, "PASS,PASS,PASS,FAIL"},
		{"breaker never opened", func(r *Report) { r.UnderFire.Breakers[0].OpenPeriods = 0 }, "PASS,PASS,PASS,N/A"},
		{"nothing measured", func(r *Report) { *r = Report{} }, "N/A,N/A,N/A,N/A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fullReport()
			tt.mutate(r)
			if got := strings.Join(statuses(evaluateBudgets(r)), ","); got != tt.want {
				t.Fatalf("budgets = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestFailed(t *testing.T) {
	if failed([]Budget{{Status: statusPass}, {Status: statusNA}}) {
		t.Error("PASS and N/A reported as failed")
	}
	if !failed([]Budget{{Status: statusPass}, {Status: statusFail}}) {
		t.Error("a FAIL not reported")
	}
}

func TestRunOf(t *testing.T) {
	ms := time.Millisecond
	res := &load.Result{
		Scheduled: 4, Sent: 3, OK: 2, Dropped: 1,
		Latency:      []time.Duration{3 * ms, 1 * ms},
		FromSchedule: []time.Duration{4 * ms, 1 * ms},
		Lag:          []time.Duration{0, ms, 0},
		Errors:       map[string]int{"HTTP 502": 1},
		Elapsed:      2 * time.Second,
	}
	r := runOf("gateway", res, true, false)
	if r.SuccessPct != 50 {
		t.Errorf("SuccessPct = %v, want 50 (2 of 4 scheduled)", r.SuccessPct)
	}
	if r.RPS != 1 {
		t.Errorf("RPS = %v, want 1 (2 OK in 2 s)", r.RPS)
	}
	if r.Latency.P50MS != 1 || r.Latency.MaxMS != 3 || r.Latency.Count != 2 {
		t.Errorf("Latency = %+v, want p50 1 ms, max 3 ms, 2 samples", r.Latency)
	}
	if r.FromSchedule == nil || r.SendLag == nil || r.FirstData != nil {
		t.Fatalf("open-loop run: from schedule %v, lag %v, first data %v", r.FromSchedule, r.SendLag, r.FirstData)
	}
	if r.FromSchedule.MaxMS != 4 {
		t.Errorf("FromSchedule max = %v ms, want 4", r.FromSchedule.MaxMS)
	}
	if r.UpstreamCalls != -1 {
		t.Errorf("UpstreamCalls = %d, want -1 (unknown)", r.UpstreamCalls)
	}
}

func TestMarkdownAndJSON(t *testing.T) {
	r := fullReport()
	r.Targets, r.Budgets = evaluateTargets(r), evaluateBudgets(r)
	r.Profiles = []Profile{{Scenario: "throughput", Seconds: 10, CPUFile: "profiles/throughput.cpu.pprof", AllocsFile: "profiles/throughput.allocs.pprof",
		Flat: []ProfileLine{{Function: "runtime.futex", Flat: "0.5s", FlatPct: 12.5, Cum: "0.5s", CumPct: 12.5}},
		Cum:  []ProfileLine{{Function: "main.serve", Flat: "0", Cum: "3s", CumPct: 75}}}}
	r.Notes = []string{"plain note", "log:\nline 1\nline 2"}
	md := r.Markdown()
	for _, want := range []string{
		"## Targets", "## Budgets kept", "| max throughput at 64 connections | ≥ 90 % of the bare proxy | 95.0 % (19000 vs 20000 req/s) | **PASS** |",
		"default settings except `x: y`", "log level the default (info): the access log is on (1002 access lines written for 1000 requests",
		"### 500 req/s\n\n2 warm-up and 10 measured rounds.", "each in turn (direct → bare proxy → Breakwater) gets a slice of 1 s of the rate", "| direct | bare proxy | Breakwater | Breakwater − bare | Breakwater − direct |",
		"| p50 | 0.300 ms | 0.400 ms | 0.440 ms | **+0.040 ms** | +0.140 ms |",
		"## 2. Max throughput (closed loop, 64 connections", "**95.0 %**",
		"| proxy CPU / request | – | 40.0 µs | 44.0 µs | ×1.10 |",
		"## 5. Cost as the work grows", "### providers", "### combos",
		"gets a slice of 1 s; 2 rounds of warm-up, then 5 measured rounds (5 s per target)",
		"| 1000 | 0.300 ms | 0.400 ms | 0.510 ms | +0.110 ms | **+0.210 ms** |",
		"Largest / smallest p50 overhead: **×1.05** (over the bare proxy instead of direct: ×1.10).",
		"### Request body size", "bare proxy **400 µs/MB**, Breakwater **700 µs/MB**",
		"### Concurrent slow streams", "| 10000 | 10000 / 10000 / 10000 | 5.00 / 6.00 / 7.50 ms | **+1.500 ms** | 19.0 / 40.0 KB | 30 → 40 | 20 → 24 |",
		"### Failure path", "**35.0 µs**",
		"## 6. Under fire: random 429s", "| calls to the flaky provider per success | – | – | 0.703 (expected 1.481) |",
		"| calls to the down provider | – | – | 800 (required 14: 12 to open the breaker, 2 probes) |",
		"## 7. Recovery", "## 8. Under fire where routing can win", "**1.020** (1020 calls)",
		"## Profiles of the gateway (PROFILE=1)", "| 1 | 0.5s | 12.5 % | `runtime.futex` | 3s | 75.0 % | `main.serve` |",
		"VmHWM (peak) at the end", "**60.0 MiB**",
		"- plain note", "```\nline 1\nline 2\n```",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
	data, err := r.JSON()
	if err != nil {
		t.Fatalf("JSON: %v", err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("JSON does not decode: %v", err)
	}
	if len(back.Targets) != 18 || len(back.Budgets) != 4 || back.Throughput.Bare.RPS != 20000 || back.OpenLoop[0].Gateway.Latency.P50MS != 0.44 ||
		back.Curves.SlowStreams.Rows[0].After.FDs != 24 || back.RateLimited.CallsPerSuccess != 1.02 || back.Profiles[0].Cum[0].Function != "main.serve" {
		t.Fatalf("JSON round trip lost data")
	}
}

func TestParseFlagsQuick(t *testing.T) {
	o, err := parseFlags([]string{"-quick", "-duration", "4s"})
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	if o.openDuration != 4*time.Second {
		t.Errorf("explicit -duration overridden by -quick: %v", o.openDuration)
	}
	if o.throughputDur != 3*time.Second || o.streamDuration != 2*time.Second || o.warmup != 500*time.Millisecond {
		t.Errorf("quick durations = %v, %v, %v", o.throughputDur, o.streamDuration, o.warmup)
	}
	if len(o.rates) != 2 || o.rates[0] != 500 || o.rates[1] != 2000 || o.conns != 64 {
		t.Errorf("defaults: rates %v, conns %d; want [500 2000], 64", o.rates, o.conns)
	}
	for _, bad := range [][]string{{"-rates", "500,x"}, {"-conns", "0"}, {"-duration", "0s"}, {"extra"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}
