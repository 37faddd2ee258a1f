package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/breakwater-dev/breakwater/bench/internal/proc"
)

// The configuration-size curves.
const (
	curveProviders   = "providers"
	curveConnections = "connections"
	curveCombos      = "combos"
)

// failPathPackage is the package of the failure-path benchmark.
const failPathPackage = "./bench/internal/failpath"

// Curves are the cost-as-the-work-grows scenarios.
type Curves struct {
	Providers   *ConfigCurve     `json:"providers,omitempty"`
	Connections *ConfigCurve     `json:"connections,omitempty"`
	Combos      *ConfigCurve     `json:"combos,omitempty"`
	BodySize    *BodyCurve       `json:"body_size,omitempty"`
	SlowStreams *SlowStreamCurve `json:"slow_streams,omitempty"`
	FailurePath *FailurePath     `json:"failure_path,omitempty"`
}

// ConfigCurve is the p50 overhead as the configuration grows.
type ConfigCurve struct {
	What string `json:"what"`
	// SliceSeconds is the length of one slice of the interleaved load;
	// every target got WarmRounds unmeasured slices, then Rounds measured
	// ones.
	SliceSeconds float64     `json:"slice_s"`
	WarmRounds   int         `json:"warm_rounds"`
	Rounds       int         `json:"rounds"`
	Rows         []ConfigRow `json:"rows"`
}

// ConfigRow is one configuration size.
type ConfigRow struct {
	Size int `json:"size"`
	Trio
}

// overheadP50 is the gateway's p50 over direct: the time it adds, the
// bare proxy's hop included (a delta to the bare proxy alone, a few
// hundredths of a millisecond, would make the growth ratio mostly noise).
func (t Trio) overheadP50() float64 { return t.Gateway.Latency.P50MS - t.Direct.Latency.P50MS }

// overBareP50 is the gateway's p50 over the bare proxy's.
func (t Trio) overBareP50() float64 { return t.Gateway.Latency.P50MS - t.Bare.Latency.P50MS }

// growth returns the largest row's p50 overhead over direct over the
// smallest's (the target's figure).
func (c *ConfigCurve) growth() (float64, bool) { return c.growthOf(Trio.overheadP50) }

// growthOf returns the largest row's overhead over the smallest's, the
// overhead as over returns it.
func (c *ConfigCurve) growthOf(over func(Trio) float64) (float64, bool) {
	if c == nil || len(c.Rows) < 2 {
		return 0, false
	}
	first, last := c.Rows[0].Trio, c.Rows[len(c.Rows)-1].Trio
	if !first.measured() || !last.measured() || over(first) <= 0 {
		return 0, false
	}
	return over(last) / over(first), true
}

// BodyCurve is the overhead as the request body grows.
type BodyCurve struct {
	RatePerS float64   `json:"rate_per_s"`
	Rows     []BodyRow `json:"rows"`
	// CopyUSPerMB is a memory copy of one MB in the harness, for scale.
	CopyUSPerMB float64 `json:"copy_us_per_mb"`
}

// BodyRow is one body size.
type BodyRow struct {
	Bytes int `json:"bytes"`
	Trio
}

// slopes returns how many µs per MB of body the bare proxy and the gateway
// add over direct (p50), from the smallest row to the largest.
func (c *BodyCurve) slopes() (bare, gateway float64, ok bool) {
	if c == nil || len(c.Rows) < 2 {
		return 0, 0, false
	}
	first, last := c.Rows[0], c.Rows[len(c.Rows)-1]
	if !first.measured() || !last.measured() || last.Bytes <= first.Bytes {
		return 0, 0, false
	}
	mb := float64(last.Bytes-first.Bytes) / (1 << 20)
	add := func(r BodyRow, pick func(Trio) Run) float64 {
		return pick(r.Trio).Latency.P50MS - r.Direct.Latency.P50MS
	}
	bareOf := func(t Trio) Run { return t.Bare }
	gwOf := func(t Trio) Run { return t.Gateway }
	bare = 1000 * (add(last, bareOf) - add(first, bareOf)) / mb
	gateway = 1000 * (add(last, gwOf) - add(first, gwOf)) / mb
	return bare, gateway, true
}

