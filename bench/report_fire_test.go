package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// proofReport is a report in which every proof budget holds with a little
// room.
func proofReport() *Report {
	r := fullReport()
	r.OpenLoop[0].AddedP50MS, r.OpenLoop[0].AddedP99MS = 0.25, 0.9
	r.OpenLoop[1].Gateway.Latency.P99MS = 4.2
	r.Throughput.Ratio = 0.35
	r.Memory.GatewayPeak = 60 << 20
	r.UnderFire = &UnderFireResult{
		Setup:              FireSetup{RatePerS: 50, StreamShare: 0.5, Seconds: 20, Providers: []string{"down", "up"}, ConnectionsPerProvider: 2, RetryHeader: "Retry-After: 1", CapacityBoundRPS: 4.5},
		Direct:             FireSide{Target: "direct", OK: 660, Scheduled: 1000, SuccessPct: 66},
		Gateway:            FireSide{Target: "gateway", OK: 996, Scheduled: 1000, SuccessPct: 99.6},
		UpstreamCalls:      1440,
		AttemptsPerSuccess: 1440.0 / 996,
		Breakers: []BreakerWatch{
			{Provider: "down", OpenPeriods: 3, OpenSeconds: 17.2, UnattributedCalls: 15},
			{Provider: "up", ClosedCalls: 1425},
		},
		CallsByKey: map[string]int64{"bench-up-key-1": 700},
	}
	r.Recovery = &RecoveryResult{Provider: "down", BreakerResetMS: 5000, StateAtSwitch: "OPEN", RetryAfterAtSwitchMS: 1800,
		ExpectedS: 1.8, Called: true, FirstCallS: 1.84, FirstCallLowS: 1.79, Closed: true, ClosedS: 1.9}
	return r
}

