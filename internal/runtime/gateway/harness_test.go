package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/gateway"
	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// harness is a gateway in front of a real mock upstream, both on loopback.
type harness struct {
	t       testing.TB
	mockAdr string
	mock    *mock.Server
	gw      *gateway.Gateway
	url     string
	logs    *syncBuffer
	log     hclog.Logger
	clock   engine.Clock
	cfgYAML string
}

// start runs the mock and a gateway whose configuration is cfgYAML with
// MOCK_URL replaced by the mock's base URL, on the system clock.
func start(t testing.TB, cfgYAML string) *harness {
	t.Helper()
	return startWith(t, cfgYAML, nil)
}

// startWith is start with an injected clock for the resilience timers (nil
// = system clock).
func startWith(t testing.TB, cfgYAML string, clock engine.Clock) *harness {
	t.Helper()
	logs := &syncBuffer{}
	log := hclog.New(&hclog.LoggerOptions{Name: "breakwater", Level: hclog.Debug, Output: logs})
	m := mock.New(nil, log)
	maddr, err := m.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("starting mock: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	h := &harness{t: t, mock: m, logs: logs, log: log, clock: clock, mockAdr: maddr,
		cfgYAML: strings.ReplaceAll(cfgYAML, "MOCK_URL", "http://"+maddr)}
	h.startGateway()
	return h
}

// startGateway (re)starts the gateway on the harness's configuration.
func (h *harness) startGateway() {
	t := h.t
	t.Helper()
	cfg, err := config.Parse([]byte(h.cfgYAML), "test.yaml")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.Start(context.Background(), cfg, gateway.Options{Logger: h.log, Listener: ln, Version: "test", Clock: h.clock})
	if err != nil {
		t.Fatalf("starting gateway: %v", err)
	}
	h.gw, h.url = gw, "http://"+gw.Addr()
	t.Cleanup(h.stopGateway)
}

// stopGateway shuts the gateway down (idempotent).
func (h *harness) stopGateway() {
	if h.gw == nil {
		return
	}
	// Connections the client dialled but never used look active to the
	// server until they close; closing the client's idle ones lets the
	// graceful shutdown finish at once.
	http.DefaultClient.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.gw.Close(ctx); err != nil {
		h.t.Errorf("closing gateway: %v", err)
	}
	h.gw = nil
}

// admin sends an admin API request with the test admin token.
func (h *harness) admin(method, path, body string) (int, map[string]any) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer test-admin-token-0123456789")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, decode(h.t, resp)
}

// post sends a JSON body with optional header pairs.
func (h *harness) post(path, body string, hdr ...string) *http.Response {
	h.t.Helper()
	return h.postWith(path, body, hdr...)
}

func readBody(t testing.TB, r *http.Response) []byte {
	t.Helper()
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return b
}

// decode reads a JSON body into a generic map.
func decode(t testing.TB, r *http.Response) map[string]any {
	t.Helper()
	b := readBody(t, r)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, b)
	}
	return m
}

// setScript replaces the mock's script.
func (h *harness) setScript(yamlText string) {
	h.t.Helper()
	s, err := mock.ParseScript([]byte(yamlText))
	if err != nil {
		h.t.Fatalf("mock script: %v", err)
	}
	h.mock.SetScript(s)
}

// waitFor polls cond until it holds or the deadline passes; for effects
// that happen asynchronously on the far side of a socket.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

const baseConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
  max_request_bytes: 4096
state:
  backend: memory
resilience:
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: alpha
    kind: openai
    base_url: MOCK_URL/v1
    models: [m1, shared]
    connections:
      - {id: a1, api_key: sk-alpha-1-secret}
      - {id: a2, api_key: sk-alpha-2-secret}
  - id: beta
    kind: openai
    base_url: MOCK_URL/v1
    models: [shared]
    connections:
      - {id: b1, api_key: sk-beta-1-secret}
  - id: claude
    kind: anthropic
    base_url: MOCK_URL/v1
    models: [c1]
    connections:
      - {id: c1key, api_key: sk-ant-secret-1}
combos:
  - name: combo1
    strategy: priority
    targets:
      - {model: alpha/m1}
      - {model: beta/shared}
`

// mockURL is the mock upstream's base URL.
func (h *harness) mockURL() string { return "http://" + h.mockAdr }

// metricsText reads GET /metrics.
func (h *harness) metricsText() string {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.url+"/metrics", nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer test-admin-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(readBody(h.t, resp))
}

// sumMetric adds the samples of a metric family in Prometheus text.
func sumMetric(t testing.TB, text, name string) float64 {
	t.Helper()
	total := 0.0
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		total += v
	}
	return total
}
