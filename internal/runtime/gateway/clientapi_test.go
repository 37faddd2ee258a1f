package gateway_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

const chatBody = `{"model":"%s","messages":[{"role":"user","content":"hello there"}]%s}`

func chat(model, extra string) string {
	return strings.Replace(strings.Replace(chatBody, "%s", model, 1), "%s", extra, 1)
}

func TestChatNonStreamProxiesAndSetsRouteHeaders(t *testing.T) {
	h := start(t, baseConfig)
	resp := h.post("/v1/chat/completions", chat("alpha/m1", ""), "Authorization", "Bearer client-key-not-forwarded")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, readBody(t, resp))
	}
	for k, want := range map[string]string{
		"X-Breakwater-Provider": "alpha", "X-Breakwater-Connection": "a1",
		"X-Breakwater-Model": "m1", "X-Breakwater-Attempts": "1",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	m := decode(t, resp)
	choices := m["choices"].([]any)
	msg := choices[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != "echo: hello there" {
		t.Fatalf("content = %v", msg["content"])
	}
	if m["model"] != "m1" {
		t.Errorf("upstream saw model %v, want the routed model m1", m["model"])
	}
	st := h.mock.Stats()
	if st.ByKey["sk-alpha-1-secret"].Calls != 1 {
		t.Fatalf("the connection's key must replace the client's: by key %+v", st.ByKey)
	}
	if _, leaked := st.ByKey["client-key-not-forwarded"]; leaked {
		t.Fatal("client Authorization reached the upstream")
	}
}

// readSSE returns the data payloads of an SSE body in order.
func readSSE(t *testing.T, resp *http.Response) (events []string, data []string) {
	t.Helper()
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			events = append(events, strings.TrimPrefix(line, "event: "))
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading stream: %v", err)
	}
	return events, data
}

func TestChatStreamRelaysEveryChunkInOrder(t *testing.T) {
	h := start(t, baseConfig)
	h.setScript(`
rules:
  - model: m1
    responses:
      - {chunks: 6, text: "one two three four five six"}
`)
	resp := h.post("/v1/chat/completions", chat("alpha/m1", `,"stream":true`))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, readBody(t, resp))
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content-type %q", ct)
	}
	if resp.Header.Get("X-Breakwater-Provider") != "alpha" {
		t.Fatalf("route headers missing on a stream")
	}
	_, data := readSSE(t, resp)
	if len(data) < 2 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("stream must end with [DONE]; got %q", data)
	}
	var text strings.Builder
	for _, d := range data[:len(data)-1] {
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		for _, c := range chunk.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if text.String() != "one two three four five six" {
		t.Fatalf("chunks reassemble to %q", text.String())
	}
}

func TestMessagesNonStreamAndStream(t *testing.T) {
	h := start(t, baseConfig)
	body := `{"model":"claude/c1","max_tokens":64,"messages":[{"role":"user","content":"hi claude"}]}`
	resp := h.post("/v1/messages", body, "anthropic-version", "2023-06-01")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, readBody(t, resp))
	}
	m := decode(t, resp)
	content := m["content"].([]any)[0].(map[string]any)
	if content["text"] != "echo: hi claude" || m["type"] != "message" {
		t.Fatalf("unexpected message %v", m)
	}
	if h.mock.Stats().ByKey["sk-ant-secret-1"].Calls != 1 {
		t.Fatal("anthropic connection key not used")
	}

	resp = h.post("/v1/messages", strings.Replace(body, `"max_tokens"`, `"stream":true,"max_tokens"`, 1))
	if resp.StatusCode != 200 {
		t.Fatalf("stream status %d", resp.StatusCode)
	}
	events, _ := readSSE(t, resp)
	want := []string{"message_start", "content_block_start"}
	for i, w := range want {
		if i >= len(events) || events[i] != w {
			t.Fatalf("events %v, want prefix %v", events, want)
		}
	}
	if events[len(events)-1] != "message_stop" {
		t.Fatalf("stream must end with message_stop: %v", events)
	}
}

func TestModelsListsProviderModelsAndCombos(t *testing.T) {
	h := start(t, baseConfig)
	resp, err := http.Get(h.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, resp)
	var ids []string
	for _, d := range m["data"].([]any) {
		ids = append(ids, d.(map[string]any)["id"].(string))
	}
	want := []string{"alpha/m1", "alpha/shared", "beta/shared", "claude/c1", "combo1"}
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("models %v, want %v", ids, want)
	}
}

