package gateway_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
)

// chaosConfig serves the model "m" from two chaotic providers (openai
// "chaos" with two connections, anthropic "chaosant") and, last, from the
// healthy "steady"; the combo "chaos-combo" lists the same three. Timeouts
// are short so injected faults are detected fast: first byte and idle
// 500 ms, content stall 300 ms before the first content (commit point), and
// an apikey breaker that degrades at 3, opens at 5 and probes after 1 s.
const chaosConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
  first_byte_timeout_ms: 500
  idle_timeout_ms: 500
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
  circuit_breaker: {apikey: {failure_threshold: 5, degradation_threshold: 3, reset_ms: 1000}}
  stream_recovery: {content_stall_timeout_ms: 300, commit_point: first_content}
providers:
  - id: chaos
    kind: openai
    base_url: MOCK_URL/v1
    models: [m]
    connections:
      - {id: c1, api_key: sk-chaos-1}
      - {id: c2, api_key: sk-chaos-2}
  - id: chaosant
    kind: anthropic
    base_url: MOCK_URL/v1
    models: [m]
    connections:
      - {id: k1, api_key: sk-chaosant-1}
  - id: steady
    kind: openai
    base_url: MOCK_URL/v1
    models: [m]
    connections:
      - {id: s1, api_key: sk-steady-1}
combos:
  - name: chaos-combo
    strategy: priority
    targets:
      - {model: chaosant/m}
      - {model: chaos/m}
      - {model: steady/m}
