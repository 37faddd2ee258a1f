package gateway_test

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// streamConfig routes "fast/m" over two connections, with a short content
// stall budget so stalls are detected quickly.
const streamConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
  stream_recovery: {content_stall_timeout_ms: 300, commit_point: COMMIT}
providers:
  - id: fast
    kind: openai
    base_url: MOCK_URL/v1
    models: [m]
    connections:
      - {id: s1, api_key: sk-s1}
      - {id: s2, api_key: sk-s2}
  - id: claude
    kind: anthropic
    base_url: MOCK_URL/v1
    models: [c]
    connections:
      - {id: k, api_key: sk-claude}
`

func streamCfg(commit string) string { return strings.Replace(streamConfig, "COMMIT", commit, 1) }

// openAIText reassembles the text of OpenAI chunks and reports the error
// code of a terminal error event, if any.
func openAIText(t *testing.T, data []string) (text string, done bool, errCode string) {
	t.Helper()
	var b strings.Builder
	for _, d := range data {
		if d == "[DONE]" {
			done = true
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(d), &chunk); err != nil {
			t.Fatalf("chunk %q is not JSON: %v", d, err)
		}
		if chunk.Error != nil {
			errCode = chunk.Error.Code
		}
		for _, c := range chunk.Choices {
			b.WriteString(c.Delta.Content)
		}
	}
	return b.String(), done, errCode
}

func TestStallBeforeCommitFailsOverToOneCleanStream(t *testing.T) {
	h := start(t, streamCfg("first_content"))
	h.setScript(`rules: [{key: sk-s1, responses: [{stall_after_chunks: 0}]}]`)
	resp := h.post("/v1/chat/completions", chat("fast/m", `,"stream":true`))
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "s2" || resp.Header.Get("X-Breakwater-Attempts") != "2" {
		t.Fatalf("status %d via %s after %s attempts", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"), resp.Header.Get("X-Breakwater-Attempts"))
	}
	_, data := readSSE(t, resp)
	text, done, code := openAIText(t, data)
	if text != "echo: hello there" || !done || code != "" {
		t.Fatalf("client stream: %q done=%v err=%q", text, done, code)
	}
	// The stall cooled nothing (stream_stall_cooldown is off by default).
	_, body := h.admin("GET", "/api/monitoring/health", "")
	if body["cooling_connections"].(float64) != 0 {
		t.Fatalf("a stream stall cooled a connection: %v", body)
	}
	waitFor(t, "the stalled upstream call to be cancelled", func() bool { return h.mock.Stats().ByKey["sk-s1"].Cancellations == 1 })
}

func TestStallAfterCommitEndsWithATerminalErrorEvent(t *testing.T) {
	h := start(t, streamCfg("first_byte"))
	h.setScript(`rules: [{key: sk-s1, responses: [{stall_after_chunks: 2, chunks: 6, text: "a b c d e f"}]}]`)
	resp := h.post("/v1/chat/completions", chat("fast/m", `,"stream":true`))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	_, data := readSSE(t, resp)
	text, done, code := openAIText(t, data)
	if done || code != "stream_content_stall" || text == "" || strings.Count(text, " ") > 2 {
		t.Fatalf("after commit: text %q done=%v code=%q (%v)", text, done, code, data)
	}
	if calls := h.mock.Stats().ByKey["sk-s2"].Calls; calls != 0 {
		t.Fatal("a committed stream was replayed on another connection")
	}
}

func TestReasoningFramesNeverTripTheStallWatchdog(t *testing.T) {
	h := start(t, streamCfg("first_byte"))
	// 10 reasoning frames 100 ms apart: a full second of reasoning against a 300 ms budget.
	h.setScript(`rules: [{key: sk-s1, responses: [{reasoning_chunks: 10, chunk_interval_ms: 100}]}]`)
	resp := h.post("/v1/chat/completions", chat("fast/m", `,"stream":true`))
	_, data := readSSE(t, resp)
	text, done, code := openAIText(t, data)
	if !done || code != "" || text != "echo: hello there" || resp.Header.Get("X-Breakwater-Connection") != "s1" {
		t.Fatalf("reasoning stream: %q done=%v code=%q via %s", text, done, code, resp.Header.Get("X-Breakwater-Connection"))
	}
}

func TestErrorEventAsFirstEventFailsOver(t *testing.T) {
	h := start(t, streamCfg("first_byte"))
	h.setScript(`rules: [{key: sk-s1, responses: [{error_event: overloaded_error}]}]`)
	resp := h.post("/v1/chat/completions", chat("fast/m", `,"stream":true`))
	_, data := readSSE(t, resp)
	text, done, _ := openAIText(t, data)
	if !done || text != "echo: hello there" || resp.Header.Get("X-Breakwater-Connection") != "s2" {
		t.Fatalf("error event failover: %q done=%v via %s", text, done, resp.Header.Get("X-Breakwater-Connection"))
	}
}

func TestOpenAIClientReachesAnthropicProvider(t *testing.T) {
	h := start(t, streamCfg("first_byte"))
	resp := h.post("/v1/chat/completions", `{"model":"claude/c","max_tokens":50,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi from openai"}]}`)
	m := decode(t, resp)
	if resp.StatusCode != 200 || m["object"] != "chat.completion" {
		t.Fatalf("non-stream: %d %v", resp.StatusCode, m)
	}
	msg := m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != "echo: hi from openai" {
		t.Fatalf("content %v", msg["content"])
	}
	if h.mock.Stats().ByKeyModel["sk-claude|c"] != 1 {
		t.Fatalf("the anthropic upstream was not called: %v", h.mock.Stats().ByKeyModel)
	}
	resp = h.post("/v1/chat/completions", `{"model":"claude/c","stream":true,"messages":[{"role":"user","content":"stream me"}]}`)
	_, data := readSSE(t, resp)
	text, done, code := openAIText(t, data)
	if text != "echo: stream me" || !done || code != "" {
		t.Fatalf("stream: %q done=%v code=%q", text, done, code)
	}
}

