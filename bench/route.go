package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/bench/internal/load"
	"github.com/breakwater-dev/breakwater/bench/internal/proc"
)

// The routing-plugin scenario: one gateway, two combos over the same two
// targets, one ordered by the built-in priority strategy and one by the
// route hook of the example routing plugin (docs/policies.md, "Routing
// plugins").
const (
	// routePluginSource is the example plugin, relative to the module root.
	routePluginSource = "examples/route-plugin"
	// routePluginName is the plugin's name in the gateway's configuration.
	routePluginName = "route"
	// routePriorityCombo and routePluginCombo are the two combos.
	routePriorityCombo = "route-priority"
	routePluginCombo   = "route-plugin"
	// routeHeader is the request header the example plugin routes by; every
	// request of the scenario names routeChosen in it.
	routeHeader = "x-route-provider"
	// routeDefault is the combo's first target, where priority sends every
	// request; routeChosen its second, the one the plugin puts first.
	routeDefault = proc.BenchProvider
	routeChosen  = "other-2"
	// routeMaxFallbackShare is the largest share of the plugin combo's
	// requests that may fall back to the priority order (a deadline
	// overrun on a busy machine) for its figures to count as the hook's.
	routeMaxFallbackShare = 0.001
	// routeHookDeadlineMS is the gateway's deadline of a route call
	// (docs/policies.md), for the report.
	routeHookDeadlineMS = 50
	// routeBenchPackage holds BenchmarkRoute, the hook measured in process.
	routeBenchPackage = "./internal/plugins"
)

// routeConfig is what the scenario adds to a two-provider benchmark
// configuration: the plugin, and the two combos over bench/bench-model and
// other-2/other-model-2 in that order.
func routeConfig(wasm string) string {
	targets := fmt.Sprintf("    targets:\n      - {model: %s/%s}\n      - {model: %s/other-model-2}\n", routeDefault, proc.BenchModel, routeChosen)
	return fmt.Sprintf("plugins:\n  - {name: %s, path: %q, hooks: [route]}\ncombos:\n"+
		"  - name: %s\n    strategy: priority\n%s"+
		"  - name: %s\n    strategy: plugin:%s\n%s",
		routePluginName, wasm, routePriorityCombo, targets, routePluginCombo, routePluginName, targets)
}

// routePlugin is the routing-plugin scenario: the example plugin built to
// WebAssembly, a gateway with both combos, an open-loop and a closed-loop
// load on each combo, then BenchmarkRoute in process.
func (b *bench) routePlugin(ctx context.Context) error {
	res := &RoutePluginResult{Plugin: routePluginName, Source: routePluginSource, Header: routeHeader + ": " + routeChosen,
		PriorityProvider: routeDefault, PluginProvider: routeChosen}
	b.rep.RoutePlugin = res
	if err := b.routeLoads(ctx, res); err != nil {
		if ctx.Err() != nil {
			return err
		}
		res.Err = err.Error()
		fmt.Fprintln(os.Stderr, "bench:   routing plugin:", err)
	}
	fmt.Fprintln(os.Stderr, "bench:  route hook in process (go test -bench)...")
	res.InProcess = routeBench(ctx)
	return ctx.Err()
}

// routeLoads builds the plugin, starts the gateway and measures both
// combos under both loads into res.
func (b *bench) routeLoads(ctx context.Context, res *RoutePluginResult) error {
	wasm := filepath.Join(b.dir, "route.wasm")
	start := time.Now()
	build, err := buildRoutePlugin(ctx, wasm)
	res.Build = build
	if err != nil {
		return err
	}
	res.BuildSeconds = time.Since(start).Seconds()
	gw, err := b.startGateway(ctx, "route-gateway", func(listen string) []byte {
		cfg := proc.GatewayConfig(proc.Shape{Listen: listen, DataDir: filepath.Join(b.dir, "route-data"), MockAddr: b.mock.Addr,
			Providers: 2, AdminToken: proc.FireAdminToken})
		return append(cfg, routeConfig(wasm)...)
	})
	if err != nil {
		return err
	}
	defer gw.Stop()
	defer func() {
		if _, other, tail := gw.LogSummary(8); other > 0 {
			b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("%s wrote %d warnings or errors; the last ones:\n%s", gw.Name, other, tail))
		}
	}()

	side := func(combo string) target {
		return target{combo, load.Request{URL: "http://" + gw.Addr + "/v1/chat/completions", Body: chatBody(combo, false),
			Header: map[string]string{routeHeader: routeChosen}, Tally: []string{headerProvider}}, gw}
	}
	open := b.openDrive(targetRate)
	closed := func(ctx context.Context, c *http.Client, req load.Request, d time.Duration) (*load.Result, error) {
		return load.ClosedLoop(ctx, c, req, b.o.conns, d)
	}
	half := b.o.routeDuration / 2
	for _, l := range []struct {
		into     **RouteLoad
		load     RouteLoad
		conns    int
		openLoop bool
		drive    driveFunc
	}{
		{&res.Open, RouteLoad{RatePerS: targetRate}, b.o.openConns, true, open},
		{&res.Closed, RouteLoad{Connections: b.o.conns}, b.o.conns, false, closed},
	} {
		rl := l.load
		rl.Seconds, rl.Rounds = b.o.routeDuration.Seconds(), len(routeRounds)
		var sides [2]routeSide
		for _, i := range routeRounds {
			combo := [2]string{routePriorityCombo, routePluginCombo}[i]
			var last *load.Result
			var before RouteCounters
			var beforeErr error
			tgt := side(combo)
			m := measurement{tgt: tgt, conns: l.conns, openLoop: l.openLoop, dur: half,
				warm: func(ctx context.Context, c *http.Client) error {
					_, err := l.drive(ctx, c, tgt.req, b.o.warmup)
					return err
				},
				// The counters are read after the warm-up: they cover the
				// measured run only.
				before: func(ctx context.Context) { before, beforeErr = b.routeCounters(ctx, gw) },
				run: func(ctx context.Context, c *http.Client) (*load.Result, error) {
					r, err := l.drive(ctx, c, tgt.req, half)
					last = r
					return r, err
				}}
			run, err := b.measure(ctx, m)
			if err != nil {
				return err
			}
			if beforeErr != nil {
				return beforeErr
			}
			after, err := b.routeCounters(ctx, gw)
			if err != nil {
				return err
			}
			sides[i].add(last, run, after.minus(before))
		}
		rl.Priority, rl.PriorityServed, rl.PriorityCounters = sides[0].total(routePriorityCombo, l.openLoop)
		rl.Plugin, rl.PluginServed, rl.PluginCounters = sides[1].total(routePluginCombo, l.openLoop)
		rl.check()
		*l.into = &rl
	}
	return nil
}

