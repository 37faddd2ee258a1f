package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/breakwater-dev/breakwater/bench/internal/load"
	"github.com/breakwater-dev/breakwater/bench/internal/proc"
)

// Request bodies: the same small chat completion for both targets, only
// the model differs (the gateway addresses provider/model).
const (
	directModel  = "bench-model"
	gatewayModel = "bench/bench-model"
	bodyFormat   = `{"model":%q,"messages":[{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":16%s}`
)

func chatBody(model string, stream bool) []byte {
	extra := ""
	if stream {
		extra = `,"stream":true`
	}
	return fmt.Appendf(nil, bodyFormat, model, extra)
}

// bench holds the running servers and the report being filled. It is used
// by one goroutine.
type bench struct {
	o         options
	bin, dir  string
	self      string // this binary, which also runs the bare proxy
	mock, gw  *proc.Child
	bare      *proc.Child
	ctrl      *http.Client
	rep       *Report
	directURL string
	bareURL   string
	gwURL     string
	// profiler takes the gateways' profiles when -profile is set.
	profiler *profiler
}

// target is one side of a comparison: its name ("direct", "bare",
// "gateway"), the request, and the process in the middle (nil direct).
type target struct {
	name string
	req  load.Request
	mid  *proc.Child
}

// trio returns the three targets of one load: the same body straight to
// the mock, through the bare proxy and through gw (with its model).
func (b *bench) trio(gw *proc.Child, direct, viaGateway []byte, stream bool) [3]target {
	return [3]target{
		{"direct", load.Request{URL: b.directURL, Body: direct, Stream: stream}, nil},
		{"bare", load.Request{URL: b.bareURL, Body: direct, Stream: stream}, b.bare},
		{"gateway", load.Request{URL: "http://" + gw.Addr + "/v1/chat/completions", Body: viaGateway, Stream: stream}, gw},
	}
}

// targets returns the three targets of the main gateway's chat request.
func (b *bench) targets(stream bool) [3]target {
	return b.trio(b.gw, chatBody(directModel, stream), chatBody(gatewayModel, stream), stream)
}

// benchmark starts the servers, runs every scenario and returns the report
// (partial when a scenario failed, together with the error).
func benchmark(ctx context.Context, o options) (*Report, error) {
	rep := newReport(o)
	startLoad := loadAvg()
	defer func() {
		endLoad := loadAvg()
		rep.LoadAvg = startLoad + " → " + endLoad
		// Only the start counts: by the end the benchmark itself keeps
		// the CPUs busy.
		if busy(startLoad, rep.CPUs) {
			rep.Notes = append(rep.Notes, fmt.Sprintf("the machine was already busy with other work when the run started "+
				"(1-min load average %s on %d CPUs): latencies, p99 and max above all, are noisier than on an idle machine",
				startLoad, rep.CPUs))
		}
	}()
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return nil, fmt.Errorf("resolving -bin: %w", err)
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("gateway binary %s: %w (run `make build` first)", o.bin, err)
	}
	dir, err := os.MkdirTemp("", "breakwater-bench-")
	if err != nil {
		return nil, fmt.Errorf("creating a temporary directory: %w", err)
	}
	if o.keep {
		rep.Notes = append(rep.Notes, "temporary directory kept: "+dir)
	} else {
		defer os.RemoveAll(dir)
	}

	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the benchmark's own binary (it runs the bare proxy): %w", err)
	}
	if note := raiseFileLimit(); note != "" {
		rep.Notes = append(rep.Notes, note)
	}

	mockPort, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	mock, err := proc.StartMock(ctx, bin, dir, mockPort)
	if err != nil {
		return nil, err
	}
	defer mock.Stop()
	barePort, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	var prof *profiler
	var bareExtra []string
	if o.profile {
		// The bare proxy is profiled too, in the same windows as the
		// gateway, so the two profiles of a run compare.
		prof = newProfiler(filepath.Join(o.out, "profiles"))
		pport, err := proc.FreePort()
		if err != nil {
			return nil, err
		}
		bareExtra = []string{"-pprof", fmt.Sprintf("127.0.0.1:%d", pport)}
		prof.addr[proc.BareProxyName] = bareExtra[1]
	}
	bare, err := proc.StartBareProxy(ctx, self, dir, barePort, mock.Addr, bareExtra...)
	if err != nil {
		return nil, err
	}
	defer bare.Stop()

	b := &bench{
		o: o, bin: bin, dir: dir, self: self, mock: mock, bare: bare, rep: rep,
		ctrl:      &http.Client{Timeout: 5 * time.Second},
		directURL: "http://" + mock.Addr + "/v1/chat/completions",
		bareURL:   "http://" + bare.Addr + "/v1/chat/completions",
		profiler:  prof,
	}
	rep.Gateway = GatewaySetup{ConfigChanges: proc.GatewayConfigChanges(), Pprof: o.profile}
	gw, err := b.startGateway(ctx, "gateway", func(listen string) []byte {
		return proc.GatewayConfig(proc.Shape{Listen: listen, DataDir: filepath.Join(dir, "data"), MockAddr: mock.Addr, Providers: 1})
	})
	if err != nil {
		return nil, err
	}
	defer gw.Stop()
	b.gw, b.gwURL = gw, "http://"+gw.Addr+"/v1/chat/completions"

	mem := &MemoryResult{}
	for _, m := range []struct {
		c   *proc.Child
		rss *int64
	}{{gw, &mem.GatewayIdleRSS}, {bare, &mem.BareIdleRSS}, {mock, &mem.MockIdleRSS}} {
		if v, err := proc.ReadMemory(m.c.PID()); err == nil {
			*m.rss = v.RSS
		}
	}
	if err := b.setStreamScript(ctx); err != nil {
		return rep, err
	}
	b.preflight(ctx)

	runErr := b.scenarios(ctx, mem)

	if mem.GatewayPeak > 0 {
		rep.Memory = mem
	}
	access, other, tail := gw.LogSummary(12)
	rep.Gateway.AccessLines, rep.Gateway.OtherLines = access, other
	if other > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the gateway wrote %d warning or error lines (and %d access lines); the last ones:\n%s", other, access, tail))
	}
	for _, c := range []*proc.Child{gw, bare} {
		if err := c.Stop(); err != nil {
			rep.Notes = append(rep.Notes, "stopping the "+c.Name+": "+err.Error())
		} else if _, werr := c.Exited(); werr != nil && !isSignalExit(werr) {
			rep.Notes = append(rep.Notes, "the "+c.Name+" exited with "+werr.Error()+" on SIGTERM")
		}
	}
	if err := mock.Stop(); err != nil {
		rep.Notes = append(rep.Notes, "stopping the mock: "+err.Error())
	}
	if b.profiler != nil {
		rep.Profiles = b.profiler.summarise(ctx)
	}
	rep.Targets = evaluateTargets(rep)
	rep.Budgets = evaluateBudgets(rep)
	if rep.Cluster != nil {
		rep.ClusterBudgets = clusterBudgets(rep)
	}
	return rep, runErr
}

