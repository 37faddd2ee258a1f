package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/breakwater-dev/breakwater/bench/internal/proc"
)

// FireSetup describes the under-fire run.
type FireSetup struct {
	// RatePerS is the total open-loop rate; StreamShare of it streams.
	RatePerS    float64 `json:"rate_per_s"`
	StreamShare float64 `json:"stream_share"`
	Seconds     float64 `json:"seconds"`
	// Providers in priority order (the first is the one hard down).
	Providers              []string `json:"providers"`
	ConnectionsPerProvider int      `json:"connections_per_provider"`
	// RateLimitedPct of the up provider's answers are 429 with RetryHeader.
	RateLimitedPct float64 `json:"rate_limited_pct"`
	RetryHeader    string  `json:"retry_header"`
	// StreamStallPct of its streams stall StallMS before any content.
	StreamStallPct float64 `json:"stream_stall_pct"`
	StallMS        int     `json:"stall_ms"`
	// DownStatus is every answer of the down provider.
	DownStatus            int   `json:"down_status"`
	BreakerResetMS        int64 `json:"breaker_reset_ms"`
	ContentStallTimeoutMS int64 `json:"content_stall_timeout_ms"`
	CooldownWaitAttempts  int   `json:"combo_cooldown_wait_max_attempts"`
	// PollMS is the requested breaker poll interval.
	PollMS float64 `json:"poll_ms"`
	// CapacityBoundRPS is the most successes per second the up provider's
	// connections can give while each 429 cools its connection for the
	// retry header's wait (0: not computed).
	CapacityBoundRPS float64 `json:"capacity_bound_rps"`
	// CallSuccessP is the chance that one call to the up provider succeeds.
	CallSuccessP float64 `json:"call_success_p"`
	// BreakerOpenAfter is the down provider's breaker failure threshold
	// (the gateway's circuit_breaker.apikey.failure_threshold): the
	// failures it must see before it opens (docs/resilience.md §1).
	BreakerOpenAfter int `json:"breaker_open_after"`
}

// FireSide is one target's figures for an under-fire load.
type FireSide struct {
	Target     string  `json:"target"`
	OK         int     `json:"ok"`
	Scheduled  int     `json:"scheduled"`
	SuccessPct float64 `json:"success_pct"`
	NonStream  Run     `json:"non_stream"`
	Stream     Run     `json:"stream"`
}

// BreakerWatch is where the calls to one provider fell, by the state of its
// breaker (see watch.Attribute).
type BreakerWatch struct {
	Provider string `json:"provider"`
	// OpenCalls were made while the breaker was OPEN throughout: wasted.
	OpenCalls int64 `json:"open_calls"`
	// ProbeCalls were made while it was HALF_OPEN throughout.
	ProbeCalls int64 `json:"probe_calls"`
	// ClosedCalls were made while it was CLOSED or DEGRADED throughout.
	ClosedCalls int64 `json:"closed_calls"`
	// UnattributedCalls were made within a poll of a state change.
	UnattributedCalls   int64   `json:"unattributed_calls"`
	OpenSeconds         float64 `json:"open_s"`
	HalfOpenSeconds     float64 `json:"half_open_s"`
	ClosedSeconds       float64 `json:"closed_s"`
	UnattributedSeconds float64 `json:"unattributed_s"`
	OpenPeriods         int     `json:"open_periods"`
	Polls               int     `json:"polls"`
	PollMedianMS        float64 `json:"poll_median_ms"`
	PollMaxMS           float64 `json:"poll_max_ms"`
	FinalState          string  `json:"final_state"`
}

