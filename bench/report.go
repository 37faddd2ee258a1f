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

// budgetConns is the number of connections of the max-throughput run the
// targets are stated for.
const budgetConns = 64

// Report is everything one benchmark run measured; it is written as
// latest.json and rendered as latest.md.
type Report struct {
	Date      string   `json:"date"`
	LoadAvg   string   `json:"load_avg"`
	Commit    string   `json:"commit"`
	GoVersion string   `json:"go_version"`
	Platform  string   `json:"platform"`
	CPUs      int      `json:"cpus"`
	Quick     bool     `json:"quick"`
	Settings  Settings `json:"settings"`
	// Gateway describes how the gateway under test ran.
	Gateway    GatewaySetup      `json:"gateway"`
	OpenLoop   []OpenLoopResult  `json:"open_loop"`
	Throughput *ThroughputResult `json:"throughput,omitempty"`
	Streaming  *StreamingResult  `json:"streaming,omitempty"`
	Memory     *MemoryResult     `json:"memory,omitempty"`
	// Curves are the cost-as-the-work-grows scenarios.
	Curves      *Curves            `json:"curves,omitempty"`
	UnderFire   *UnderFireResult   `json:"under_fire,omitempty"`
	Recovery    *RecoveryResult    `json:"recovery,omitempty"`
	RateLimited *RateLimitedResult `json:"rate_limited,omitempty"`
	// Cluster is the several-instances scenario.
	Cluster *ClusterResult `json:"cluster,omitempty"`
	// RoutePlugin is the routing-plugin scenario.
	RoutePlugin *RoutePluginResult `json:"route_plugin,omitempty"`
	// Profiles are the CPU and allocation profiles of the gateway and, in
	// the interleaved tables, the bare proxy (PROFILE=1).
	Profiles []Profile `json:"profiles,omitempty"`
	// Targets are the targets of the "thinnest possible proxy" issue,
	// judged against the bare proxy; Budgets the earlier budgets kept.
	Targets []Budget `json:"targets"`
	Budgets []Budget `json:"budgets"`
	// ClusterBudgets are the several-instances ones.
	ClusterBudgets []Budget `json:"cluster_budgets,omitempty"`
	Notes          []string `json:"notes,omitempty"`
}

// GatewaySetup is how the gateway under test was run.
type GatewaySetup struct {
	// LogLevel is the --log-level given ("" = the default, info).
	LogLevel string `json:"log_level"`
	// ConfigChanges lists what the harness's configuration sets beyond
	// providers, listen address and state path.
	ConfigChanges []string `json:"config_changes"`
	// AccessLines counts the main gateway's access log lines, OtherLines
	// its warnings and errors.
	AccessLines int `json:"access_log_lines"`
	OtherLines  int `json:"warning_log_lines"`
	// Requests is how many requests the main gateway was sent.
	Requests int `json:"requests"`
	// Pprof reports whether the gateways ran with --pprof.
	Pprof bool `json:"pprof"`
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
	ClusterChanges        int       `json:"cluster_changes,omitempty"`
	ClusterSeconds        float64   `json:"cluster_s,omitempty"`
	RouteSeconds          float64   `json:"route_s,omitempty"`
	CurveRatePerS         float64   `json:"curve_rate_per_s"`
	CurveSeconds          float64   `json:"curve_s"`
	SliceSeconds          float64   `json:"slice_s"`
	Profile               bool      `json:"profile"`
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
	// MockCPUMS is the CPU time the mock used; ProxyCPUMS that of the
	// process in the middle (the bare proxy or the gateway; 0 direct).
	MockCPUMS  float64 `json:"mock_cpu_ms"`
	ProxyCPUMS float64 `json:"proxy_cpu_ms"`
	// GeneratorCPUPct is the load generator's CPU use, % of one core.
	GeneratorCPUPct float64 `json:"generator_cpu_pct"`
	// ProxyMaxRSS is the highest VmRSS of the process in the middle,
	// sampled every 100 ms, in bytes; 0 for direct runs.
	ProxyMaxRSS int64          `json:"proxy_max_rss_bytes,omitempty"`
	Errors      map[string]int `json:"errors,omitempty"`
	// SliceP50MS is, for a run measured in slices (interleaved), each
	// slice's p50 in the order measured.
	SliceP50MS []float64 `json:"slice_p50_ms,omitempty"`
}