// startGateway starts a gateway named name with the configuration cfg
// returns for its listen address, with the extra arguments of every
// gateway (--pprof when profiling).
func (b *bench) startGateway(ctx context.Context, name string, cfg func(listen string) []byte) (*proc.Child, error) {
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	var extra []string
	if b.profiler != nil {
		pport, err := proc.FreePort()
		if err != nil {
			return nil, err
		}
		extra = append(extra, "--pprof", fmt.Sprintf("127.0.0.1:%d", pport))
		defer func() { b.profiler.addr[name] = fmt.Sprintf("127.0.0.1:%d", pport) }()
	}
	return proc.StartGatewayWith(ctx, b.bin, b.dir, name, cfg(fmt.Sprintf("127.0.0.1:%d", port)), extra...)
}

// busy reports whether a load average (as text) exceeds the CPU count.
func busy(load string, cpus int) bool {
	v, err := strconv.ParseFloat(load, 64)
	return err == nil && v > float64(cpus)
}

// isSignalExit reports whether err is "killed by a signal" (fine for a
// child we stopped).
func isSignalExit(err error) bool {
	return strings.HasPrefix(err.Error(), "signal:")
}

// scenarios runs the selected scenarios in order, stopping at the first
// error or when the gateway or the bare proxy dies.
func (b *bench) scenarios(ctx context.Context, mem *MemoryResult) error {
	steps := []struct {
		name string
		skip bool
		run  func(context.Context) error
	}{
		{"fixed rate", b.o.skipOpen, b.openLoop},
		{"max throughput", b.o.skipMax, func(ctx context.Context) error { return b.throughput(ctx, mem) }},
		{"streaming", b.o.skipStream, b.streaming},
		{"curves", b.o.skipCurves, b.curves},
		{"under fire", b.o.skipFire, b.underFire},
		{"rate-limited", b.o.skipRateLimited, b.rateLimited},
		{"several instances", b.o.skipCluster, b.cluster},
		{"routing plugin", b.o.skipRoutePlugin, b.routePlugin},
	}
	for i, s := range steps {
		if s.skip {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %s...\n", s.name)
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("%s scenario: %w", s.name, err)
		}
		if i < 3 {
			// The memory section is about scenarios 1–3: the peaks
			// (VmHWM) are read before the curves load the mock and the
			// bare proxy with large bodies and thousands of streams.
			b.readPeaks(mem)
		}
		for _, c := range []*proc.Child{b.gw, b.bare} {
			if exited, err := c.Exited(); exited {
				msg := fmt.Sprintf("the %s exited during the %s scenario (%v); its log:\n%s", c.Name, s.name, err, c.LogTail(30))
				b.rep.Notes = append(b.rep.Notes, msg)
				return errors.New("the " + c.Name + " exited during the " + s.name + " scenario")
			}
		}
	}
	return nil
}

