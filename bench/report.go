package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/bench/internal/load"
	"github.com/breakwater-dev/breakwater/bench/internal/stats"
)

// Budget limits checked by every run.
const (
	// budgetAddedP50MS is the most the gateway may add to p50 latency at
	// budgetAddedRate req/s.
	budgetAddedP50MS = 0.5
	budgetAddedRate  = 500
	// budgetFullRate is the rate the gateway must serve with 100 % success,
	// keeping up: at least budgetKeepUp of the rate achieved (successes per
	// second from the first send to the last answer).
	budgetFullRate = 2000
	budgetKeepUp   = 0.9
	// budgetThroughputRatio is the least gateway/direct throughput ratio
	// at budgetConns connections.
	budgetThroughputRatio = 0.15
	budgetConns           = 64
	// budgetPeakRSS is the most the gateway's VmHWM may reach (100 MiB).
	budgetPeakRSS = 100 << 20
)

// Report is everything one benchmark run measured; it is written as
// latest.json and rendered as latest.md.
type Report struct {
	Date       string            `json:"date"`
	LoadAvg    string            `json:"load_avg"`
	Commit     string            `json:"commit"`
	GoVersion  string            `json:"go_version"`
	Platform   string            `json:"platform"`
	CPUs       int               `json:"cpus"`
	Quick      bool              `json:"quick"`
	Settings   Settings          `json:"settings"`
	OpenLoop   []OpenLoopResult  `json:"open_loop"`
	Throughput *ThroughputResult `json:"throughput,omitempty"`
	Streaming  *StreamingResult  `json:"streaming,omitempty"`
	Memory     *MemoryResult     `json:"memory,omitempty"`
	UnderFire  *UnderFireResult  `json:"under_fire,omitempty"`
	Recovery   *RecoveryResult   `json:"recovery,omitempty"`
	// Budgets are the foundation budgets; ProofBudgets the stricter
	// proof-under-fire ones.
	Budgets      []Budget `json:"budgets"`
	ProofBudgets []Budget `json:"proof_budgets"`
	Notes        []string `json:"notes,omitempty"`
}

// Settings are the run's parameters.
type Settings struct {
	Rates                 []float64 `json:"rates_per_s"`
	OpenLoopSeconds       float64   `json:"open_loop_s"`
	WarmupSeconds         float64   `json:"warmup_s"`
	Connections           int       `json:"connections"`
	ThroughputSeconds     float64   `json:"throughput_s"`
	StreamWorkers         int       `json:"stream_workers"`
	StreamSeconds         float64   `json:"stream_s"`
	StreamChunks          int       `json:"stream_chunks"`
	StreamChunkIntervalMS int       `json:"stream_chunk_interval_ms"`
	OpenLoopConnections   int       `json:"open_loop_connections"`
	TimeoutSeconds        float64   `json:"timeout_s"`
	MaxInFlight           int       `json:"max_in_flight"`
	FireRatePerS          float64   `json:"fire_rate_per_s"`
	FireSeconds           float64   `json:"fire_s"`
	FireRetryHeader       string    `json:"fire_retry_header"`
	BreakerResetMS        int64     `json:"breaker_reset_ms"`
	FirePollMS            float64   `json:"fire_poll_ms"`
	RecoveryMaxSeconds    float64   `json:"recovery_max_s"`
}

// Latency is a latency summary in milliseconds.
type Latency struct {
	Count  int     `json:"count"`
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
	MeanMS float64 `json:"mean_ms"`
}