// SlowStreamCurve is the cost of many concurrent slow streams.
type SlowStreamCurve struct {
	ChunkIntervalMS int64   `json:"chunk_interval_ms"`
	Chunks          int     `json:"chunks"`
	RampSeconds     float64 `json:"ramp_s"`
	// FileLimit is the open-file limit of the processes; MaxStreams the
	// most streams a proxy can hold under it (two descriptors each).
	FileLimit  int             `json:"file_limit"`
	MaxStreams int             `json:"max_streams"`
	Rows       []SlowStreamRow `json:"rows"`
}

// SlowStreamRow is one number of concurrent streams.
type SlowStreamRow struct {
	// Asked is the row's number; Streams what was run (lower when the
	// open-file limit does not allow Asked).
	Asked   int `json:"asked"`
	Streams int `json:"streams"`
	Trio
	BareRSSBefore    int64 `json:"bare_rss_before_bytes"`
	GatewayRSSBefore int64 `json:"gateway_rss_before_bytes"`
	// Before and After are the gateway's goroutines and descriptors before
	// the streams and once they ended.
	Before Census `json:"before"`
	After  Census `json:"after"`
}

// Census is a process's goroutines and open file descriptors (-1 unknown).
type Census struct {
	Goroutines int `json:"goroutines"`
	FDs        int `json:"fds"`
}

// perStream returns the resident memory one open stream cost the process
// in the middle: the highest RSS during the row minus the RSS before it,
// over the streams.
func perStream(maxRSS, before int64, streams int) float64 {
	if streams == 0 || maxRSS == 0 || before == 0 {
		return 0
	}
	return float64(maxRSS-before) / float64(streams)
}

// leakBase is what row i of the slow-stream curve is compared with once its
// streams ended: what the row before it left, or its own state before it
// when it is the first.
func leakBase(rows []SlowStreamRow, i int) Census {
	if i == 0 {
		return rows[0].Before
	}
	return rows[i-1].After
}

// FailurePath is the failure-path benchmark's result.
type FailurePath struct {
	// Command is what ran; Rules the operator rules loaded.
	Command string            `json:"command"`
	Rules   int               `json:"rules"`
	Cases   []FailurePathCase `json:"cases"`
	Err     string            `json:"error,omitempty"`
}

// FailurePathCase is one benchmarked failure.
type FailurePathCase struct {
	Name        string  `json:"name"`
	NsPerOp     float64 `json:"ns_per_op"`
	MedianNs    float64 `json:"median_ns"`
	P10Ns       float64 `json:"p10_ns"`
	P90Ns       float64 `json:"p90_ns"`
	BytesPerOp  float64 `json:"bytes_per_op"`
	AllocsPerOp float64 `json:"allocs_per_op"`
	// Rules is the operator rules the benchmark had loaded.
	Rules int `json:"rules"`
}

// failurePath runs the failure-path benchmark with `go test -bench` from
// the current directory (the module root under `make bench`) and reads it.
func failurePath(ctx context.Context) *FailurePath {
	args := []string{"test", "-run", "^$", "-bench", "^BenchmarkFailurePath$", "-benchtime", "3000x", "-count", "1", failPathPackage}
	fp := &FailurePath{Command: "go " + strings.Join(args, " ")}
	out, err := goBench(ctx, args)
	if err != nil {
		fp.Err = err.Error()
		return fp
	}
	fp.Cases = parseBench(out)
	for _, c := range fp.Cases {
		fp.Rules = c.Rules
	}
	if len(fp.Cases) == 0 {
		fp.Err = "no benchmark lines in the output: " + lastLines(out, 5)
	}
	return fp
}

// goBench runs `go ARGS` (a `go test -bench` command) with the go command
// on PATH and returns its output, or an error with the output's last
// lines.
func goBench(ctx context.Context, args []string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, lastLines(string(out), 5))
	}
	return string(out), nil
}

