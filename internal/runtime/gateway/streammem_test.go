package gateway_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/gateway"
	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
)

// slowStreamConfig routes "slow/m" to the mock with the default stream
// watchdogs (their budgets are far above the mock's one chunk a second).
const slowStreamConfig = `
server:
  listen: 127.0.0.1:0
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: slow
    kind: openai
    base_url: MOCK_URL/v1
    models: [m]
    connections:
      - {id: c1, api_key: sk-slow-1}
`

// slowStreams is how many streams BenchmarkSlowStreamMemory holds open.
const slowStreams = 500

// BenchmarkSlowStreamMemory is the gateway's memory and goroutines per
// open slow stream (one chunk a second; issue 18 §3): it holds
// slowStreams streams open directly against the mock, then the same
// through the gateway, each until its first content chunk arrived, and
// reports the difference per stream of the Go heap and stacks in use
// (HeapInuse + StackInuse after a GC) and of the goroutines. The client
// and the mock run in the test process too; the direct run measures
// their share, which the difference removes.
func BenchmarkSlowStreamMemory(b *testing.B) {
	log := hclog.NewNullLogger()
	m := mock.New(nil, log)
	maddr, err := m.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	s, err := mock.ParseScript([]byte(`rules: [{responses: [{chunks: 60, chunk_interval_ms: 1000}]}]`))
	if err != nil {
		b.Fatal(err)
	}
	m.SetScript(s)
	cfg, err := config.Parse([]byte(strings.ReplaceAll(slowStreamConfig, "MOCK_URL", "http://"+maddr)), "test.yaml")
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gw, err := gateway.Start(context.Background(), cfg, gateway.Options{Logger: log, Listener: ln, Version: "test"})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = gw.Close(ctx)
	}()
	direct := "http://" + maddr + "/v1/chat/completions"
	via := "http://" + gw.Addr() + "/v1/chat/completions"
	// Warm up: pools, lazily built state, the first upstream connections.
	holdStreams(b, via, "slow/m", 20)
	holdStreams(b, direct, "m", 20)
	for b.Loop() {
		dMem, dG := holdStreams(b, direct, "m", slowStreams)
		gMem, gG := holdStreams(b, via, "slow/m", slowStreams)
		b.ReportMetric(float64(gMem-dMem)/slowStreams, "B/stream")
		b.ReportMetric(float64(gG-dG)/slowStreams, "goroutines/stream")
	}
}

// holdStreams opens n streams to url, waits until each has received its
// first data line, and returns how much the heap and stacks in use and the
// goroutines grew meanwhile; then it ends the streams and waits until the
// goroutines are back.
func holdStreams(b *testing.B, url, model string, n int) (mem int64, goroutines int) {
	b.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	settle := func() (int64, int) {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapInuse + ms.StackInuse), runtime.NumGoroutine()
	}
	mem0, g0 := settle()
	ctx, cancel := context.WithCancel(context.Background())
	var first, done sync.WaitGroup
	errs := make(chan error, n)
	body := `{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for range n {
		first.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			seen := false
			defer func() {
				if !seen {
					first.Done()
				}
			}()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if !seen && strings.HasPrefix(sc.Text(), "data:") {
					seen = true
					first.Done()
				}
			}
		}()
	}
	first.Wait()
	select {
	case err := <-errs:
		cancel()
		b.Fatalf("opening a stream to %s: %v", url, err)
	default:
	}
	mem1, g1 := settle()
	cancel()
	done.Wait()
	tr.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > g0+10 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	return mem1 - mem0, g1 - g0
}
