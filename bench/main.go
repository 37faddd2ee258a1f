// Command bench is Breakwater's load harness. It starts the mock upstream,
// a bare fasthttp reverse proxy of its own (this binary, run as `bench
// bareproxy`: the floor of one extra hop) and the gateway as child
// processes on loopback, then measures every load three ways in one run —
// straight to the mock, through the bare proxy, through the gateway —
// and judges the gateway against the bare proxy: fixed-rate (open-loop)
// latency, closed-loop maximum throughput, streaming time to first byte,
// CPU per request and memory; then the cost as the work grows (providers,
// connections and combos in the configuration, thousands of slow streams,
// request bodies up to 1 MB, the failure path with 100 operator rules);
// then, with gateways in front of a hard-down provider and a flaky one,
// the same comparison under fire, the time a recovered provider takes to
// get traffic again, and a rate-limited provider whose keys each have a
// token bucket; and with three gateways sharing one redis-server, how fast
// a change reaches the others and what Redis mode costs a success against
// Badger mode; and what a routing plugin's route hook costs a request
// against the priority strategy, through a gateway and in process. With
// -profile the gateways expose pprof on loopback and
// every gateway run leaves a CPU and an allocation profile. It writes
// OUT/latest.md and OUT/latest.json and prints the markdown.
//
//	go run ./bench -bin ./bin/breakwater -out bench/results [-quick] [-profile]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the command-line settings.
type options struct {
	bin, out          string
	quick, strict     bool
	keep              bool
	rates             []float64
	openDuration      time.Duration
	warmup            time.Duration
	conns             int
	openConns         int
	throughputDur     time.Duration
	streamWorkers     int
	streamDuration    time.Duration
	streamChunks      int
	streamInterval    time.Duration
	timeout           time.Duration
	maxInFlight       int
	settle            time.Duration
	skipOpen, skipMax bool
	skipStream        bool
	fireRate          float64
	fireDuration      time.Duration
	fireRetryHeader   string
	breakerReset      time.Duration
	firePoll          time.Duration
	recoveryMax       time.Duration
	skipFire          bool
	skipRecovery      bool
	skipRateLimited   bool
	rlKeys            int
	rlRate            float64
	rlBurst           int
	rlLoad            float64
	skipCurves        bool
	curveRate         float64
	curveDuration     time.Duration
	slice             time.Duration
	curveProviders    []int
	curveConnections  []int
	curveCombos       []int
	slowStreams       []int
	slowRamp          time.Duration
	slowHold          time.Duration
	bodySizes         []int
	bodyRate          float64
	skipFailurePath   bool
	profile           bool
	skipCluster       bool
	clusterChanges    int
	clusterDuration   time.Duration
	skipRoutePlugin   bool
	routeDuration     time.Duration
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == bareProxyCommand {
		os.Exit(runBareProxy(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	opts, err := parseFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rep, runErr := benchmark(ctx, opts)
	if rep != nil {
		if err := write(rep, opts.out); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		fmt.Print(rep.Markdown())
	}
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "bench:", runErr)
		return 1
	}
	if opts.strict && (failed(rep.Targets) || failed(rep.Budgets) || failed(rep.ClusterBudgets) || rep.RoutePlugin.failed()) {
		fmt.Fprintln(os.Stderr, "bench: a target or budget failed, or the routing-plugin scenario did (-strict)")
		return 1
	}
	return 0
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&o.bin, "bin", "./bin/breakwater", "breakwater binary (runs `mock` and `serve`)")
	fs.StringVar(&o.out, "out", "bench/results", "directory for latest.md and latest.json")
	fs.BoolVar(&o.quick, "quick", false, "smoke run of about 45 s (short durations unless set explicitly)")
	fs.BoolVar(&o.strict, "strict", false, "exit 1 when a budget fails")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (configuration, logs, Badger data)")
	rates := fs.String("rates", "500,2000", "comma-separated open-loop rates, req/s")
	fs.DurationVar(&o.openDuration, "duration", 10*time.Second, "measured time of each open-loop rate, per target")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured warm-up before every measured run")
	fs.IntVar(&o.conns, "conns", budgetConns, "closed-loop connections for max throughput")
	fs.IntVar(&o.openConns, "open-conns", 256, "open loop: most connections per target")
	fs.DurationVar(&o.throughputDur, "throughput-duration", 10*time.Second, "measured time of the max-throughput run")
	fs.IntVar(&o.streamWorkers, "stream-workers", 8, "concurrent streaming requests")
	fs.DurationVar(&o.streamDuration, "stream-duration", 8*time.Second, "measured time of the streaming run")
	fs.IntVar(&o.streamChunks, "stream-chunks", 8, "content chunks per mock stream")
	fs.DurationVar(&o.streamInterval, "stream-interval", 5*time.Millisecond, "pause between mock stream chunks")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-request timeout")
	fs.IntVar(&o.maxInFlight, "max-inflight", 10000, "open loop: drop arrivals while this many requests are outstanding")
	fs.DurationVar(&o.settle, "settle", 300*time.Millisecond, "pause between runs")
	fs.BoolVar(&o.skipOpen, "skip-open", false, "skip the fixed-rate scenario")
	fs.BoolVar(&o.skipMax, "skip-throughput", false, "skip the max-throughput scenario")
	fs.BoolVar(&o.skipStream, "skip-stream", false, "skip the streaming scenario")
	fs.Float64Var(&o.fireRate, "fire-rate", 10, "under fire: open-loop rate, req/s (half of them streams); keep it below the capacity bound the report prints")
	fs.DurationVar(&o.fireDuration, "fire-duration", 20*time.Second, "under fire: measured time of each target")
	fs.StringVar(&o.fireRetryHeader, "fire-retry-header", "retry-after-ms: 200", "under fire: the header of the flaky provider's 429s (`Name: value`)")
	fs.DurationVar(&o.breakerReset, "breaker-reset", 5*time.Second, "under fire: the gateway's apikey breaker reset timeout (default of the gateway: 30s)")
	fs.DurationVar(&o.firePoll, "fire-poll", 50*time.Millisecond, "under fire: how often the breakers and the mock's counters are read")
	fs.DurationVar(&o.recoveryMax, "recovery-max", 30*time.Second, "recovery: longest load after the down provider comes back")
	fs.BoolVar(&o.skipFire, "skip-fire", false, "skip the under-fire and recovery scenarios")
	fs.BoolVar(&o.skipRecovery, "skip-recovery", false, "skip the recovery scenario")
	fs.BoolVar(&o.skipRateLimited, "skip-rate-limited", false, "skip the rate-limited scenario")
	fs.IntVar(&o.rlKeys, "rl-keys", 2, "rate-limited: API keys of the limited provider, each with its own token bucket")
	fs.Float64Var(&o.rlRate, "rl-rate", 5, "rate-limited: each key's token bucket refill, requests per second")
	fs.IntVar(&o.rlBurst, "rl-burst", 5, "rate-limited: each key's token bucket size")
	fs.Float64Var(&o.rlLoad, "rl-load", 0.7, "rate-limited: offered load as a share of the keys' total capacity")
	fs.BoolVar(&o.skipCurves, "skip-curves", false, "skip the cost-as-the-work-grows curves")
	fs.Float64Var(&o.curveRate, "curve-rate", targetRate, "curves: open-loop rate of the configuration-size rows, req/s")
	fs.DurationVar(&o.curveDuration, "curve-duration", 10*time.Second, "curves: measured time of each configuration-size and body-size row, per target")
	fs.DurationVar(&o.slice, "slice", 250*time.Millisecond, "fixed rate and configuration-size curves: length of one target's turn; the targets take turns in slices until each had -warmup, then its measured time")
	providers := fs.String("curve-providers", "1,10,100,1000", "curves: providers in the configuration, one row each (\"\" skips)")
	connections := fs.String("curve-connections", "1,10,100,1000", "curves: connections of the routed provider, one row each (\"\" skips)")
	combos := fs.String("curve-combos", "1,10,50,200", "curves: combos in the configuration, one row each (\"\" skips)")
	slow := fs.String("slow-streams", "10,100,1000,10000", "curves: concurrent slow streams (one chunk a second), one row each (\"\" skips)")
	fs.DurationVar(&o.slowRamp, "slow-ramp", 5*time.Second, "curves: time over which the slow streams are opened")
	fs.DurationVar(&o.slowHold, "slow-hold", 4*time.Second, "curves: time every slow stream stays open after the last one opened")
	bodies := fs.String("body-sizes", "1024,10240,102400,1048576", "curves: request body sizes in bytes, one row each (\"\" skips)")
	fs.Float64Var(&o.bodyRate, "body-rate", 10, "curves: open-loop rate of the body-size rows, req/s")
	fs.BoolVar(&o.skipFailurePath, "skip-failure-path", false, "skip the failure-path benchmark (go test -bench in bench/internal/failpath)")
	fs.BoolVar(&o.profile, "profile", false, "run the gateways with --pprof and write a CPU and an allocation profile of every measured gateway run to OUT/profiles")
	fs.BoolVar(&o.skipCluster, "skip-cluster", false, "skip the several-instances scenario (three gateways on one redis-server)")
	fs.IntVar(&o.clusterChanges, "cluster-changes", 200, "several instances: settings changes whose propagation is timed")
	fs.DurationVar(&o.clusterDuration, "cluster-duration", 10*time.Second, "several instances: measured time of the Badger and the Redis closed-loop runs")
	fs.BoolVar(&o.skipRoutePlugin, "skip-route-plugin", false, "skip the routing-plugin scenario (the route hook's cost per request, through a gateway and in process)")
	fs.DurationVar(&o.routeDuration, "route-duration", 10*time.Second, "routing plugin: measured time of each combo's open-loop and closed-loop run")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.quick {
		quick := map[string]func(){
			"duration":            func() { o.openDuration = 3 * time.Second },
			"warmup":              func() { o.warmup = 500 * time.Millisecond },
			"throughput-duration": func() { o.throughputDur = 3 * time.Second },
			"stream-duration":     func() { o.streamDuration = 2 * time.Second },
			"fire-duration":       func() { o.fireDuration = 3 * time.Second },
			"breaker-reset":       func() { o.breakerReset = 2 * time.Second },
			"recovery-max":        func() { o.recoveryMax = 5 * time.Second },
			"curve-duration":      func() { o.curveDuration = 1500 * time.Millisecond },
			"curve-providers":     func() { *providers = "1,1000" },
			"curve-connections":   func() { *connections = "1,1000" },
			"curve-combos":        func() { *combos = "1,200" },
			"slow-streams":        func() { *slow = "10,1000" },
			"slow-ramp":           func() { o.slowRamp = time.Second },
			"slow-hold":           func() { o.slowHold = 2 * time.Second },
			"body-sizes":          func() { *bodies = "1024,1048576" },
			"cluster-changes":     func() { o.clusterChanges = 40 },
			"cluster-duration":    func() { o.clusterDuration = 3 * time.Second },
			"route-duration":      func() { o.routeDuration = 3 * time.Second },
		}
		for name, apply := range quick {
			if !set[name] {
				apply()
			}
		}
	}
	for _, s := range strings.Split(*rates, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r <= 0 {
			return o, fmt.Errorf("bad rate %q in -rates", s)
		}
		o.rates = append(o.rates, r)
	}
	for _, l := range []struct {
		name string
		text string
		into *[]int
	}{{"-curve-providers", *providers, &o.curveProviders}, {"-curve-connections", *connections, &o.curveConnections},
		{"-curve-combos", *combos, &o.curveCombos}, {"-slow-streams", *slow, &o.slowStreams}, {"-body-sizes", *bodies, &o.bodySizes}} {
		v, err := intList(l.text)
		if err != nil {
			return o, fmt.Errorf("%s: %w", l.name, err)
		}
		*l.into = v
	}
	switch {
	case o.rlKeys < 1, o.rlBurst < 1, o.rlRate <= 0, o.rlLoad <= 0, o.curveRate <= 0, o.bodyRate <= 0, o.curveDuration <= 0, o.slice <= 0, o.slowRamp <= 0, o.slowHold <= 0:
		return o, errors.New("-rl-keys, -rl-burst, -rl-rate, -rl-load, -curve-rate, -body-rate, -curve-duration, -slice, -slow-ramp and -slow-hold must be > 0")
	case o.conns < 1, o.openConns < 1, o.streamWorkers < 1, o.streamChunks < 1, o.maxInFlight < 1:
		return o, errors.New("-conns, -open-conns, -stream-workers, -stream-chunks and -max-inflight must be ≥ 1")
	case o.openDuration <= 0, o.throughputDur <= 0, o.streamDuration <= 0, o.timeout <= 0:
		return o, errors.New("durations and -timeout must be > 0")
	case o.warmup < 0, o.streamInterval < 0, o.settle < 0:
		return o, errors.New("-warmup, -stream-interval and -settle must be ≥ 0")
	case o.fireRate <= 0, o.fireDuration <= 0, o.firePoll <= 0, o.recoveryMax <= 0:
		return o, errors.New("-fire-rate, -fire-duration, -fire-poll and -recovery-max must be > 0")
	case o.clusterChanges < 1 || o.clusterDuration <= 0:
		return o, errors.New("-cluster-changes must be ≥ 1 and -cluster-duration > 0")
	case o.routeDuration <= 0:
		return o, errors.New("-route-duration must be > 0")
	case o.breakerReset < time.Second || o.breakerReset > 24*time.Hour:
		return o, errors.New("-breaker-reset must be within 1s..24h (the gateway clamps it so)")
	}
	if name, value, ok := strings.Cut(o.fireRetryHeader, ":"); !ok || strings.TrimSpace(name) == "" || strings.TrimSpace(value) == "" ||
		strings.ContainsAny(name, " \t") {
		return o, fmt.Errorf("-fire-retry-header %q: want `Name: value`", o.fireRetryHeader)
	}
	return o, nil
}

