package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
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

// slowChunkInterval is the pause between two chunks of a slow stream.
const slowChunkInterval = time.Second

// settleMax is how long the slow-stream curve waits, after a row's
// streams ended, for the gateway's goroutines and descriptors to come
// back: fasthttp servers keep an idle worker goroutine up to 10 s and
// clean idle workers every 10 s, so pooled workers are gone within 20 s.
const settleMax = 30 * time.Second

// fdReserve is how many descriptors a proxy keeps besides its two per
// stream (listeners, Badger files, logs).
const fdReserve = 200

// curves runs the cost-as-the-work-grows scenarios.
func (b *bench) curves(ctx context.Context) error {
	c := &Curves{}
	b.rep.Curves = c
	for _, cc := range []struct {
		what  string
		sizes []int
		into  **ConfigCurve
	}{{curveProviders, b.o.curveProviders, &c.Providers}, {curveConnections, b.o.curveConnections, &c.Connections},
		{curveCombos, b.o.curveCombos, &c.Combos}} {
		if len(cc.sizes) == 0 {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench:  %s curve %v...\n", cc.what, cc.sizes)
		curve, err := b.configCurve(ctx, cc.what, cc.sizes)
		if err != nil {
			return err
		}
		*cc.into = curve
	}
	if len(b.o.bodySizes) > 0 {
		fmt.Fprintf(os.Stderr, "bench:  body size curve %v...\n", b.o.bodySizes)
		if err := b.bodyCurve(ctx); err != nil {
			return err
		}
	}
	if len(b.o.slowStreams) > 0 {
		fmt.Fprintf(os.Stderr, "bench:  slow stream curve %v...\n", b.o.slowStreams)
		if err := b.slowCurve(ctx); err != nil {
			return err
		}
	}
	if !b.o.skipFailurePath {
		fmt.Fprintln(os.Stderr, "bench:  failure path (go test -bench)...")
		c.FailurePath = failurePath(ctx)
	}
	return nil
}

// configCurve measures one configuration-size curve: a gateway of each
// size, all started up front, and the open-loop rate of -curve-rate on
// direct, the bare proxy and every size's gateway, interleaved in slices
// of -slice (direct → bare → each size, smallest first, round after
// round), so that the machine's drift weighs on every column and every
// row alike. Direct and the bare proxy are measured once for the curve
// and shared by its rows.
func (b *bench) configCurve(ctx context.Context, what string, sizes []int) (*ConfigCurve, error) {
	curve := &ConfigCurve{What: what, SliceSeconds: b.o.slice.Seconds(), WarmRounds: roundsOf(b.o.warmup, b.o.slice),
		Rounds: max(1, roundsOf(b.o.curveDuration, b.o.slice))}
	var tgts []target
	profiles := []string{"", ""}
	for _, n := range sizes {
		gw, model, err := b.configGateway(ctx, what, n)
		if err != nil {
			return nil, err
		}
		defer gw.Stop()
		tr := b.trio(gw, chatBody(directModel, false), chatBody(model, false), false)
		if tgts == nil {
			tgts = append(tgts, tr[0], tr[1])
		}
		tgts = append(tgts, tr[2])
		profiles = append(profiles, gw.Name)
	}
	runs, err := b.interleave(ctx, tgts, interleaved{conns: b.o.openConns, openLoop: true, drive: b.openDrive(b.o.curveRate),
		warm: b.o.warmup, total: b.o.curveDuration, slice: b.o.slice, profiles: profiles})
	if err != nil {
		return nil, fmt.Errorf("%s curve: %w", what, err)
	}
	for i, n := range sizes {
		curve.Rows = append(curve.Rows, ConfigRow{Size: n, Trio: Trio{Direct: runs[0], Bare: runs[1], Gateway: runs[2+i]}})
	}
	return curve, nil
}

// configGateway starts the gateway of one configuration size and returns
// it with the model its requests address.
func (b *bench) configGateway(ctx context.Context, what string, n int) (*proc.Child, string, error) {
	name := fmt.Sprintf("gateway-%s-%d", what, n)
	shape := proc.Shape{DataDir: filepath.Join(b.dir, "data-"+name), MockAddr: b.mock.Addr, Providers: 1}
	model := gatewayModel
	switch what {
	case curveProviders:
		shape.Providers = n
	case curveConnections:
		shape.Connections = n
	case curveCombos:
		shape.Combos, model = n, proc.BenchCombo
	}
	gw, err := b.startGateway(ctx, name, func(listen string) []byte {
		shape.Listen = listen
		return proc.GatewayConfig(shape)
	})
	return gw, model, err
}

// bodyCurve measures requests of every -body-sizes size through a gateway
// of its own (so the main gateway's memory figures stay its own), the mock
// answering a two-letter text so only the request grows.
func (b *bench) bodyCurve(ctx context.Context) error {
	gw, err := b.startGateway(ctx, "gateway-body", func(listen string) []byte {
		return proc.GatewayConfig(proc.Shape{Listen: listen, DataDir: filepath.Join(b.dir, "data-body"), MockAddr: b.mock.Addr, Providers: 1})
	})
	if err != nil {
		return err
	}
	defer gw.Stop()
	if err := b.mockScript(ctx, map[string]any{"rules": []any{map[string]any{
		"name": "short answer", "path": "/v1/chat/completions", "responses": []any{map[string]any{"text": "ok"}},
	}}}); err != nil {
		return err
	}
	defer func() { _ = b.setStreamScript(ctx) }()
	curve := &BodyCurve{RatePerS: b.o.bodyRate, CopyUSPerMB: copyCost()}
	b.rep.Curves.BodySize = curve
	for _, size := range b.o.bodySizes {
		tr, err := b.measureTrio(ctx, b.trio(gw, sizedBody(directModel, size), sizedBody(gatewayModel, size), false),
			measurement{conns: b.o.openConns, openLoop: true, profile: fmt.Sprintf("body-%d", size)},
			b.openDrive(b.o.bodyRate), min(b.o.warmup, time.Second), b.o.curveDuration)
		if err != nil {
			return err
		}
		curve.Rows = append(curve.Rows, BodyRow{Bytes: size, Trio: tr})
	}
	return nil
}

// sizedBody returns a chat request of exactly size bytes (or the smallest
// possible, when size is smaller): the user message is padded with text.
func sizedBody(model string, size int) []byte {
	base := fmt.Appendf(nil, bodyFormat, model, "")
	pad := size - len(base)
	if pad <= 0 {
		return base
	}
	const words = "the quick brown fox jumps over the lazy dog "
	text := strings.Repeat(words, pad/len(words)+1)[:pad]
	return []byte(strings.Replace(string(base), "Say hello to the benchmark.", "Say hello to the benchmark."+text, 1))
}

// copyCost returns the time a memory copy of one MB takes in this
// process, in µs (the best of a few tries), as a reference for the body
// curve.
func copyCost() float64 {
	src, dst := make([]byte, 1<<20), make([]byte, 1<<20)
	best := time.Duration(math.MaxInt64)
	for range 20 {
		t0 := time.Now()
		copy(dst, src)
		best = min(best, time.Since(t0))
	}
	return float64(best) / float64(time.Microsecond)
}

// slowCurve opens -slow-streams streams of one chunk a second through a
// gateway of its own (with an admin token, to read /metrics), row by row.
func (b *bench) slowCurve(ctx context.Context) error {
	rampS, holdS := b.o.slowRamp.Seconds(), b.o.slowHold.Seconds()
	chunks := int(math.Ceil(rampS+holdS)) + 1
	curve := &SlowStreamCurve{ChunkIntervalMS: slowChunkInterval.Milliseconds(), Chunks: chunks, RampSeconds: rampS}
	b.rep.Curves.SlowStreams = curve
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		curve.FileLimit = int(lim.Cur)
		curve.MaxStreams = max(1, (int(lim.Cur)-fdReserve)/2)
	}
	if err := b.mockScript(ctx, map[string]any{"rules": []any{map[string]any{
		"name": "slow streams", "path": "/v1/chat/completions", "header": "accept=text/event-stream",
		"responses": []any{map[string]any{"chunks": chunks, "chunk_interval_ms": slowChunkInterval.Milliseconds()}},
	}}}); err != nil {
		return err
	}
	defer func() { _ = b.setStreamScript(ctx) }()
	gw, err := b.startGateway(ctx, "gateway-slow", func(listen string) []byte {
		return proc.GatewayConfig(proc.Shape{Listen: listen, DataDir: filepath.Join(b.dir, "data-slow"), MockAddr: b.mock.Addr,
			Providers: 1, AdminToken: proc.FireAdminToken, Source: proc.GatewaySource})
	})
	if err != nil {
		return err
	}
	defer gw.Stop()
	for _, asked := range b.o.slowStreams {
		n := asked
		if curve.MaxStreams > 0 && n > curve.MaxStreams {
			n = curve.MaxStreams
		}
		row := SlowStreamRow{Asked: asked, Streams: n}
		var rss [3]int64
		drive := func(ctx context.Context, c *http.Client, req load.Request, d time.Duration) (*load.Result, error) {
			return load.OpenLoop(ctx, c, req, load.Schedule{Rate: float64(n) / rampS, Duration: d}, n+1)
		}
		tgts := b.trio(gw, chatBody(directModel, true), chatBody(gatewayModel, true), true)
		var runs [3]Run
		for i, tgt := range tgts {
			m := measurement{tgt: tgt, conns: n, openLoop: true, profile: fmt.Sprintf("slow-streams-%d", n),
				dur:     b.o.slowRamp + time.Duration(chunks-1)*slowChunkInterval,
				timeout: time.Duration(chunks+10) * time.Second}
			m.run = func(ctx context.Context, c *http.Client) (*load.Result, error) {
				return drive(ctx, c, tgt.req, b.o.slowRamp)
			}
			m.before = func(ctx context.Context) {
				if tgt.mid == nil {
					return
				}
				if mem, err := proc.ReadMemory(tgt.mid.PID()); err == nil {
					rss[i] = mem.RSS
				}
				if tgt.mid == gw {
					row.Before = b.census(ctx, gw)
				}
			}
			m.after = func(ctx context.Context) {
				if tgt.mid == gw {
					row.After = b.settledCensus(ctx, gw, row.Before)
				}
			}
			var err error
			if runs[i], err = b.measure(ctx, m); err != nil {
				return err
			}
		}
		row.Trio = Trio{Direct: runs[0], Bare: runs[1], Gateway: runs[2]}
		row.BareRSSBefore, row.GatewayRSSBefore = rss[1], rss[2]
		curve.Rows = append(curve.Rows, row)
	}
	return nil
}

