package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/bareproxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/accesslog"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/gateway"
	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
)

// benchClient posts a small chat completion to url in a loop; the direct
// call to the mock and the call through the gateway use it alike, so their
// ratio is the gateway's cost.
func benchPost(b *testing.B, url, model string) {
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"hello there"}]}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}

// BenchmarkDirectMock is the baseline: the mock called directly.
func BenchmarkDirectMock(b *testing.B) {
	h := start(b, baseConfig)
	defer h.stopGateway()
	benchPost(b, h.mockURL()+"/v1/chat/completions", "m1")
}

// BenchmarkGatewayNonStream is the same call through the gateway.
func BenchmarkGatewayNonStream(b *testing.B) {
	h := start(b, baseConfig)
	defer h.stopGateway()
	benchPost(b, h.url+"/v1/chat/completions", "alpha/m1")
}

// The floor benchmarks (BenchmarkFloorNonStream, BenchmarkFloorLatency,
// BenchmarkFloorStream) run,
// in one process and one run, a bare fasthttp reverse proxy and the gateway
// in front of the same mock upstream, with the same client, and report the
// gateway's figures as ratios to the bare proxy's: the in-process yardstick
// of issue 18's "within a hair of the bare proxy" (the harness in bench/
// measures the same thing across processes).

// startFloorBare serves the bare proxy of the load harness
// (internal/bareproxy) in front of upstream and returns its address.
func startFloorBare(b *testing.B, upstream string) string {
	b.Helper()
	p := bareproxy.New(upstream, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = p.Serve(ln) }()
	b.Cleanup(func() { _ = p.Shutdown() })
	return ln.Addr().String()
}

// floorSetup is a mock upstream, a bare proxy and a gateway in front of
// it, the gateway configured as the binary is by default
// (startBenchGateway).
type floorSetup struct {
	mockAddr, bareAddr, gwAddr string
}

func startFloor(b *testing.B) *floorSetup {
	b.Helper()
	return startFloorScript(b, "rules:\n  - responses: [{chunks: 8}]\n")
}

// startFloorScript is startFloor with the mock answering as script says.
func startFloorScript(b *testing.B, script string) *floorSetup {
	b.Helper()
	m := mock.New(nil, hclog.NewNullLogger())
	maddr, err := m.Start("127.0.0.1:0")
	if err != nil {
		b.Fatalf("starting mock: %v", err)
	}
	b.Cleanup(func() { _ = m.Close() })
	sc, err := mock.ParseScript([]byte(script))
	if err != nil {
		b.Fatal(err)
	}
	m.SetScript(sc)
	gw := startBenchGateway(b, strings.ReplaceAll(baseConfig, "MOCK_URL", "http://"+maddr))
	return &floorSetup{mockAddr: maddr, bareAddr: startFloorBare(b, maddr), gwAddr: gw}
}