// Run is one target's figures for one scenario.
type Run struct {
	Target     string  `json:"target"`
	Scheduled  int     `json:"scheduled"`
	Sent       int     `json:"sent"`
	OK         int     `json:"ok"`
	Dropped    int     `json:"dropped"`
	SuccessPct float64 `json:"success_pct"`
	// RPS is successful requests per second of wall time.
	RPS float64 `json:"rps"`
	// Latency runs from the send (the request handed to the client).
	Latency Latency `json:"latency"`
	// FromSchedule runs from the scheduled send time (open loop only).
	FromSchedule *Latency `json:"from_schedule,omitempty"`
	// SendLag is how late the generator sent requests (open loop only).
	SendLag *Latency `json:"send_lag,omitempty"`
	// FirstData is send → first "data:" line (streams only).
	FirstData *Latency `json:"first_data,omitempty"`
	// UpstreamCalls is the mock's call count for the run (-1 unknown).
	UpstreamCalls int64 `json:"upstream_calls"`
	// MockCPUMS and GatewayCPUMS are the CPU time the servers used.
	MockCPUMS    float64 `json:"mock_cpu_ms"`
	GatewayCPUMS float64 `json:"gateway_cpu_ms"`
	// GeneratorCPUPct is the load generator's CPU use, % of one core.
	GeneratorCPUPct float64 `json:"generator_cpu_pct"`
	// GatewayMaxRSS is the highest gateway VmRSS sampled (every 100 ms)
	// during a gateway run, in bytes; 0 for direct runs.
	GatewayMaxRSS int64          `json:"gateway_max_rss_bytes,omitempty"`
	Errors        map[string]int `json:"errors,omitempty"`
}

// OpenLoopResult is scenario 1 at one rate.
type OpenLoopResult struct {
	RatePerS float64 `json:"rate_per_s"`
	Direct   Run     `json:"direct"`
	Gateway  Run     `json:"gateway"`
	// Added* are gateway minus direct: of Latency, and of FromSchedule.
	AddedP50MS             float64 `json:"added_p50_ms"`
	AddedP99MS             float64 `json:"added_p99_ms"`
	AddedFromScheduleP50MS float64 `json:"added_from_schedule_p50_ms"`
	AddedFromScheduleP99MS float64 `json:"added_from_schedule_p99_ms"`
}

// ThroughputResult is scenario 2.
type ThroughputResult struct {
	Connections int     `json:"connections"`
	Direct      Run     `json:"direct"`
	Gateway     Run     `json:"gateway"`
	Ratio       float64 `json:"ratio"`
	AddedP50MS  float64 `json:"added_p50_ms"`
	AddedP99MS  float64 `json:"added_p99_ms"`
}

// StreamingResult is scenario 3.
type StreamingResult struct {
	Workers             int     `json:"workers"`
	Direct              Run     `json:"direct"`
	Gateway             Run     `json:"gateway"`
	AddedFirstDataP50MS float64 `json:"added_first_data_p50_ms"`
	AddedFirstDataP99MS float64 `json:"added_first_data_p99_ms"`
	AddedTotalP50MS     float64 `json:"added_total_p50_ms"`
	AddedTotalP99MS     float64 `json:"added_total_p99_ms"`
}

// MemoryResult is scenario 4, in bytes.
type MemoryResult struct {
	GatewayIdleRSS   int64 `json:"gateway_idle_rss_bytes"`
	GatewayPeak      int64 `json:"gateway_peak_bytes"`
	GatewayMaxRSSRun int64 `json:"gateway_max_rss_during_throughput_bytes"`
	MockIdleRSS      int64 `json:"mock_idle_rss_bytes"`
	MockPeak         int64 `json:"mock_peak_bytes"`
}

// Budget is one checked limit. Status is PASS, FAIL or N/A (not measured).
type Budget struct {
	Name   string `json:"name"`
	Limit  string `json:"limit"`
	Figure string `json:"figure"`
	Status string `json:"status"`
}

// Budget statuses.
const (
	statusPass = "PASS"
	statusFail = "FAIL"
	statusNA   = "N/A"
)

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func latencyOf(samples []time.Duration) Latency {
	s := stats.Summarize(samples)
	return Latency{Count: s.Count, P50MS: ms(s.P50), P90MS: ms(s.P90), P99MS: ms(s.P99), MaxMS: ms(s.Max), MeanMS: ms(s.Mean)}
}

