package proxy_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/clock"
	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/policies"
	"github.com/breakwater-dev/breakwater/internal/runtime/accesslog"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/metrics"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/reqlog"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/memstore"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// cannedUpstream answers every buffered call at once with the same
// answer, without a connection: a benchmark of the request loop then
// measures the loop's own work.
type cannedUpstream struct {
	answer upstream.Buffered
	calls  atomic.Int64
}

func (c *cannedUpstream) Do(*http.Request, upstream.Route, upstream.Limits) (*http.Response, error) {
	panic("cannedUpstream: streaming calls are not canned")
}

func (c *cannedUpstream) DoWhile(*http.Request, upstream.Route, upstream.Limits, func()) (*http.Response, error) {
	panic("cannedUpstream: streaming calls are not canned")
}

func (c *cannedUpstream) DoBuffered(t upstream.Target, _ wire.Splice, _ upstream.Route, _ time.Duration) (upstream.Buffered, error) {
	c.calls.Add(1)
	if t.Header.Get("Authorization") == "" {
		return upstream.Buffered{Status: 401}, nil
	}
	return c.answer, nil
}

func (c *cannedUpstream) Buffers(upstream.Route) bool { return true }

func (c *cannedUpstream) Timeouts() upstream.Timeouts { return upstream.DefaultTimeouts() }

func (c *cannedUpstream) Close() {}

// BenchmarkServeLoop serves non-streaming requests through Proxy.Serve
// set up as the gateway sets it up — system clock, metrics, access lines
// (to nowhere) and the request log — with an upstream that answers at
// once (cannedUpstream): ns/op is the request loop's own CPU time per
// request, from Serve to its Result, the upstream call excepted.
func BenchmarkServeLoop(b *testing.B) {
	cfg, err := config.Parse([]byte(loopConfig), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	topo, err := topology.Build(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	sys := clock.System()
	st := memstore.New(sys)
	pipe, err := policies.New(ctx, policies.Options{Store: st, Clock: sys})
	if err != nil {
		b.Fatal(err)
	}
	settings, err := cfg.Resilience.EngineSettings()
	if err != nil {
		b.Fatal(err)
	}
	eng, err := engine.New(ctx, engine.Options{Clock: sys, Store: st, Settings: settings, Providers: topology.EngineSpecs(cfg), Classifier: pipe})
	if err != nil {
		b.Fatal(err)
	}
	m := metrics.New()
	eng.SetObserver(m.EngineObserver())
	access := accesslog.New(accesslog.Options{Output: io.Discard, Level: hclog.Info, Name: "breakwater.access", FlushEvery: accesslog.DefaultFlushEvery})
	requests := reqlog.New(reqlog.DefaultCapacity, sys)
	up := &cannedUpstream{answer: upstream.Buffered{Status: 200, Body: bufferedAnswer, Fields: []wire.Header{
		{Name: "Content-Length", Value: "230"}, {Name: "Content-Type", Value: "application/json"},
		{Name: "Date", Value: "Wed, 02 Dec 2026 10:00:00 GMT"}}}}
	p, err := proxy.New(proxy.Options{Config: cfg, Topology: topo, Engine: eng, Store: st, Access: access, Metrics: m,
		Upstream: up, UserAgent: "breakwater/bench", RequestObserver: func(r reqlog.Record) { requests.Add(&r) }})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	body := chat("alpha/m1", "")
	parsed, err := wire.ParseFor(wire.FormatChat, []byte(body))
	if err != nil {
		b.Fatal(err)
	}
	req := &proxy.Request{ID: "req-bench", Format: wire.FormatChat, Body: []byte(body), Parsed: parsed}
	b.ReportAllocs()
	for b.Loop() {
		req.Start = time.Now() // the server stamps each request's arrival
		res := p.Serve(ctx, req)
		if res.Status != 200 || !bytes.HasPrefix(res.Body, []byte(`{"id":"chatcmpl-1"`)) {
			b.Fatalf("answer %d %s", res.Status, res.Body)
		}
		p.Release(res)
	}
}
