package gateway_test

import (
	"bytes"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// The benchmarks of this file measure how the gateway's cost grows with
// the work (issue 18 §3): the request body's size and the number of
// connections of the routed provider. Each compares, in the same run, the
// gateway with a direct call to the same upstream (and, for bodies, with the
// bare fasthttp reverse proxy of the floor benchmarks and a copy of the body), interleaving the
// targets request by request so that drift on a shared machine hits them
// alike. The upstream is a minimal fasthttp server over loopback that
// reads the body and answers a fixed chat completion: what grows with the
// body is then the hop's work, not the upstream's.

// scaleAnswer is the upstream's answer to every call.
const scaleAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"bench-model",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`

// serveFast serves h on a loopback listener until the benchmark ends.
func serveFast(b *testing.B, h fasthttp.RequestHandler) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h, MaxRequestBodySize: 8 << 20}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// startScaleUpstream runs the upstream: it answers scaleAnswer once the
// request (body included) is read, with the x-ratelimit-* headers of an
// account with most of its quota left when quota is set.
func startScaleUpstream(b *testing.B, quota bool) string {
	return serveFast(b, func(ctx *fasthttp.RequestCtx) {
		if len(ctx.PostBody()) == 0 {
			ctx.SetStatusCode(400)
			return
		}
		if quota {
			ctx.Response.Header.Set("X-Ratelimit-Limit-Requests", "10000")
			ctx.Response.Header.Set("X-Ratelimit-Remaining-Requests", "9000")
			ctx.Response.Header.Set("X-Ratelimit-Reset-Requests", "6s")
		}
		ctx.SetContentType("application/json")
		ctx.SetBodyString(scaleAnswer)
	})
}

// startScaleGateway runs a gateway whose provider "bench" (kind openai)
// has conns connections to upstream, configured as the binary is
// (startBenchGateway).
func startScaleGateway(b *testing.B, upstream string, conns int) string {
	b.Helper()
	var y strings.Builder
	fmt.Fprintf(&y, "server:\n  listen: 127.0.0.1:0\n  max_request_bytes: %d\nstate:\n  backend: memory\n", 8<<20)
	y.WriteString("resilience:\n  request_queue: {auto_enable_api_key_providers: false}\n")
	fmt.Fprintf(&y, "providers:\n  - id: bench\n    kind: openai\n    base_url: http://%s/v1\n    models: [bench-model]\n    connections:\n", upstream)
	for i := range conns {
		fmt.Fprintf(&y, "      - {id: conn-%d, api_key: bench-upstream-key-%d}\n", i+1, i+1)
	}
	return startBenchGateway(b, y.String())
}

// startComboGateway runs a gateway with combos combos, shaped as the load
// harness's combos curve: "bench-combo" (priority, one target:
// bench/bench-model) and combos−1 others, each over another provider's
// model and bench/bench-model; every other provider has two connections.
func startComboGateway(b *testing.B, upstream string, combos int) string {
	b.Helper()
	var y strings.Builder
	fmt.Fprintf(&y, "server:\n  listen: 127.0.0.1:0\n  max_request_bytes: %d\nstate:\n  backend: memory\n", 8<<20)
	y.WriteString("resilience:\n  request_queue: {auto_enable_api_key_providers: false}\nproviders:\n")
	provider := func(id, model string) {
		fmt.Fprintf(&y, "  - id: %s\n    kind: openai\n    base_url: http://%s/v1\n    models: [%s]\n    connections:\n", id, upstream, model)
		fmt.Fprintf(&y, "      - {id: c1, api_key: %s-key-1}\n      - {id: c2, api_key: %s-key-2}\n", id, id)
	}
	provider("bench", "bench-model")
	for i := 2; i <= combos; i++ {
		provider(fmt.Sprintf("other-%d", i), fmt.Sprintf("other-model-%d", i))
	}
	y.WriteString("combos:\n  - name: bench-combo\n    strategy: priority\n    targets:\n      - {model: bench/bench-model}\n")
	for i := 2; i <= combos; i++ {
		fmt.Fprintf(&y, "  - name: combo-%d\n    strategy: priority\n    targets:\n      - {model: other-%d/other-model-%d}\n      - {model: bench/bench-model}\n", i, i, i)
	}
	return startBenchGateway(b, y.String())
}

// BenchmarkCombos is the combos curve of the load harness in process:
// each iteration sends one request direct to the upstream and one to the
// combo "bench-combo" through a gateway with 1 and one with 200 combos in
// its configuration, interleaved, and reports the added time of each over
// the direct call (medians) and their ratio (target ≤ 1.10).
func BenchmarkCombos(b *testing.B) {
	up := startScaleUpstream(b, false)
	gw1, gwN := startComboGateway(b, up, 1), startComboGateway(b, up, 200)
	smallAndLarge(b, up, "bench-combo", gw1, gwN, "add-200-µs")
}

// scaleBody returns a chat request for model of size bytes, the user
// message padded with words.
func scaleBody(model string, size int) []byte {
	const head, tail = `{"model":"%s","stream":false,"messages":[{"role":"user","content":"Say hello.`, `"}]}`
	base := fmt.Sprintf(head, model)
	pad := max(size-len(base)-len(tail), 0)
	const words = "the quick brown fox jumps over the lazy dog "
	return []byte(base + strings.Repeat(words, pad/len(words)+1)[:pad] + tail)
}

// scaleClient posts bodies to the targets of a benchmark.
type scaleClient struct {
	b *testing.B
	c *fasthttp.Client
}

func newScaleClient(b *testing.B) *scaleClient {
	return &scaleClient{b: b, c: &fasthttp.Client{MaxResponseBodySize: 1 << 20}}
}

// post sends body to addr's /v1/chat/completions and returns the time to
// the whole answer, which must be a 200.
func (s *scaleClient) post(addr string, body []byte) time.Duration {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + addr + "/v1/chat/completions")
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(body)
	t0 := time.Now()
	if err := s.c.Do(req, resp); err != nil {
		s.b.Fatal(err)
	}
	d := time.Since(t0)
	if resp.StatusCode() != 200 {
		s.b.Fatalf("%s: status %d: %s", addr, resp.StatusCode(), resp.Body())
	}
	return d
}

// median returns the median of ds in µs.
func median(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Microsecond)
}

// BenchmarkBodySize measures what a request body costs per MB, from 1 KB
// to 1 MB: each iteration sends both sizes direct to the upstream, through
// the bare proxy and through the gateway, and copies the 1 MB body
// (bytes.Clone). It reports, from the medians, the added time per MB of
// body of the bare proxy and of the gateway over the direct call
// (bare-µs/MB, gw-µs/MB), the copy's (clone-µs/MB), and the ratios
// gw/bare (target ≤ 2: the gateway may add one more pass) and gw/clone.
func BenchmarkBodySize(b *testing.B) {
	up := startScaleUpstream(b, false)
	bare := startFloorBare(b, up)
	gw := startScaleGateway(b, up, 2)
	c := newScaleClient(b)
	const small, large = 1 << 10, 1 << 20
	mb := float64(large-small) / (1 << 20)
	type target struct {
		addr, model string
		at          [2][]time.Duration // small, large
	}
	targets := []*target{{addr: up, model: "bench-model"}, {addr: bare, model: "bench-model"}, {addr: gw, model: "bench/bench-model"}}
	bodies := map[string][2][]byte{}
	for _, t := range targets {
		bodies[t.model] = [2][]byte{scaleBody(t.model, small), scaleBody(t.model, large)}
		for range 3 { // warm the connections and the pools
			c.post(t.addr, bodies[t.model][0])
			c.post(t.addr, bodies[t.model][1])
		}
	}
	var clone [2][]time.Duration
	var sink []byte
	b.ResetTimer()
	for b.Loop() {
		for _, t := range targets {
			for i, body := range bodies[t.model] {
				t.at[i] = append(t.at[i], c.post(t.addr, body))
			}
		}
		for i, body := range bodies["bench-model"] {
			t0 := time.Now()
			sink = bytes.Clone(body)
			clone[i] = append(clone[i], time.Since(t0))
		}
	}
	_ = sink
	slope := func(at [2][]time.Duration) float64 { return (median(at[1]) - median(at[0])) / mb }
	direct := slope(targets[0].at)
	bareMB, gwMB, cloneMB := slope(targets[1].at)-direct, slope(targets[2].at)-direct, slope(clone)
	b.ReportMetric(bareMB, "bare-µs/MB")
	b.ReportMetric(gwMB, "gw-µs/MB")
	b.ReportMetric(cloneMB, "clone-µs/MB")
	b.ReportMetric(gwMB/bareMB, "gw/bare")
	b.ReportMetric(gwMB/cloneMB, "gw/clone")
}

// BenchmarkConnections measures how the gateway's added latency grows with
// the connections of the routed provider: each iteration sends the same
// small request direct to the upstream and through two gateways whose
// provider has 1 and 1000 connections. It reports the median added time
// over the direct call of each (add-1-µs, add-1000-µs) and their ratio
// (target ≤ 1.10). In "quota" the upstream reports its rate limits
// (x-ratelimit-*), which feeds the headroom order of the connections.
func BenchmarkConnections(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchConnections(b, false) })
	b.Run("quota", func(b *testing.B) { benchConnections(b, true) })
}

func benchConnections(b *testing.B, quota bool) {
	up := startScaleUpstream(b, quota)
	gw1, gwN := startScaleGateway(b, up, 1), startScaleGateway(b, up, 1000)
	smallAndLarge(b, up, "bench/bench-model", gw1, gwN, "add-1000-µs")
}

// smallAndLarge sends, per iteration, one request direct to the upstream
// and one for model through the small and the large gateway, interleaved
// after a warm-up, and reports the added time of each over the direct
// call (medians, add-1-µs and large) and their ratio.
func smallAndLarge(b *testing.B, up, model, small, large, metric string) {
	c := newScaleClient(b)
	direct, routed := scaleBody("bench-model", 300), scaleBody(model, 300)
	for range 20 {
		c.post(up, direct)
		c.post(small, routed)
		c.post(large, routed)
	}
	var d, one, many []time.Duration
	b.ResetTimer()
	for b.Loop() {
		d = append(d, c.post(up, direct))
		one = append(one, c.post(small, routed))
		many = append(many, c.post(large, routed))
	}
	base := median(d)
	add1, addN := median(one)-base, median(many)-base
	b.ReportMetric(add1, "add-1-µs")
	b.ReportMetric(addN, metric)
	b.ReportMetric(addN/add1, "ratio")
}