// Trio is one load measured three ways: straight to the mock, through the
// bare proxy, through the gateway.
type Trio struct {
	Direct  Run `json:"direct"`
	Bare    Run `json:"bare"`
	Gateway Run `json:"gateway"`
}

// measured reports whether all three runs had successes.
func (t Trio) measured() bool { return t.Direct.OK > 0 && t.Bare.OK > 0 && t.Gateway.OK > 0 }

// OpenLoopResult is scenario 1 at one rate.
type OpenLoopResult struct {
	RatePerS float64 `json:"rate_per_s"`
	// WarmRounds and Rounds are the unmeasured and the measured rounds
	// of the interleaved load, each a slice of Settings.SliceSeconds on
	// every target.
	WarmRounds int `json:"warm_rounds"`
	Rounds     int `json:"rounds"`
	Trio
}

// ThroughputResult is scenario 2.
type ThroughputResult struct {
	Connections int `json:"connections"`
	// WarmRounds and Rounds are the unmeasured and the measured rounds
	// of the interleaved load.
	WarmRounds int `json:"warm_rounds"`
	Rounds     int `json:"rounds"`
	Trio
}

// StreamingResult is scenario 3.
type StreamingResult struct {
	Workers int `json:"workers"`
	// WarmRounds and Rounds are the unmeasured and the measured rounds
	// of the interleaved load.
	WarmRounds int `json:"warm_rounds"`
	Rounds     int `json:"rounds"`
	Trio
}

// MemoryResult is scenario 4, in bytes.
type MemoryResult struct {
	GatewayIdleRSS   int64 `json:"gateway_idle_rss_bytes"`
	GatewayPeak      int64 `json:"gateway_peak_bytes"`
	GatewayMaxRSSRun int64 `json:"gateway_max_rss_during_throughput_bytes"`
	BareIdleRSS      int64 `json:"bare_idle_rss_bytes"`
	BarePeak         int64 `json:"bare_peak_bytes"`
	MockIdleRSS      int64 `json:"mock_idle_rss_bytes"`
	MockPeak         int64 `json:"mock_peak_bytes"`
}

