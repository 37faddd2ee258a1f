package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFireMarkdownAndJSON(t *testing.T) {
	r := fullReport()
	r.Targets, r.Budgets = evaluateTargets(r), evaluateBudgets(r)
	md := r.Markdown()
	for _, want := range []string{
		"the floor is **1.496 calls per success**", "3 OPEN periods, so 14 calls to it were required",
		"| under fire (random 429s): client success | ≥ 99.5 % | 99.60 % (996/1000) | **PASS** |",
		"| under fire (random 429s): upstream calls per success | within 5 % of the floor | 1.506 = ×1.007 the floor 1.496 (1500 calls / 996 successes) | **PASS** |",
		"## 6. Under fire: random 429s (50 req/s for 20 s, 50 % streams)", "`Retry-After: 1`", "**4.5 successes/s**",
		"| direct (flaky key) | bare proxy (flaky key) | Breakwater | Breakwater − bare |",
		"The offered 50 req/s is above it", "| down | **0** |", "## 7. Recovery",
		"**1.84 s** (between 1.79 and 1.84 s)", "OPEN, 1800 ms of OPEN left",
		"## 8. Under fire where routing can win: rate-limited keys (7.0 req/s offered for 20 s, 50 % streams)",
		"(`rate_limit`: 5 requests a second, bursts of 5)", "Total capacity 10.0 req/s; the offered load is 70 %",
		"| non-streaming p99 | 2.000 ms | 3.000 ms | 40.000 ms | **+37.000 ms** |",
		"| Breakwater calls by key | – | – | bench-upstream-key-1 ×510, bench-upstream-key-2 ×510 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	data, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"under_fire", "recovery", "rate_limited", "targets", "budgets", "curves"} {
		if _, ok := back[key]; !ok {
			t.Errorf("latest.json lacks %q", key)
		}
	}
	fire := back["under_fire"].(map[string]any)
	if fire["attempts_per_success"].(float64) != 1500.0/996 || fire["setup"].(map[string]any)["capacity_bound_rps"].(float64) != 4.5 {
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

func TestParseFlagsCurves(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.curveProviders, []int{1, 10, 100, 1000}) || !slices.Equal(o.curveCombos, []int{1, 10, 50, 200}) ||
		!slices.Equal(o.slowStreams, []int{10, 100, 1000, 10000}) || !slices.Equal(o.bodySizes, []int{1024, 10240, 102400, 1048576}) {
		t.Errorf("curve defaults = %v, %v, %v, %v", o.curveProviders, o.curveCombos, o.slowStreams, o.bodySizes)
	}
	if o.slice != 250*time.Millisecond || o.curveDuration != 10*time.Second || o.curveRate != targetRate {
		t.Errorf("interleaved curve defaults = slice %v, %v per target at %v req/s", o.slice, o.curveDuration, o.curveRate)
	}
	if o.rlKeys != 2 || o.rlRate != 5 || o.rlBurst != 5 || o.rlLoad != 0.7 || o.profile {
		t.Errorf("rate-limited defaults = %d keys, %v/s, burst %d, load %v; profile %v", o.rlKeys, o.rlRate, o.rlBurst, o.rlLoad, o.profile)
	}
	o, err = parseFlags([]string{"-quick", "-slow-streams", "5,50", "-curve-combos", "", "-profile"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.slowStreams, []int{5, 50}) || len(o.curveCombos) != 0 || !slices.Equal(o.curveProviders, []int{1, 1000}) || !o.profile {
		t.Errorf("quick curves = %v, %v, %v; profile %v", o.slowStreams, o.curveCombos, o.curveProviders, o.profile)
	}
	for _, bad := range [][]string{{"-slow-streams", "10,5"}, {"-body-sizes", "0"}, {"-curve-providers", "x"}, {"-rl-load", "0"}, {"-rl-keys", "0"}, {"-slice", "0s"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}
