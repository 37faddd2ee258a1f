package main

import (
	"fmt"
	"strings"
)

// RoutePluginResult is the routing-plugin scenario: the cost of the
// route hook per request, through the gateway and in process.
type RoutePluginResult struct {
	// Plugin is the plugin's name in the configuration, Source the
	// example it was built from, Build the command and BuildSeconds its
	// time.
	Plugin       string  `json:"plugin"`
	Source       string  `json:"source"`
	Build        string  `json:"build"`
	BuildSeconds float64 `json:"build_s"`
	// Header is the header every request carries, which the plugin
	// routes by; PriorityProvider and PluginProvider are where each
	// combo must send the requests.
	Header           string `json:"header"`
	PriorityProvider string `json:"priority_provider"`
	PluginProvider   string `json:"plugin_provider"`
	// Open is the open-loop load (latency), Closed the closed-loop one
	// (throughput and CPU).
	Open   *RouteLoad `json:"open_loop,omitempty"`
	Closed *RouteLoad `json:"closed_loop,omitempty"`
	// InProcess is BenchmarkRoute, run with `go test -bench`.
	InProcess *RouteBench `json:"in_process,omitempty"`
	// Err is why the loads were not measured (the plugin's build, the
	// gateway's start).
	Err string `json:"error,omitempty"`
}

// RouteLoad is one load on both combos, one after the other.
type RouteLoad struct {
	// RatePerS is the open loop's rate, Connections the closed loop's.
	RatePerS    float64 `json:"rate_per_s,omitempty"`
	Connections int     `json:"connections,omitempty"`
	// Seconds is each combo's measured time, in Rounds rounds of equal
	// length (priority, plugin, plugin, priority), each after a warm-up.
	Seconds  float64 `json:"seconds"`
	Rounds   int     `json:"rounds"`
	Priority Run     `json:"priority"`
	Plugin   Run     `json:"plugin"`
	// PriorityServed and PluginServed count the successes by the
	// provider that answered them (X-Breakwater-Provider).
	PriorityServed map[string]int `json:"priority_served_by"`
	PluginServed   map[string]int `json:"plugin_served_by"`
	// PriorityCounters and PluginCounters are the plugin combo's and the
	// plugin's counters (GET /api/plugins) over each side's run, its
	// warm-up included.
	PriorityCounters RouteCounters `json:"priority_counters"`
	PluginCounters   RouteCounters `json:"plugin_counters"`
	// Cost is the hook's cost per request (plugin − priority); nil when
	// Err says the plugin did not route the requests as it should.
	Cost *RouteCost `json:"cost,omitempty"`
	Err  string     `json:"error,omitempty"`
}

// RouteCounters are the plugin combo's strategy counters and the
// plugin's own calls and errors.
type RouteCounters struct {
	Calls        uint64 `json:"strategy_calls"`
	Declined     uint64 `json:"declined"`
	Fallbacks    uint64 `json:"fallbacks"`
	PluginCalls  uint64 `json:"plugin_calls"`
	PluginErrors uint64 `json:"plugin_errors"`
}

// RouteCost is what the plugin combo costs a request more than the
// priority combo: latency deltas, the gateway's CPU per request delta
// (µs) and the throughput ratio (plugin / priority).
type RouteCost struct {
	P50DeltaMS      float64 `json:"p50_delta_ms"`
	P99DeltaMS      float64 `json:"p99_delta_ms"`
	CPUDeltaUS      float64 `json:"cpu_per_request_delta_us"`
	ThroughputRatio float64 `json:"throughput_ratio"`
}

// RouteBench is BenchmarkRoute's result.
type RouteBench struct {
	Command string           `json:"command"`
	Cases   []RouteBenchCase `json:"cases"`
	Err     string           `json:"error,omitempty"`
}

// RouteBenchCase is one sub-benchmark (a combo size).
type RouteBenchCase struct {
	Name        string  `json:"name"`
	NsPerOp     float64 `json:"ns_per_op"`
	MedianNs    float64 `json:"median_ns"`
	P10Ns       float64 `json:"p10_ns"`
	P99Ns       float64 `json:"p99_ns"`
	BytesPerOp  float64 `json:"bytes_per_op"`
	AllocsPerOp float64 `json:"allocs_per_op"`
}