// UnderFireResult is scenario 5.
type UnderFireResult struct {
	Setup   FireSetup `json:"setup"`
	Direct  FireSide  `json:"direct"`
	Bare    FireSide  `json:"bare"`
	Gateway FireSide  `json:"gateway"`
	// UpstreamCalls is what the mock counted on the four keys during the
	// gateway run; CallsByKey per key.
	UpstreamCalls int64            `json:"upstream_calls"`
	CallsByKey    map[string]int64 `json:"calls_by_key"`
	// AttemptsPerSuccess is UpstreamCalls over the gateway's successes.
	AttemptsPerSuccess float64 `json:"attempts_per_success"`
	// RequiredDownCalls are the calls to the down provider the spec
	// requires (§1): the failures that open its breaker
	// (Setup.BreakerOpenAfter) and one probe per HALF_OPEN that the run
	// saw (an OPEN period after the first begins with a failed probe; a
	// probe still in flight at the end is not counted).
	RequiredDownCalls int `json:"required_down_calls"`
	// Floor is the calls per success a spec-following router needs on
	// average: 1 / CallSuccessP for the flaky provider, plus
	// RequiredDownCalls over the successes.
	Floor float64 `json:"floor"`
	// AttemptsHeaderPerSuccess is the mean X-Breakwater-Attempts of the
	// successful answers; SuccessAttempts and FailureAttempts count its
	// values ("" = absent); ServedBy counts X-Breakwater-Provider of the
	// successful answers.
	AttemptsHeaderPerSuccess float64        `json:"attempts_header_per_success"`
	SuccessAttempts          map[string]int `json:"success_attempts,omitempty"`
	FailureAttempts          map[string]int `json:"failure_attempts,omitempty"`
	ServedBy                 map[string]int `json:"served_by,omitempty"`
	Breakers                 []BreakerWatch `json:"breakers"`
	// WastedCalls sums OpenCalls over the providers.
	WastedCalls    int64 `json:"wasted_calls"`
	GatewayMaxRSS  int64 `json:"gateway_max_rss_bytes"`
	GatewayPeakRSS int64 `json:"gateway_peak_bytes"`
}

// RecoveryResult is scenario 6.
type RecoveryResult struct {
	Provider       string `json:"provider"`
	BreakerResetMS int64  `json:"breaker_reset_ms"`
	// StateAtSwitch and RetryAfterAtSwitchMS are the breaker just before
	// the switch; ConnCooldownAtSwitchMS the shortest cooldown left of its
	// connections; ExpectedS the larger of the two, in seconds.
	StateAtSwitch          string  `json:"state_at_switch"`
	RetryAfterAtSwitchMS   int64   `json:"retry_after_at_switch_ms"`
	ConnCooldownAtSwitchMS int64   `json:"conn_cooldown_at_switch_ms"`
	ExpectedS              float64 `json:"expected_s"`
	// WindowS is how long the load went on after the switch.
	WindowS float64 `json:"window_s"`
	// Called: the provider got a call after the switch, between
	// FirstCallLowS and FirstCallS seconds after it.
	Called        bool    `json:"called"`
	FirstCallS    float64 `json:"first_call_s"`
	FirstCallLowS float64 `json:"first_call_low_s"`
	// Closed: its breaker then read CLOSED, ClosedS after the switch.
	Closed       bool           `json:"closed"`
	ClosedS      float64        `json:"closed_s"`
	Load         FireSide       `json:"load"`
	ServedBy     map[string]int `json:"served_by,omitempty"`
	PollMedianMS float64        `json:"poll_median_ms"`
	PollMaxMS    float64        `json:"poll_max_ms"`
}

// fireTargets judges the under-fire scenarios.
func (r *Report) fireTargets() []Budget {
	var out []Budget
	b := na("under fire (random 429s): upstream calls per success", fmt.Sprintf("within %.0f %% of the floor", 100*(targetFloorSlack-1)),
		"every upstream call (both providers) over client successes; floor: 1 / the chance a call to the flaky provider succeeds, "+
			"plus the down provider's calls the spec requires — the failures that open its breaker and one probe per HALF_OPEN (§1) — over the successes (§6)")
	if f := r.UnderFire; f != nil && f.Gateway.Scheduled > 0 && f.Setup.CallSuccessP > 0 {
		floor := f.floor()
		if f.Gateway.OK == 0 {
			b.Figure, b.Status = fmt.Sprintf("no success (%d calls)", f.UpstreamCalls), statusFail
		} else {
			b.Figure = fmt.Sprintf("%.3f = ×%.3f the floor %.3f (%d calls / %d successes)", f.AttemptsPerSuccess, f.AttemptsPerSuccess/floor, floor,
				f.UpstreamCalls, f.Gateway.OK)
			b.Status = passIf(f.AttemptsPerSuccess <= targetFloorSlack*floor)
		}
	}
	out = append(out, b)

	rl := r.RateLimited
	measured := rl != nil && rl.Gateway.Scheduled > 0
	b = na("rate-limited: client success", fmt.Sprintf("≥ %.1f %%", targetRLSuccessPct), "§8")
	if measured {
		b.Figure = fmt.Sprintf("%s (%d/%d)", pct(rl.Gateway.SuccessPct), rl.Gateway.OK, rl.Gateway.Scheduled)
		b.Status = passIf(rl.Gateway.SuccessPct >= targetRLSuccessPct)
	}
	out = append(out, b)

	b = na("rate-limited: upstream calls per success", fmt.Sprintf("≤ %.2f", targetRLCallsPerSuccess), "mock's call counters over client successes (§8)")
	if measured {
		if rl.Gateway.OK == 0 {
			b.Figure, b.Status = fmt.Sprintf("no success (%d calls)", rl.UpstreamCalls), statusFail
		} else {
			b.Figure = fmt.Sprintf("%.3f (%d calls / %d successes)", rl.CallsPerSuccess, rl.UpstreamCalls, rl.Gateway.OK)
			b.Status = passIf(rl.CallsPerSuccess <= targetRLCallsPerSuccess)
		}
	}
	out = append(out, b)

	measured = measured && rl.Gateway.NonStream.OK > 0 && rl.Bare.NonStream.OK > 0
	var bare, gw float64
	if measured {
		bare, gw = rl.Bare.NonStream.Latency.P99MS, rl.Gateway.NonStream.Latency.P99MS
	}
	out = append(out, overBare("rate-limited: p99 overhead", "non-streaming successes, Breakwater p99 − bare p99 (§8)",
		targetRLAddedP99MS, measured, bare, gw))
	return out
}