// intList parses a comma-separated list of positive integers, in
// increasing order ("" is an empty list).
func intList(text string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(text, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("%d is not larger than the value before it", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// write stores the report as OUT/latest.md and OUT/latest.json.
func write(rep *Report, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", out, err)
	}
	data, err := rep.JSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "latest.json"), data, 0o644); err != nil {
		return fmt.Errorf("writing latest.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "latest.md"), []byte(rep.Markdown()), 0o644); err != nil {
		return fmt.Errorf("writing latest.md: %w", err)
	}
	return nil
}

// newReport fills the header of a report.
func newReport(o options) *Report {
	return &Report{
		Date:      time.Now().UTC().Format(time.RFC3339),
		Commit:    gitCommit(),
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
		CPUs:      runtime.NumCPU(),
		Quick:     o.quick,
		Settings: Settings{
			Rates:                 o.rates,
			OpenLoopSeconds:       o.openDuration.Seconds(),
			WarmupSeconds:         o.warmup.Seconds(),
			Connections:           o.conns,
			ThroughputSeconds:     o.throughputDur.Seconds(),
			StreamWorkers:         o.streamWorkers,
			StreamSeconds:         o.streamDuration.Seconds(),
			StreamChunks:          o.streamChunks,
			StreamChunkIntervalMS: int(o.streamInterval / time.Millisecond),
			OpenLoopConnections:   o.openConns,
			TimeoutSeconds:        o.timeout.Seconds(),
			MaxInFlight:           o.maxInFlight,
			FireRatePerS:          o.fireRate,
			FireSeconds:           o.fireDuration.Seconds(),
			FireRetryHeader:       o.fireRetryHeader,
			BreakerResetMS:        o.breakerReset.Milliseconds(),
			FirePollMS:            float64(o.firePoll) / float64(time.Millisecond),
			RecoveryMaxSeconds:    o.recoveryMax.Seconds(),
			ClusterChanges:        o.clusterChanges,
			ClusterSeconds:        o.clusterDuration.Seconds(),
			RouteSeconds:          o.routeDuration.Seconds(),
			CurveRatePerS:         o.curveRate,
			CurveSeconds:          o.curveDuration.Seconds(),
			SliceSeconds:          o.slice.Seconds(),
			Profile:               o.profile,
		},
	}
}

// loadAvg returns the 1-minute load average from /proc/loadavg, or "?".
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// gitCommit returns the short HEAD commit, with "-dirty" when the tree has
// changes, or "unknown".
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown (no git commit)"
	}
	commit := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		commit += "-dirty"
	}
	return commit
}
