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
	mock, gw  *proc.Child
	ctrl      *http.Client
	rep       *Report
	directURL string
	gwURL     string
}

// target is one side of a comparison.
type target struct {
	name string // "direct" or "gateway"
	req  load.Request
}

func (b *bench) targets(stream bool) [2]target {
	return [2]target{
		{"direct", load.Request{URL: b.directURL, Body: chatBody(directModel, stream), Stream: stream}},
		{"gateway", load.Request{URL: b.gwURL, Body: chatBody(gatewayModel, stream), Stream: stream}},
	}
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

	mockPort, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	mock, err := proc.StartMock(ctx, bin, dir, mockPort)
	if err != nil {
		return nil, err
	}
	defer mock.Stop()
	gwPort, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	gw, err := proc.StartGateway(ctx, bin, dir, gwPort, mock.Addr)
	if err != nil {
		return nil, err
	}
	defer gw.Stop()

	b := &bench{
		o: o, bin: bin, dir: dir, mock: mock, gw: gw, rep: rep,
		ctrl:      &http.Client{Timeout: 5 * time.Second},
		directURL: "http://" + mock.Addr + "/v1/chat/completions",
		gwURL:     "http://" + gw.Addr + "/v1/chat/completions",
	}
	mem := &MemoryResult{}
	if m, err := proc.ReadMemory(gw.PID()); err == nil {
		mem.GatewayIdleRSS = m.RSS
	}
	if m, err := proc.ReadMemory(mock.PID()); err == nil {
		mem.MockIdleRSS = m.RSS
	}
	if err := b.setStreamScript(ctx); err != nil {
		return rep, err
	}
	b.preflight(ctx)

	runErr := b.scenarios(ctx, mem)

	if m, err := proc.ReadMemory(gw.PID()); err == nil {
		mem.GatewayPeak = m.Peak
	} else if runErr == nil {
		runErr = err
	}
	if m, err := proc.ReadMemory(mock.PID()); err == nil {
		mem.MockPeak = m.Peak
	}
	if mem.GatewayPeak > 0 {
		rep.Memory = mem
	}
	if n := gw.LogLines(); n > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the gateway (at --log-level warn) wrote %d log lines; the last ones:\n%s", n, gw.LogTail(12)))
	}
	if err := gw.Stop(); err != nil {
		rep.Notes = append(rep.Notes, "stopping the gateway: "+err.Error())
	} else if _, werr := gw.Exited(); werr != nil && !isSignalExit(werr) {
		rep.Notes = append(rep.Notes, "the gateway exited with "+werr.Error()+" on SIGTERM")
	}
	if err := mock.Stop(); err != nil {
		rep.Notes = append(rep.Notes, "stopping the mock: "+err.Error())
	}
	rep.Budgets = evaluateBudgets(rep)
	rep.ProofBudgets = evaluateProofBudgets(rep)
	return rep, runErr
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
// error or when the gateway dies.
func (b *bench) scenarios(ctx context.Context, mem *MemoryResult) error {
	steps := []struct {
		name string
		skip bool
		run  func(context.Context) error
	}{
		{"fixed rate", b.o.skipOpen, b.openLoop},
		{"max throughput", b.o.skipMax, func(ctx context.Context) error { return b.throughput(ctx, mem) }},
		{"streaming", b.o.skipStream, b.streaming},
		{"under fire", b.o.skipFire, b.underFire},
	}
	for _, s := range steps {
		if s.skip {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %s...\n", s.name)
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("%s scenario: %w", s.name, err)
		}
		if exited, err := b.gw.Exited(); exited {
			msg := fmt.Sprintf("the gateway exited during the %s scenario (%v); its log:\n%s", s.name, err, b.gw.LogTail(30))
			b.rep.Notes = append(b.rep.Notes, msg)
			return errors.New("the gateway exited during the " + s.name + " scenario")
		}
	}
	return nil
}

// measurement is what measure needs to know about one run.
type measurement struct {
	tgt      target
	conns    int
	warm     func(context.Context, *http.Client) error
	run      func(context.Context, *http.Client) (*load.Result, error)
	openLoop bool
}

// measure runs one measurement against one target: warm-up, mock counter
// reset, the run, then the CPU and call counts around it.
func (b *bench) measure(ctx context.Context, m measurement) (Run, error) {
	client := load.NewClient(m.conns, b.o.timeout)
	defer client.CloseIdleConnections()
	if m.warm != nil {
		if err := m.warm(ctx, client); err != nil {
			return Run{}, fmt.Errorf("warm-up of %s: %w", m.tgt.name, err)
		}
	}
	if err := b.mockPost(ctx, "/_mock/reset", nil); err != nil {
		return Run{}, err
	}
	mock0, _ := proc.ReadCPU(b.mock.PID())
	gw0, _ := proc.ReadCPU(b.gw.PID())
	self0 := selfCPU()
	var sampler *proc.Sampler
	if m.tgt.name == "gateway" {
		sampler = proc.NewSampler(b.gw.PID(), 100*time.Millisecond)
	}
	start := time.Now()
	res, err := m.run(ctx, client)
	wall := time.Since(start)
	var maxRSS int64
	if sampler != nil {
		maxRSS, _ = sampler.Stop()
	}
	if err != nil {
		return Run{}, err
	}
	mock1, _ := proc.ReadCPU(b.mock.PID())
	gw1, _ := proc.ReadCPU(b.gw.PID())
	self1 := selfCPU()

	run := runOf(m.tgt.name, res, m.openLoop, m.tgt.req.Stream)
	run.MockCPUMS = ms(mock1 - mock0)
	run.GatewayCPUMS = ms(gw1 - gw0)
	run.GeneratorCPUPct = 100 * (self1 - self0).Seconds() / wall.Seconds()
	run.GatewayMaxRSS = maxRSS
	if total, err := b.mockCalls(ctx); err == nil {
		run.UpstreamCalls = total
	}
	fmt.Fprintf(os.Stderr, "bench:   %-7s %d/%d ok, %.0f req/s, p50 %.3f ms, p99 %.3f ms\n",
		m.tgt.name, run.OK, run.Scheduled, run.RPS, run.Latency.P50MS, run.Latency.P99MS)
	if err := sleepCtx(ctx, b.o.settle); err != nil {
		return Run{}, err
	}
	return run, nil
}

