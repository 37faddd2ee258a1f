package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/bench/internal/load"
	"github.com/breakwater-dev/breakwater/bench/internal/proc"
)

// rlKeyPrefix starts the API keys of the rate-limited provider (the
// benchmark provider's keys: "bench-upstream-key-1", ...).
const rlKeyPrefix = "bench-upstream-key-"

// Poisson seeds of the rate-limited load (non-streaming, streaming).
var rlSeeds = [2]uint64{21, 22}

// RateLimitedSetup describes the rate-limited run.
type RateLimitedSetup struct {
	Keys              int     `json:"keys"`
	RequestsPerSecond float64 `json:"requests_per_second_per_key"`
	Burst             int     `json:"burst"`
	CapacityRPS       float64 `json:"capacity_rps"`
	OfferedRPS        float64 `json:"offered_rps"`
	StreamShare       float64 `json:"stream_share"`
	Seconds           float64 `json:"seconds"`
}

// RateLimitedResult is the rate-limited scenario: a provider whose keys
// each have a token bucket, under Poisson load at a share of their total
// capacity.
type RateLimitedResult struct {
	Setup   RateLimitedSetup `json:"setup"`
	Direct  FireSide         `json:"direct"`
	Bare    FireSide         `json:"bare"`
	Gateway FireSide         `json:"gateway"`
	// UpstreamCalls is what the mock counted on the provider's keys during
	// the gateway run; CallsByKey per key.
	UpstreamCalls   int64            `json:"upstream_calls"`
	CallsByKey      map[string]int64 `json:"calls_by_key"`
	CallsPerSuccess float64          `json:"calls_per_success"`
	SuccessAttempts map[string]int   `json:"success_attempts,omitempty"`
	FailureAttempts map[string]int   `json:"failure_attempts,omitempty"`
}

// rateLimited is the scenario where routing can win: the benchmark
// provider has -rl-keys keys, each limited by a token bucket in the mock
// (-rl-rate per second, bursts of -rl-burst), answering 429 with
// Retry-After and x-ratelimit-* headers when empty; the load is Poisson at
// -rl-load of the keys' total capacity, half of it streams. Direct and
// bare send it all to the first key; the gateway may spread it.
func (b *bench) rateLimited(ctx context.Context) error {
	capacity := float64(b.o.rlKeys) * b.o.rlRate
	res := &RateLimitedResult{Setup: RateLimitedSetup{Keys: b.o.rlKeys, RequestsPerSecond: b.o.rlRate, Burst: b.o.rlBurst,
		CapacityRPS: capacity, OfferedRPS: b.o.rlLoad * capacity, StreamShare: fireStreamShare, Seconds: b.o.fireDuration.Seconds()}}
	b.rep.RateLimited = res
	if err := b.mockScript(ctx, map[string]any{"rules": []any{map[string]any{
		"name": "rate-limited keys", "key": rlKeyPrefix + "*",
		"rate_limit": map[string]any{"requests_per_second": b.o.rlRate, "burst": b.o.rlBurst},
		"responses":  []any{map[string]any{"chunks": b.o.streamChunks, "chunk_interval_ms": b.o.streamInterval.Milliseconds()}},
	}}}); err != nil {
		return err
	}
	defer func() { _ = b.setStreamScript(ctx) }()
	gw, err := b.startGateway(ctx, "gateway-ratelimited", func(listen string) []byte {
		return proc.GatewayConfig(proc.Shape{Listen: listen, DataDir: filepath.Join(b.dir, "data-ratelimited"), MockAddr: b.mock.Addr,
			Providers: 1, Connections: b.o.rlKeys})
	})
	if err != nil {
		return err
	}
	defer gw.Stop()

	run := func(ctx context.Context, reqs [2]load.Request, d time.Duration, stop <-chan struct{}) ([2]*load.Result, error) {
		return b.splitRun(ctx, reqs, stop, func(i int) load.Schedule {
			return load.Poisson(fireShare(i)*res.Setup.OfferedRPS, d, rlSeeds[i])
		})
	}
	sides, err := b.rawSides(ctx, rlKeyPrefix+"1", run)
	if err != nil {
		return err
	}
	res.Direct, res.Bare = sides[0], sides[1]

	fmt.Fprintf(os.Stderr, "bench:   gateway for %v...\n", b.o.fireDuration)
	before, err := b.mockStats(ctx)
	if err != nil {
		return err
	}
	if prof := b.profile(ctx, gw, "rate-limited", b.o.fireDuration); prof != nil {
		defer prof.wait()
	}
	reqs := b.fireRequests("http://"+gw.Addr+"/v1/chat/completions", nil)
	for i := range reqs {
		reqs[i].Body = chatBody(gatewayModel, reqs[i].Stream)
	}
	results, err := run(ctx, reqs, b.o.fireDuration, nil)
	if err != nil {
		return err
	}
	after, err := b.mockStats(ctx)
	if err != nil {
		return err
	}
	res.Gateway = fireSide("gateway", results)
	logSide(res.Gateway)
	res.CallsByKey = map[string]int64{}
	for k, v := range after.ByKey {
		if strings.HasPrefix(k, rlKeyPrefix) {
			n := v.Calls - before.ByKey[k].Calls
			res.CallsByKey[k] = n
			res.UpstreamCalls += n
		}
	}
	if res.Gateway.OK > 0 {
		res.CallsPerSuccess = float64(res.UpstreamCalls) / float64(res.Gateway.OK)
	}
	res.SuccessAttempts = tallyOf(results[:], headerAttempts, true)
	res.FailureAttempts = tallyOf(results[:], headerAttempts, false)
	fmt.Fprintf(os.Stderr, "bench:   %.3f upstream calls per success\n", res.CallsPerSuccess)
	b.noteLog(gw)
	return nil
}
