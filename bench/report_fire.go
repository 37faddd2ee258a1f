package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/breakwater-dev/breakwater/bench/internal/proc"
)

// Proof-under-fire budgets (the "Proof under fire" issue), checked next to
// the foundation budgets of report.go.
const (
	proofAddedP50MS     = 0.3
	proofAddedP99MS     = 1.0
	proofFullRateP99MS  = 5.0
	proofThroughput     = 0.30
	proofPeakRSS        = 100_000_000 // 100 MB
	proofFireSuccessPct = 99.5
	proofFireAttempts   = 1.5
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
	Gateway FireSide  `json:"gateway"`
	// Added* are gateway minus direct over successful requests:
	// non-streaming latency, stream first data and whole stream.
	AddedP50MS          float64 `json:"added_p50_ms"`
	AddedP99MS          float64 `json:"added_p99_ms"`
	AddedFirstDataP50MS float64 `json:"added_first_data_p50_ms"`
	AddedFirstDataP99MS float64 `json:"added_first_data_p99_ms"`
	AddedStreamP50MS    float64 `json:"added_stream_p50_ms"`
	AddedStreamP99MS    float64 `json:"added_stream_p99_ms"`
	// UpstreamCalls is what the mock counted on the four keys during the
	// gateway run; CallsByKey per key.
	UpstreamCalls int64            `json:"upstream_calls"`
	CallsByKey    map[string]int64 `json:"calls_by_key"`
	// AttemptsPerSuccess is UpstreamCalls over the gateway's successes.
	AttemptsPerSuccess float64 `json:"attempts_per_success"`
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

// evaluateProofBudgets checks the proof-under-fire budgets against r.
func evaluateProofBudgets(r *Report) []Budget {
	var out []Budget
	na := func(name, limit string) Budget {
		return Budget{Name: name, Limit: limit, Status: statusNA, Figure: "not measured"}
	}

	o500 := findRate(r.OpenLoop, budgetAddedRate)
	b := na(fmt.Sprintf("added p50 latency at %d req/s", budgetAddedRate), fmt.Sprintf("≤ %.1f ms", proofAddedP50MS))
	if o := o500; o != nil {
		b.Figure = fmt.Sprintf("%+.3f ms (direct %.3f, gateway %.3f)", o.AddedP50MS, o.Direct.Latency.P50MS, o.Gateway.Latency.P50MS)
		b.Status = passIf(o.Gateway.OK > 0 && o.Direct.OK > 0 && o.AddedP50MS <= proofAddedP50MS)
	}
	out = append(out, b)

	b = na(fmt.Sprintf("added p99 latency at %d req/s", budgetAddedRate), fmt.Sprintf("≤ %.1f ms", proofAddedP99MS))
	if o := o500; o != nil {
		b.Figure = fmt.Sprintf("%+.3f ms (direct %.3f, gateway %.3f)", o.AddedP99MS, o.Direct.Latency.P99MS, o.Gateway.Latency.P99MS)
		b.Status = passIf(o.Gateway.OK > 0 && o.Direct.OK > 0 && o.AddedP99MS <= proofAddedP99MS)
	}
	out = append(out, b)

	b = na(fmt.Sprintf("%d req/s through the gateway", budgetFullRate), fmt.Sprintf("100 %% success, p99 ≤ %.0f ms", proofFullRateP99MS))
	if o := findRate(r.OpenLoop, budgetFullRate); o != nil {
		g := o.Gateway
		b.Figure = fmt.Sprintf("%s (%d/%d), p99 %.3f ms", pct(g.SuccessPct), g.OK, g.Scheduled, g.Latency.P99MS)
		b.Status = passIf(g.Scheduled > 0 && g.OK == g.Scheduled && g.Latency.P99MS <= proofFullRateP99MS)
	}
	out = append(out, b)

	b = na(fmt.Sprintf("gateway throughput vs direct at %d connections", budgetConns), fmt.Sprintf("≥ %.0f %%", 100*proofThroughput))
	if t := r.Throughput; t != nil && t.Connections == budgetConns {
		b.Figure = fmt.Sprintf("%.1f %% (%.0f vs %.0f req/s)", 100*t.Ratio, t.Gateway.RPS, t.Direct.RPS)
		b.Status = passIf(t.Direct.RPS > 0 && t.Ratio >= proofThroughput)
	} else if t != nil {
		b.Figure = fmt.Sprintf("run at %d connections, not %d", t.Connections, budgetConns)
	}
	out = append(out, b)

	b = na("gateway peak RSS (VmHWM)", "≤ 100 MB")
	if m := r.Memory; m != nil && m.GatewayPeak > 0 {
		b.Figure = fmt.Sprintf("%.1f MB", float64(m.GatewayPeak)/1e6)
		b.Status = passIf(m.GatewayPeak <= proofPeakRSS)
	}
	out = append(out, b)

	f := r.UnderFire
	b = na("under fire: client success", fmt.Sprintf("≥ %.1f %%", proofFireSuccessPct))
	if f != nil && f.Gateway.Scheduled > 0 {
		g := f.Gateway
		b.Figure = fmt.Sprintf("%s (%d/%d)", pct(g.SuccessPct), g.OK, g.Scheduled)
		b.Status = passIf(g.SuccessPct >= proofFireSuccessPct)
	}
	out = append(out, b)

	b = na("under fire: upstream attempts per success", fmt.Sprintf("≤ %.1f", proofFireAttempts))
	if f != nil && f.Gateway.Scheduled > 0 {
		if f.Gateway.OK == 0 {
			b.Figure, b.Status = fmt.Sprintf("no success (%d calls)", f.UpstreamCalls), statusFail
		} else {
			b.Figure = fmt.Sprintf("%.3f (%d calls / %d successes)", f.AttemptsPerSuccess, f.UpstreamCalls, f.Gateway.OK)
			b.Status = passIf(f.AttemptsPerSuccess <= proofFireAttempts)
		}
	}
	out = append(out, b)

	b = na("under fire: calls to a provider while its breaker was OPEN (probes excepted)", "0")
	if f != nil && f.Gateway.Scheduled > 0 {
		periods, openS := 0, 0.0
		for _, w := range f.Breakers {
			periods += w.OpenPeriods
			openS += w.OpenSeconds
		}
		if periods == 0 {
			b.Figure = "no OPEN period observed: nothing to judge"
		} else {
			b.Figure = fmt.Sprintf("%d (over %.1f s observed OPEN, %d OPEN periods)", f.WastedCalls, openS, periods)
			b.Status = passIf(f.WastedCalls == 0)
		}
	}
	out = append(out, b)
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

// fireSideRows adds the client rows of two under-fire loads.
func fireSideRows(t table, d, g FireSide) {
	t.row("success, all requests", fmt.Sprintf("%s (%d/%d)", pct(d.SuccessPct), d.OK, d.Scheduled),
		fmt.Sprintf("**%s** (%d/%d)", pct(g.SuccessPct), g.OK, g.Scheduled), fmt.Sprintf("%+.2f pt", g.SuccessPct-d.SuccessPct))
	t.row("success, non-streaming", successCell(d.NonStream), successCell(g.NonStream), "")
	t.row("success, streaming", successCell(d.Stream), successCell(g.Stream), "")
}

// fireMarkdown renders scenarios 5 and 6.
func (r *Report) fireMarkdown(b *strings.Builder) {
	t := table{b}
	if f := r.UnderFire; f != nil {
		s := f.Setup
		fmt.Fprintf(b, "## 5. Under fire (%.0f req/s for %.0f s, %.0f %% streams)\n\n", s.RatePerS, s.Seconds, 100*s.StreamShare)
		fmt.Fprintf(b, "A second gateway with %d providers of %d connections each, both serving the same bare model, in this priority order: "+
			"`%s`, hard down (every call answers %d), then `%s`, where %.0f %% of the calls answer 429 with `%s` "+
			"and %.0f %% of the streams stall before the first content byte (for %d ms, then end without `[DONE]`). "+
			"Gateway settings: breaker defaults except `reset_ms: %d` (shortened from 30 s so probes and recovery fit in the run), "+
			"`content_stall_timeout_ms: %d`, `combo_cooldown_wait.max_attempts: %d` (default 2: a request may wait out short rate-limit cooldowns that many times), request queue not auto-enabled. "+
			"Open loop, the same schedule for both columns; direct = straight to the mock with the flaky provider's first key, so the client sees the faults raw. "+
			"Added latency compares successful requests only.\n\n",
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
				"so even a router that never calls the down provider needs about **%.2f calls per success**.\n\n",
				s.CallSuccessP, 1/s.CallSuccessP)
		}
		d, g := f.Direct, f.Gateway
		t.head("", "direct (flaky key)", "gateway", "gateway − direct")
		fireSideRows(t, d, g)
		t.row("non-streaming p50", fms(d.NonStream.Latency.P50MS), fms(g.NonStream.Latency.P50MS), "**"+dms(f.AddedP50MS)+"**")
		t.row("non-streaming p99", fms(d.NonStream.Latency.P99MS), fms(g.NonStream.Latency.P99MS), "**"+dms(f.AddedP99MS)+"**")
		if d.Stream.FirstData != nil && g.Stream.FirstData != nil {
			t.row("stream first data p50", fms(d.Stream.FirstData.P50MS), fms(g.Stream.FirstData.P50MS), dms(f.AddedFirstDataP50MS))
			t.row("stream first data p99", fms(d.Stream.FirstData.P99MS), fms(g.Stream.FirstData.P99MS), dms(f.AddedFirstDataP99MS))
		}
		t.row("whole stream p50", fms(d.Stream.Latency.P50MS), fms(g.Stream.Latency.P50MS), dms(f.AddedStreamP50MS))
		t.row("whole stream p99", fms(d.Stream.Latency.P99MS), fms(g.Stream.Latency.P99MS), dms(f.AddedStreamP99MS))
		t.row("upstream calls", fmt.Sprint(d.NonStream.Sent+d.Stream.Sent), fmt.Sprint(f.UpstreamCalls), "")
		t.row("upstream attempts per success", ratioText(d.NonStream.Sent+d.Stream.Sent, d.OK),
			fmt.Sprintf("**%.3f**", f.AttemptsPerSuccess), "")
		var keys []string
		for _, k := range slices.Sorted(maps.Keys(f.CallsByKey)) {
			keys = append(keys, fmt.Sprintf("%s ×%d", k, f.CallsByKey[k]))
		}
		t.row("gateway calls by key", "–", strings.Join(keys, ", "), "")
		if s.CallSuccessP > 0 && g.OK > 0 {
			var flaky int64
			for k, n := range f.CallsByKey {
				if strings.HasPrefix(k, proc.FireUpKeyPrefix) {
					flaky += n
				}
			}
			t.row("calls to the flaky provider per success", "–",
				fmt.Sprintf("%.3f (floor %.2f)", float64(flaky)/float64(g.OK), 1/s.CallSuccessP), "")
		}
		t.row("X-Breakwater-Attempts of successes", "–", tallyCell(f.SuccessAttempts)+fmt.Sprintf(" (mean %.3f)", f.AttemptsHeaderPerSuccess), "")
		t.row("X-Breakwater-Attempts of failures", "–", tallyCell(f.FailureAttempts), "")
		t.row("successes served by", "–", tallyCell(f.ServedBy), "")
		t.row("errors, non-streaming", errorsCell(d.NonStream.Errors), errorsCell(g.NonStream.Errors), "")
		t.row("errors, streaming", errorsCell(d.Stream.Errors), errorsCell(g.Stream.Errors), "")
		t.row("gateway VmRSS max (sampled) / VmHWM", "–", mib(f.GatewayMaxRSS)+" / "+mib(f.GatewayPeakRSS), "")
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
		fmt.Fprintf(b, "## 6. Recovery\n\n"+
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
