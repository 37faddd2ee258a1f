package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
)

// recorded is what the upstream received of one call.
type recorded struct {
	path, query string
	header      http.Header
	body        []byte
}

// recorder is an upstream that records every call, then answers it with
// the mock.
type recorder struct {
	mu    sync.Mutex
	calls []recorded
	url   string
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{}
	m := mock.New(nil, nil)
	t.Cleanup(func() { _ = m.Close() })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.calls = append(r.calls, recorded{path: req.URL.Path, query: req.URL.RawQuery, header: req.Header.Clone(), body: body})
		r.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(body))
		m.Handler().ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *recorder) last(t *testing.T) recorded {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		t.Fatal("the upstream was not called")
	}
	return r.calls[len(r.calls)-1]
}

const recorderConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
  max_request_bytes: 4096
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: oa
    kind: openai
    base_url: REC_URL/v1
    models: [m1]
    connections: [{id: o1, api_key: sk-oa}]
  - id: an
    kind: anthropic
    base_url: REC_URL/v1
    models: [c1]
    connections: [{id: k1, api_key: sk-an}]
`

// On a same-format route the upstream receives the client's body byte for
// byte — unknown top-level and nested fields, key order, spacing and
// escapes included — with only the model value rewritten.
func TestSameFormatBodiesPassThroughByteForByte(t *testing.T) {
	rec := newRecorder(t)
	h := start(t, strings.ReplaceAll(recorderConfig, "REC_URL", rec.url))
	cases := []struct {
		path, body, model, upstreamModel string
		hdr                              []string
	}{
		{"/v1/chat/completions", `{ "x_vendor" : {"nested":[1,{"deep":"\u00e9"}]}, "model":"oa/m1","messages":[{"role":"user","content":"hi","x_part_field":true}],  "future_option":1.50}`,
			"oa/m1", "m1", nil},
		{"/v1/messages", `{"model":"an/c1","max_tokens":16,"messages":[{"role":"user","content":[{"type":"text","text":"hi","x_block":{"a":null}}]}],"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]},"x_top":"keep me"}`,
			"an/c1", "c1", []string{"anthropic-version", "2023-06-01"}},
		{"/v1/responses", `{"model":"oa/m1","input":[{"role":"user","content":[{"type":"input_text","text":"hi","x_part":1}]}],"x_future":{"b":[true]}}`,
			"oa/m1", "m1", nil},
	}
	for _, tc := range cases {
		resp := h.post(tc.path, tc.body, tc.hdr...)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tc.path, resp.StatusCode, readBody(t, resp))
		}
		readBody(t, resp)
		want := strings.Replace(tc.body, `"`+tc.model+`"`, `"`+tc.upstreamModel+`"`, 1)
		if got := rec.last(t).body; string(got) != want {
			t.Errorf("%s: upstream body\n%s\nwant\n%s", tc.path, got, want)
		}
	}
}