func TestEvaluateProofBudgets(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(r *Report)
		// added p50, added p99, 2000 req/s, throughput, RSS, fire success,
		// attempts, wasted calls
		want string
	}{
		{"all within", func(*Report) {}, "PASS,PASS,PASS,PASS,PASS,PASS,PASS,PASS"},
		{"added p50 exactly 0.3 ms", func(r *Report) { r.OpenLoop[0].AddedP50MS = 0.3 }, "PASS,PASS,PASS,PASS,PASS,PASS,PASS,PASS"},
		{"added p50 0.301 ms", func(r *Report) { r.OpenLoop[0].AddedP50MS = 0.301 }, "FAIL,PASS,PASS,PASS,PASS,PASS,PASS,PASS"},
		{"added p99 1.001 ms", func(r *Report) { r.OpenLoop[0].AddedP99MS = 1.001 }, "PASS,FAIL,PASS,PASS,PASS,PASS,PASS,PASS"},
		{"2000 req/s p99 exactly 5 ms", func(r *Report) { r.OpenLoop[1].Gateway.Latency.P99MS = 5 }, "PASS,PASS,PASS,PASS,PASS,PASS,PASS,PASS"},
		{"2000 req/s p99 5.01 ms", func(r *Report) { r.OpenLoop[1].Gateway.Latency.P99MS = 5.01 }, "PASS,PASS,FAIL,PASS,PASS,PASS,PASS,PASS"},
		{"one failure at 2000 req/s", func(r *Report) { r.OpenLoop[1].Gateway.OK = 19999 }, "PASS,PASS,FAIL,PASS,PASS,PASS,PASS,PASS"},
		{"throughput 29.9 % passes the old budget, not this one", func(r *Report) { r.Throughput.Ratio = 0.299 }, "PASS,PASS,PASS,FAIL,PASS,PASS,PASS,PASS"},
		{"peak RSS exactly 100 MB", func(r *Report) { r.Memory.GatewayPeak = 100_000_000 }, "PASS,PASS,PASS,PASS,PASS,PASS,PASS,PASS"},
		{"peak RSS 99 MiB is over 100 MB", func(r *Report) { r.Memory.GatewayPeak = 99 << 20 }, "PASS,PASS,PASS,PASS,FAIL,PASS,PASS,PASS"},
		{"under fire 99.5 % exactly", func(r *Report) { r.UnderFire.Gateway.OK, r.UnderFire.Gateway.SuccessPct = 995, 99.5 }, "PASS,PASS,PASS,PASS,PASS,PASS,PASS,PASS"},
		{"under fire 99.4 %", func(r *Report) { r.UnderFire.Gateway.OK, r.UnderFire.Gateway.SuccessPct = 994, 99.4 }, "PASS,PASS,PASS,PASS,PASS,FAIL,PASS,PASS"},
		{"1.5 attempts per success exactly", func(r *Report) { r.UnderFire.AttemptsPerSuccess = 1.5 }, "PASS,PASS,PASS,PASS,PASS,PASS,PASS,PASS"},
		{"1.51 attempts per success", func(r *Report) { r.UnderFire.AttemptsPerSuccess = 1.51 }, "PASS,PASS,PASS,PASS,PASS,PASS,FAIL,PASS"},
		{"no success at all", func(r *Report) {
			r.UnderFire.Gateway.OK, r.UnderFire.Gateway.SuccessPct, r.UnderFire.AttemptsPerSuccess = 0, 0, 0
		}, "PASS,PASS,PASS,PASS,PASS,FAIL,FAIL,PASS"},
		{"one call to an OPEN breaker", func(r *Report) { r.UnderFire.WastedCalls = 1 }, "PASS,PASS,PASS,PASS,PASS,PASS,PASS,FAIL"},
		{"breaker never opened", func(r *Report) { r.UnderFire.Breakers[0].OpenPeriods = 0 }, "PASS,PASS,PASS,PASS,PASS,PASS,PASS,N/A"},
		{"under fire not run", func(r *Report) { r.UnderFire = nil }, "PASS,PASS,PASS,PASS,PASS,N/A,N/A,N/A"},
		{"nothing measured", func(r *Report) { *r = Report{} }, "N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := proofReport()
			tt.mutate(r)
			if got := strings.Join(statuses(evaluateProofBudgets(r)), ","); got != tt.want {
				t.Fatalf("proof budgets = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestStrictCountsProofBudgets(t *testing.T) {
	r := proofReport()
	r.UnderFire.WastedCalls = 2
	r.Budgets, r.ProofBudgets = evaluateBudgets(r), evaluateProofBudgets(r)
	if failed(r.Budgets) {
		t.Fatal("a foundation budget failed in a report that meets them all")
	}
	if !failed(r.ProofBudgets) {
		t.Fatal("two calls to an OPEN breaker did not fail a proof budget")
	}
}

func TestFireMarkdownAndJSON(t *testing.T) {
	r := proofReport()
	r.UnderFire.Setup.CallSuccessP = 0.675
	r.Budgets, r.ProofBudgets = evaluateBudgets(r), evaluateProofBudgets(r)
	md := r.Markdown()
	for _, want := range []string{
		"about **1.48 calls per success**",
		"| calls to the flaky provider per success | – | 0.703 (floor 1.48) |", // 700 calls / 996 successes
		"## Budgets", "## Proof under fire budgets", "| under fire: client success | ≥ 99.5 % | 99.60 % (996/1000) | **PASS** |",
		"## 5. Under fire (50 req/s for 20 s, 50 % streams)", "`Retry-After: 1`", "**4.5 successes/s**",
		"The offered 50 req/s is above it", "| down | **0** |", "## 6. Recovery",
		"**1.84 s** (between 1.79 and 1.84 s)", "OPEN, 1800 ms of OPEN left",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Index(md, "## Proof under fire budgets") > strings.Index(md, "## 1. Fixed rate") {
		t.Error("the proof budgets table is not next to the foundation budgets")
	}
	data, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"under_fire", "recovery", "proof_budgets", "budgets"} {
		if _, ok := back[key]; !ok {
			t.Errorf("latest.json lacks %q", key)
		}
	}
	fire := back["under_fire"].(map[string]any)
	if fire["attempts_per_success"].(float64) != 1440.0/996 || fire["setup"].(map[string]any)["capacity_bound_rps"].(float64) != 4.5 {
		t.Errorf("under_fire figures lost: %v", fire)
	}
	if back["recovery"].(map[string]any)["first_call_s"].(float64) != 1.84 {
		t.Errorf("recovery figures lost: %v", back["recovery"])
	}
}

func TestParseFlagsFire(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.fireRate != 10 || o.fireDuration != 20*time.Second || o.breakerReset != 5*time.Second ||
		o.fireRetryHeader != "retry-after-ms: 200" || o.firePoll != 50*time.Millisecond || o.recoveryMax != 30*time.Second {
		t.Errorf("fire defaults = %v req/s, %v, reset %v, %q, poll %v, recovery %v",
			o.fireRate, o.fireDuration, o.breakerReset, o.fireRetryHeader, o.firePoll, o.recoveryMax)
	}
	o, err = parseFlags([]string{"-quick", "-breaker-reset", "3s"})
	if err != nil {
		t.Fatal(err)
	}
	if o.fireDuration != 3*time.Second || o.breakerReset != 3*time.Second || o.recoveryMax != 5*time.Second {
		t.Errorf("quick fire settings = %v, reset %v, recovery %v", o.fireDuration, o.breakerReset, o.recoveryMax)
	}
	for _, bad := range [][]string{
		{"-fire-rate", "0"}, {"-breaker-reset", "500ms"}, {"-fire-poll", "0s"},
		{"-fire-retry-header", "Retry-After"}, {"-fire-retry-header", "Retry After: 1"}, {"-fire-retry-header", "Retry-After:"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}