// parseBench reads `go test -bench` lines of BenchmarkFailurePath:
// "BenchmarkFailurePath/NAME-P  N  X ns/op  Y median-ns ... Z B/op  W allocs/op".
func parseBench(text string) []FailurePathCase {
	var out []FailurePathCase
	for _, l := range benchLines(text, "BenchmarkFailurePath") {
		v := l.values
		out = append(out, FailurePathCase{Name: l.name, NsPerOp: v["ns/op"], MedianNs: v["median-ns"], P10Ns: v["p10-ns"],
			P90Ns: v["p90-ns"], BytesPerOp: v["B/op"], AllocsPerOp: v["allocs/op"], Rules: int(v["rules"])})
	}
	return out
}

// benchLine is one result line of `go test -bench`: the sub-benchmark's
// name (without the GOMAXPROCS suffix) and its figures by unit.
type benchLine struct {
	name   string
	values map[string]float64
}

// benchLines reads the result lines of benchmark's sub-benchmarks:
// "BENCHMARK/NAME-P  N  X ns/op  Y unit ...".
func benchLines(text, benchmark string) []benchLine {
	var out []benchLine
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		name, ok := strings.CutPrefix(f0(f), benchmark+"/")
		if len(f) < 4 || !ok {
			continue
		}
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		l := benchLine{name: name, values: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				l.values[f[i+1]] = v
			}
		}
		out = append(out, l)
	}
	return out
}

// f0 returns the first field, or "".
func f0(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}