// startBenchGateway starts a gateway on cfgYAML configured as the binary
// is by default: log level info, the access line of every request written
// (to /dev/null, in batches as the binary writes them to its output). It
// returns the gateway's address.
func startBenchGateway(b *testing.B, cfgYAML string) string {
	b.Helper()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = devnull.Close() })
	mu := new(sync.Mutex)
	access := accesslog.New(accesslog.Options{Output: devnull, Mutex: mu, Level: hclog.Info, Name: "breakwater.access",
		FlushEvery: accesslog.DefaultFlushEvery})
	log := hclog.New(&hclog.LoggerOptions{Name: "breakwater", Level: hclog.Info, Output: access.SharedOutput(), Mutex: mu})
	cfg, err := config.Parse([]byte(cfgYAML), "bench.yaml")
	if err != nil {
		b.Fatalf("config: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gw, err := gateway.Start(context.Background(), cfg, gateway.Options{Logger: log, AccessLog: access, Listener: ln, Version: "bench"})
	if err != nil {
		b.Fatalf("starting gateway: %v", err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = gw.Close(ctx)
	})
	return gw.Addr()
}

// floorFigures are one sub-benchmark's results, for the ratios.
type floorFigures struct {
	nsPerOp, allocsPerOp float64
}

func floorAllocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// BenchmarkFloorNonStream: 16 clients post small chat completions, through
// the bare proxy ("bare") and through the gateway ("gateway"). ns/op is
// the wall time per request with the two CPUs busy, so its ratio is the
// gateway's cost per request against the bare proxy's (client and mock
// included on both sides). The gateway reports x-bare-ns and
// x-bare-allocs, the ratios to the "bare" run just before it (-count N
// runs the pair N times).
func BenchmarkFloorNonStream(b *testing.B) {
	f := startFloor(b)
	var bare floorFigures
	run := func(addr, model string, out *floorFigures) func(*testing.B) {
		return func(b *testing.B) {
			body := []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"hello there"}]}`)
			c := &fasthttp.HostClient{Addr: addr, MaxConns: 64}
			defer c.CloseIdleConnections()
			b.SetParallelism(8)
			b.ReportAllocs()
			m0 := floorAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(resp)
				for pb.Next() {
					req.Reset()
					req.SetRequestURI("http://" + addr + "/v1/chat/completions")
					req.Header.SetMethod(fasthttp.MethodPost)
					req.Header.SetContentType("application/json")
					req.SetBodyRaw(body)
					if err := c.Do(req, resp); err != nil {
						b.Fatal(err)
					}
					if resp.StatusCode() != 200 || !bytes.Contains(resp.Body(), []byte(`"choices"`)) {
						b.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
					}
				}
			})
			b.StopTimer()
			out.nsPerOp = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			out.allocsPerOp = float64(floorAllocs()-m0) / float64(b.N)
			if out != &bare && bare.nsPerOp > 0 {
				b.ReportMetric(out.nsPerOp/bare.nsPerOp, "x-bare-ns")
				b.ReportMetric(out.allocsPerOp/bare.allocsPerOp, "x-bare-allocs")
			}
		}
	}
	var gw floorFigures
	b.Run("bare", run(f.bareAddr, "m1", &bare))
	b.Run("gateway", run(f.gwAddr, "alpha/m1", &gw))
}

// BenchmarkFloorLatency and BenchmarkFloorStream send one request at a
// time, alternately through the bare proxy and through the gateway (one
// op is one of each), so both see the same machine at the same moment,
// and report the medians: bare-p50-ns, gw-p50-ns, added-p50-ns (the
// difference) and x-bare-p50 (the ratio). For streams the time is send →
// first "data:" line (time to first byte), the stream then read to its
// end.

// BenchmarkFloorLatency is the non-streaming call.
func BenchmarkFloorLatency(b *testing.B) {
	f := startFloor(b)
	one := func(addr, model string) func() time.Duration {
		body := []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"hello there"}]}`)
		c := &fasthttp.HostClient{Addr: addr, MaxConns: 4}
		b.Cleanup(c.CloseIdleConnections)
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		return func() time.Duration {
			req.Reset()
			req.SetRequestURI("http://" + addr + "/v1/chat/completions")
			req.Header.SetMethod(fasthttp.MethodPost)
			req.Header.SetContentType("application/json")
			req.SetBodyRaw(body)
			t0 := time.Now()
			if err := c.Do(req, resp); err != nil {
				b.Fatal(err)
			}
			d := time.Since(t0)
			if resp.StatusCode() != 200 || !bytes.Contains(resp.Body(), []byte(`"choices"`)) {
				b.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
			}
			return d
		}
	}
	alternate(b, one(f.bareAddr, "m1"), one(f.gwAddr, "alpha/m1"))
}

// BenchmarkFloorStream is a stream of 8 chunks; its time is the time to
// first byte.
func BenchmarkFloorStream(b *testing.B) {
	floorStream(b, startFloor(b))
}

// BenchmarkFloorStreamPaced is BenchmarkFloorStream with the mock's
// chunks 1 ms apart, as the load harness's streams are paced (5 ms): the
// stream's rest no longer arrives with its first byte, so the proxies go
// idle after it, as they do under the harness, instead of relaying the
// whole stream while the client reads its first line.
func BenchmarkFloorStreamPaced(b *testing.B) {
	floorStream(b, startFloorScript(b, "rules:\n  - responses: [{chunks: 3, chunk_interval_ms: 1}]\n"))
}

// floorStream alternates streams through f's bare proxy and gateway.
func floorStream(b *testing.B, f *floorSetup) {
	one := func(addr, model string) func() time.Duration {
		body := `{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"hello there"}]}`
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		b.Cleanup(client.CloseIdleConnections)
		url := "http://" + addr + "/v1/chat/completions"
		return func() time.Duration {
			t0 := time.Now()
			resp, err := client.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					b.Fatalf("no data line: %v", err)
				}
				if bytes.HasPrefix(line, []byte("data:")) {
					break
				}
			}
			d := time.Since(t0)
			rest, err := io.ReadAll(br)
			if err != nil || !bytes.Contains(rest, []byte("[DONE]")) {
				b.Fatalf("stream cut: %v", err)
			}
			return d
		}
	}
	alternate(b, one(f.bareAddr, "m1"), one(f.gwAddr, "alpha/m1"))
}

// alternate runs bare and gw one after the other b.N times and reports
// their medians (see BenchmarkFloorLatency).
func alternate(b *testing.B, bare, gw func() time.Duration) {
	for range 50 { // warm both pools of connections
		bare()
		gw()
	}
	bt, gt := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		bt = append(bt, bare())
		gt = append(gt, gw())
	}
	b.StopTimer()
	slices.Sort(bt)
	slices.Sort(gt)
	bp, gp := float64(bt[len(bt)/2].Nanoseconds()), float64(gt[len(gt)/2].Nanoseconds())
	b.ReportMetric(bp, "bare-p50-ns")
	b.ReportMetric(gp, "gw-p50-ns")
	b.ReportMetric(gp-bp, "added-p50-ns")
	b.ReportMetric(gp/bp, "x-bare-p50")
}