// failed reports whether the scenario ran and a part of it failed.
func (r *RoutePluginResult) failed() bool {
	if r == nil {
		return false
	}
	if r.Err != "" || (r.InProcess != nil && r.InProcess.Err != "") {
		return true
	}
	for _, l := range []*RouteLoad{r.Open, r.Closed} {
		if l != nil && l.Err != "" {
			return true
		}
	}
	return false
}

// servedText formats a count of successes by provider.
func servedText(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	named := make(map[string]int, len(m))
	for k, n := range m {
		if k == "" {
			k = "no " + headerProvider
		}
		named[k] += n
	}
	return errorsCell(named)
}

// routeMarkdown renders the routing-plugin section.
func (r *Report) routeMarkdown(b *strings.Builder) {
	rp := r.RoutePlugin
	if rp == nil {
		return
	}
	t := table{b}
	fmt.Fprintf(b, "## Routing plugin: the route hook's cost per request\n\n"+
		"One gateway, two combos over the same two targets (`%[1]s/bench-model`, then `%[2]s/other-model-2`, both in front of the mock): "+
		"`%[3]s` (strategy `priority`) and `%[4]s` (strategy `plugin:%[5]s`, the route hook of [`%[6]s`](../../%[6]s) built with "+
		"`%[7]s`). Every request to either carries `%[8]s`: priority ignores it and sends to %[1]s, the plugin puts %[2]s first. "+
		"Both combos get the same load from the same generator, one after the other, in rounds of equal length in the order "+
		"priority, plugin, plugin, priority (each after a warm-up), so that a machine growing busier or quieter weighs on both alike; "+
		"each combo's figures are over its rounds together. A load's figures count only when every success "+
		"of the priority combo was answered by %[1]s without a plugin call and every success of the plugin combo by %[2]s "+
		"(`%[9]s`), with a plugin call for every request sent and no decline (`GET /api/plugins`, read around the measured run); "+
		"a request whose hook call failed (its %[10]d ms deadline on a busy machine) takes the priority order and is counted as a "+
		"fallback: at most %[11]g %% may, or the load is an error.\n\n",
		rp.PriorityProvider, rp.PluginProvider, routePriorityCombo, routePluginCombo, rp.Plugin, rp.Source, rp.Build, rp.Header, headerProvider,
		routeHookDeadlineMS, 100*routeMaxFallbackShare)
	if rp.Err != "" {
		b.WriteString("**Error**: " + rp.Err + "\n\n")
	}
	cost := func(l *RouteLoad, f func(*RouteCost) string) string {
		switch {
		case l == nil:
			return "not measured"
		case l.Cost == nil:
			return "**error**"
		}
		return "**" + f(l.Cost) + "**"
	}
	if rp.Open != nil || rp.Closed != nil {
		t.head("route hook, per request (plugin − priority)", "measured", "how")
		openHow, closedHow := "", ""
		if l := rp.Open; l != nil {
			openHow = fmt.Sprintf("open loop, %.0f req/s, %.0f s each in %d rounds", l.RatePerS, l.Seconds, l.Rounds)
		}
		if l := rp.Closed; l != nil {
			closedHow = fmt.Sprintf("closed loop, %d connections, %.0f s each in %d rounds", l.Connections, l.Seconds, l.Rounds)
		}
		t.row("p50 Δ", cost(rp.Open, func(c *RouteCost) string { return dms(c.P50DeltaMS) }), openHow)
		t.row("p99 Δ", cost(rp.Open, func(c *RouteCost) string { return dms(c.P99DeltaMS) }), openHow)
		t.row("gateway CPU / request Δ", cost(rp.Closed, func(c *RouteCost) string { return fmt.Sprintf("%+.1f µs", c.CPUDeltaUS) }),
			closedHow+", `/proc/PID/stat`")
		t.row("throughput, plugin / priority", cost(rp.Closed, func(c *RouteCost) string { return fmt.Sprintf("×%.3f", c.ThroughputRatio) }), closedHow)
		b.WriteString("\n")
	}
	for _, l := range []struct {
		title string
		load  *RouteLoad
	}{{"Open loop", rp.Open}, {"Closed loop", rp.Closed}} {
		if l.load == nil {
			continue
		}
		routeLoadTable(b, l.title, l.load)
	}
	if ib := rp.InProcess; ib != nil {
		fmt.Fprintf(b, "### In process\n\n`%s`: the strategy, the plugin host and the example plugin end to end, "+
			"one route call per operation, without the gateway around it.\n\n", ib.Command)
		if ib.Err != "" {
			b.WriteString("**Error**: " + ib.Err + "\n\n")
		} else {
			t.head("combo", "median", "p10", "p99", "mean (ns/op)", "allocs / op", "bytes / op")
			for _, c := range ib.Cases {
				t.row(c.Name, fmt.Sprintf("**%.1f µs**", c.MedianNs/1000), fmt.Sprintf("%.1f µs", c.P10Ns/1000), fmt.Sprintf("%.1f µs", c.P99Ns/1000),
					fmt.Sprintf("%.0f ns", c.NsPerOp), fmt.Sprintf("**%.0f**", c.AllocsPerOp), fmt.Sprintf("%.0f", c.BytesPerOp))
			}
			b.WriteString("\n")
		}
	}
}