// readPeaks reads the VmHWM of the main gateway, the bare proxy and the
// mock into mem.
func (b *bench) readPeaks(mem *MemoryResult) {
	for _, p := range []struct {
		c    *proc.Child
		into *int64
	}{{b.gw, &mem.GatewayPeak}, {b.bare, &mem.BarePeak}, {b.mock, &mem.MockPeak}} {
		if m, err := proc.ReadMemory(p.c.PID()); err == nil {
			*p.into = m.Peak
		}
	}
}

// measurement is what measure needs to know about one run.
type measurement struct {
	tgt      target
	conns    int
	warm     func(context.Context, *http.Client) error
	run      func(context.Context, *http.Client) (*load.Result, error)
	openLoop bool
	// profile, when not empty, names the gateway run's profiles; dur is
	// how long the run lasts.
	profile string
	dur     time.Duration
	// timeout, when set, replaces -timeout as the per-request deadline.
	timeout time.Duration
	// before runs just before the measured run; after once the run is
	// over and the client's connections are closed (both optional).
	before, after func(context.Context)
	// client, when set, is the client to send with; measure then leaves
	// its connections open (an interleaved load keeps one client per
	// target over all its slices). quiet leaves out the progress line.
	client *http.Client
	quiet  bool
	// pause, when set, replaces -settle as the pause after the run.
	pause time.Duration
}

// measure runs one measurement against one target: warm-up, mock counter
// reset, the run, then the CPU and call counts around it.
func (b *bench) measure(ctx context.Context, m measurement) (Run, error) {
	timeout := b.o.timeout
	if m.timeout > 0 {
		timeout = m.timeout
	}
	client := m.client
	if client == nil {
		client = load.NewClient(m.conns, timeout)
		defer client.CloseIdleConnections()
	}
	if m.warm != nil {
		if err := m.warm(ctx, client); err != nil {
			return Run{}, fmt.Errorf("warm-up of %s: %w", m.tgt.name, err)
		}
	}
	if err := b.mockPost(ctx, "/_mock/reset", nil); err != nil {
		return Run{}, err
	}
	mock0, _ := proc.ReadCPU(b.mock.PID())
	var mid0 time.Duration
	var sampler *proc.Sampler
	if m.tgt.mid != nil {
		mid0, _ = proc.ReadCPU(m.tgt.mid.PID())
		sampler = proc.NewSampler(m.tgt.mid.PID(), 100*time.Millisecond)
	}
	var prof *capture
	if b.profiler != nil && m.profile != "" && m.tgt.name == "gateway" {
		prof = b.profiler.start(ctx, m.tgt.mid.Name, m.profile, m.dur)
	}
	if m.before != nil {
		m.before(ctx)
	}
	self0 := selfCPU()
	start := time.Now()
	res, err := m.run(ctx, client)
	wall := time.Since(start)
	self1 := selfCPU()
	if m.client == nil {
		client.CloseIdleConnections()
	}
	if m.after != nil && err == nil {
		m.after(ctx)
	}
	var maxRSS int64
	if sampler != nil {
		maxRSS, _ = sampler.Stop()
	}
	if prof != nil {
		prof.wait()
	}
	if err != nil {
		return Run{}, err
	}
	mock1, _ := proc.ReadCPU(b.mock.PID())

	run := runOf(m.tgt.name, res, m.openLoop, m.tgt.req.Stream)
	run.MockCPUMS = ms(mock1 - mock0)
	if m.tgt.mid != nil {
		mid1, _ := proc.ReadCPU(m.tgt.mid.PID())
		run.ProxyCPUMS = ms(mid1 - mid0)
	}
	run.GeneratorCPUPct = 100 * (self1 - self0).Seconds() / wall.Seconds()
	run.ProxyMaxRSS = maxRSS
	if total, err := b.mockCalls(ctx); err == nil {
		run.UpstreamCalls = total
	}
	if m.tgt.mid == b.gw {
		b.rep.Gateway.Requests += run.Sent
	}
	if !m.quiet {
		progress(m.tgt.name, run)
	}
	pause := b.o.settle
	if m.pause > 0 {
		pause = m.pause
	}
	if err := sleepCtx(ctx, pause); err != nil {
		return Run{}, err
	}
	return run, nil
}