// census reads the gateway's goroutines (go_goroutines of GET /metrics)
// and open file descriptors (/proc/PID/fd); -1 for what cannot be read.
func (b *bench) census(ctx context.Context, gw *proc.Child) Census {
	c := Census{Goroutines: -1, FDs: -1}
	if entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", gw.PID())); err == nil {
		c.FDs = len(entries)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+gw.Addr+"/metrics", nil)
	if err != nil {
		return c
	}
	req.Header.Set("Authorization", "Bearer "+proc.FireAdminToken)
	resp, err := b.ctrl.Do(req)
	if err != nil {
		return c
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		c.Goroutines = goroutinesOf(bufio.NewScanner(resp.Body))
	}
	return c
}

// goroutinesOf returns the value of go_goroutines in Prometheus text, or -1.
func goroutinesOf(sc *bufio.Scanner) int {
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && name == "go_goroutines" {
			if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
				return int(v)
			}
		}
	}
	return -1
}

// settledCensus waits up to 30 s after the streams ended for the gateway's
// goroutines and descriptors to come back within the leak allowance of
// before, and returns the last census.
func (b *bench) settledCensus(ctx context.Context, gw *proc.Child, before Census) Census {
	deadline := time.Now().Add(settleMax)
	for {
		c := b.census(ctx, gw)
		if !leaked(before, c) || time.Now().After(deadline) || ctx.Err() != nil {
			return c
		}
		_ = sleepCtx(ctx, 250*time.Millisecond)
	}
}

// leaked reports whether after holds more goroutines or descriptors than
// before plus the allowance (or could not be read).
func leaked(before, after Census) bool {
	return before.Goroutines < 0 || after.Goroutines < 0 || before.FDs < 0 || after.FDs < 0 ||
		after.Goroutines > before.Goroutines+leakGoroutines || after.FDs > before.FDs+leakFDs
}

// mockScript replaces the mock's script.
func (b *bench) mockScript(ctx context.Context, script map[string]any) error {
	body, err := json.Marshal(script)
	if err != nil {
		return fmt.Errorf("encoding a mock script: %w", err)
	}
	return b.mockPost(ctx, "/_mock/script", body)
}