// routeRounds is the order of a load's measured rounds, each half of
// -route-duration long: priority (0), plugin (1), plugin, priority, so
// that a machine growing busier or quieter during the load weighs on both
// combos alike.
var routeRounds = [...]int{0, 1, 1, 0}

// routeSide gathers one combo's rounds of one load.
type routeSide struct {
	parts
	count RouteCounters
}

// add records one round: the generator's result, measure's figures and
// the counters' growth over the round.
func (s *routeSide) add(r *load.Result, run Run, c RouteCounters) {
	s.parts.add(r, run)
	s.count = RouteCounters{Calls: s.count.Calls + c.Calls, Declined: s.count.Declined + c.Declined, Fallbacks: s.count.Fallbacks + c.Fallbacks,
		PluginCalls: s.count.PluginCalls + c.PluginCalls, PluginErrors: s.count.PluginErrors + c.PluginErrors}
}

// total returns the side's rounds as one run (latencies over every
// round's samples, CPU and calls added up), the successes by answering
// provider and the counters.
func (s *routeSide) total(name string, openLoop bool) (Run, map[string]int, RouteCounters) {
	return s.parts.total(name, openLoop, false), tallyOf(s.results, headerProvider, true), s.count
}

// buildRoutePlugin builds the example routing plugin to wasm with the go
// command on PATH (as the plugin tests do) and returns the command.
func buildRoutePlugin(ctx context.Context, wasm string) (string, error) {
	args := []string{"build", "-buildmode=c-shared", "-o", wasm, "."}
	command := "GOOS=wasip1 GOARCH=wasm go " + strings.Join(args, " ") + " (in " + routePluginSource + ")"
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if err != nil || root == "." || strings.TrimSpace(string(gomod)) == os.DevNull {
		return command, fmt.Errorf("finding the module root (run the benchmark from the repository): go env GOMOD: %v", err)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(root, routePluginSource)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return command, fmt.Errorf("building the routing plugin: %v: %s", err, lastLines(string(out), 5))
	}
	return command, nil
}

// routeCounters reads the plugin combo's strategy counters and the
// plugin's own from GET /api/plugins.
func (b *bench) routeCounters(ctx context.Context, gw *proc.Child) (RouteCounters, error) {
	var doc struct {
		Plugins []struct {
			Name   string `json:"name"`
			Calls  uint64 `json:"calls"`
			Errors uint64 `json:"errors"`
		} `json:"plugins"`
		Strategies []struct {
			Combo     string `json:"combo"`
			Calls     uint64 `json:"calls"`
			Declined  uint64 `json:"declined"`
			Fallbacks uint64 `json:"fallbacks"`
		} `json:"route_strategies"`
	}
	if err := b.getJSON(ctx, "http://"+gw.Addr+"/api/plugins", proc.FireAdminToken, &doc); err != nil {
		return RouteCounters{}, err
	}
	var c RouteCounters
	found := false
	for _, s := range doc.Strategies {
		if s.Combo == routePluginCombo {
			c.Calls, c.Declined, c.Fallbacks, found = s.Calls, s.Declined, s.Fallbacks, true
		}
	}
	for _, p := range doc.Plugins {
		if p.Name == routePluginName {
			c.PluginCalls, c.PluginErrors = p.Calls, p.Errors
		}
	}
	if !found {
		return c, fmt.Errorf("GET /api/plugins lists no route strategy for combo %s", routePluginCombo)
	}
	return c, nil
}