// progress prints one run's figures to stderr.
func progress(name string, run Run) {
	fmt.Fprintf(os.Stderr, "bench:   %-7s %d/%d ok, %.0f req/s, p50 %.3f ms, p99 %.3f ms\n",
		name, run.OK, run.Scheduled, run.RPS, run.Latency.P50MS, run.Latency.P99MS)
}

// driveFunc sends one load to req for d.
type driveFunc func(ctx context.Context, c *http.Client, req load.Request, d time.Duration) (*load.Result, error)

// measureTrio measures the same load on the three targets, in order:
// drive for warm first (skipped when warm is 0), then for dur.
func (b *bench) measureTrio(ctx context.Context, tgts [3]target, m measurement, drive driveFunc, warm, dur time.Duration) (Trio, error) {
	var runs [3]Run
	m.dur = dur
	for i, tgt := range tgts {
		m.tgt, m.warm = tgt, nil
		if warm > 0 {
			// The main gateway's warm-up requests count as sent to it too,
			// for the access log check.
			m.warm = func(ctx context.Context, c *http.Client) error {
				res, err := drive(ctx, c, tgt.req, warm)
				if err == nil && tgt.mid == b.gw {
					b.rep.Gateway.Requests += res.Sent
				}
				return err
			}
		}
		m.run = func(ctx context.Context, c *http.Client) (*load.Result, error) {
			return drive(ctx, c, tgt.req, dur)
		}
		var err error
		if runs[i], err = b.measure(ctx, m); err != nil {
			return Trio{}, err
		}
	}
	return Trio{Direct: runs[0], Bare: runs[1], Gateway: runs[2]}, nil
}

// openLoop is scenario 1: every rate, on the three targets interleaved in
// slices of -slice (direct → bare → gateway, round after round) until each
// had -warmup, then -duration measured.
func (b *bench) openLoop(ctx context.Context) error {
	for _, rate := range b.o.rates {
		tgts := b.targets(false)
		runs, err := b.interleave(ctx, tgts[:], interleaved{conns: b.o.openConns, openLoop: true, drive: b.openDrive(rate),
			warm: b.o.warmup, total: b.o.openDuration, slice: b.o.slice, profiles: []string{"", fmt.Sprintf("open-loop-%.0f-bare", rate), fmt.Sprintf("open-loop-%.0f", rate)}})
		if err != nil {
			return fmt.Errorf("%.0f req/s: %w", rate, err)
		}
		b.rep.OpenLoop = append(b.rep.OpenLoop, OpenLoopResult{RatePerS: rate, Trio: Trio{Direct: runs[0], Bare: runs[1], Gateway: runs[2]},
			WarmRounds: roundsOf(b.o.warmup, b.o.slice), Rounds: max(1, roundsOf(b.o.openDuration, b.o.slice))})
	}
	return nil
}

// throughput is scenario 2: closed loop at -conns connections, the three
// targets interleaved in slices of at least throughputSlice, as the
// fixed-rate and streaming tables are. Measured one after the other, the
// bare proxy's unchanged code read 12.5k to 21.5k req/s across four full
// runs: the machine's drift between two 10 s runs outweighed the
// difference measured.
func (b *bench) throughput(ctx context.Context, mem *MemoryResult) error {
	drive := func(ctx context.Context, c *http.Client, req load.Request, d time.Duration) (*load.Result, error) {
		return load.ClosedLoop(ctx, c, req, b.o.conns, d)
	}
	slice := max(b.o.slice, throughputSlice)
	tgts := b.targets(false)
	runs, err := b.interleave(ctx, tgts[:], interleaved{conns: b.o.conns, drive: drive,
		warm: b.o.warmup, total: b.o.throughputDur, slice: slice, profiles: []string{"", "throughput-bare", "throughput"}})
	if err != nil {
		return err
	}
	mem.GatewayMaxRSSRun = runs[2].ProxyMaxRSS
	b.rep.Throughput = &ThroughputResult{Connections: b.o.conns, Trio: Trio{Direct: runs[0], Bare: runs[1], Gateway: runs[2]},
		WarmRounds: roundsOf(b.o.warmup, slice), Rounds: max(1, roundsOf(b.o.throughputDur, slice))}
	return nil
}

