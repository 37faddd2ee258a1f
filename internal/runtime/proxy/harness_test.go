package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/policies"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/metrics"
	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/memstore"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstreamtest"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp's housekeeping, for the test on a real loopback
		// upstream (TestBufferedPathAllocations): its process-wide Date
		// header ticker, never stopped; its worker-pool cleaner, which
		// checks its stop channel between 10 s sleeps; and the buffered
		// client's idle-connection cleaners, which end once no idle
		// connection is left, up to 90 s later.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"))
}

var epoch = time.Date(2025, 7, 1, 9, 0, 0, 0, time.UTC)

// loop is a Proxy over the in-memory mock upstream: real engine, real
// policy pipeline, memory store, fake clock for the engine and every wait.
type loop struct {
	t       testing.TB
	p       *proxy.Proxy
	eng     *engine.Engine
	pipe    *policies.Pipeline
	mock    *mock.Server
	up      *upstreamtest.Upstream
	clock   *clocktest.Clock
	metrics *metrics.Metrics
}

// setup is what a test may change before the loop is built: the policy
// pipeline's and the proxy's options.
type setup struct {
	policies *policies.Options
	proxy    *proxy.Options
}

// newLoop builds the loop for cfgYAML (providers' base_url may be any
// URL: no socket is opened) and the mock script; each opt adjusts the
// options first. The in-memory upstream's call timers run on the system
// clock (10 min, 60 s: they never fire here), so the fake clock's pending
// timers are the loop's own.
func newLoop(t testing.TB, cfgYAML, script string, opts ...func(*setup)) *loop {
	t.Helper()
	return newLoopWith(t, cfgYAML, script, nil, opts...)
}

// newLoopWith is newLoop with the upstream's handler made by wrap from the
// mock's handler and the loop's fake clock; with a wrap, the upstream's
// call timers run on the fake clock too.
func newLoopWith(t testing.TB, cfgYAML, script string, wrap func(mock http.Handler, clock *clocktest.Clock) http.Handler, opts ...func(*setup)) *loop {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgYAML), "test.yaml")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	topo, err := topology.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := &loop{t: t, clock: clocktest.NewClock(epoch), metrics: metrics.New()}
	var sc *mock.Script
	if script != "" {
		if sc, err = mock.ParseScript([]byte(script)); err != nil {
			t.Fatalf("mock script: %v", err)
		}
	}
	l.mock = mock.New(sc, nil)
	t.Cleanup(func() { _ = l.mock.Close() })
	l.up = upstreamtest.New(l.mock.Handler())
	if wrap != nil {
		l.up = upstreamtest.New(wrap(l.mock.Handler(), l.clock)).WithClock(l.clock)
	}
	st := memstore.New(l.clock)
	ctx := context.Background()
	po := policies.Options{Store: st, Clock: l.clock}
	pxo := proxy.Options{Config: cfg, Topology: topo, Store: st, Clock: l.clock,
		Metrics: l.metrics, Upstream: l.up, UserAgent: "breakwater/test"}
	for _, o := range opts {
		o(&setup{policies: &po, proxy: &pxo})
	}
	if l.pipe, err = policies.New(ctx, po); err != nil {
		t.Fatal(err)
	}
	settings, err := cfg.Resilience.EngineSettings()
	if err != nil {
		t.Fatal(err)
	}
	l.eng, err = engine.New(ctx, engine.Options{Clock: l.clock, Store: st, Settings: settings,
		Providers: topology.EngineSpecs(cfg), Classifier: l.pipe})
	if err != nil {
		t.Fatal(err)
	}
	pxo.Engine = l.eng
	l.p, err = proxy.New(pxo)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.p.Close)
	return l
}

// request builds a client request in format f from a JSON body.
func (l *loop) request(f wire.Format, body string) *proxy.Request {
	l.t.Helper()
	parsed, err := wire.ParseFor(f, []byte(body))
	if err != nil {
		l.t.Fatalf("request body: %v", err)
	}
	return &proxy.Request{ID: "req-test", Format: f, Body: []byte(body), Parsed: parsed}
}

// chat is an OpenAI chat request for model.
func chat(model, extra string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hello there"}]` + extra + `}`
}

// serve runs a request to its answer; a stream is run into a buffer.
func (l *loop) serve(req *proxy.Request) (*proxy.Result, string) {
	l.t.Helper()
	res := l.p.Serve(context.Background(), req)
	if res.Stream == nil {
		return res, string(res.Body)
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	res.Stream.Run(w)
	return res, buf.String()
}

// serveAsync runs a request in the background, for tests that move the
// clock while it waits.
func (l *loop) serveAsync(req *proxy.Request) <-chan *proxy.Result {
	ch := make(chan *proxy.Result, 1)
	go func() { ch <- l.p.Serve(context.Background(), req) }()
	return ch
}

// calls returns the mock's call count for key|model.
func (l *loop) calls(key, model string) uint64 { return l.mock.Stats().ByKeyModel[key+"|"+model] }

// counter sums a counter of the proxy's metrics whose labels include
// every pair of want.
func (l *loop) counter(name string, want map[string]string) float64 {
	l.t.Helper()
	mfs, err := l.metrics.Registry().Gather()
	if err != nil {
		l.t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metric
				}
			}
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// errorCode reads the code of an OpenAI or Anthropic error body.
func errorCode(t *testing.T, body string) string {
	t.Helper()
	var doc struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return doc.Error.Code
}

// waitTimers waits until n timers are pending on the fake clock.
func (l *loop) waitTimers(n int) {
	l.t.Helper()
	if !l.clock.WaitForTimers(n, 5*time.Second) {
		l.t.Fatalf("fewer than %d timers pending on the clock", n)
	}
}

// waitTimer waits until the loop sleeps on the fake clock.
func (l *loop) waitTimer() {
	l.t.Helper()
	if !l.clock.WaitForTimers(1, 5*time.Second) {
		l.t.Fatal("the request never waited on the clock")
	}
}

// recv takes a background result.
func recv(t testing.TB, ch <-chan *proxy.Result) *proxy.Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no answer within 5 s")
		return nil
	}
}

func has(s, sub string) bool { return strings.Contains(s, sub) }