// minus returns the counters' growth since before.
func (c RouteCounters) minus(before RouteCounters) RouteCounters {
	return RouteCounters{Calls: c.Calls - before.Calls, Declined: c.Declined - before.Declined, Fallbacks: c.Fallbacks - before.Fallbacks,
		PluginCalls: c.PluginCalls - before.PluginCalls, PluginErrors: c.PluginErrors - before.PluginErrors}
}

// check makes sure each side was routed as it should be, and then fills
// the hook's cost; otherwise it sets Err and leaves the cost out. The
// priority combo: every success answered by routeDefault, no plugin call.
// The plugin combo: a strategy call and a plugin call for every request
// sent, no decline, every success answered by routeChosen except those of
// counted fallbacks (the hook overran its deadline or failed, and the
// request took the priority order), and at most routeMaxFallbackShare of
// the requests fell back: the figures are then those of requests the
// plugin routed, its rare failures included, as a client would see them.
func (l *RouteLoad) check() {
	var errs []error
	p, q := l.Priority, l.Plugin
	if p.OK == 0 || q.OK == 0 {
		errs = append(errs, fmt.Errorf("no success (priority %d, plugin %d)", p.OK, q.OK))
	}
	if n := l.PriorityServed[routeDefault]; n != p.OK {
		errs = append(errs, fmt.Errorf("priority: %d of %d successes answered by %s (%s)", n, p.OK, routeDefault, servedText(l.PriorityServed)))
	}
	if c := l.PriorityCounters; c.Calls != 0 || c.PluginCalls != 0 {
		errs = append(errs, fmt.Errorf("priority: %d strategy calls, %d plugin calls", c.Calls, c.PluginCalls))
	}
	c := l.PluginCounters
	if n := l.PluginServed[routeChosen]; uint64(n)+c.Fallbacks < uint64(q.OK) {
		errs = append(errs, fmt.Errorf("plugin: %d of %d successes answered by %s, the plugin's choice, with %d fallbacks (%s)",
			n, q.OK, routeChosen, c.Fallbacks, servedText(l.PluginServed)))
	}
	if c.Calls < uint64(q.Sent) || c.PluginCalls < uint64(q.Sent) || c.Declined != 0 {
		errs = append(errs, fmt.Errorf("plugin: %d requests sent, but %d strategy calls (%d declined), %d plugin calls",
			q.Sent, c.Calls, c.Declined, c.PluginCalls))
	}
	if float64(c.Fallbacks) > routeMaxFallbackShare*float64(q.Sent) {
		errs = append(errs, fmt.Errorf("plugin: %d of %d requests fell back to the priority order (%d plugin errors)", c.Fallbacks, q.Sent, c.PluginErrors))
	}
	if err := errors.Join(errs...); err != nil {
		l.Err = strings.ReplaceAll(err.Error(), "\n", "; ")
		return
	}
	l.Cost = &RouteCost{
		P50DeltaMS:      q.Latency.P50MS - p.Latency.P50MS,
		P99DeltaMS:      q.Latency.P99MS - p.Latency.P99MS,
		CPUDeltaUS:      cpuPerReq(q.ProxyCPUMS, q.Sent) - cpuPerReq(p.ProxyCPUMS, p.Sent),
		ThroughputRatio: q.RPS / p.RPS,
	}
}

// routeBench runs BenchmarkRoute (the strategy, the host and the example
// plugin end to end, in process) and reads it.
func routeBench(ctx context.Context) *RouteBench {
	args := []string{"test", "-run", "^$", "-bench", "^BenchmarkRoute$", "-benchmem", "-benchtime", "2000x", "-count", "1", routeBenchPackage}
	rb := &RouteBench{Command: "go " + strings.Join(args, " ")}
	out, err := goBench(ctx, args)
	if err != nil {
		rb.Err = err.Error()
		return rb
	}
	if rb.Cases = parseRouteBench(out); len(rb.Cases) == 0 {
		rb.Err = "no benchmark lines in the output: " + lastLines(out, 5)
	}
	return rb
}

// parseRouteBench reads the `go test -bench` lines of BenchmarkRoute:
// "BenchmarkRoute/targets=N-P  COUNT  X ns/op  Y median-ns  Z p10-ns  W p99-ns  B B/op  A allocs/op".
func parseRouteBench(text string) []RouteBenchCase {
	var out []RouteBenchCase
	for _, l := range benchLines(text, "BenchmarkRoute") {
		v := l.values
		out = append(out, RouteBenchCase{Name: l.name, NsPerOp: v["ns/op"], MedianNs: v["median-ns"], P10Ns: v["p10-ns"],
			P99Ns: v["p99-ns"], BytesPerOp: v["B/op"], AllocsPerOp: v["allocs/op"]})
	}
	return out
}
