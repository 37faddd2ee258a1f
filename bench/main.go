// Command bench is Breakwater's load harness. It starts the mock upstream
// and the gateway as child processes on loopback, then measures — in one
// run, side by side — a direct call to the mock against the same call
// through the gateway: fixed-rate (open-loop) latency, closed-loop maximum
// throughput, streaming time to first byte, and the gateway's memory. Then,
// with a second gateway in front of a hard-down provider and a flaky one,
// the same comparison under fire (client success, upstream attempts per
// success, added latency, calls to a provider whose breaker is open) and
// the time a recovered provider takes to get traffic again. It writes
// OUT/latest.md and OUT/latest.json and prints the markdown.
//
//	go run ./bench -bin ./bin/breakwater -out bench/results [-quick]
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
}

func main() { os.Exit(run(os.Args[1:])) }

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
	if opts.strict && (failed(rep.Budgets) || failed(rep.ProofBudgets)) {
		fmt.Fprintln(os.Stderr, "bench: a budget failed (-strict)")
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
	fs.DurationVar(&o.openDuration, "duration", 10*time.Second, "measured time of each open-loop rate")
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
	switch {
	case o.conns < 1, o.openConns < 1, o.streamWorkers < 1, o.streamChunks < 1, o.maxInFlight < 1:
		return o, errors.New("-conns, -open-conns, -stream-workers, -stream-chunks and -max-inflight must be ≥ 1")
	case o.openDuration <= 0, o.throughputDur <= 0, o.streamDuration <= 0, o.timeout <= 0:
		return o, errors.New("durations and -timeout must be > 0")
	case o.warmup < 0, o.streamInterval < 0, o.settle < 0:
		return o, errors.New("-warmup, -stream-interval and -settle must be ≥ 0")
	case o.fireRate <= 0, o.fireDuration <= 0, o.firePoll <= 0, o.recoveryMax <= 0:
		return o, errors.New("-fire-rate, -fire-duration, -fire-poll and -recovery-max must be > 0")
	case o.breakerReset < time.Second || o.breakerReset > 24*time.Hour:
		return o, errors.New("-breaker-reset must be within 1s..24h (the gateway clamps it so)")
	}
	if name, value, ok := strings.Cut(o.fireRetryHeader, ":"); !ok || strings.TrimSpace(name) == "" || strings.TrimSpace(value) == "" ||
		strings.ContainsAny(name, " \t") {
		return o, fmt.Errorf("-fire-retry-header %q: want `Name: value`", o.fireRetryHeader)
	}
	return o, nil
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