// Budget is one checked limit. Status is PASS, FAIL or N/A (not measured).
type Budget struct {
	Name   string `json:"name"`
	Limit  string `json:"limit"`
	Figure string `json:"figure"`
	Status string `json:"status"`
	// How says how the figure is measured.
	How string `json:"how,omitempty"`
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

// trioHead starts a table of the three targets with the Breakwater
// deltas to the bare proxy and to direct.
func (t table) trioHead(first string) {
	t.head(first, "direct", "bare proxy", "Breakwater", "Breakwater − bare", "Breakwater − direct")
}

// msRow adds a latency row of a trio table; bold marks the delta to the
// bare proxy, the one a target is about.
func (t table) msRow(name string, d, b, g float64, bold bool) {
	delta := dms(g - b)
	if bold {
		delta = "**" + delta + "**"
	}
	t.row(name, fms(d), fms(b), fms(g), delta, dms(g-d))
}

// latRows adds the p50, p90, p99 and max rows of a trio's latencies;
// bold50 and bold99 mark the deltas targets are about.
func (t table) latRows(prefix string, pick func(Run) *Latency, tr Trio, bold50, bold99 bool) {
	d, b, g := pick(tr.Direct), pick(tr.Bare), pick(tr.Gateway)
	if d == nil || b == nil || g == nil {
		return
	}
	t.msRow(prefix+"p50", d.P50MS, b.P50MS, g.P50MS, bold50)
	t.msRow(prefix+"p90", d.P90MS, b.P90MS, g.P90MS, false)
	t.msRow(prefix+"p99", d.P99MS, b.P99MS, g.P99MS, bold99)
	t.msRow(prefix+"max", d.MaxMS, b.MaxMS, g.MaxMS, false)
}

func latencyOfRun(r Run) *Latency      { return &r.Latency }
func fromScheduleOfRun(r Run) *Latency { return r.FromSchedule }
func firstDataOfRun(r Run) *Latency    { return r.FirstData }
func cpuOfRun(r Run) (proxy, mock float64) {
	return cpuPerReq(r.ProxyCPUMS, r.Sent), cpuPerReq(r.MockCPUMS, r.Sent)
}

// trioCommonRows adds the rows every trio table ends with: upstream
// calls, CPU per request, generator CPU, RSS of the process in the middle
// and errors.
func (t table) trioCommonRows(tr Trio) {
	d, b, g := tr.Direct, tr.Bare, tr.Gateway
	t.row("upstream calls", callsCell(d.UpstreamCalls), callsCell(b.UpstreamCalls), callsCell(g.UpstreamCalls), "", "")
	bp, _ := cpuOfRun(b)
	gp, _ := cpuOfRun(g)
	t.row("proxy CPU / request", "–", fmt.Sprintf("%.1f µs", bp), fmt.Sprintf("%.1f µs", gp), ratio(gp, bp), "")
	_, dm := cpuOfRun(d)
	_, bm := cpuOfRun(b)
	_, gm := cpuOfRun(g)
	t.row("mock CPU / request", fmt.Sprintf("%.1f µs", dm), fmt.Sprintf("%.1f µs", bm), fmt.Sprintf("%.1f µs", gm), "", "")
	t.row("generator CPU", fmt.Sprintf("%.0f %% of a core", d.GeneratorCPUPct), fmt.Sprintf("%.0f %% of a core", b.GeneratorCPUPct),
		fmt.Sprintf("%.0f %% of a core", g.GeneratorCPUPct), "", "")
	t.row("proxy VmRSS max (sampled)", "–", mib(b.ProxyMaxRSS), mib(g.ProxyMaxRSS), ratio(float64(g.ProxyMaxRSS), float64(b.ProxyMaxRSS)), "")
	t.row("errors", errorsCell(d.Errors), errorsCell(b.Errors), errorsCell(g.Errors), "", "")
}

func (t table) successRow(tr Trio) {
	t.row("success", successCell(tr.Direct), successCell(tr.Bare), successCell(tr.Gateway),
		fmt.Sprintf("%+.2f pt", tr.Gateway.SuccessPct-tr.Bare.SuccessPct), fmt.Sprintf("%+.2f pt", tr.Gateway.SuccessPct-tr.Direct.SuccessPct))
}

// budgetTable renders a list of budgets or targets.
func budgetTable(b *strings.Builder, bs []Budget) {
	t := table{b}
	t.head("target", "limit", "measured", "result", "how")
	for _, bu := range bs {
		t.row(bu.Name, bu.Limit, bu.Figure, "**"+bu.Status+"**", bu.How)
	}
	b.WriteString("\n")
}

// Markdown renders the report.
func (r *Report) Markdown() string {
	var b strings.Builder
	t := table{&b}
	mode := "full"
	if r.Quick {
		mode = "quick (smoke run, short durations: the figures only show that every table is produced)"
	}
	fmt.Fprintf(&b, "# Breakwater benchmark\n\n")
	fmt.Fprintf(&b, "- Date: %s\n- Commit: %s\n- Go: %s (%s), %d CPUs\n- Load average (1 min, start → end): %s\n- Mode: %s\n",
		r.Date, r.Commit, r.GoVersion, r.Platform, r.CPUs, r.LoadAvg, mode)
	b.WriteString("- Three targets in every table, measured with the same generator, client settings and body, one after the other " +
		"except in the fixed-rate tables, the throughput table, the streaming table and the configuration-size curves, where they take turns in short slices: " +
		"**direct** = the mock upstream called directly (`bench-model`); **bare proxy** = the same request through the harness's own " +
		"bare fasthttp reverse proxy (one `HostClient`, no routing, no logging; streams flushed piece by piece), the physical floor " +
		"of one extra hop; **Breakwater** = the same request through the gateway (`bench/bench-model`). The generator, the proxies " +
		"and the mock share the CPUs, so absolute times mean little: compare the columns of one run.\n")
	g := r.Gateway
	level := "the default (info): the access log is on"
	if g.LogLevel != "" {
		level = "`" + g.LogLevel + "`"
	}
	fmt.Fprintf(&b, "- Gateway: `breakwater serve --config FILE`, log level %s", level)
	if g.AccessLines > 0 || g.Requests > 0 {
		fmt.Fprintf(&b, " (%d access lines written for %d requests sent to the main gateway)", g.AccessLines, g.Requests)
	}
	b.WriteString(". Configuration: default settings except ")
	if len(g.ConfigChanges) == 0 {
		b.WriteString("nothing")
	} else {
		b.WriteString(strings.Join(g.ConfigChanges, "; "))
	}
	b.WriteString(".")
	if g.Pprof {
		b.WriteString(" **Profiled run** (`PROFILE=1`): the gateways ran with `--pprof` and a CPU profile was taken during every " +
			"measured gateway run, which costs the gateway a few per cent: do not judge the targets on a profiled run.")
	}
	b.WriteString("\n\n")

	b.WriteString("## Targets\n\n" +
		"The targets of the \"thinnest possible proxy\" issue, as ratios or deltas to the bare proxy measured in the same run.\n\n")
	budgetTable(&b, r.Targets)
	b.WriteString("## Budgets kept\n\n" +
		"Earlier budgets that still make sense. Dropped, because the targets above replace them: added p50 at 500 req/s " +
		"≤ 0.5 ms and ≤ 0.3 ms over direct, added p99 ≤ 1.0 ms over direct, throughput ≥ 15 % and ≥ 30 % of direct " +
		"(now against the bare proxy), under-fire upstream attempts per success ≤ 1.5 (now: within 5 % of the scenario's floor, " +
		"and ≤ 1.05 in the rate-limited scenario).\n\n")
	budgetTable(&b, r.Budgets)

	s := r.Settings
	if len(r.OpenLoop) > 0 {
		fmt.Fprintf(&b, "## 1. Fixed rate, non-streaming (open loop)\n\n"+
			"Requests are sent at fixed intervals, each in its own goroutine, whatever the answers do, so a slow answer never delays "+
			"later requests (no coordinated omission). Latency runs from the send, the moment the request is handed to the client: "+
			"the client keeps at most %[3]d connections per target and a request finding them all busy waits, which counts. "+
			"Latency from the scheduled time also includes the generator's own lateness (send lag). "+
			"The three targets are measured interleaved, so the machine's drift weighs on them alike: round after round, each in "+
			"turn (direct → bare proxy → Breakwater) gets a slice of %[4]g s of the rate, each with its own client kept over its "+
			"slices; rounds of warm-up until each had %.1[2]f s, then measured rounds until each had %.0[1]f s, each target's "+
			"latencies merged over its slices.\n\n",
			s.OpenLoopSeconds, s.WarmupSeconds, s.OpenLoopConnections, s.SliceSeconds)
	}
	for _, o := range r.OpenLoop {
		fmt.Fprintf(&b, "### %.0f req/s\n\n%d warm-up and %d measured rounds.\n\n", o.RatePerS, o.WarmRounds, o.Rounds)
		t.trioHead("")
		t.successRow(o.Trio)
		t.row("achieved rate", fmt.Sprintf("%.1f req/s", o.Direct.RPS), fmt.Sprintf("%.1f req/s", o.Bare.RPS),
			fmt.Sprintf("%.1f req/s", o.Gateway.RPS), ratio(o.Gateway.RPS, o.Bare.RPS), ratio(o.Gateway.RPS, o.Direct.RPS))
		t.latRows("", latencyOfRun, o.Trio, o.RatePerS == targetRate, o.RatePerS == targetRate)
		t.latRows("from schedule ", fromScheduleOfRun, o.Trio, false, false)
		if o.Direct.SendLag != nil && o.Bare.SendLag != nil && o.Gateway.SendLag != nil {
			lag := func(r Run) string { return fms(r.SendLag.P50MS) + " / " + fms(r.SendLag.P99MS) }
			t.row("generator send lag p50 / p99", lag(o.Direct), lag(o.Bare), lag(o.Gateway), "", "")
		}
		t.trioCommonRows(o.Trio)
		b.WriteString("\n")
	}

	if tp := r.Throughput; tp != nil {
		fmt.Fprintf(&b, "## 2. Max throughput (closed loop, %d connections, %.0f s)\n\n", tp.Connections, s.ThroughputSeconds)
		fmt.Fprintf(&b, "Each connection sends its next request as soon as the previous answer is read. The three targets take turns "+
			"in slices of at least 1 s: %d warm-up and %d measured rounds; throughput is each target's successes over its measured time.\n\n",
			tp.WarmRounds, tp.Rounds)
		t.head("", "direct", "bare proxy", "Breakwater", "Breakwater / bare", "Breakwater / direct")
		d, bp, g := tp.Direct, tp.Bare, tp.Gateway
		t.row("throughput", fmt.Sprintf("%.0f req/s", d.RPS), fmt.Sprintf("%.0f req/s", bp.RPS), fmt.Sprintf("%.0f req/s", g.RPS),
			fmt.Sprintf("**%s**", pctRatio(g.RPS, bp.RPS)), pctRatio(g.RPS, d.RPS))
		t.row("success", successCell(d), successCell(bp), successCell(g), "", "")
		for _, p := range []struct {
			name    string
			d, b, g float64
		}{{"p50", d.Latency.P50MS, bp.Latency.P50MS, g.Latency.P50MS}, {"p99", d.Latency.P99MS, bp.Latency.P99MS, g.Latency.P99MS},
			{"max", d.Latency.MaxMS, bp.Latency.MaxMS, g.Latency.MaxMS}} {
			t.row(p.name, fms(p.d), fms(p.b), fms(p.g), dms(p.g-p.b), dms(p.g-p.d))
		}
		t.trioCommonRows(tp.Trio)
		b.WriteString("\n")
	}

	if st := r.Streaming; st != nil {
		fmt.Fprintf(&b, "## 3. Streaming time to first byte (%d concurrent, %.0f s)\n\n"+
			"The mock streams %d content chunks %d ms apart; time to first byte is send → first `data:` line, "+
			"whole stream is send → end of body after `data: [DONE]`. The three targets take turns in slices of at least 1 s: "+
			"%d warm-up and %d measured rounds. Within a slice the workers start one after the other, spread over one stream's "+
			"length (%d ms), so that they do not all send at the same moments.\n\n",
			st.Workers, s.StreamSeconds, s.StreamChunks, s.StreamChunkIntervalMS, st.WarmRounds, st.Rounds, s.StreamChunks*s.StreamChunkIntervalMS)
		t.trioHead("")
		t.row("streams completed", successCell(st.Direct), successCell(st.Bare), successCell(st.Gateway), "", "")
		t.latRows("first data: ", firstDataOfRun, st.Trio, true, false)
		t.msRow("whole stream p50", st.Direct.Latency.P50MS, st.Bare.Latency.P50MS, st.Gateway.Latency.P50MS, false)
		t.msRow("whole stream p99", st.Direct.Latency.P99MS, st.Bare.Latency.P99MS, st.Gateway.Latency.P99MS, false)
		t.trioCommonRows(st.Trio)
		b.WriteString("\n")
	}

	if m := r.Memory; m != nil {
		b.WriteString("## 4. Memory (resident set, from /proc/PID/status)\n\nPeaks (VmHWM) as they stood after scenarios 1–3.\n\n")
		t.head("", "mock", "bare proxy", "Breakwater", "Breakwater / bare")
		t.row("VmRSS idle, after start", mib(m.MockIdleRSS), mib(m.BareIdleRSS), mib(m.GatewayIdleRSS),
			ratio(float64(m.GatewayIdleRSS), float64(m.BareIdleRSS)))
		during := "not run"
		if m.GatewayMaxRSSRun > 0 {
			during = mib(m.GatewayMaxRSSRun)
		}
		t.row("VmRSS max during max throughput (sampled)", "–", "–", during, "")
		t.row("VmHWM (peak) at the end", mib(m.MockPeak), mib(m.BarePeak), "**"+mib(m.GatewayPeak)+"**",
			ratio(float64(m.GatewayPeak), float64(m.BarePeak)))
		b.WriteString("\n")
	}

	r.curvesMarkdown(&b)
	r.fireMarkdown(&b)
	r.rateLimitedMarkdown(&b)
	r.clusterMarkdown(&b)
	r.routeMarkdown(&b)
	r.profilesMarkdown(&b)

	if len(r.Notes) > 0 {
		b.WriteString("## Notes\n\n")
		for _, n := range r.Notes {
			if first, rest, ok := strings.Cut(n, "\n"); ok {
				b.WriteString("- " + first + "\n\n```\n" + rest + "\n```\n")
				continue
			}
			b.WriteString("- " + n + "\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// pctRatio formats a/b as a percentage, or "–" when b is 0.
func pctRatio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f %%", 100*a/b)
}

// JSON renders the report as indented JSON.
func (r *Report) JSON() ([]byte, error) {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the report: %w", err)
	}
	return append(data, '\n'), nil
}