// routeLoadTable renders one load of the routing-plugin scenario.
func routeLoadTable(b *strings.Builder, title string, l *RouteLoad) {
	t := table{b}
	p, q := l.Priority, l.Plugin
	if l.RatePerS > 0 {
		fmt.Fprintf(b, "### %s, %.0f req/s\n\n", title, l.RatePerS)
	} else {
		fmt.Fprintf(b, "### %s, %d connections\n\n", title, l.Connections)
	}
	delta := func(f func(*RouteCost) string) string {
		if l.Cost == nil {
			return "error"
		}
		return f(l.Cost)
	}
	t.head("", "priority", "plugin:"+routePluginName, "plugin − priority")
	t.row("success", successCell(p), successCell(q), "")
	t.row("answered by", servedText(l.PriorityServed), servedText(l.PluginServed), "")
	pc, qc := l.PriorityCounters, l.PluginCounters
	t.row("plugin calls (strategy calls / declined / fallbacks; plugin errors)",
		fmt.Sprintf("%d (%d / %d / %d; %d)", pc.PluginCalls, pc.Calls, pc.Declined, pc.Fallbacks, pc.PluginErrors),
		fmt.Sprintf("%d (%d / %d / %d; %d)", qc.PluginCalls, qc.Calls, qc.Declined, qc.Fallbacks, qc.PluginErrors), "")
	t.row("throughput", fmt.Sprintf("%.0f req/s", p.RPS), fmt.Sprintf("%.0f req/s", q.RPS),
		delta(func(c *RouteCost) string { return fmt.Sprintf("×%.3f", c.ThroughputRatio) }))
	t.row("p50", fms(p.Latency.P50MS), fms(q.Latency.P50MS), delta(func(c *RouteCost) string { return dms(c.P50DeltaMS) }))
	t.row("p90", fms(p.Latency.P90MS), fms(q.Latency.P90MS), delta(func(*RouteCost) string { return dms(q.Latency.P90MS - p.Latency.P90MS) }))
	t.row("p99", fms(p.Latency.P99MS), fms(q.Latency.P99MS), delta(func(c *RouteCost) string { return dms(c.P99DeltaMS) }))
	t.row("gateway CPU / request", fmt.Sprintf("%.1f µs", cpuPerReq(p.ProxyCPUMS, p.Sent)), fmt.Sprintf("%.1f µs", cpuPerReq(q.ProxyCPUMS, q.Sent)),
		delta(func(c *RouteCost) string { return fmt.Sprintf("%+.1f µs", c.CPUDeltaUS) }))
	t.row("upstream calls", callsCell(p.UpstreamCalls), callsCell(q.UpstreamCalls), "")
	t.row("errors", errorsCell(p.Errors), errorsCell(q.Errors), "")
	b.WriteString("\n")
	if l.Err != "" {
		b.WriteString("**Error**: " + l.Err + "\n\n")
	}
}