// runOf turns a load.Result into a Run. openLoop adds the from-schedule
// and send lag summaries; stream adds the first-data summary.
func runOf(target string, r *load.Result, openLoop, stream bool) Run {
	run := Run{
		Target: target, Scheduled: r.Scheduled, Sent: r.Sent, OK: r.OK, Dropped: r.Dropped,
		UpstreamCalls: -1, Errors: r.Errors,
	}
	if r.Scheduled > 0 {
		run.SuccessPct = 100 * float64(r.OK) / float64(r.Scheduled)
	}
	if r.Elapsed > 0 {
		run.RPS = float64(r.OK) / r.Elapsed.Seconds()
	}
	run.Latency = latencyOf(r.Latency)
	if openLoop {
		fs, lag := latencyOf(r.FromSchedule), latencyOf(r.Lag)
		run.FromSchedule, run.SendLag = &fs, &lag
	}
	if stream {
		fd := latencyOf(r.FirstData)
		run.FirstData = &fd
	}
	if len(run.Errors) == 0 {
		run.Errors = nil
	}
	return run
}

// evaluateBudgets checks the four budgets against r.
func evaluateBudgets(r *Report) []Budget {
	var out []Budget

	b := Budget{Name: fmt.Sprintf("added p50 latency at %d req/s", budgetAddedRate),
		Limit: fmt.Sprintf("≤ %.1f ms", budgetAddedP50MS), Status: statusNA, Figure: "not measured"}
	if o := findRate(r.OpenLoop, budgetAddedRate); o != nil {
		b.Figure = fmt.Sprintf("%+.3f ms (direct %.3f, gateway %.3f)", o.AddedP50MS, o.Direct.Latency.P50MS, o.Gateway.Latency.P50MS)
		b.Status = passIf(o.Gateway.OK > 0 && o.Direct.OK > 0 && o.AddedP50MS <= budgetAddedP50MS)
	}
	out = append(out, b)

	b = Budget{Name: fmt.Sprintf("%d req/s through the gateway", budgetFullRate),
		Limit:  fmt.Sprintf("100 %% success, ≥ %.0f req/s achieved", budgetKeepUp*budgetFullRate),
		Status: statusNA, Figure: "not measured"}
	if o := findRate(r.OpenLoop, budgetFullRate); o != nil {
		g := o.Gateway
		b.Figure = fmt.Sprintf("%s (%d/%d), %.0f req/s achieved", pct(g.SuccessPct), g.OK, g.Scheduled, g.RPS)
		b.Status = passIf(g.Scheduled > 0 && g.OK == g.Scheduled && g.RPS >= budgetKeepUp*budgetFullRate)
	}
	out = append(out, b)

	b = Budget{Name: fmt.Sprintf("gateway throughput vs direct at %d connections", budgetConns),
		Limit: fmt.Sprintf("≥ %.0f %%", 100*budgetThroughputRatio), Status: statusNA, Figure: "not measured"}
	if t := r.Throughput; t != nil && t.Connections == budgetConns {
		b.Figure = fmt.Sprintf("%.1f %% (%.0f vs %.0f req/s)", 100*t.Ratio, t.Gateway.RPS, t.Direct.RPS)
		b.Status = passIf(t.Direct.RPS > 0 && t.Ratio >= budgetThroughputRatio)
	} else if t != nil {
		b.Figure = fmt.Sprintf("run at %d connections, not %d", t.Connections, budgetConns)
	}
	out = append(out, b)

	b = Budget{Name: "gateway peak RSS (VmHWM)", Limit: fmt.Sprintf("≤ %s", mib(budgetPeakRSS)),
		Status: statusNA, Figure: "not measured"}
	if m := r.Memory; m != nil && m.GatewayPeak > 0 {
		b.Figure = mib(m.GatewayPeak)
		b.Status = passIf(m.GatewayPeak <= budgetPeakRSS)
	}
	out = append(out, b)
	return out
}

func findRate(rs []OpenLoopResult, rate float64) *OpenLoopResult {
	for i := range rs {
		if rs[i].RatePerS == rate {
			return &rs[i]
		}
	}
	return nil
}

func passIf(ok bool) string {
	if ok {
		return statusPass
	}
	return statusFail
}