// ?beta=true and anthropic-beta reach an Anthropic-kind provider (Claude
// Code's request shape); a translated route to an OpenAI-kind provider
// drops both (each beta's feature travels in a body field the translation
// carries or refuses), and no other query parameter is passed on.
func TestBetaQueryAndHeaderForwarding(t *testing.T) {
	rec := newRecorder(t)
	h := start(t, strings.ReplaceAll(recorderConfig, "REC_URL", rec.url))
	body := `{"model":"%s","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	hdr := []string{"anthropic-version", "2023-06-01", "anthropic-beta", "claude-code-20250219,interleaved-thinking-2025-05-14"}
	resp := h.post("/v1/messages?beta=true&x-other=1", fmt.Sprintf(body, "an/c1"), hdr...)
	readBody(t, resp)
	got := rec.last(t)
	if resp.StatusCode != 200 || got.path != "/v1/messages" || got.query != "beta=true" ||
		got.header.Get("anthropic-beta") != "claude-code-20250219,interleaved-thinking-2025-05-14" || got.header.Get("anthropic-version") != "2023-06-01" {
		t.Fatalf("anthropic kind: %d %s?%s %v", resp.StatusCode, got.path, got.query, got.header)
	}
	resp = h.post("/v1/messages/count_tokens?beta=true", fmt.Sprintf(body, "an/c1"), hdr...)
	readBody(t, resp)
	if got = rec.last(t); resp.StatusCode != 200 || got.path != "/v1/messages/count_tokens" || got.query != "beta=true" {
		t.Fatalf("count_tokens: %d %s?%s", resp.StatusCode, got.path, got.query)
	}
	resp = h.post("/v1/messages?beta=true", fmt.Sprintf(body, "oa/m1"), hdr...)
	readBody(t, resp)
	got = rec.last(t)
	if resp.StatusCode != 200 || got.path != "/v1/chat/completions" || got.query != "" || got.header.Get("anthropic-beta") != "" || got.header.Get("anthropic-version") != "" {
		t.Fatalf("openai kind: %d %s?%s %v", resp.StatusCode, got.path, got.query, got.header)
	}
}

// The new endpoints through the gateway: count_tokens (forwarded or
// estimated), embeddings and legacy completions, each with the route
// headers; an Anthropic-kind target of embeddings is a 400 that says why.
func TestEndpointsThroughTheGateway(t *testing.T) {
	h := start(t, baseConfig)
	count := `{"model":"%s","messages":[{"role":"user","content":"hello there"}]}`
	resp := h.post("/v1/messages/count_tokens", fmt.Sprintf(count, "claude/c1"), "anthropic-version", "2023-06-01")
	m := decode(t, resp)
	if resp.StatusCode != 200 || m["input_tokens"] == nil || resp.Header.Get("X-Breakwater-Provider") != "claude" || h.mock.Stats().Total != 1 {
		t.Fatalf("count_tokens forwarded: %d %v", resp.StatusCode, m)
	}
	resp = h.post("/v1/messages/count_tokens", fmt.Sprintf(count, "alpha/m1"))
	m = decode(t, resp)
	if resp.StatusCode != 200 || m["input_tokens"].(float64) < 1 || resp.Header.Get("X-Breakwater-Token-Count") != "estimated" || h.mock.Stats().Total != 1 {
		t.Fatalf("count_tokens estimated: %d %v %v", resp.StatusCode, m, resp.Header)
	}
	resp = h.post("/v1/messages/count_tokens", fmt.Sprintf(count, "claude/c1")[:20])
	m = decode(t, resp)
	if resp.StatusCode != 400 || m["type"] != "error" {
		t.Fatalf("count_tokens bad body: %d %v (want the Anthropic error shape)", resp.StatusCode, m)
	}
	resp = h.post("/v1/embeddings", `{"model":"alpha/m1","input":"alpha"}`)
	m = decode(t, resp)
	if resp.StatusCode != 200 || m["object"] != "list" || resp.Header.Get("X-Breakwater-Connection") != "a1" {
		t.Fatalf("embeddings: %d %v", resp.StatusCode, m)
	}
	resp = h.post("/v1/embeddings", `{"model":"claude/c1","input":"alpha"}`)
	m = decode(t, resp)
	if resp.StatusCode != 400 || m["error"].(map[string]any)["code"] != "wrong_endpoint" {
		t.Fatalf("embeddings → anthropic: %d %v", resp.StatusCode, m)
	}
	resp = h.post("/v1/embeddings", `{"model":"alpha/m1","input":"alpha","stream":true}`)
	m = decode(t, resp)
	if resp.StatusCode != 400 || m["error"].(map[string]any)["param"] != "stream" {
		t.Fatalf("embeddings stream: %d %v", resp.StatusCode, m)
	}
	resp = h.post("/v1/completions", `{"model":"alpha/m1","prompt":"hello there"}`)
	m = decode(t, resp)
	if resp.StatusCode != 200 || m["object"] != "text_completion" {
		t.Fatalf("completions: %d %v", resp.StatusCode, m)
	}
	resp = h.post("/v1/completions", `{"model":"alpha/m1"}`)
	m = decode(t, resp)
	if resp.StatusCode != 400 || m["error"].(map[string]any)["param"] != "prompt" {
		t.Fatalf("completions without prompt: %d %v", resp.StatusCode, m)
	}
}

// get sends a GET with optional header pairs.
func (h *harness) get(path string, hdr ...string) *http.Response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.url+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	return resp
}

// GET /v1/models in Anthropic's shape when the request carries
// anthropic-version (pages of limit models, after_id / before_id
// cursors), GET /v1/models/{id} in both shapes.
func TestModelsInBothShapes(t *testing.T) {
	h := start(t, baseConfig)
	av := []string{"anthropic-version", "2023-06-01"}
	ids := func(m map[string]any) string {
		var out []string
		for _, d := range m["data"].([]any) {
			e := d.(map[string]any)
			if e["type"] != "model" || e["display_name"] != e["id"] || e["created_at"] != "1970-01-01T00:00:00Z" {
				t.Fatalf("not an Anthropic ModelInfo: %v", e)
			}
			out = append(out, e["id"].(string))
		}
		return strings.Join(out, ",")
	}
	m := decode(t, h.get("/v1/models", av...))
	if ids(m) != "alpha/m1,alpha/shared,beta/shared,claude/c1,combo1" || m["has_more"] != false || m["first_id"] != "alpha/m1" || m["last_id"] != "combo1" {
		t.Fatalf("anthropic list %v", m)
	}
	m = decode(t, h.get("/v1/models?limit=2", av...))
	if ids(m) != "alpha/m1,alpha/shared" || m["has_more"] != true || m["last_id"] != "alpha/shared" {
		t.Fatalf("first page %v", m)
	}
	m = decode(t, h.get("/v1/models?limit=2&after_id=alpha/shared", av...))
	if ids(m) != "beta/shared,claude/c1" || m["has_more"] != true {
		t.Fatalf("second page %v", m)
	}
	m = decode(t, h.get("/v1/models?limit=2&before_id=claude/c1", av...))
	if ids(m) != "alpha/shared,beta/shared" || m["has_more"] != true {
		t.Fatalf("page before %v", m)
	}
	for _, bad := range []string{"limit=0", "limit=1001", "limit=x", "after_id=nope", "after_id=combo1&before_id=combo1"} {
		resp := h.get("/v1/models?"+bad, av...)
		m = decode(t, resp)
		if resp.StatusCode != 400 || m["type"] != "error" {
			t.Fatalf("%s: %d %v", bad, resp.StatusCode, m)
		}
	}
	m = decode(t, h.get("/v1/models/claude%2Fc1", av...))
	if m["type"] != "model" || m["id"] != "claude/c1" {
		t.Fatalf("anthropic model %v", m)
	}
	resp := h.get("/v1/models/claude/c1")
	m = decode(t, resp)
	if resp.StatusCode != 200 || m["object"] != "model" || m["id"] != "claude/c1" || m["owned_by"] != "claude" {
		t.Fatalf("openai model %v", m)
	}
	resp = h.get("/v1/models/nope", av...)
	m = decode(t, resp)
	if resp.StatusCode != 404 || m["type"] != "error" || m["error"].(map[string]any)["type"] != "not_found_error" {
		t.Fatalf("anthropic unknown model: %d %v", resp.StatusCode, m)
	}
	resp = h.get("/v1/models/nope")
	m = decode(t, resp)
	if resp.StatusCode != 404 || m["error"].(map[string]any)["code"] != "model_not_found" {
		t.Fatalf("openai unknown model: %d %v", resp.StatusCode, m)
	}
}

// A client that writes its whole oversized body before it reads (the
// race the official SDKs lose when the server closes early) reads the
// 413 with its JSON error: the connection lingers, discarding the body,
// instead of resetting. The same connection is not reused.
func TestOversizedBodyAnswerReachesAClientStillWriting(t *testing.T) {
	h := start(t, baseConfig) // max_request_bytes: 4096
	for try := range 3 {
		conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		body := bytes.Repeat([]byte("x"), 8<<20)
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		head := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
		if _, err := conn.Write([]byte(head)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the server refuses on the header, before the body
		if _, err := conn.Write(body); err != nil {
			t.Fatalf("try %d: writing the body after the refusal: %v (the server reset the connection)", try, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("try %d: reading the answer: %v", try, err)
		}
		m := decode(t, resp)
		if resp.StatusCode != 413 || m["error"].(map[string]any)["code"] != "request_too_large" || !resp.Close {
			t.Fatalf("try %d: %d %v close %v", try, resp.StatusCode, m, resp.Close)
		}
		_ = conn.Close()
	}
	// Keep-alive requests of normal size are not affected.
	for range 3 {
		resp := h.post("/v1/chat/completions", chat("alpha/m1", ""))
		if readBody(t, resp); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// Legacy completions ride the same attempt loop as chat: a 503 on the
// first connection fails over to the second, then a combo falls over to
// its next provider; the client gets one text_completion, with the route
// headers of the connection that served.
func TestLegacyCompletionsFailOver(t *testing.T) {
	h := start(t, baseConfig)
	h.setScript(`rules: [{key: sk-alpha-1-secret, path: /v1/completions, responses: [{status: 503}]}]`)
	resp := h.post("/v1/completions", `{"model":"alpha/m1","prompt":"hello there"}`)
	m := decode(t, resp)
	if resp.StatusCode != 200 || m["object"] != "text_completion" || resp.Header.Get("X-Breakwater-Connection") != "a2" ||
		resp.Header.Get("X-Breakwater-Attempts") != "2" {
		t.Fatalf("connection failover: %d via %s (%s attempts): %v", resp.StatusCode,
			resp.Header.Get("X-Breakwater-Connection"), resp.Header.Get("X-Breakwater-Attempts"), m)
	}
	h.setScript(`rules: [{key: sk-alpha-*, path: /v1/completions, responses: [{status: 503}]}]`)
	resp = h.post("/v1/completions", `{"model":"combo1","prompt":"hello there"}`)
	m = decode(t, resp)
	if resp.StatusCode != 200 || m["object"] != "text_completion" || resp.Header.Get("X-Breakwater-Provider") != "beta" {
		t.Fatalf("combo failover: %d via %s: %v", resp.StatusCode, resp.Header.Get("X-Breakwater-Provider"), m)
	}
	if st := h.mock.Stats(); st.ByKey["sk-beta-1-secret"].Calls != 1 {
		t.Fatalf("beta served %d calls, want 1: %+v", st.ByKey["sk-beta-1-secret"].Calls, st.ByKey)
	}
}