// curveTargets judges the curves.
func (r *Report) curveTargets() []Budget {
	var out []Budget
	c := r.Curves
	if c == nil {
		c = &Curves{}
	}
	for _, cc := range []struct {
		what  string
		curve *ConfigCurve
	}{{curveProviders, c.Providers}, {curveConnections, c.Connections}, {curveCombos, c.Combos}} {
		b := na(fmt.Sprintf("p50 overhead, 1 → many %s", cc.what), fmt.Sprintf("grows ≤ %.0f %%", 100*(targetCurveGrowth-1)),
			fmt.Sprintf("Breakwater p50 − direct p50 at %.0f req/s, largest row / smallest; direct, bare proxy and every row's gateway "+
				"measured interleaved in slices (§5)", r.Settings.CurveRatePerS))
		if g, ok := cc.curve.growth(); ok {
			first, last := cc.curve.Rows[0], cc.curve.Rows[len(cc.curve.Rows)-1]
			b.Figure = fmt.Sprintf("×%.2f (%s at %d, %s at %d)", g, dms(first.overheadP50()), first.Size, dms(last.overheadP50()), last.Size)
			b.Status = passIf(g <= targetCurveGrowth)
		}
		out = append(out, b)
	}

	s := c.SlowStreams
	var top *SlowStreamRow
	if s != nil && len(s.Rows) > 0 {
		top = &s.Rows[len(s.Rows)-1]
	}
	b := na("gateway RSS per open slow stream", fmt.Sprintf("≤ %.0f KB", targetRSSPerStream/1000.0),
		"(highest VmRSS during the row − VmRSS before) / streams, largest row (§5)")
	if top != nil && top.Gateway.ProxyMaxRSS > 0 {
		g := perStream(top.Gateway.ProxyMaxRSS, top.GatewayRSSBefore, top.Streams)
		b.Figure = fmt.Sprintf("%.1f KB at %d streams (bare proxy %.1f KB)", g/1000, top.Streams,
			perStream(top.Bare.ProxyMaxRSS, top.BareRSSBefore, top.Streams)/1000)
		b.Status = passIf(g <= targetRSSPerStream && top.Gateway.OK == top.Streams)
		if top.Gateway.OK != top.Streams {
			b.Figure += fmt.Sprintf("; only %d of the streams completed", top.Gateway.OK)
		}
	}
	out = append(out, b)

	b = na(fmt.Sprintf("slow streams: first-byte p99 at %d", targetSlowStreams), fmt.Sprintf("≤ %+.0f ms over the bare proxy", targetSlowTTFBP99MS),
		"send → first `data:` line, largest row (§5)")
	if top != nil && top.Gateway.FirstData != nil && top.Bare.FirstData != nil && top.Gateway.OK > 0 {
		d := top.Gateway.FirstData.P99MS - top.Bare.FirstData.P99MS
		b.Figure = fmt.Sprintf("%s at %d streams (bare %.3f, Breakwater %.3f)", dms(d), top.Streams, top.Bare.FirstData.P99MS, top.Gateway.FirstData.P99MS)
		b.Status = passIf(d <= targetSlowTTFBP99MS && top.Streams >= targetSlowStreams)
		if top.Streams < targetSlowStreams {
			// Not the target's figure: say what the smaller row shows.
			within := "over"
			if d <= targetSlowTTFBP99MS {
				within = "within"
			}
			b.Status = statusNA
			b.Figure += fmt.Sprintf("; not measurable at %d here: the open-file limit %d allows a proxy %d streams (two descriptors each); "+
				"at %d the delta is %s the limit", targetSlowStreams, s.FileLimit, s.MaxStreams, top.Streams, within)
		}
	}
	out = append(out, b)

	b = na("no goroutine or descriptor leak after the slow streams", fmt.Sprintf("≤ +%d goroutines, ≤ +%d fds", leakGoroutines, leakFDs),
		"gateway's `go_goroutines` (GET /metrics) and /proc/PID/fd once the largest row's streams ended (up to 30 s), against what the row "+
			"before it left: idle upstream keep-alive pools fill in the first large row and must not grow after (§5)")
	if top != nil {
		base := leakBase(s.Rows, len(s.Rows)-1)
		b.Figure = fmt.Sprintf("%+d goroutines, %+d fds after %d streams (%d → %d goroutines, %d → %d fds)",
			top.After.Goroutines-base.Goroutines, top.After.FDs-base.FDs, top.Streams, base.Goroutines, top.After.Goroutines, base.FDs, top.After.FDs)
		b.Status = passIf(!leaked(base, top.After))
	}
	out = append(out, b)

	b = na("overhead per MB of request body", "no faster than a copy of the body: Breakwater's µs/MB ≤ 2× the bare proxy's",
		"p50 − direct p50, smallest to largest body; the bare proxy passes the body through once, the gateway may add one more pass (§5)")
	if bare, gw, ok := c.BodySize.slopes(); ok {
		b.Figure = fmt.Sprintf("%.0f µs/MB (bare proxy %.0f µs/MB; memory copy %.0f µs/MB)", gw, bare, c.BodySize.CopyUSPerMB)
		b.Status = passIf(gw <= 2*bare)
		if bare <= 0 || gw <= 0 {
			// A body that costs less the larger it is: the run's noise
			// exceeds what the body costs, and no ratio can be read.
			b.Status = statusNA
			b.Figure += "; not resolved: a slope at or below zero means the run's noise exceeds the body's cost"
		}
	}
	out = append(out, b)

	b = na(fmt.Sprintf("failure path with %d operator rules", targetFailureRules), fmt.Sprintf("≤ %d µs median", targetFailurePathUS),
		"restate + classify (policy pipeline) + record (engine over Badger), `go test -bench` in "+failPathPackage+" (§5)")
	if fp := c.FailurePath; fp != nil {
		if fp.Err != "" {
			b.Figure = "the benchmark failed: " + fp.Err
			b.Status = statusFail
		} else {
			var parts []string
			pass := fp.Rules >= targetFailureRules
			for _, fc := range fp.Cases {
				parts = append(parts, fmt.Sprintf("%s %.1f µs", fc.Name, fc.MedianNs/1000))
				pass = pass && fc.MedianNs > 0 && fc.MedianNs <= targetFailurePathUS*1000
			}
			b.Figure = strings.Join(parts, ", ")
			b.Status = passIf(pass)
		}
	}
	out = append(out, b)
	return out
}