// failed reports whether any budget failed.
func failed(bs []Budget) bool {
	return slices.ContainsFunc(bs, func(b Budget) bool { return b.Status == statusFail })
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func pct(p float64) string { return fmt.Sprintf("%.2f %%", p) }

func fms(v float64) string { return fmt.Sprintf("%.3f ms", v) }

func dms(v float64) string { return fmt.Sprintf("%+.3f ms", v) }

// ratio formats a/b as "×1.23", or "–" when b is 0.
func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a/b) {
		return "–"
	}
	return fmt.Sprintf("×%.2f", a/b)
}

func errorsCell(m map[string]int) string {
	if len(m) == 0 {
		return "–"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", strings.ReplaceAll(k, "|", "/"), m[k]))
	}
	return strings.Join(parts, "; ")
}

func successCell(r Run) string {
	s := fmt.Sprintf("%s (%d/%d)", pct(r.SuccessPct), r.OK, r.Scheduled)
	if r.Dropped > 0 {
		s += fmt.Sprintf(", %d dropped", r.Dropped)
	}
	return s
}

func callsCell(n int64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprint(n)
}

// cpuPerReq formats CPU milliseconds per request as microseconds.
func cpuPerReq(cpuMS float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return 1000 * cpuMS / float64(n)
}

// table writes a markdown table.
type table struct{ b *strings.Builder }