`

// chaosSeed fixes every random choice of the chaos test: the phase
// schedule and the mock's per-rule generators.
const chaosSeed = 20261130

// chaosPhases are the fault mixes the chaotic keys ("sk-chaos*") go
// through; "steady" is never matched. Every fault happens before the
// stream's commit point, so a healthy target can still answer: latency
// under and over the 500 ms first-byte timeout, a TCP reset before the
// headers, a mid-body drop before any content, 503s, and a stall before
// the first content (the content-stall watchdog for streams, the idle
// timeout for non-streams).
var chaosPhases = []struct{ name, steps string }{
	{"latency", `
      - {weight: 3}
      - {weight: 2, latency_ms: 150}
      - {weight: 1, latency_ms: 300}`},
	{"mixed", `
      - {weight: 8}
      - {weight: 3, latency_ms: 150}
      - {weight: 1, latency_ms: 900}
      - {weight: 1, reset: true}
      - {weight: 1, reset_after_chunks: 0}
      - {weight: 1, status: 503}
      - {weight: 1, stall_after_chunks: 0, stall_ms: 1500}`},
	{"503 burst", `
      - {status: 503}`},
	{"resets and timeouts", `
      - {weight: 1, reset: true}
      - {weight: 1, latency_ms: 900}
      - {weight: 2}`},
	{"stalls", `
      - {weight: 2, stall_after_chunks: 0, stall_ms: 1500}
      - {weight: 1, latency_ms: 300}`},
}

func chaosScript(phase int, seed uint64) string {
	return fmt.Sprintf("rules:\n  - key: \"sk-chaos*\"\n    mode: random\n    seed: %d\n    responses:%s\n",
		seed%1_000_000_007, chaosPhases[phase].steps)
}

// startQuiet is start with the gateway and the mock logging at warn level:
// the harness keeps its debug log in memory, which would grow with every
// request of a long load and swamp the heap and RSS measurements.
func startQuiet(t *testing.T, cfgYAML string) *harness {
	t.Helper()
	logs := &syncBuffer{}
	log := hclog.New(&hclog.LoggerOptions{Name: "breakwater", Level: hclog.Warn, Output: logs})
	m := mock.New(nil, log.Named("mock"))
	maddr, err := m.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("starting mock: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	h := &harness{t: t, mock: m, logs: logs, log: log,
		cfgYAML: strings.ReplaceAll(cfgYAML, "MOCK_URL", "http://"+maddr)}
	h.startGateway()
	return h
}

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

// loadClient is an HTTP client with enough idle connections for the load
// workers (the default keeps 2 per host and churns sockets).
func loadClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{MaxIdleConns: 128, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
		Timeout:   30 * time.Second,
	}
}

// loadReq is one kind of client request of the chaos and soak loads.
type loadReq struct {
	path   string // /v1/chat/completions or /v1/messages
	model  string
	stream bool
}

func (r loadReq) String() string {
	return fmt.Sprintf("%s model=%s stream=%v", r.path, r.model, r.stream)
}

// loadMix lists every combination of endpoint, model and streaming.
func loadMix(models ...string) []loadReq {
	var out []loadReq
	for _, p := range []string{"/v1/chat/completions", "/v1/messages"} {
		for _, m := range models {
			for _, s := range []bool{false, true} {
				out = append(out, loadReq{p, m, s})
			}
		}
	}
	return out
}

// loadResult is what one client request saw.
type loadResult struct {
	status   int
	provider string
	attempts string
	err      error // nil when the request fully succeeded
}

// do sends r with a unique user text and checks the full answer: status
// 200, the echoed text, and for streams a clean end ([DONE] or
// message_stop) with no error event. It never calls t.Fatal, so load
// goroutines may use it.
func (r loadReq) do(cli *http.Client, base string, n int) loadResult {
	text := fmt.Sprintf("hello %d", n)
	body := fmt.Sprintf(`{"model":%q,"max_tokens":64,"stream":%v,"messages":[{"role":"user","content":%q}]}`, r.model, r.stream, text)
	req, err := http.NewRequest(http.MethodPost, base+r.path, strings.NewReader(body))
	if err != nil {
		return loadResult{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cli.Do(req)
	if err != nil {
		return loadResult{err: fmt.Errorf("%s: %w", r, err)}
	}
	defer resp.Body.Close()
	res := loadResult{status: resp.StatusCode, provider: resp.Header.Get("X-Breakwater-Provider"), attempts: resp.Header.Get("X-Breakwater-Attempts")}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		res.err = fmt.Errorf("%s: status %d: %s", r, resp.StatusCode, b)
		return res
	}
	want := "echo: " + text
	var got string
	switch {
	case r.stream:
		got, err = streamText(resp.Body, r.path == "/v1/messages")
	case r.path == "/v1/messages":
		var m struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		err = json.NewDecoder(resp.Body).Decode(&m)
		if err == nil && len(m.Content) > 0 {
			got = m.Content[0].Text
		}
	default:
		var m struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		err = json.NewDecoder(resp.Body).Decode(&m)
		if err == nil && len(m.Choices) > 0 {
			got = m.Choices[0].Message.Content
		}
	}
	if err == nil && got != want {
		err = fmt.Errorf("answer %q, want %q", got, want)
	}
	if err != nil {
		res.err = fmt.Errorf("%s via %s (attempts %s): %w", r, res.provider, res.attempts, err)
	}
	return res
}

// streamText reads an SSE body and returns its text; the stream must end
// cleanly ([DONE] for OpenAI, message_stop for Anthropic) with no error
// event.
func streamText(body io.Reader, anthropic bool) (string, error) {
	sc := bufio.NewScanner(body)
	var b strings.Builder
	ended := false
	for sc.Scan() {
		line := sc.Text()
		if line == "event: error" {
			return b.String(), errors.New("error event in the stream")
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if d == "[DONE]" {
			ended = true
			continue
		}
		var ev struct {
			Type    string `json:"type"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Delta struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"delta"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			return b.String(), fmt.Errorf("frame %q is not JSON: %w", d, err)
		}
		if len(ev.Error) > 0 && string(ev.Error) != "null" {
			return b.String(), fmt.Errorf("error frame %s", d)
		}
		if anthropic {
			if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
				b.WriteString(ev.Delta.Text)
			}
			if ev.Type == "message_stop" {
				ended = true
			}
			continue
		}
		for _, c := range ev.Choices {
			b.WriteString(c.Delta.Content)
		}
	}
	if err := sc.Err(); err != nil {
		return b.String(), fmt.Errorf("reading the stream: %w", err)
	}
	if !ended {
		return b.String(), errors.New("the stream ended without [DONE] / message_stop")
	}
	return b.String(), nil
}