// tallyCell formats a tally as "1 ×812, 2 ×40" (numeric values in
// numeric order, "" as "none").
func tallyCell(t map[string]int) string {
	if len(t) == 0 {
		return "–"
	}
	keys := slices.SortedFunc(maps.Keys(t), func(a, b string) int {
		x, errA := strconv.Atoi(a)
		y, errB := strconv.Atoi(b)
		if errA == nil && errB == nil {
			return x - y
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		name := k
		if name == "" {
			name = "none"
		}
		parts = append(parts, fmt.Sprintf("%s ×%d", name, t[k]))
	}
	return strings.Join(parts, ", ")
}

// fireHead starts a table of three under-fire loads.
func fireHead(t table, raw string) {
	t.head("", "direct ("+raw+")", "bare proxy ("+raw+")", "Breakwater", "Breakwater − bare")
}

// fireSideRows adds the client rows of three under-fire loads: success,
// latency of the successes, errors.
func fireSideRows(t table, d, bp, g FireSide) {
	side := func(s FireSide) string { return fmt.Sprintf("%s (%d/%d)", pct(s.SuccessPct), s.OK, s.Scheduled) }
	t.row("success, all requests", side(d), side(bp), "**"+side(g)+"**", fmt.Sprintf("%+.2f pt", g.SuccessPct-bp.SuccessPct))
	t.row("success, non-streaming", successCell(d.NonStream), successCell(bp.NonStream), successCell(g.NonStream), "")
	t.row("success, streaming", successCell(d.Stream), successCell(bp.Stream), successCell(g.Stream), "")
	lat := func(name string, pick func(FireSide) *Latency, p99, bold bool) {
		ld, lb, lg := pick(d), pick(bp), pick(g)
		if ld == nil || lb == nil || lg == nil {
			return
		}
		v := func(l *Latency) float64 {
			if p99 {
				return l.P99MS
			}
			return l.P50MS
		}
		delta := dms(v(lg) - v(lb))
		if bold {
			delta = "**" + delta + "**"
		}
		t.row(name, fms(v(ld)), fms(v(lb)), fms(v(lg)), delta)
	}
	nonStream := func(s FireSide) *Latency { return &s.NonStream.Latency }
	first := func(s FireSide) *Latency { return s.Stream.FirstData }
	whole := func(s FireSide) *Latency { return &s.Stream.Latency }
	lat("non-streaming p50", nonStream, false, false)
	lat("non-streaming p99", nonStream, true, true)
	lat("stream first data p50", first, false, false)
	lat("stream first data p99", first, true, false)
	lat("whole stream p50", whole, false, false)
	lat("whole stream p99", whole, true, false)
	sent := func(s FireSide) int { return s.NonStream.Sent + s.Stream.Sent }
	t.row("requests sent (= upstream calls without a gateway)", fmt.Sprint(sent(d)), fmt.Sprint(sent(bp)), fmt.Sprint(sent(g)), "")
	t.row("errors, non-streaming", errorsCell(d.NonStream.Errors), errorsCell(bp.NonStream.Errors), errorsCell(g.NonStream.Errors), "")
	t.row("errors, streaming", errorsCell(d.Stream.Errors), errorsCell(bp.Stream.Errors), errorsCell(g.Stream.Errors), "")
}

// fireMarkdown renders scenarios 6 and 7.
func (r *Report) fireMarkdown(b *strings.Builder) {
	t := table{b}
	if f := r.UnderFire; f != nil {
		s := f.Setup
		fmt.Fprintf(b, "## 6. Under fire: random 429s (%.0f req/s for %.0f s, %.0f %% streams)\n\n", s.RatePerS, s.Seconds, 100*s.StreamShare)
		fmt.Fprintf(b, "A second gateway with %d providers of %d connections each, both serving the same bare model, in this priority order: "+
			"`%s`, hard down (every call answers %d), then `%s`, where %.0f %% of the calls answer 429 with `%s` "+
			"and %.0f %% of the streams stall before the first content byte (for %d ms, then end without `[DONE]`). "+
			"Gateway settings: breaker defaults except `reset_ms: %d` (shortened from 30 s so probes and recovery fit in the run), "+
			"`content_stall_timeout_ms: %d`, `combo_cooldown_wait.max_attempts: %d` (default 2: a request may wait out short rate-limit cooldowns that many times), request queue not auto-enabled. "+
			"Open loop, the same schedule for the three columns; direct and bare proxy = the load sent with the flaky provider's first key, "+
			"straight to the mock and through the bare proxy, so the client sees the faults raw. Latency compares successful requests only.\n\n",
			len(s.Providers), s.ConnectionsPerProvider, s.Providers[0], s.DownStatus, s.Providers[len(s.Providers)-1],
			s.RateLimitedPct, s.RetryHeader, s.StreamStallPct, s.StallMS, s.BreakerResetMS, s.ContentStallTimeoutMS, s.CooldownWaitAttempts)
		if s.CapacityBoundRPS > 0 {
			fmt.Fprintf(b, "Capacity bound: while every 429 cools its connection for the wait it asks for, the flaky provider's %d connections "+
				"can give at most about **%.1f successes/s** (%.2f successes between two 429s per connection, then the wait; call time ignored). ",
				s.ConnectionsPerProvider, s.CapacityBoundRPS, s.CapacityBoundRPS*retryWaitS(s)/float64(s.ConnectionsPerProvider))
			if s.RatePerS > s.CapacityBoundRPS {
				fmt.Fprintf(b, "The offered %.0f req/s is above it: a gateway that honours the header cannot reach the success target at this rate "+
					"(`-fire-rate` and `-fire-retry-header` change the load).", s.RatePerS)
			} else {
				fmt.Fprintf(b, "The offered %.0f req/s is below it.", s.RatePerS)
			}
			b.WriteString("\n\n")
		}
		if s.CallSuccessP > 0 {
			fmt.Fprintf(b, "Attempts floor: a call to the flaky provider succeeds with probability %.3f (no 429, and for streams no stall), "+
				"so a router needs about %.3f calls to it per success whatever it does (every call is a fresh draw). "+
				"The down provider costs calls the spec requires too: its breaker opens only after %d failures (§1), "+
				"and each HALF_OPEN lets one probe through", s.CallSuccessP, 1/s.CallSuccessP, s.BreakerOpenAfter)
			if f.Gateway.OK > 0 {
				fmt.Fprintf(b, "; this run's breaker watch shows %d OPEN periods, so %d calls to it were required, "+
					"%.3f per success: the floor is **%.3f calls per success**", openPeriods(f, proc.FireDownProvider), f.RequiredDownCalls,
					float64(f.RequiredDownCalls)/float64(f.Gateway.OK), f.floor())
			}
			b.WriteString(". The mock's draws are seeded: the flaky part of a run differs from its expectation by chance " +
				"(one standard deviation of the calls per success is about √((1−p)/(p²·successes)), ±0.06 at 200 successes), " +
				"the direct and bare columns show the same script's draws without a gateway.\n\n")
		}
		d, bp, g := f.Direct, f.Bare, f.Gateway
		fireHead(t, "flaky key")
		fireSideRows(t, d, bp, g)
		t.row("upstream calls per success", ratioText(d.NonStream.Sent+d.Stream.Sent, d.OK), ratioText(bp.NonStream.Sent+bp.Stream.Sent, bp.OK),
			fmt.Sprintf("**%.3f** (%d calls)", f.AttemptsPerSuccess, f.UpstreamCalls), "")
		var keys []string
		for _, k := range slices.Sorted(maps.Keys(f.CallsByKey)) {
			keys = append(keys, fmt.Sprintf("%s ×%d", k, f.CallsByKey[k]))
		}
		t.row("Breakwater calls by key", "–", "–", strings.Join(keys, ", "), "")
		if s.CallSuccessP > 0 && g.OK > 0 {
			var flaky int64
			for k, n := range f.CallsByKey {
				if strings.HasPrefix(k, proc.FireUpKeyPrefix) {
					flaky += n
				}
			}
			t.row("calls to the flaky provider per success", "–", "–",
				fmt.Sprintf("%.3f (expected %.3f)", float64(flaky)/float64(g.OK), 1/s.CallSuccessP), "")
			t.row("calls to the down provider", "–", "–",
				fmt.Sprintf("%d (required %d: %d to open the breaker, %d probes)", f.UpstreamCalls-flaky, f.RequiredDownCalls,
					s.BreakerOpenAfter, f.RequiredDownCalls-s.BreakerOpenAfter), "")
		}
		t.row("X-Breakwater-Attempts of successes", "–", "–", tallyCell(f.SuccessAttempts)+fmt.Sprintf(" (mean %.3f)", f.AttemptsHeaderPerSuccess), "")
		t.row("X-Breakwater-Attempts of failures", "–", "–", tallyCell(f.FailureAttempts), "")
		t.row("successes served by", "–", "–", tallyCell(f.ServedBy), "")
		t.row("gateway VmRSS max (sampled) / VmHWM", "–", "–", mib(f.GatewayMaxRSS)+" / "+mib(f.GatewayPeakRSS), "")
		b.WriteString("\n")

		fmt.Fprintf(b, "Calls by breaker state. Every ~%.0f ms the harness reads the mock's per-key call counters, then the gateway's "+
			"`GET /api/monitoring/health`. The calls counted between two counter reads were made between the breaker read before the first "+
			"and the breaker read after the second; when those two reads show the same state and the same last transition, the breaker "+
			"held that state the whole time and the calls are attributed to it. Calls within about two polls of a state change "+
			"(the failures that trip the breaker, the probes of HALF_OPEN, the first calls after closing) stay unattributed; "+
			"a call counted as OPEN was made at least one poll after the breaker opened, with no probe in between.\n\n", s.PollMS)
		t.head("provider", "OPEN (wasted)", "HALF_OPEN (probes)", "CLOSED/DEGRADED", "unattributed", "time OPEN / HALF_OPEN / CLOSED / unattr.", "OPEN periods", "polls (median / max gap)", "state at end")
		for _, w := range f.Breakers {
			t.row(w.Provider, fmt.Sprintf("**%d**", w.OpenCalls), fmt.Sprint(w.ProbeCalls), fmt.Sprint(w.ClosedCalls), fmt.Sprint(w.UnattributedCalls),
				fmt.Sprintf("%.1f / %.1f / %.1f / %.1f s", w.OpenSeconds, w.HalfOpenSeconds, w.ClosedSeconds, w.UnattributedSeconds),
				fmt.Sprint(w.OpenPeriods), fmt.Sprintf("%d (%.0f / %.0f ms)", w.Polls, w.PollMedianMS, w.PollMaxMS), w.FinalState)
		}
		b.WriteString("\n")
	}

	if rc := r.Recovery; rc != nil {
		fmt.Fprintf(b, "## 7. Recovery\n\n"+
			"Right after the under-fire run, the same load goes on; after %.0f s the mock's script for `%s` is switched to healthy answers. "+
			"The harness then polls the mock's counters and the breaker as above, and stops the load %.0f s after the breaker reads CLOSED "+
			"(or %.0f s after the switch). The breaker reset timeout is %d ms (shortened from the 30 s default); "+
			"the breaker's own remaining OPEN time and its connections' cooldowns at the switch say when a call is due.\n\n",
			recoveryLead.Seconds(), rc.Provider, recoveryTail.Seconds(), r.Settings.RecoveryMaxSeconds, rc.BreakerResetMS)
		t.head("", "value")
		t.row("breaker at the switch", fmt.Sprintf("%s, %d ms of OPEN left", rc.StateAtSwitch, rc.RetryAfterAtSwitchMS))
		t.row("shortest connection cooldown left at the switch", fmt.Sprintf("%d ms", rc.ConnCooldownAtSwitchMS))
		t.row("expected first call after the switch", fmt.Sprintf("%.2f s", rc.ExpectedS))
		if rc.Called {
			t.row("first call after the switch", fmt.Sprintf("**%.2f s** (between %.2f and %.2f s)", rc.FirstCallS, rc.FirstCallLowS, rc.FirstCallS))
		} else {
			t.row("first call after the switch", fmt.Sprintf("**none within %.1f s**", rc.WindowS))
		}
		if rc.Closed {
			t.row("breaker CLOSED after the switch", fmt.Sprintf("%.2f s", rc.ClosedS))
		} else {
			t.row("breaker CLOSED after the switch", fmt.Sprintf("not within %.1f s", rc.WindowS))
		}
		t.row("client success during the recovery load", fmt.Sprintf("%s (%d/%d)", pct(rc.Load.SuccessPct), rc.Load.OK, rc.Load.Scheduled))
		t.row("successes served by", tallyCell(rc.ServedBy))
		t.row("polls (median / max gap)", fmt.Sprintf("%.0f / %.0f ms", rc.PollMedianMS, rc.PollMaxMS))
		b.WriteString("\n")
	}
}

// retryWaitS is the retry header's wait in seconds (0 when unknown).
func retryWaitS(s FireSetup) float64 {
	name, value, _ := strings.Cut(s.RetryHeader, ":")
	d, _ := retryHint(name, value)
	return d.Seconds()
}

// ratioText formats a/b with three decimals, or "–" when b is 0.
func ratioText(a, b int) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f", float64(a)/float64(b))
}

// rateLimitedMarkdown renders scenario 8.
func (r *Report) rateLimitedMarkdown(b *strings.Builder) {
	rl := r.RateLimited
	if rl == nil {
		return
	}
	t := table{b}
	s := rl.Setup
	fmt.Fprintf(b, "## 8. Under fire where routing can win: rate-limited keys (%.1f req/s offered for %.0f s, %.0f %% streams)\n\n", s.OfferedRPS, s.Seconds, 100*s.StreamShare)
	fmt.Fprintf(b, "A gateway of its own with one provider of %d connections; in the mock each connection's key has a token bucket "+
		"(`rate_limit`: %.0f requests a second, bursts of %d) and answers 429 with `Retry-After`, `retry-after-ms` and "+
		"`x-ratelimit-remaining-requests`/`x-ratelimit-reset-requests` when it is empty; every answer carries the `x-ratelimit-*` headers. "+
		"Total capacity %.1f req/s; the offered load is %.0f %% of it, in Poisson arrivals (seeded: bursts and lulls as in real traffic), "+
		"half of them streams. Default gateway settings apart from the request queue (see the header). Direct and bare proxy send the "+
		"whole load to the first key, as a client without a gateway would; a router that reads the headers can spread it and never meet an "+
		"empty bucket.\n\n", s.Keys, s.RequestsPerSecond, s.Burst, s.CapacityRPS, 100*s.OfferedRPS/s.CapacityRPS)
	fireHead(t, "first key")
	fireSideRows(t, rl.Direct, rl.Bare, rl.Gateway)
	t.row("upstream calls per success", ratioText(rl.Direct.NonStream.Sent+rl.Direct.Stream.Sent, rl.Direct.OK),
		ratioText(rl.Bare.NonStream.Sent+rl.Bare.Stream.Sent, rl.Bare.OK), fmt.Sprintf("**%.3f** (%d calls)", rl.CallsPerSuccess, rl.UpstreamCalls), "")
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(rl.CallsByKey)) {
		keys = append(keys, fmt.Sprintf("%s ×%d", k, rl.CallsByKey[k]))
	}
	t.row("Breakwater calls by key", "–", "–", strings.Join(keys, ", "), "")
	t.row("X-Breakwater-Attempts of successes / failures", "–", "–", tallyCell(rl.SuccessAttempts)+" / "+tallyCell(rl.FailureAttempts), "")
	b.WriteString("\n")
}

// openPeriods is the number of OPEN periods the breaker watch saw for
// provider.
func openPeriods(f *UnderFireResult, provider string) int {
	for _, w := range f.Breakers {
		if w.Provider == provider {
			return w.OpenPeriods
		}
	}
	return 0
}

// floor is the calls per success a spec-following router needs on
// average (see UnderFireResult.Floor); 0 when unknown.
func (f *UnderFireResult) floor() float64 {
	if f.Setup.CallSuccessP <= 0 {
		return 0
	}
	fl := 1 / f.Setup.CallSuccessP
	if f.Gateway.OK > 0 {
		fl += float64(f.RequiredDownCalls) / float64(f.Gateway.OK)
	}
	return fl
}