func (t table) row(cells ...string) {
	t.b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

func (t table) head(cells ...string) {
	t.row(cells...)
	seps := make([]string, len(cells))
	seps[0] = "---"
	for i := 1; i < len(cells); i++ {
		seps[i] = "---:"
	}
	t.row(seps...)
}

// serverCPURows adds the CPU-per-request rows of a scenario.
func serverCPURows(t table, d, g Run) {
	dm := cpuPerReq(d.MockCPUMS, d.Sent)
	gg := cpuPerReq(g.GatewayCPUMS, g.Sent)
	gm := cpuPerReq(g.MockCPUMS, g.Sent)
	t.row("server CPU / request", fmt.Sprintf("%.0f µs (mock)", dm),
		fmt.Sprintf("%.0f µs (gateway %.0f + mock %.0f)", gg+gm, gg, gm), ratio(gg+gm, dm))
	t.row("generator CPU", fmt.Sprintf("%.0f %% of a core", d.GeneratorCPUPct),
		fmt.Sprintf("%.0f %% of a core", g.GeneratorCPUPct), "")
	t.row("gateway VmRSS max (sampled)", "–", mib(g.GatewayMaxRSS), "")
}

// Markdown renders the report.
func (r *Report) Markdown() string {
	var b strings.Builder
	t := table{&b}
	mode := "full"
	if r.Quick {
		mode = "quick (smoke run, short durations)"
	}
	fmt.Fprintf(&b, "# Breakwater benchmark\n\n")
	fmt.Fprintf(&b, "- Date: %s\n- Commit: %s\n- Go: %s (%s), %d CPUs\n- Load average (1 min, start → end): %s\n- Mode: %s\n",
		r.Date, r.Commit, r.GoVersion, r.Platform, r.CPUs, r.LoadAvg, mode)
	fmt.Fprintf(&b, "- Direct = the mock upstream called directly (`bench-model`); gateway = the same request through Breakwater (`bench/bench-model`, Badger state, two connections, "+
		"the per-connection request queue not auto-enabled as its default limiter of 100 requests a minute would cap every figure). "+
		"Same generator, client settings and body for both, direct first. The generator, the gateway and the mock share the %d CPUs, "+
		"so absolute times mean little: compare the columns of one run.\n\n", r.CPUs)

	b.WriteString("## Budgets\n\n")
	t.head("budget", "limit", "measured", "result")
	for _, bu := range r.Budgets {
		t.row(bu.Name, bu.Limit, bu.Figure, "**"+bu.Status+"**")
	}
	b.WriteString("\n")
	if len(r.ProofBudgets) > 0 {
		b.WriteString("## Proof under fire budgets\n\n")
		b.WriteString("The stricter targets of the \"Proof under fire\" issue; the foundation budgets above still apply.\n\n")
		t.head("budget", "limit", "measured", "result")
		for _, bu := range r.ProofBudgets {
			t.row(bu.Name, bu.Limit, bu.Figure, "**"+bu.Status+"**")
		}
		b.WriteString("\n")
	}

	s := r.Settings
	fmt.Fprintf(&b, "## 1. Fixed rate, non-streaming (open loop)\n\n"+
		"Requests are sent at fixed intervals, each in its own goroutine, whatever the answers do, so a slow answer never delays "+
		"later requests (no coordinated omission). Latency runs from the send, the moment the request is handed to the client: "+
		"the client keeps at most %[3]d connections per target and a request finding them all busy waits, which counts. "+
		"The generator's timers wake late by a few tenths of a millisecond, by an amount that depends on how busy the CPUs are "+
		"(send lag, below); latency from the scheduled time, which includes it, is shown too. "+
		"%.0[1]f s per rate after %.1[2]f s of warm-up.\n\n",
		s.OpenLoopSeconds, s.WarmupSeconds, s.OpenLoopConnections)
	for _, o := range r.OpenLoop {
		d, g := o.Direct, o.Gateway
		fmt.Fprintf(&b, "### %.0f req/s\n\n", o.RatePerS)
		t.head("", "direct", "gateway", "gateway − direct")
		t.row("success", successCell(d), successCell(g), fmt.Sprintf("%+.2f pt", g.SuccessPct-d.SuccessPct))
		t.row("achieved rate", fmt.Sprintf("%.1f req/s", d.RPS), fmt.Sprintf("%.1f req/s", g.RPS), ratio(g.RPS, d.RPS))
		t.row("p50", fms(d.Latency.P50MS), fms(g.Latency.P50MS), "**"+dms(o.AddedP50MS)+"**")
		t.row("p90", fms(d.Latency.P90MS), fms(g.Latency.P90MS), dms(g.Latency.P90MS-d.Latency.P90MS))
		t.row("p99", fms(d.Latency.P99MS), fms(g.Latency.P99MS), "**"+dms(o.AddedP99MS)+"**")
		t.row("max", fms(d.Latency.MaxMS), fms(g.Latency.MaxMS), dms(g.Latency.MaxMS-d.Latency.MaxMS))
		if d.FromSchedule != nil && g.FromSchedule != nil {
			t.row("from schedule p50", fms(d.FromSchedule.P50MS), fms(g.FromSchedule.P50MS), dms(o.AddedFromScheduleP50MS))
			t.row("from schedule p99", fms(d.FromSchedule.P99MS), fms(g.FromSchedule.P99MS), dms(o.AddedFromScheduleP99MS))
			t.row("from schedule max", fms(d.FromSchedule.MaxMS), fms(g.FromSchedule.MaxMS), dms(g.FromSchedule.MaxMS-d.FromSchedule.MaxMS))
		}
		if d.SendLag != nil && g.SendLag != nil {
			t.row("generator send lag p50 / p99", fms(d.SendLag.P50MS)+" / "+fms(d.SendLag.P99MS),
				fms(g.SendLag.P50MS)+" / "+fms(g.SendLag.P99MS), "")
		}
		t.row("upstream calls", callsCell(d.UpstreamCalls), callsCell(g.UpstreamCalls), "")
		serverCPURows(t, d, g)
		t.row("errors", errorsCell(d.Errors), errorsCell(g.Errors), "")
		b.WriteString("\n")
	}

	if tp := r.Throughput; tp != nil {
		d, g := tp.Direct, tp.Gateway
		fmt.Fprintf(&b, "## 2. Max throughput (closed loop, %d connections, %.0f s)\n\n", tp.Connections, s.ThroughputSeconds)
		b.WriteString("Each connection sends its next request as soon as the previous answer is read.\n\n")
		t.head("", "direct", "gateway", "gateway vs direct")
		t.row("throughput", fmt.Sprintf("%.0f req/s", d.RPS), fmt.Sprintf("%.0f req/s", g.RPS), fmt.Sprintf("**%.1f %%**", 100*tp.Ratio))
		t.row("success", successCell(d), successCell(g), fmt.Sprintf("%+.2f pt", g.SuccessPct-d.SuccessPct))
		t.row("p50", fms(d.Latency.P50MS), fms(g.Latency.P50MS), dms(tp.AddedP50MS))
		t.row("p99", fms(d.Latency.P99MS), fms(g.Latency.P99MS), dms(tp.AddedP99MS))
		t.row("max", fms(d.Latency.MaxMS), fms(g.Latency.MaxMS), dms(g.Latency.MaxMS-d.Latency.MaxMS))
		t.row("upstream calls", callsCell(d.UpstreamCalls), callsCell(g.UpstreamCalls), "")
		serverCPURows(t, d, g)
		t.row("errors", errorsCell(d.Errors), errorsCell(g.Errors), "")
		b.WriteString("\n")
	}

	if st := r.Streaming; st != nil {
		d, g := st.Direct, st.Gateway
		fmt.Fprintf(&b, "## 3. Streaming time to first byte (%d concurrent, %.0f s)\n\n"+
			"The mock streams %d content chunks %d ms apart; time to first byte is send → first `data:` line, "+
			"whole stream is send → end of body after `data: [DONE]`.\n\n",
			st.Workers, s.StreamSeconds, s.StreamChunks, s.StreamChunkIntervalMS)
		t.head("", "direct", "gateway", "gateway − direct")
		t.row("streams completed", successCell(d), successCell(g), "")
		if d.FirstData != nil && g.FirstData != nil {
			t.row("first data: p50", fms(d.FirstData.P50MS), fms(g.FirstData.P50MS), "**"+dms(st.AddedFirstDataP50MS)+"**")
			t.row("first data: p99", fms(d.FirstData.P99MS), fms(g.FirstData.P99MS), "**"+dms(st.AddedFirstDataP99MS)+"**")
			t.row("first data: max", fms(d.FirstData.MaxMS), fms(g.FirstData.MaxMS), dms(g.FirstData.MaxMS-d.FirstData.MaxMS))
		}
		t.row("whole stream p50", fms(d.Latency.P50MS), fms(g.Latency.P50MS), dms(st.AddedTotalP50MS))
		t.row("whole stream p99", fms(d.Latency.P99MS), fms(g.Latency.P99MS), dms(st.AddedTotalP99MS))
		t.row("upstream calls", callsCell(d.UpstreamCalls), callsCell(g.UpstreamCalls), "")
		serverCPURows(t, d, g)
		t.row("errors", errorsCell(d.Errors), errorsCell(g.Errors), "")
		b.WriteString("\n")
	}

	if m := r.Memory; m != nil {
		b.WriteString("## 4. Memory (resident set, from /proc/PID/status)\n\n")
		t.head("", "mock", "gateway", "gateway / mock")
		t.row("VmRSS idle, after start", mib(m.MockIdleRSS), mib(m.GatewayIdleRSS), ratio(float64(m.GatewayIdleRSS), float64(m.MockIdleRSS)))
		during := "not run"
		if m.GatewayMaxRSSRun > 0 {
			during = mib(m.GatewayMaxRSSRun)
		}
		t.row("VmRSS max during max throughput (sampled)", "–", during, "")
		t.row("VmHWM (peak) at the end", mib(m.MockPeak), "**"+mib(m.GatewayPeak)+"**", ratio(float64(m.GatewayPeak), float64(m.MockPeak)))
		b.WriteString("\n")
	}

	r.fireMarkdown(&b)

	if len(r.Notes) > 0 {
		b.WriteString("## Notes\n\n")
		for _, n := range r.Notes {
			if strings.Contains(n, "\n") {
				b.WriteString("- " + strings.SplitN(n, "\n", 2)[0] + "\n\n```\n" + strings.SplitN(n, "\n", 2)[1] + "\n```\n")
				continue
			}
			b.WriteString("- " + n + "\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// JSON renders the report as indented JSON.
func (r *Report) JSON() ([]byte, error) {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the report: %w", err)
	}
	return append(data, '\n'), nil
}