// breakers reads the breaker view of GET /api/monitoring/health without
// failing the test (for polling goroutines).
func breakers(cli *http.Client, base string) (map[string]breakerView, error) {
	req, err := http.NewRequest(http.MethodGet, base+"/api/monitoring/health", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer test-admin-token-0123456789")
	resp, err := cli.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("health: status %d", resp.StatusCode)
	}
	var h struct {
		Providers map[string]breakerView `json:"providers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	return h.Providers, nil
}

// breakerView is one provider of the health answer.
type breakerView struct {
	State        string `json:"state"`
	FailureCount int    `json:"failure_count"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	Transitions  []struct {
		From   string `json:"from"`
		To     string `json:"to"`
		Reason string `json:"reason"`
	} `json:"transitions"`
}

// postGCHeap is the live heap after two full collections.
func postGCHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestChaosZeroClientFailuresWhileBreakersOpenAndRecover is the chaos test
// of docs/resilience.md §15. For a fixed time, 8 clients send a mix of OpenAI
// and Anthropic, streaming and non-streaming requests for the bare model
// "m" and the combo "chaos-combo" while a seeded schedule switches the two
// chaotic providers between fault mixes (latency, timeouts, resets, 503
// bursts, stalls). The healthy provider is always a candidate, so every
// client request must succeed. The chaotic breakers must open during the
// run and, once the faults stop, close again through traffic after their
// reset timeout. At the end no goroutine is left behind and the post-GC
// heap grew by less than 20 MB over the warm-up.
func TestChaosZeroClientFailuresWhileBreakersOpenAndRecover(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	run := 15 * time.Second
	switch {
	case testing.Short():
		run = 5 * time.Second
	case raceEnabled():
		run = 10 * time.Second
	}
	const workers = 8
	h := startQuiet(t, chaosConfig)
	cli := loadClient()
	mix := loadMix("m", "chaos-combo")

	// Warm-up on healthy upstreams, then the heap baseline.
	for i := 0; i < 20*len(mix); i++ {
		if res := mix[i%len(mix)].do(cli, h.url, i); res.err != nil {
			t.Fatalf("warm-up: %v", res.err)
		}
	}
	heapBefore := postGCHeap()

	var (
		seq       atomic.Int64
		mu        sync.Mutex
		failures  []string
		failCount int
		total     int
		failover  int // answered after more than one attempt
		served    = map[string]int{}
		seenOpen  = map[string]bool{}
		moves     = map[string]map[string]bool{} // provider → "FROM→TO" seen
		states    = map[string]map[string]int{}
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := int(seq.Add(1))
				res := mix[i%len(mix)].do(cli, h.url, n)
				mu.Lock()
				total++
				if res.err != nil {
					failCount++
					if len(failures) < 20 {
						failures = append(failures, res.err.Error())
					}
				} else {
					served[res.provider]++
					if res.attempts != "1" {
						failover++
					}
				}
				mu.Unlock()
				time.Sleep(2 * time.Millisecond) // a client, not a CPU hog
			}
		}()
	}
	// The breaker monitor.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			b, err := breakers(cli, h.url)
			if err != nil {
				continue
			}
			mu.Lock()
			for p, v := range b {
				if states[p] == nil {
					states[p] = map[string]int{}
				}
				states[p][v.State]++
				if v.State == "OPEN" {
					seenOpen[p] = true
				}
				if moves[p] == nil {
					moves[p] = map[string]bool{}
				}
				for _, tr := range v.Transitions {
					moves[p][tr.From+"→"+tr.To] = true
					if tr.To == "OPEN" {
						seenOpen[p] = true
					}
				}
			}
			mu.Unlock()
		}
	}()

	// The seeded chaos schedule: a new fault mix every 300..800 ms.
	rng := rand.New(rand.NewPCG(chaosSeed, chaosSeed>>1))
	var schedule []string
	deadline := time.Now().Add(run)
	for time.Now().Before(deadline) {
		p := rng.IntN(len(chaosPhases))
		h.setScript(chaosScript(p, rng.Uint64()))
		schedule = append(schedule, chaosPhases[p].name)
		time.Sleep(time.Duration(300+rng.IntN(500)) * time.Millisecond)
	}
	// End on a 503 burst until both chaotic breakers are OPEN, so the
	// recovery below always starts from OPEN.
	h.setScript(chaosScript(2, rng.Uint64()))
	schedule = append(schedule, chaosPhases[2].name)
	waitOpen := time.Now().Add(10 * time.Second)
	for {
		b, err := breakers(cli, h.url)
		if err == nil && b["chaos"].State == "OPEN" && b["chaosant"].State == "OPEN" {
			break
		}
		if time.Now().After(waitOpen) {
			t.Errorf("the final 503 burst did not open both chaotic breakers: %+v (%v)", b, err)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	chaosStats := h.mock.Stats()

	mu.Lock()
	t.Logf("chaos: %s, %d phases, %d client requests, %d answered after failover, served by %v; mock saw %d calls (%d cancelled by the gateway)",
		run, len(schedule), total, failover, served, chaosStats.Total, chaosStats.Cancellations)
	t.Logf("breaker states seen while polling: %v; transitions seen: %v", states, moves)
	if failCount > 0 {
		t.Errorf("%d client-visible failures with a healthy target available; first ones:\n%s", failCount, strings.Join(failures, "\n"))
	}
	if total < 50 || failover == 0 || served["steady"] == 0 {
		t.Errorf("the chaos did not exercise failover: %d requests, %d after failover, served %v", total, failover, served)
	}
	for _, p := range []string{"chaos", "chaosant"} {
		if !seenOpen[p] {
			t.Errorf("the breaker of %s never opened under chaos (states seen %v)", p, states[p])
		}
	}
	mu.Unlock()

	// The faults stop: traffic after the reset timeout closes both
	// breakers through their HALF_OPEN probe (or the quiet period).
	h.setScript(`rules: []`)
	recovered := false
	var last map[string]breakerView
	recoverBy := time.Now().Add(25 * time.Second) // ≥ 16 × the 1 s reset (backoff cap)
	start := time.Now()
	for n := 0; time.Now().Before(recoverBy); n++ {
		res := mix[n%len(mix)].do(cli, h.url, 1_000_000+n)
		if res.err != nil {
			t.Fatalf("after the chaos stopped: %v", res.err)
		}
		b, err := breakers(cli, h.url)
		if err != nil {
			t.Fatal(err)
		}
		last = b
		if b["chaos"].State == "CLOSED" && b["chaosant"].State == "CLOSED" && b["steady"].State == "CLOSED" {
			recovered = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !recovered {
		t.Fatalf("breakers did not recover within 25 s of the chaos stopping: %+v", last)
	}
	t.Logf("breakers OPEN → CLOSED %s after the chaos stopped", time.Since(start).Round(time.Millisecond))
	for _, p := range []string{"chaos", "chaosant"} {
		tr := last[p].Transitions
		if len(tr) == 0 || tr[len(tr)-1].To != "CLOSED" {
			t.Errorf("%s: last transition is not to CLOSED: %+v", p, tr)
		}
	}
	// Healthy upstreams: the chaotic providers serve again, first attempt.
	res := loadReq{"/v1/chat/completions", "m", false}.do(cli, h.url, 2_000_000)
	if res.err != nil || res.provider != "chaos" || res.attempts != "1" {
		t.Errorf("after recovery: provider %q attempts %q err %v", res.provider, res.attempts, res.err)
	}

	heapAfter := postGCHeap()
	growth := int64(heapAfter) - int64(heapBefore)
	t.Logf("post-GC heap: %d → %d bytes (growth %d)", heapBefore, heapAfter, growth)
	if growth > 20<<20 {
		t.Errorf("post-GC heap grew by %d bytes over the chaos run (limit 20 MB)", growth)
	}

	// Close the client side first: fasthttp counts a connection that never
	// carried a request as idle only after 5 s, and the harness gives the
	// shutdown 5 s.
	cli.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	h.stopGateway()
	_ = h.mock.Close()
	goleak.VerifyNone(t, ignore,
		// fasthttp's process-wide Date header ticker, started by the first
		// server in the process and never stopped.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// fasthttp's worker-pool cleaner checks its stop channel only
		// between 10 s sleeps, so it outlives a shutdown by up to 10 s.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		// The upstream client's idle-connection cleaners (one per client
		// and per upstream host) sleep between sweeps and end once no idle
		// connection is left, up to MaxIdleConnDuration (90 s) later; their
		// connections are closed at shutdown.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"))
}