func TestBareModelIsServedByFirstProviderListingIt(t *testing.T) {
	h := start(t, baseConfig)
	resp := h.post("/v1/chat/completions", chat("shared", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Provider") != "alpha" {
		t.Fatalf("status %d provider %q", resp.StatusCode, resp.Header.Get("X-Breakwater-Provider"))
	}
}

func TestBadInputAnswers(t *testing.T) {
	h := start(t, baseConfig)
	cases := []struct {
		name, path, body string
		status           int
		code, param      string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"model":`, 400, "invalid_request_error", "body"},
		{"missing model", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request_error", "model"},
		{"missing messages", "/v1/chat/completions", `{"model":"alpha/m1"}`, 400, "invalid_request_error", "messages"},
		{"unknown model", "/v1/chat/completions", chat("nope/none", ""), 404, "model_not_found", "model"},
		{"oversize", "/v1/chat/completions", chat("alpha/m1", `,"pad":"`+strings.Repeat("x", 5000)+`"`), 413, "request_too_large", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.post(tc.path, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, readBody(t, resp))
			}
			e := decode(t, resp)["error"].(map[string]any)
			if e["code"] != tc.code {
				t.Fatalf("code %v, want %s (%v)", e["code"], tc.code, e)
			}
			if tc.param != "" && (e["param"] != tc.param || !strings.Contains(e["message"].(string), tc.param)) {
				t.Fatalf("error must name field %q: %v", tc.param, e)
			}
		})
	}
	// Anthropic shape on /v1/messages.
	resp := h.post("/v1/messages", `{"model":"claude/c1"}`)
	m := decode(t, resp)
	if resp.StatusCode != 400 || m["type"] != "error" || m["error"].(map[string]any)["type"] != "invalid_request_error" {
		t.Fatalf("anthropic error shape: %d %v", resp.StatusCode, m)
	}
	if h.mock.Stats().Total != 0 {
		t.Fatalf("bad input must never reach upstream; mock saw %d calls", h.mock.Stats().Total)
	}
}

const keyedConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state:
  backend: memory
resilience:
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: alpha
    kind: openai
    base_url: MOCK_URL/v1
    models: [m1]
    connections:
      - {id: a1, api_key: sk-upstream-secret-xyz}
keys:
  - {id: app1, key: client-secret-key-abc}
`

func TestClientKeysAndSecretsNeverLogged(t *testing.T) {
	h := start(t, keyedConfig)
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong-key-123"}, {"x-api-key", "wrong-key-456"}} {
		resp := h.post("/v1/chat/completions", chat("alpha/m1", ""), hdr...)
		e := decode(t, resp)
		if resp.StatusCode != 401 {
			t.Fatalf("no/wrong key: status %d", resp.StatusCode)
		}
		if b, _ := json.Marshal(e); strings.Contains(string(b), "wrong-key") {
			t.Fatalf("error body echoes the presented key: %s", b)
		}
	}
	resp := h.post("/v1/chat/completions", chat("alpha/m1", ""), "Authorization", "Bearer client-secret-key-abc")
	readBody(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("valid bearer key: %d", resp.StatusCode)
	}
	resp = h.post("/v1/chat/completions", chat("alpha/m1", ""), "x-api-key", "client-secret-key-abc")
	readBody(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("valid x-api-key: %d", resp.StatusCode)
	}
	// Admin API without / with a wrong token.
	for _, tok := range []string{"", "Bearer nope"} {
		req, _ := http.NewRequest(http.MethodGet, h.url+"/api/monitoring/health", nil)
		if tok != "" {
			req.Header.Set("Authorization", tok)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, r)
		if r.StatusCode != 401 {
			t.Fatalf("admin without token: %d", r.StatusCode)
		}
	}
	// An upstream failure path too, so error logging is exercised.
	h.setScript(`rules: [{responses: [{status: 500}]}]`)
	readBody(t, h.post("/v1/chat/completions", chat("alpha/m1", ""), "x-api-key", "client-secret-key-abc"))
	logs := h.logs.String()
	if !strings.Contains(logs, "request_id") {
		t.Fatalf("no access log lines captured:\n%s", logs)
	}
	for _, secret := range []string{"client-secret-key-abc", "sk-upstream-secret-xyz", "test-admin-token-0123456789", "wrong-key-123", "wrong-key-456"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("secret %q appears in the logs", secret)
		}
	}
}

func TestUpstreamSeesNoSessionOrLeaseHeaders(t *testing.T) {
	var mu sync.Mutex
	var seen http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Header.Clone()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`))
	}))
	defer up.Close()
	cfg := strings.ReplaceAll(keyedConfig, "MOCK_URL", up.URL)
	cfg = strings.Replace(cfg, "{id: app1, key: client-secret-key-abc}", "{id: app1, key: client-secret-key-abc, scopes: [lease:exclusive], allowed_connections: [alpha/a1]}", 1)
	cfg = strings.Replace(cfg, "resilience:\n", "resilience:\n  session_affinity_ttl_ms: 60000\n", 1)
	h := start(t, cfg)
	owner := "vlo_" + strings.Repeat("A", 43)
	lr := h.post("/api/v1/session-leases", `{"action":"acquire"}`, "x-api-key", "client-secret-key-abc", "X-Breakwater-Lease-Owner", owner)
	lm := decode(t, lr)
	if lr.StatusCode != 200 || lm["state"] != "ACTIVE" || lm["generation"].(float64) != 1 {
		t.Fatalf("acquire: %d %v", lr.StatusCode, lm)
	}
	resp := h.post("/v1/chat/completions", chat("alpha/m1", ""),
		"x-api-key", "client-secret-key-abc",
		"X-Session-Id", "sess-1", "x-codex-session-id", "sess-2", "x-breakwater-session", "sess-3",
		"X-Breakwater-Lease-Owner", owner, "X-Breakwater-Lease-Generation", "1", "Cookie", "a=b")
	readBody(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if logs := h.logs.String(); strings.Contains(logs, owner) || strings.Contains(logs, "sess-1") {
		t.Fatal("lease owner or session id in the logs")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{"X-Session-Id", "X-Codex-Session-Id", "X-Breakwater-Session", "X-Breakwater-Lease-Owner", "X-Breakwater-Lease-Generation", "X-Api-Key", "Cookie"} {
		if v := seen.Get(k); v != "" {
			t.Errorf("header %s forwarded upstream: %q", k, v)
		}
	}
	if got := seen.Get("Authorization"); got != "Bearer sk-upstream-secret-xyz" {
		t.Errorf("upstream Authorization = %q, want the connection's key", got)
	}
}

func TestClientDisconnectMidStreamCancelsUpstream(t *testing.T) {
	h := start(t, baseConfig)
	h.setScript(`
rules:
  - model: m1
    responses:
      - {chunks: 200, chunk_interval_ms: 20}
`)
	resp := h.post("/v1/chat/completions", chat("alpha/m1", `,"stream":true`))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	got := 0
	for got < 2 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			got++
		}
	}
	resp.Body.Close() // the client goes away after two chunks
	waitFor(t, "the upstream call to be cancelled", func() bool { return h.mock.Stats().Cancellations == 1 })
	st := h.mock.Stats()
	if st.Completed != 0 {
		t.Fatalf("upstream ran to completion after the client left: %+v", st)
	}
	waitFor(t, "the access line of the aborted stream", func() bool { return strings.Contains(h.logs.String(), "client_abort") })
}

func TestMetricsEndpoint(t *testing.T) {
	h := start(t, baseConfig)
	h.setScript(`rules: [{key: sk-alpha-1-secret, responses: [{status: 503}]}]`)
	readBody(t, h.post("/v1/chat/completions", chat("alpha/m1", "")))
	req, _ := http.NewRequest(http.MethodGet, h.url+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if resp.StatusCode != 401 {
		t.Fatalf("/metrics without the admin token: %d", resp.StatusCode)
	}
	req.Header.Set("Authorization", "Bearer test-admin-token-0123456789")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	text := string(readBody(t, resp))
	for _, want := range []string{
		`breakwater_attempts_total{connection="a1",model="m1",provider="alpha",reason="transient"} 1`,
		`breakwater_attempts_total{connection="a2",model="m1",provider="alpha",reason="success"} 1`,
		`breakwater_requests_total{code="",endpoint="chat_completions",model="m1",provider="alpha",status="2xx"} 1`,
		`breakwater_breaker_state{provider="alpha"} 0`,
		`breakwater_attempts_per_request_bucket{le="2"} 1`,
		"breakwater_gateway_overhead_seconds_count 1",
		`breakwater_policy_decisions_total{reason="transient",source="default"} 1`,
		`breakwater_admission_running{connection="a1",provider="alpha"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, secret := range []string{"sk-alpha-1-secret", "sk-alpha-2-secret", "test-admin-token"} {
		if strings.Contains(text, secret) {
			t.Fatalf("secret %q in metrics", secret)
		}
	}
}