// curvesMarkdown renders the curves (§5).
func (r *Report) curvesMarkdown(b *strings.Builder) {
	c := r.Curves
	if c == nil {
		return
	}
	t := table{b}
	b.WriteString("## 5. Cost as the work grows\n\n")
	for _, cc := range []*ConfigCurve{c.Providers, c.Connections, c.Combos} {
		if cc == nil || len(cc.Rows) == 0 {
			continue
		}
		var what string
		switch cc.What {
		case curveProviders:
			what = "providers in the configuration (the routed one and others, each with two connections and a model of its own); requests address `bench/bench-model`"
		case curveConnections:
			what = "connections (API keys) of the routed provider; requests address `bench/bench-model`"
		case curveCombos:
			what = "combos in the configuration; requests address the combo `bench-combo` (priority, one target: `bench/bench-model`)"
		}
		fmt.Fprintf(b, "### %s\n\nA gateway per row with that many %s. The curve's gateways are all started before it; open loop at "+
			"%.0f req/s on direct, the bare proxy and every row's gateway, interleaved: round after round, each target in turn (direct → "+
			"bare proxy → Breakwater at each size, smallest first) gets a slice of %g s; %d rounds of warm-up, then %d measured rounds (%g s per "+
			"target), each target's latencies merged over its slices. So the machine's drift weighs on every column and every row alike; "+
			"direct and the bare proxy are measured once for the curve and shown in every row.\n\n",
			cc.What, what, r.Settings.CurveRatePerS, cc.SliceSeconds, cc.WarmRounds, cc.Rounds, float64(cc.Rounds)*cc.SliceSeconds)
		t.head(cc.What, "direct p50", "bare p50", "Breakwater p50", "Breakwater − bare", "**Breakwater − direct**", "Breakwater p99 − bare p99", "Breakwater success", "proxy CPU / request (bare → Breakwater)")
		for _, row := range cc.Rows {
			bp, _ := cpuOfRun(row.Bare)
			gp, _ := cpuOfRun(row.Gateway)
			t.row(strconv.Itoa(row.Size), fms(row.Direct.Latency.P50MS), fms(row.Bare.Latency.P50MS), fms(row.Gateway.Latency.P50MS),
				dms(row.overBareP50()), "**"+dms(row.overheadP50())+"**",
				dms(row.Gateway.Latency.P99MS-row.Bare.Latency.P99MS), successCell(row.Gateway), fmt.Sprintf("%.1f → %.1f µs", bp, gp))
		}
		if g, ok := cc.growth(); ok {
			fmt.Fprintf(b, "\nLargest / smallest p50 overhead: **×%.2f**", g)
			if gb, ok := cc.growthOf(Trio.overBareP50); ok {
				fmt.Fprintf(b, " (over the bare proxy instead of direct: ×%.2f)", gb)
			}
			b.WriteString(".\n")
		}
		b.WriteString("\n")
	}

	if bc := c.BodySize; bc != nil && len(bc.Rows) > 0 {
		fmt.Fprintf(b, "### Request body size\n\nThe same chat request padded to each size (the user message grows), through the main gateway; "+
			"the mock answers a two-letter text, so only the request grows. Open loop at %.0f req/s for %.1f s per target.\n\n",
			bc.RatePerS, r.Settings.CurveSeconds)
		t.head("body", "direct p50", "bare p50", "Breakwater p50", "bare − direct", "Breakwater − direct", "Breakwater − bare", "Breakwater success", "proxy CPU / request (bare → Breakwater)")
		for _, row := range bc.Rows {
			bp, _ := cpuOfRun(row.Bare)
			gp, _ := cpuOfRun(row.Gateway)
			t.row(sizeText(row.Bytes), fms(row.Direct.Latency.P50MS), fms(row.Bare.Latency.P50MS), fms(row.Gateway.Latency.P50MS),
				dms(row.Bare.Latency.P50MS-row.Direct.Latency.P50MS), dms(row.overheadP50()),
				dms(row.overBareP50()), successCell(row.Gateway), fmt.Sprintf("%.1f → %.1f µs", bp, gp))
		}
		if bare, gw, ok := bc.slopes(); ok {
			fmt.Fprintf(b, "\nAdded p50 per MB of body, smallest to largest row: bare proxy **%.0f µs/MB**, Breakwater **%.0f µs/MB** "+
				"(a memory copy of 1 MB takes %.0f µs here).\n", bare, gw, bc.CopyUSPerMB)
		}
		b.WriteString("\n")
	}

	if s := c.SlowStreams; s != nil && len(s.Rows) > 0 {
		fmt.Fprintf(b, "### Concurrent slow streams\n\nA gateway of its own (with an admin token, to read `go_goroutines` from `/metrics`). "+
			"Per row, that many streams are opened over %.0f s (open loop), each sending %d chunks %d ms apart, so all are open together "+
			"for a while. RSS per stream is (highest VmRSS during the row − VmRSS before) / streams. The gateway's goroutines and "+
			"descriptors are read before each row and once its streams ended (waiting up to 30 s for pooled workers to go). "+
			"Each column dials the mock from its own loopback address (direct 127.0.0.1, bare proxy %s, Breakwater %s), so the "+
			"connections an earlier column left in TIME_WAIT do not crowd the next one's ephemeral ports. "+
			"The open-file limit is %d, so a proxy holds at most %d streams (two descriptors each).\n\n", s.RampSeconds, s.Chunks, s.ChunkIntervalMS, proc.BareSource, proc.GatewaySource, s.FileLimit, s.MaxStreams)
		t.head("streams", "completed (direct / bare / Breakwater)", "first byte p99 (direct / bare / Breakwater)", "**Breakwater − bare p99**",
			"RSS per stream (bare / Breakwater)", "goroutines before → after", "fds before → after")
		for _, row := range s.Rows {
			n := strconv.Itoa(row.Streams)
			if row.Asked != row.Streams {
				n = fmt.Sprintf("%d (asked %d)", row.Streams, row.Asked)
			}
			fd := func(r Run) string {
				if r.FirstData == nil {
					return "–"
				}
				return fmt.Sprintf("%.2f", r.FirstData.P99MS)
			}
			delta := "–"
			if row.Gateway.FirstData != nil && row.Bare.FirstData != nil {
				delta = "**" + dms(row.Gateway.FirstData.P99MS-row.Bare.FirstData.P99MS) + "**"
			}
			t.row(n, fmt.Sprintf("%d / %d / %d", row.Direct.OK, row.Bare.OK, row.Gateway.OK),
				fmt.Sprintf("%s / %s / %s ms", fd(row.Direct), fd(row.Bare), fd(row.Gateway)), delta,
				fmt.Sprintf("%.1f / %.1f KB", perStream(row.Bare.ProxyMaxRSS, row.BareRSSBefore, row.Streams)/1000,
					perStream(row.Gateway.ProxyMaxRSS, row.GatewayRSSBefore, row.Streams)/1000),
				fmt.Sprintf("%d → %d", row.Before.Goroutines, row.After.Goroutines), fmt.Sprintf("%d → %d", row.Before.FDs, row.After.FDs))
		}
		b.WriteString("\n")
	}

	if fp := c.FailurePath; fp != nil {
		fmt.Fprintf(b, "### Failure path\n\nMeasured in a Go benchmark, not through the gateway (a failed request's latency through the gateway "+
			"is dominated by the upstream call and the retry): `%s`. One failed attempt restated and classified by the policy pipeline "+
			"with %d operator rules loaded (none of which matches, so all are looked at), then recorded by the engine over Badger.\n\n",
			fp.Command, fp.Rules)
		if fp.Err != "" {
			b.WriteString("Failed: " + fp.Err + "\n\n")
		} else {
			t.head("failure", "median", "p10", "p90", "mean (ns/op)", "allocs / op", "bytes / op")
			for _, fc := range fp.Cases {
				t.row(fc.Name, fmt.Sprintf("**%.1f µs**", fc.MedianNs/1000), fmt.Sprintf("%.1f µs", fc.P10Ns/1000), fmt.Sprintf("%.1f µs", fc.P90Ns/1000),
					fmt.Sprintf("%.1f µs", fc.NsPerOp/1000), fmt.Sprintf("%.0f", fc.AllocsPerOp), fmt.Sprintf("%.0f", fc.BytesPerOp))
			}
			b.WriteString("\n")
		}
	}
}

// sizeText formats a byte count as KB or MB (binary).
func sizeText(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.4g MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.4g KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
