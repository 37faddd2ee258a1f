package main

import (
	"fmt"
)

// The targets of the "thinnest possible proxy" issue. Every one is judged
// in one run, against the bare proxy measured in the same run.
const (
	// targetThroughputRatio is the least Breakwater/bare throughput at
	// budgetConns connections.
	targetThroughputRatio = 0.90
	// targetRate is the open-loop rate of the latency targets.
	targetRate = 500
	// targetAddedP50MS and targetAddedP99MS are the most Breakwater may add
	// over the bare proxy at targetRate.
	targetAddedP50MS = 0.05
	targetAddedP99MS = 0.3
	// targetFirstDataP50MS is the most Breakwater may add over the bare
	// proxy to a stream's first-byte p50.
	targetFirstDataP50MS = 0.1
	// targetCPURatio is the most gateway CPU per request may be, as a
	// multiple of the bare proxy's, in the max-throughput run.
	targetCPURatio = 1.15
	// targetCurveGrowth is the most the p50 overhead may grow from the
	// smallest configuration of a curve to the largest.
	targetCurveGrowth = 1.10
	// targetRSSPerStream is the most resident memory one open slow stream
	// may cost the gateway (50 KB).
	targetRSSPerStream = 50_000
	// targetSlowTTFBP99MS is the most Breakwater may add over the bare
	// proxy to the first-byte p99 with targetSlowStreams slow streams.
	targetSlowTTFBP99MS = 2.0
	targetSlowStreams   = 10_000
	// leakGoroutines and leakFDs are how many goroutines and file
	// descriptors more than before the streams the gateway may hold once
	// they ended: its idle upstream keep-alive pool and timers, not one
	// per stream.
	leakGoroutines = 50
	leakFDs        = 25
	// targetFailurePathUS is the most the failure path (restate, classify,
	// record) may take, median, with targetFailureRules operator rules.
	targetFailurePathUS = 50
	targetFailureRules  = 100
	// The rate-limited scenario: client success, upstream calls per
	// success, and p99 overhead over the bare proxy.
	targetRLSuccessPct      = 99.9
	targetRLCallsPerSuccess = 1.05
	targetRLAddedP99MS      = 50
	// targetFloorSlack is how far above its floor the random-429 scenario's
	// upstream calls per success may be.
	targetFloorSlack = 1.05
)

// The earlier budgets kept.
const (
	budgetFullRate       = 2000
	budgetKeepUp         = 0.9
	budgetFullRateP99MS  = 5.0
	budgetPeakRSS        = 100 << 20
	budgetFireSuccessPct = 99.5
)

// na returns a budget not measured (yet).
func na(name, limit, how string) Budget {
	return Budget{Name: name, Limit: limit, Status: statusNA, Figure: "not measured", How: how}
}