// driveFunc sends one load to req for d.
type driveFunc func(ctx context.Context, c *http.Client, req load.Request, d time.Duration) (*load.Result, error)

// measurePair measures the same load straight to the mock, then through
// the gateway: drive for warm first (skipped when warm is 0), then for dur.
func (b *bench) measurePair(ctx context.Context, stream bool, m measurement, drive driveFunc, warm, dur time.Duration) (direct, gateway Run, err error) {
	var runs [2]Run
	for i, tgt := range b.targets(stream) {
		m.tgt, m.warm = tgt, nil
		if warm > 0 {
			m.warm = func(ctx context.Context, c *http.Client) error {
				_, err := drive(ctx, c, tgt.req, warm)
				return err
			}
		}
		m.run = func(ctx context.Context, c *http.Client) (*load.Result, error) {
			return drive(ctx, c, tgt.req, dur)
		}
		if runs[i], err = b.measure(ctx, m); err != nil {
			return Run{}, Run{}, err
		}
	}
	return runs[0], runs[1], nil
}

// openLoop is scenario 1: every rate, direct then gateway.
func (b *bench) openLoop(ctx context.Context) error {
	for _, rate := range b.o.rates {
		res := OpenLoopResult{RatePerS: rate}
		drive := func(ctx context.Context, c *http.Client, req load.Request, d time.Duration) (*load.Result, error) {
			return load.OpenLoop(ctx, c, req, load.Schedule{Rate: rate, Duration: d}, b.o.maxInFlight)
		}
		var err error
		res.Direct, res.Gateway, err = b.measurePair(ctx, false, measurement{conns: b.o.openConns, openLoop: true},
			drive, b.o.warmup, b.o.openDuration)
		if err != nil {
			return err
		}
		d, g := res.Direct, res.Gateway
		res.AddedP50MS = g.Latency.P50MS - d.Latency.P50MS
		res.AddedP99MS = g.Latency.P99MS - d.Latency.P99MS
		res.AddedFromScheduleP50MS = g.FromSchedule.P50MS - d.FromSchedule.P50MS
		res.AddedFromScheduleP99MS = g.FromSchedule.P99MS - d.FromSchedule.P99MS
		b.rep.OpenLoop = append(b.rep.OpenLoop, res)
	}
	return nil
}

// throughput is scenario 2: closed loop at -conns connections.
func (b *bench) throughput(ctx context.Context, mem *MemoryResult) error {
	res := &ThroughputResult{Connections: b.o.conns}
	drive := func(ctx context.Context, c *http.Client, req load.Request, d time.Duration) (*load.Result, error) {
		return load.ClosedLoop(ctx, c, req, b.o.conns, d)
	}
	var err error
	res.Direct, res.Gateway, err = b.measurePair(ctx, false, measurement{conns: b.o.conns}, drive, b.o.warmup, b.o.throughputDur)
	if err != nil {
		return err
	}
	if res.Direct.RPS > 0 {
		res.Ratio = res.Gateway.RPS / res.Direct.RPS
	}
	res.AddedP50MS = res.Gateway.Latency.P50MS - res.Direct.Latency.P50MS
	res.AddedP99MS = res.Gateway.Latency.P99MS - res.Direct.Latency.P99MS
	mem.GatewayMaxRSSRun = res.Gateway.GatewayMaxRSS
	b.rep.Throughput = res
	return nil
}

// streaming is scenario 3: -stream-workers concurrent streams.
func (b *bench) streaming(ctx context.Context) error {
	res := &StreamingResult{Workers: b.o.streamWorkers}
	drive := func(ctx context.Context, c *http.Client, req load.Request, d time.Duration) (*load.Result, error) {
		return load.Streams(ctx, c, req, b.o.streamWorkers, d)
	}
	var err error
	res.Direct, res.Gateway, err = b.measurePair(ctx, true, measurement{conns: b.o.streamWorkers}, drive,
		min(b.o.warmup, time.Second), b.o.streamDuration)
	if err != nil {
		return err
	}
	d, g := res.Direct, res.Gateway
	res.AddedFirstDataP50MS = g.FirstData.P50MS - d.FirstData.P50MS
	res.AddedFirstDataP99MS = g.FirstData.P99MS - d.FirstData.P99MS
	res.AddedTotalP50MS = g.Latency.P50MS - d.Latency.P50MS
	res.AddedTotalP99MS = g.Latency.P99MS - d.Latency.P99MS
	b.rep.Streaming = res
	return nil
}

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
			if ok && tgt.name == "direct" {
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