// throughputSlice is the shortest slice of the interleaved closed loop:
// long against the few ms its connections take to fill the pipe again.
const throughputSlice = time.Second

// streaming is scenario 3: -stream-workers concurrent streams.
func (b *bench) streaming(ctx context.Context) error {
	// The workers start one after the other over the length of one
	// stream: streams of one length that all started at once would stay
	// in step, and every request would arrive in a burst of
	// -stream-workers at once (8 requests on 2 cores: the time to first
	// byte of the last one in the burst is mostly the CPU time of the
	// seven before it, in every column).
	spread := time.Duration(b.o.streamChunks) * b.o.streamInterval
	drive := func(ctx context.Context, c *http.Client, req load.Request, d time.Duration) (*load.Result, error) {
		req.Spread = spread
		return load.Streams(ctx, c, req, b.o.streamWorkers, d)
	}
	// Interleaved as the fixed-rate tables are, in slices long enough for
	// a worker's streams (a few tens of ms each) to follow one another.
	warm, slice := min(b.o.warmup, time.Second), max(b.o.slice, streamSlice)
	tgts := b.targets(true)
	runs, err := b.interleave(ctx, tgts[:], interleaved{conns: b.o.streamWorkers, drive: drive,
		warm: warm, total: b.o.streamDuration, slice: slice, profiles: []string{"", "streaming-bare", "streaming"}})
	if err != nil {
		return err
	}
	b.rep.Streaming = &StreamingResult{Workers: b.o.streamWorkers, Trio: Trio{Direct: runs[0], Bare: runs[1], Gateway: runs[2]},
		WarmRounds: roundsOf(warm, slice), Rounds: max(1, roundsOf(b.o.streamDuration, slice))}
	return nil
}

// streamSlice is the shortest slice of the interleaved streaming load.
const streamSlice = time.Second

// setStreamScript makes the mock stream -stream-chunks chunks
// -stream-interval apart; non-streaming answers are unaffected.
func (b *bench) setStreamScript(ctx context.Context) error {
	script := map[string]any{"rules": []any{map[string]any{
		"name": "bench-stream",
		"path": "/v1/chat/completions",
		"responses": []any{map[string]any{
			"chunks":            b.o.streamChunks,
			"chunk_interval_ms": int(b.o.streamInterval / time.Millisecond),
		}},
	}}}
	body, err := json.Marshal(script)
	if err != nil {
		return fmt.Errorf("encoding the mock script: %w", err)
	}
	return b.mockPost(ctx, "/_mock/script", body)
}

// preflight sends one request of each kind to each target and notes what
// came back, so a misbehaving gateway is described before the figures.
func (b *bench) preflight(ctx context.Context) {
	for _, stream := range []bool{false, true} {
		for _, tgt := range b.targets(stream) {
			kind := "non-streaming"
			if stream {
				kind = "streaming"
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, tgt.req.URL, bytes.NewReader(tgt.req.Body))
			if err != nil {
				continue
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := b.ctrl.Do(req)
			if err != nil {
				b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("preflight %s %s request failed: %v", tgt.name, kind, err))
				continue
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			ok := resp.StatusCode == http.StatusOK
			if stream {
				ok = ok && bytes.Contains(body, []byte("data: [DONE]"))
			}
			if ok && tgt.name != "gateway" {
				continue
			}
			note := fmt.Sprintf("preflight %s %s request: %s", tgt.name, kind, resp.Status)
			if tgt.name == "gateway" {
				var hs []string
				for _, h := range []string{"X-Breakwater-Provider", "X-Breakwater-Connection", "X-Breakwater-Model", "X-Breakwater-Attempts"} {
					hs = append(hs, h+"="+resp.Header.Get(h))
				}
				note += ", " + strings.Join(hs, ", ")
			}
			if !ok {
				snippet := string(body)
				if len(snippet) > 400 {
					snippet = snippet[:400] + "…"
				}
				note += "; body: " + strings.ReplaceAll(snippet, "\n", `\n`)
			}
			b.rep.Notes = append(b.rep.Notes, note)
		}
	}
}

func (b *bench) mockPost(ctx context.Context, path string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+b.mock.Addr+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("mock %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.ctrl.Do(req)
	if err != nil {
		return fmt.Errorf("mock %s: %w", path, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("mock %s: %s: %s", path, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// mockCalls returns the mock's call count since the last reset.
func (b *bench) mockCalls(ctx context.Context) (int64, error) {
	st, err := b.mockStats(ctx)
	if err != nil {
		return 0, fmt.Errorf("mock stats: %w", err)
	}
	return st.Total, nil
}

// selfCPU returns the user+system CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