// evaluateTargets judges the targets of the issue against r.
func evaluateTargets(r *Report) []Budget {
	var out []Budget

	tp := na(fmt.Sprintf("max throughput at %d connections", budgetConns), fmt.Sprintf("≥ %.0f %% of the bare proxy", 100*targetThroughputRatio),
		"closed loop, successes per second, Breakwater / bare proxy (§2)")
	if t := r.Throughput; t != nil && t.Connections == budgetConns && t.Bare.RPS > 0 {
		tp.Figure = fmt.Sprintf("%s (%.0f vs %.0f req/s)", pctRatio(t.Gateway.RPS, t.Bare.RPS), t.Gateway.RPS, t.Bare.RPS)
		tp.Status = passIf(t.Gateway.RPS >= targetThroughputRatio*t.Bare.RPS)
	} else if t != nil {
		tp.Figure = fmt.Sprintf("run at %d connections, not %d", t.Connections, budgetConns)
	}
	out = append(out, tp)

	o := findRate(r.OpenLoop, targetRate)
	open := o != nil && o.measured()
	var bare, gw Latency
	if open {
		bare, gw = o.Bare.Latency, o.Gateway.Latency
	}
	out = append(out,
		overBare(fmt.Sprintf("added p50 at %d req/s", targetRate), "open loop, latency from the send, Breakwater p50 − bare p50 (§1)",
			targetAddedP50MS, open, bare.P50MS, gw.P50MS),
		overBare(fmt.Sprintf("added p99 at %d req/s", targetRate), "as above, p99", targetAddedP99MS, open, bare.P99MS, gw.P99MS))

	st := r.Streaming
	streams := st != nil && st.measured() && st.Gateway.FirstData != nil && st.Bare.FirstData != nil
	var bareFirst, gwFirst float64
	if streams {
		bareFirst, gwFirst = st.Bare.FirstData.P50MS, st.Gateway.FirstData.P50MS
	}
	out = append(out, overBare("stream first-byte p50", "send → first `data:` line, Breakwater p50 − bare p50 (§3)",
		targetFirstDataP50MS, streams, bareFirst, gwFirst))

	b := na("gateway CPU per request", fmt.Sprintf("≤ %.2f× the bare proxy's", targetCPURatio),
		"CPU time (/proc/PID/stat) of the process in the middle over requests sent, max-throughput run (§2)")
	if t := r.Throughput; t != nil && t.measured() && t.Bare.ProxyCPUMS > 0 {
		gp, _ := cpuOfRun(t.Gateway)
		bp, _ := cpuOfRun(t.Bare)
		b.Figure = fmt.Sprintf("×%.2f (%.1f vs %.1f µs)", gp/bp, gp, bp)
		b.Status = passIf(gp <= targetCPURatio*bp)
	}
	out = append(out, b)

	b = na("access logging on while measured", "default log level, one access line per request",
		"the main gateway's access lines (`breakwater.access`) against the requests sent to it")
	if g := r.Gateway; g.Requests > 0 {
		b.Figure = fmt.Sprintf("%d access lines for %d requests, log level %s", g.AccessLines, g.Requests, orDefault(g.LogLevel))
		b.Status = passIf(g.LogLevel == "" && g.AccessLines >= g.Requests)
	}
	out = append(out, b)

	out = append(out, r.curveTargets()...)
	out = append(out, r.fireTargets()...)
	return out
}

// overBare judges a latency of the gateway against the bare proxy's in the
// same run: at most limitMS more; N/A unless measured.
func overBare(name, how string, limitMS float64, measured bool, bare, gw float64) Budget {
	b := na(name, fmt.Sprintf("≤ %+.2f ms over the bare proxy", limitMS), how)
	if measured {
		d := gw - bare
		b.Figure = fmt.Sprintf("%s (bare %.3f, Breakwater %.3f)", dms(d), bare, gw)
		b.Status = passIf(d <= limitMS)
	}
	return b
}

func orDefault(level string) string {
	if level == "" {
		return "default (info)"
	}
	return level
}

// evaluateBudgets checks the earlier budgets that are kept.
func evaluateBudgets(r *Report) []Budget {
	var out []Budget
	b := na(fmt.Sprintf("%d req/s through the gateway", budgetFullRate),
		fmt.Sprintf("100 %% success, ≥ %.0f req/s achieved, p99 ≤ %.0f ms", budgetKeepUp*budgetFullRate, budgetFullRateP99MS), "open loop (§1)")
	if o := findRate(r.OpenLoop, budgetFullRate); o != nil {
		g := o.Gateway
		b.Figure = fmt.Sprintf("%s (%d/%d), %.0f req/s, p99 %.3f ms", pct(g.SuccessPct), g.OK, g.Scheduled, g.RPS, g.Latency.P99MS)
		b.Status = passIf(g.Scheduled > 0 && g.OK == g.Scheduled && g.RPS >= budgetKeepUp*budgetFullRate && g.Latency.P99MS <= budgetFullRateP99MS)
	}
	out = append(out, b)

	b = na("gateway peak RSS (VmHWM)", fmt.Sprintf("≤ %s", mib(budgetPeakRSS)), "main gateway, at the end of §1–§3 (§4)")
	if m := r.Memory; m != nil && m.GatewayPeak > 0 {
		b.Figure = mib(m.GatewayPeak)
		b.Status = passIf(m.GatewayPeak <= budgetPeakRSS)
	}
	out = append(out, b)

	f := r.UnderFire
	b = na("under fire (random 429s): client success", fmt.Sprintf("≥ %.1f %%", budgetFireSuccessPct), "§6")
	if f != nil && f.Gateway.Scheduled > 0 {
		g := f.Gateway
		b.Figure = fmt.Sprintf("%s (%d/%d)", pct(g.SuccessPct), g.OK, g.Scheduled)
		b.Status = passIf(g.SuccessPct >= budgetFireSuccessPct)
	}
	out = append(out, b)

	b = na("under fire: calls to a provider while its breaker was OPEN (probes excepted)", "0", "breaker watch (§6)")
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