func TestAnthropicClientReachesOpenAIProvider(t *testing.T) {
	h := start(t, streamCfg("first_byte"))
	resp := h.post("/v1/messages", `{"model":"fast/m","max_tokens":50,"system":"be brief","messages":[{"role":"user","content":"hi from anthropic"}]}`)
	m := decode(t, resp)
	if resp.StatusCode != 200 || m["type"] != "message" {
		t.Fatalf("non-stream: %d %v", resp.StatusCode, m)
	}
	if txt := m["content"].([]any)[0].(map[string]any)["text"]; txt != "echo: hi from anthropic" {
		t.Fatalf("content %v", txt)
	}
	resp = h.post("/v1/messages", `{"model":"fast/m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"stream me"}]}`)
	events, data := readSSE(t, resp)
	if events[0] != "message_start" || events[len(events)-1] != "message_stop" {
		t.Fatalf("event sequence %v", events)
	}
	var b strings.Builder
	for _, d := range data {
		var ev struct {
			Delta struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"delta"`
		}
		if json.Unmarshal([]byte(d), &ev) == nil && ev.Delta.Type == "text_delta" {
			b.WriteString(ev.Delta.Text)
		}
	}
	if b.String() != "echo: stream me" {
		t.Fatalf("anthropic stream text %q", b.String())
	}
}

// TestStreamHeapGrowth runs 50 warm-up then 500 SSE streams of 10 chunks
// through the gateway; the post-GC heap may grow by less than 5 MB.
func TestStreamHeapGrowth(t *testing.T) {
	if testing.Short() {
		t.Skip("heap test skipped in -short mode")
	}
	h := start(t, streamCfg("first_byte"))
	h.setScript(`rules: [{responses: [{chunks: 10, text: "one two three four five six seven eight nine ten"}]}]`)
	run := func(n int) {
		for i := 0; i < n; i++ {
			resp := h.post("/v1/chat/completions", chat("fast/m", `,"stream":true`))
			_, data := readSSE(t, resp)
			if _, done, _ := openAIText(t, data); !done {
				t.Fatalf("stream %d incomplete", i)
			}
		}
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	run(50)
	before := heap()
	run(500)
	after := heap()
	growth := int64(after) - int64(before)
	t.Logf("post-GC heap: %d → %d bytes (growth %d)", before, after, growth)
	if growth > 5<<20 {
		t.Fatalf("heap grew by %d bytes over 500 streams (limit 5 MB)", growth)
	}
}

func TestResponsesPassThroughServesBackgroundSynchronously(t *testing.T) {
	h := start(t, streamCfg("first_byte"))
	resp := h.post("/v1/responses", `{"model":"fast/m","input":"hello responses","background":true}`)
	warn := resp.Header.Get("X-Breakwater-Warning")
	m := decode(t, resp)
	if resp.StatusCode != 200 || m["object"] != "response" || !strings.Contains(warn, "synchronously") {
		t.Fatalf("responses: %d %v warning=%q", resp.StatusCode, m, warn)
	}
	if h.mock.Stats().ByKeyModel["sk-s1|m"] != 1 {
		t.Fatalf("upstream not called through /responses: %v", h.mock.Stats().ByKeyModel)
	}
	resp = h.post("/v1/responses", `{"model":"fast/m","input":"stream it","stream":true}`)
	events, _ := readSSE(t, resp)
	if resp.StatusCode != 200 || len(events) == 0 || events[len(events)-1] != "response.completed" {
		t.Fatalf("responses stream: %d %v", resp.StatusCode, events)
	}
	// An Anthropic-kind provider gets the Responses request translated to
	// Messages, a background one served synchronously too.
	resp = h.post("/v1/responses", `{"model":"claude/c","input":"x","background":true}`)
	warn = resp.Header.Get("X-Breakwater-Warning")
	if m = decode(t, resp); resp.StatusCode != 200 || m["object"] != "response" || m["status"] != "completed" || !strings.Contains(warn, "synchronously") {
		t.Fatalf("responses to an anthropic provider: %d %v warning=%q", resp.StatusCode, m, warn)
	}
	resp = h.post("/v1/responses", `{"model":"fast/m"}`)
	if e := decode(t, resp)["error"].(map[string]any); resp.StatusCode != 400 || e["param"] != "input" {
		t.Fatalf("missing input: %d %v", resp.StatusCode, e)
	}
}
