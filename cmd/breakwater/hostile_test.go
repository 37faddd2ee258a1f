package main

// The hostile suite (issue 19): every probe of the hardening review,
// replayed against the real binary with the fault-injecting mock as the
// upstream. Each test asserts the status and error code the client gets,
// that the provider's health is untouched where it must be, and — at the
// end of each gateway's life — that no configured secret appeared in any
// log line (the gateway logs at debug level here), response or metric.
//
// BREAKWATER_HOSTILE_BIN=/path/to/breakwater runs the suite against
// another build (to see the probes fail on an older one).

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Secrets of the hostile configurations: none may leave the gateway.
const (
	hAdmin     = "hostile-admin-token-7Qx2Lm9Vb4Kd"
	hClientKey = "hostile-client-key-Zr8Tn3Wq6Yp1"
	hOpenAIKey = "sk-hostile-openai-Fh5Jk8Lm2Np4Qr7St9Vw"
	hClaudeKey = "sk-ant-hostile-Gx3Hy6Jz9Kb2Mc5Nd8Pf"
	hQueueKey  = "sk-hostile-queued-Bq4Cw7Dx1Ey5Fz8Ga2"
	hStallKey  = "sk-hostile-stalls-Hc6Jd9Ke2Lf5Mg8Nh3"
)

var hostileSecrets = []string{hAdmin, hClientKey, hOpenAIKey, hClaudeKey, hQueueKey, hStallKey}

// hostileConfig routes every fault of the mock script to one provider
// kind or the other; "queued" has a local admission queue of one slot.
const hostileConfig = `
server:
  listen: LISTEN
  admin_token: ` + hAdmin + `
  request_deadline_ms: 3000
  write_timeout_ms: 1000
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false, max_wait_ms: 20000}
  stream_recovery: {content_stall_timeout_ms: 400}
  combo_cooldown_wait: {enabled: false}
providers:
  - id: openai
    kind: openai
    base_url: MOCK/v1
    models: [m1, redirect, html, bad-json, json-stream, gzip, keepalive, slow, reset, echo-key]
    connections: [{id: o1, api_key: ` + hOpenAIKey + `, disable_cooling: true}]
  - id: claude
    kind: anthropic
    base_url: MOCK/v1
    models: [c1, echo-key]
    connections: [{id: k1, api_key: ` + hClaudeKey + `, disable_cooling: true}]
  - id: queued
    kind: openai
    base_url: MOCK/v1
    models: [qslow]
    connections:
      - {id: q1, api_key: ` + hQueueKey + `, disable_cooling: true, rate_limit_protection: true, rate_limit_overrides: {max_concurrent: 1}}
  - id: stally
    kind: openai
    base_url: MOCK/v1
    models: [stall]
    connections: [{id: s1, api_key: ` + hStallKey + `, disable_cooling: true}]
combos:
  - name: stalls
    strategy: priority
    targets: [{model: stally/stall}, {model: stally/stall}, {model: stally/stall}]
keys:
  - {id: app, key: ` + hClientKey + `}
`

// hostileScript is the mock's script: one fault per model.
const hostileScript = `
rules:
  - {model: redirect, responses: [{redirect: "REDIRECT/steal", status: 307}]}
  - {model: echo-key, responses: [{echo_key: true}]}
  - {model: keepalive, responses: [{keepalive_only: true, ping_every_ms: 50, stall_ms: 30000}]}
  - {model: stall, responses: [{stall_after_chunks: 0, ping_every_ms: 50, stall_ms: 30000}]}
  - {model: slow, responses: [{latency_ms: 30000}]}
  - {model: qslow, responses: [{latency_ms: 2000}]}
  - {model: gzip, responses: [{gzip: true}]}
  - {model: reset, responses: [{reset: true}]}
  - {model: html, responses: [{body: "<html><body>502 Bad Gateway</body></html>", headers: {Content-Type: text/html}}]}
  - {model: bad-json, responses: [{body: '{"id": "chatcmpl-1", "choices": [', headers: {Content-Type: application/json}}]}
  - {model: json-stream, responses: [{body: '{"id":"chatcmpl-1","object":"chat.completion","choices":[]}', headers: {Content-Type: application/json}}]}
`

// hostileBin is the binary under test.
func hostileBin() string {
	if b := os.Getenv("BREAKWATER_HOSTILE_BIN"); b != "" {
		return b
	}
	return binPath
}

// hostile is one gateway under test with its mock.
type hostile struct {
	t       *testing.T
	gw      *child
	mock    *child
	addr    string // host:port of the gateway
	bodies  bytes.Buffer
	bodyMu  sync.Mutex
	secrets []string
}

// startHostile runs the mock with script and the gateway with cfg (LISTEN,
// MOCK and REDIRECT replaced) at debug log level. At the end of the test
// it checks that no secret appeared in the gateway's log, any response
// body read through h, or the metrics.
func startHostile(t *testing.T, cfg, script, redirect string) *hostile {
	t.Helper()
	saved := binPath
	binPath = hostileBin()
	defer func() { binPath = saved }()
	h := &hostile{t: t, secrets: hostileSecrets}
	h.mock = startChild(t, "mock upstream listening on ", "mock", "--listen", freePort(t))
	if script != "" {
		if code, _ := call(t, "POST", h.mock.url+"/_mock/script", strings.ReplaceAll(script, "REDIRECT", redirect)); code != 200 {
			t.Fatalf("mock script: %d", code)
		}
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "breakwater.yaml")
	cfg = strings.NewReplacer("LISTEN", freePort(t), "MOCK", h.mock.url).Replace(cfg)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	h.gw = startChild(t, "breakwater listening on ", "--log-level", "debug", "serve", "--config", cfgPath)
	h.addr = strings.TrimPrefix(h.gw.url, "http://")
	t.Cleanup(h.checkNoSecrets)
	return h
}

// checkNoSecrets fails the test when a configured secret appears in the
// gateway's log, a response body read during the test, or the metrics.
func (h *hostile) checkNoSecrets() {
	t := h.t
	if h.gw == nil {
		return
	}
	metrics := ""
	if code, raw := h.get("/metrics", "Authorization", "Bearer "+hAdmin); code == 200 {
		metrics = raw
	}
	h.bodyMu.Lock()
	bodies := h.bodies.String()
	h.bodyMu.Unlock()
	logs := h.gw.stderr.String()
	for _, s := range h.secrets {
		for where, text := range map[string]string{"log": logs, "responses": bodies, "metrics": metrics} {
			if i := strings.Index(text, s); i >= 0 {
				lo, hi := max(0, i-200), min(len(text), i+len(s)+50)
				t.Errorf("secret %q… appears in the %s: …%s…", s[:8], where, text[lo:hi])
			}
		}
	}
}

// waitLog waits up to 5 s for the gateway's log to contain s (the log
// reaches the test through a pipe, after the answer that caused it).
func (h *hostile) waitLog(s string) string {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		logs := h.gw.stderr.String()
		if strings.Contains(logs, s) || time.Now().After(deadline) {
			return logs
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hResp is an answer: status, headers, body.
type hResp struct {
	status int
	header http.Header
	body   []byte
}

// code returns the answer's error code (OpenAI or Anthropic shape).
func (r hResp) code() string {
	var doc struct {
		Error struct {
			Code string `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &doc)
	return doc.Error.Code
}

// keep records a response body for the secret check.
func (h *hostile) keep(b []byte) {
	h.bodyMu.Lock()
	h.bodies.Write(b)
	h.bodies.WriteByte('\n')
	h.bodyMu.Unlock()
}

// do sends a request through net/http with the client key and
// Content-Type: application/json unless hdr overrides them.
func (h *hostile) do(method, path string, body io.Reader, hdr ...string) hResp {
	h.t.Helper()
	req, err := http.NewRequest(method, h.gw.url+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+hClientKey)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	h.keep(b)
	return hResp{status: resp.StatusCode, header: resp.Header, body: b}
}

func (h *hostile) post(path, body string, hdr ...string) hResp {
	h.t.Helper()
	return h.do("POST", path, strings.NewReader(body), hdr...)
}

func (h *hostile) get(path string, hdr ...string) (int, string) {
	h.t.Helper()
	r := h.do("GET", path, nil, hdr...)
	return r.status, string(r.body)
}

// raw writes request bytes on a new connection and reads one answer.
func (h *hostile) raw(req []byte, halfClose bool) hResp {
	h.t.Helper()
	conn, err := net.Dial("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(req); err != nil {
		h.t.Fatal(err)
	}
	if halfClose {
		_ = conn.(*net.TCPConn).CloseWrite()
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		h.t.Fatalf("reading the answer to %.60q: %v", req, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	h.keep(b)
	return hResp{status: resp.StatusCode, header: resp.Header, body: b}
}

// rawPost builds a POST with the client key, extra header lines and body.
func rawPost(path, extra, body string) []byte {
	return []byte("POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + hClientKey +
		"\r\nContent-Type: application/json\r\n" + extra + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// mockStats reads the mock's counters.
func (h *hostile) mockStats() (total uint64, byKeyModel map[string]uint64) {
	h.t.Helper()
	resp, err := http.Get(h.mock.url + "/_mock/stats")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Total      uint64            `json:"total"`
		ByKeyModel map[string]uint64 `json:"by_key_model"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		h.t.Fatal(err)
	}
	return st.Total, st.ByKeyModel
}

// breaker returns a provider's breaker state and failure count.
func (h *hostile) breaker(provider string) (string, float64) {
	h.t.Helper()
	_, body := call(h.t, "GET", h.gw.url+"/api/monitoring/health", "", "Authorization", "Bearer "+hAdmin)
	p, _ := body["providers"].(map[string]any)[provider].(map[string]any)
	state, _ := p["state"].(string)
	n, _ := p["failure_count"].(float64)
	return state, n
}

// healthy fails the test unless provider's breaker is CLOSED with no
// failure counted.
func (h *hostile) healthy(provider string) {
	h.t.Helper()
	if state, n := h.breaker(provider); state != "CLOSED" || n != 0 {
		h.t.Fatalf("provider %s: breaker %s with %v failures, want CLOSED with none", provider, state, n)
	}
}

// vmHWM returns the peak resident set size of a process, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM line")
	return 0
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func chatBody(model, extra string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hello"}]` + extra + `}`
}

func messagesBody(model, extra string) string {
	return `{"model":"` + model + `","max_tokens":16,"messages":[{"role":"user","content":"hello"}]` + extra + `}`
}

// TestHostileClientAPI replays the probes of issue 19 that reach the
// client API, one gateway for all of them.
func TestHostileClientAPI(t *testing.T) {
	var redirected atomic.Int64
	steal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirected.Add(1)
		_, _ = io.WriteString(w, `{"id":"stolen","object":"chat.completion","choices":[]}`)
	}))
	defer steal.Close()
	h := startHostile(t, hostileConfig, hostileScript, steal.URL)

	// Item 1. Probe: a 1,827-byte "gzip, gzip" body took RSS to 3.35 GB
	// (three in parallel: out of memory); a 102 KB gzip body put 100 MB
	// upstream past max_request_bytes.
	t.Run("compressed bodies are bounded", func(t *testing.T) {
		inner := gzipped(t, make([]byte, 100<<20))
		stacked := gzipped(t, inner)
		t.Logf("one layer: %d bytes for 100 MB; two layers: %d bytes", len(inner), len(stacked))
		before, _ := h.mockStats()
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := h.do("POST", "/v1/chat/completions", bytes.NewReader(stacked), "Content-Encoding", "gzip, gzip")
				if r.status != 415 || r.code() != "unsupported_content_encoding" {
					t.Errorf("gzip, gzip: %d %s", r.status, r.body)
				}
			}()
		}
		wg.Wait()
		if r := h.do("POST", "/v1/chat/completions", bytes.NewReader(inner), "Content-Encoding", "gzip"); r.status != 413 || r.code() != "request_too_large" {
			t.Fatalf("102 KB gzip of 100 MB: %d %s", r.status, r.body)
		}
		// The admin API is bounded the same way.
		if r := h.do("PATCH", "/api/resilience", bytes.NewReader(inner), "Content-Encoding", "gzip", "Authorization", "Bearer "+hAdmin); r.status != 413 {
			t.Fatalf("admin API, gzip bomb: %d %s", r.status, r.body)
		}
		if r := h.do("POST", "/v1/chat/completions", bytes.NewReader(inner), "Content-Encoding", "br"); r.status != 415 {
			t.Fatalf("br: %d %s", r.status, r.body)
		}
		// A plain gzip body within the limit is decoded and served.
		r := h.do("POST", "/v1/chat/completions", bytes.NewReader(gzipped(t, []byte(chatBody("openai/m1", "")))), "Content-Encoding", "gzip")
		if r.status != 200 || !bytes.Contains(r.body, []byte("echo: hello")) {
			t.Fatalf("small gzip body: %d %s", r.status, r.body)
		}
		if after, _ := h.mockStats(); after != before+1 {
			t.Fatalf("%d upstream calls, want 1 (the bombs must never reach the upstream)", after-before)
		}
		if hwm := vmHWM(t, h.gw.cmd.Process.Pid); hwm > 200<<20 {
			t.Fatalf("gateway peak RSS %d MB after the bombs, want under 200 MB", hwm>>20)
		} else {
			t.Logf("gateway peak RSS after the bombs: %d MB", hwm>>20)
		}
	})

	// Item 2. Probe: a malformed or interrupted request header was logged
	// at ERROR with the raw header buffer (client keys, the admin token),
	// and answered internal_error.
	t.Run("unreadable requests leave no secret and get the right status", func(t *testing.T) {
		secrets := "Authorization: Bearer " + hAdmin + "\r\nx-api-key: " + hClientKey + "\r\n"
		for _, c := range []struct {
			name      string
			req       string
			halfClose bool
			status    int
			code      string
		}{
			{"interrupted header", "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + secrets + "Content-Le", true, 400, "malformed_request"},
			{"interrupted body", "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + secrets + "Content-Length: 100\r\n\r\n{\"model\"", true, 400, "malformed_request"},
			{"broken chunk", "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + secrets + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", true, 400, "malformed_request"},
			{"header too large", "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + secrets + "X-Filler: " + strings.Repeat("a", 9000) + "\r\n\r\n", false, 431, "request_header_fields_too_large"},
			{"body too large", "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + secrets + "Content-Length: 20000000\r\n\r\n", false, 413, "request_too_large"},
		} {
			r := h.raw([]byte(c.req), c.halfClose)
			if r.status != c.status || r.code() != c.code {
				t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.body, c.status, c.code)
			}
		}
		if logs := h.gw.stderr.String(); strings.Contains(logs, "[ERROR]") {
			t.Errorf("unreadable requests logged an error:\n%s", logs)
		}
	})

	// Item 3. Probe: the streaming client followed 301/302/307/308 to
	// other hosts with the Anthropic key, re-POSTing the prompt, and
	// relayed the foreign answer as 200.
	t.Run("a redirect is never followed", func(t *testing.T) {
		for _, stream := range []string{"", `,"stream":true`} {
			r := h.post("/v1/chat/completions", chatBody("openai/redirect", stream))
			if r.status != 502 || bytes.Contains(r.body, []byte("stolen")) {
				t.Fatalf("redirecting upstream (stream=%q): %d %s", stream, r.status, r.body)
			}
		}
		if n := redirected.Load(); n != 0 {
			t.Fatalf("the redirect target was called %d times", n)
		}
	})

	// Item 4. Probe: an upstream echoing "Incorrect API key provided:
	// sk-…" exposed the gateway's key to the client, as the client's own
	// 401.
	t.Run("an upstream that echoes the key", func(t *testing.T) {
		for _, c := range []struct{ path, body string }{
			{"/v1/chat/completions", chatBody("openai/echo-key", "")},
			{"/v1/chat/completions", chatBody("openai/echo-key", `,"stream":true`)},
			{"/v1/messages", messagesBody("claude/echo-key", "")},
			{"/v1/messages", messagesBody("claude/echo-key", `,"stream":true`)},
			{"/v1/chat/completions", chatBody("claude/echo-key", "")},
		} {
			r := h.post(c.path, c.body)
			if r.status != 502 || r.code() != "upstream_auth_error" {
				t.Fatalf("%s %s: %d %s", c.path, c.body, r.status, r.body)
			}
		}
	})

	// Item 5. Probes: 8 requests with "str\u0065am":false beside
	// "stream":true, or 9 with a control byte in anthropic-beta, opened a
	// provider's breaker for 30 s; a non-SSE body on a stream counted as a
	// transport failure.
	t.Run("one client cannot open a breaker", func(t *testing.T) {
		for range 15 {
			r := h.post("/v1/messages", `{"model":"claude/c1","max_tokens":16,"str\u0065am":false,"stream":true,"messages":[{"role":"user","content":"x"}]}`)
			if r.status != 400 || !bytes.Contains(r.body, []byte("stream")) {
				t.Fatalf("escaped stream key: %d %s", r.status, r.body)
			}
			r = h.raw(rawPost("/v1/messages", "anthropic-beta: tools-2024-05-16\x01\r\n", messagesBody("claude/c1", `,"stream":true`)), false)
			if r.status != 400 || !bytes.Contains(r.body, []byte("anthropic-beta")) {
				t.Fatalf("control byte in anthropic-beta: %d %s", r.status, r.body)
			}
			r = h.raw(rawPost("/v1/messages", "anthropic-version: "+strings.Repeat("9", 3000)+"\r\n", messagesBody("claude/c1", "")), false)
			if r.status != 400 || !bytes.Contains(r.body, []byte("anthropic-version")) {
				t.Fatalf("oversized anthropic-version: %d %s", r.status, r.body)
			}
			if r = h.post("/v1/chat/completions", chatBody("openai/json-stream", `,"stream":true`)); r.status != 502 {
				t.Fatalf("JSON answer to a stream: %d %s", r.status, r.body)
			}
		}
		h.healthy("claude")
		h.healthy("openai")
	})

	// Item 6. Probe: "mod\u0065l":"<any model>" beside an allowed "model"
	// made the upstream run and bill the other model while logs, metrics
	// and X-Breakwater-Model showed the allowed one.
	t.Run("the model routed is the model the upstream runs", func(t *testing.T) {
		for _, ep := range []struct {
			path, body, escaped, key, model string
		}{
			{"/v1/chat/completions", chatBody("openai/m1", ""), `{"model":"openai/m1","mod\u0065l":"gpt-expensive","messages":[{"role":"user","content":"x"}]}`, hOpenAIKey, "m1"},
			{"/v1/messages", messagesBody("claude/c1", ""), `{"model":"claude/c1","mod\u0065l":"claude-expensive","max_tokens":16,"messages":[{"role":"user","content":"x"}]}`, hClaudeKey, "c1"},
			{"/v1/responses", `{"model":"openai/m1","input":"hello"}`, `{"model":"openai/m1","mod\u0065l":"gpt-expensive","input":"x"}`, hOpenAIKey, "m1"},
			{"/v1/messages/count_tokens", `{"model":"claude/c1","messages":[{"role":"user","content":"hello"}]}`, `{"model":"claude/c1","mod\u0065l":"claude-expensive","messages":[{"role":"user","content":"x"}]}`, hClaudeKey, "c1"},
			{"/v1/embeddings", `{"model":"openai/m1","input":"hello"}`, `{"model":"openai/m1","mod\u0065l":"gpt-expensive","input":"x"}`, hOpenAIKey, "m1"},
			{"/v1/completions", `{"model":"openai/m1","prompt":"hello"}`, `{"model":"openai/m1","mod\u0065l":"gpt-expensive","prompt":"x"}`, hOpenAIKey, "m1"},
		} {
			before, _ := h.mockStats()
			if r := h.post(ep.path, ep.escaped); r.status != 400 || !bytes.Contains(r.body, []byte("model")) {
				t.Fatalf("%s escaped model key: %d %s", ep.path, r.status, r.body)
			}
			if after, _ := h.mockStats(); after != before {
				t.Fatalf("%s: the escaped request reached the upstream", ep.path)
			}
			_, seen := h.mockStats()
			r := h.post(ep.path, ep.body)
			_, now := h.mockStats()
			if r.status != 200 || r.header.Get("X-Breakwater-Model") != ep.model || now[ep.key+"|"+ep.model] != seen[ep.key+"|"+ep.model]+1 {
				t.Fatalf("%s: %d model header %q, upstream calls %v → %v", ep.path, r.status, r.header.Get("X-Breakwater-Model"), seen, now)
			}
		}
	})

	// Item 7. Probes: 30 requests whose clients left after 0.5 s were all
	// still sent upstream from the admission queue; an abandoned
	// streaming request kept making new attempts after its client left; a
	// keep-alive-only upstream held a client with zero bytes for 900 s.
	t.Run("abandoned queued requests are not sent", func(t *testing.T) {
		_, before := h.mockStats()
		req := rawPost("/v1/chat/completions", "", chatBody("queued/qslow", ""))
		var conns []net.Conn
		for range 30 {
			c, err := net.Dial("tcp", h.addr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write(req); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		time.Sleep(500 * time.Millisecond)
		for _, c := range conns {
			c.Close()
		}
		time.Sleep(2500 * time.Millisecond) // past the one admitted call
		_, after := h.mockStats()
		if sent := after[hQueueKey+"|qslow"] - before[hQueueKey+"|qslow"]; sent > 1 {
			t.Fatalf("%d of 30 abandoned queued requests were sent upstream, want at most the 1 admitted before they left", sent)
		}
	})
	t.Run("an abandoned stream makes no new attempt", func(t *testing.T) {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(rawPost("/v1/chat/completions", "", chatBody("stalls", `,"stream":true`))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		c.Close()
		time.Sleep(300 * time.Millisecond)
		_, left := h.mockStats()
		time.Sleep(2 * time.Second)
		_, later := h.mockStats()
		if later[hStallKey+"|stall"] != left[hStallKey+"|stall"] {
			t.Fatalf("attempts went on after the client left: %d then %d", left[hStallKey+"|stall"], later[hStallKey+"|stall"])
		}
		h.healthy("stally")
	})
	// Keep-alives are not progress: the target is tried twice, the client
	// answered within two stall budgets.
	t.Run("a keep-alive-only upstream is given up", func(t *testing.T) {
		_, before := h.mockStats()
		t0 := time.Now()
		r := h.post("/v1/chat/completions", chatBody("openai/keepalive", `,"stream":true`))
		took := time.Since(t0)
		_, after := h.mockStats()
		if r.status != 502 || r.code() != "stream_content_stall" || after[hOpenAIKey+"|keepalive"]-before[hOpenAIKey+"|keepalive"] != 2 || took > 2*time.Second {
			t.Fatalf("keep-alive-only upstream: %d %s after %v and %d attempts", r.status, r.body, took, after[hOpenAIKey+"|keepalive"]-before[hOpenAIKey+"|keepalive"])
		}
	})
	// The request deadline (3 s here) ends a request whose upstream takes
	// 30 s.
	t.Run("the request deadline ends the attempt loop", func(t *testing.T) {
		t0 := time.Now()
		r := h.post("/v1/chat/completions", chatBody("openai/slow", ""))
		if took := time.Since(t0); r.status != 504 || r.code() != "request_deadline_exceeded" || took > 5*time.Second {
			t.Fatalf("30 s upstream, 3 s deadline: %d %s after %v", r.status, r.body, took)
		}
		h.healthy("openai")
		h.healthy("queued")
	})

	// Item 10. The smaller probes.
	t.Run("smaller items", func(t *testing.T) {
		// HTML or invalid JSON answered as 200 is an upstream failure.
		for _, m := range []string{"html", "bad-json"} {
			if r := h.post("/v1/chat/completions", chatBody("openai/"+m, "")); r.status != 502 || r.code() != "upstream_unreachable" {
				t.Fatalf("%s 200: %d %s", m, r.status, r.body)
			}
		}
		h.healthy("openai")
		// An unsolicited gzip body reaches the client decoded.
		for _, stream := range []string{"", `,"stream":true`} {
			r := h.post("/v1/chat/completions", chatBody("openai/gzip", stream))
			if r.status != 200 || r.header.Get("Content-Encoding") != "" || !bytes.Contains(r.body, []byte(`"finish_reason":"stop"`)) {
				t.Fatalf("gzip upstream (stream=%q): %d %q %q", stream, r.status, r.header.Get("Content-Encoding"), r.body)
			}
		}
		// A 1 MB model name is neither echoed nor logged whole.
		huge := strings.Repeat("m", 1<<20)
		r := h.post("/v1/chat/completions", chatBody(huge, ""))
		if r.status != 404 || len(r.body) > 2048 {
			t.Fatalf("1 MB model: %d, %d bytes", r.status, len(r.body))
		}
		for _, line := range strings.Split(h.gw.stderr.String(), "\n") {
			if len(line) > 4096 {
				t.Fatalf("a log line of %d bytes", len(line))
			}
		}
		// null never clears the operator rules; [] does.
		admin := []string{"Authorization", "Bearer " + hAdmin}
		if r := h.do("PUT", "/api/policies/operator-rules", strings.NewReader("null"), admin...); r.status != 400 {
			t.Fatalf("PUT operator-rules null: %d %s", r.status, r.body)
		}
		if r := h.do("PUT", "/api/policies/operator-rules", strings.NewReader("[]"), admin...); r.status != 200 {
			t.Fatalf("PUT operator-rules []: %d %s", r.status, r.body)
		}
		// A refused key leaves an audit line, without the key.
		if r := h.post("/v1/chat/completions", chatBody("openai/m1", ""), "Authorization", "Bearer sk-wrong-Xy7Zb4Qm1Wn8Rt3"); r.status != 401 {
			t.Fatalf("wrong key: %d", r.status)
		}
		logs := h.waitLog("breakwater.audit: authentication refused")
		if !strings.Contains(logs, "breakwater.audit: authentication refused: realm=client client_ip=127.0.0.1 method=POST path=/v1/chat/completions key_id=unknown reason=\"unknown key\"") ||
			strings.Contains(logs, "sk-wrong-Xy7Zb4Qm1Wn8Rt3") {
			t.Fatalf("no audit line, or one with the key:\n%s", logs)
		}
		// The transport error text is logged at debug, not above.
		if r := h.post("/v1/chat/completions", chatBody("openai/reset", "")); r.status != 502 {
			t.Fatalf("reset upstream: %d %s", r.status, r.body)
		}
		found := false
		for _, line := range strings.Split(h.waitLog(`model=reset status=0 reason=network_error`), "\n") {
			if !strings.Contains(line, "upstream call:") && !strings.Contains(line, "closed connection") {
				continue
			}
			if !strings.Contains(line, "[DEBUG]") {
				t.Fatalf("transport error text logged above debug: %s", line)
			}
			found = found || strings.Contains(line, "model=reset")
		}
		if !found {
			t.Fatal("the transport error text is not logged at debug")
		}
	})
}

// TestHostileKeylessLoopback: without client keys, a web page (or a
// DNS-rebinding host) cannot use the gateway; the operator's own clients
// and the console can.
func TestHostileKeylessLoopback(t *testing.T) {
	cfg := strings.Replace(hostileConfig, "keys:\n  - {id: app, key: "+hClientKey+"}\n", "", 1)
	h := startHostile(t, cfg, hostileScript, "http://127.0.0.1:9")
	for _, c := range []struct {
		name   string
		hdr    []string
		status int
		code   string
	}{
		{"text/plain POST (a form or a simple CORS request)", []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"form POST", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"rebinding host", []string{"Host", "evil.example:8080"}, 403, "forbidden_host"},
		{"foreign origin", []string{"Origin", "https://evil.example"}, 403, "forbidden_origin"},
		{"null origin", []string{"Origin", "null"}, 403, "forbidden_origin"},
	} {
		req, _ := http.NewRequest("POST", h.gw.url+"/v1/chat/completions", strings.NewReader(chatBody("openai/m1", "")))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(c.hdr); i += 2 {
			if c.hdr[i] == "Host" {
				req.Host = c.hdr[i+1]
			} else {
				req.Header.Set(c.hdr[i], c.hdr[i+1])
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r := hResp{status: resp.StatusCode, body: b}
		if r.status != c.status || r.code() != c.code {
			t.Errorf("%s: %d %s", c.name, r.status, b)
		}
	}
	total, _ := h.mockStats()
	if total != 0 {
		t.Fatalf("%d refused requests reached the upstream", total)
	}
	// The operator's clients: JSON from a loopback origin or none.
	if r := h.post("/v1/chat/completions", chatBody("openai/m1", ""), "Origin", "http://localhost:3000", "Authorization", ""); r.status != 200 {
		t.Fatalf("JSON from a loopback origin: %d %s", r.status, r.body)
	}
	if code, _ := h.get("/v1/models", "Authorization", ""); code != 200 {
		t.Fatalf("GET /v1/models: %d", code)
	}
	// The console page and its admin API calls.
	if code, page := h.get("/dashboard", "Authorization", ""); code != 200 || !strings.Contains(page, "<html") {
		t.Fatalf("console page: %d", code)
	}
	if code, _ := h.get("/api/monitoring/health", "Authorization", "Bearer "+hAdmin, "Origin", h.gw.url); code != 200 {
		t.Fatalf("console's health call: %d", code)
	}
}

// memoryConfig: one fast provider whose answer is short whatever the
// request (the request body is what the test measures), the default
// in-flight body budget.
const memoryConfig = `
server:
  listen: LISTEN
  admin_token: ` + hAdmin + `
  write_timeout_ms: 1000
  MAXINFLIGHT
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false, max_wait_ms: QUEUEWAIT}
providers:
  - id: openai
    kind: openai
    base_url: MOCK/v1
    models: [m1, big, slowbig]
    connections: [{id: o1, api_key: ` + hOpenAIKey + `}]
keys:
  - {id: app, key: ` + hClientKey + `}
`

// maxSizeBody is a chat request for model of exactly n bytes.
func maxSizeBody(model string, n int) []byte {
	head, tail := `{"model":"`+model+`","messages":[{"role":"user","content":"`, `"}]}`
	b := make([]byte, 0, n)
	b = append(b, head...)
	b = append(b, bytes.Repeat([]byte("x"), n-len(head)-len(tail))...)
	return append(b, tail...)
}

// TestHostileMemoryBounded: 64 parallel maximum-size requests (10 MiB
// each) under the default in-flight body budget (64 MiB). Probe: 32
// parallel 10 MB requests took RSS to 1.3 GB (64: 1.7 GB, measured on
// the build before the budget). The stated bound: the gateway's peak RSS
// stays under 512 MB (measured: about 360 MB).
func TestHostileMemoryBounded(t *testing.T) {
	cfg := strings.NewReplacer("MAXINFLIGHT", "", "QUEUEWAIT", "60000").Replace(memoryConfig)
	h := startHostile(t, cfg, `rules: [{responses: [{text: "ok", latency_ms: 200}]}]`, "")
	body := maxSizeBody("openai/m1", 10<<20)
	var wg sync.WaitGroup
	var ok atomic.Int64
	t0 := time.Now()
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", h.gw.url+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+hClientKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
			if err != nil {
				t.Errorf("request: %v", err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ok.Add(1)
			} else {
				t.Errorf("answer %d %.200s", resp.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	hwm := vmHWM(t, h.gw.cmd.Process.Pid)
	t.Logf("64 × 10 MiB requests: %d answered 200 in %v; gateway peak RSS %d MB", ok.Load(), time.Since(t0).Round(time.Millisecond), hwm>>20)
	if hwm > 512<<20 {
		t.Fatalf("gateway peak RSS %d MB, want under 512 MB", hwm>>20)
	}
}

// TestHostileBodyBudgetAndSlowReaders: a request the body budget has no
// room for waits up to the queue budget, then gets 503 with Retry-After
// (its body unread); a client that stops reading a large answer is cut
// off after the write timeout (1 s here). Probe: a client that stopped
// reading pinned a 60 MB answer for minutes.
func TestHostileBodyBudgetAndSlowReaders(t *testing.T) {
	cfg := strings.NewReplacer("MAXINFLIGHT", "max_inflight_body_bytes: 10485760", "QUEUEWAIT", "500").Replace(memoryConfig)
	h := startHostile(t, cfg, `rules: [{model: slowbig, responses: [{latency_ms: 2000}]}]`, "")

	// One request holds the whole budget for 2 s; the next one waits
	// 0.5 s and is refused.
	body := maxSizeBody("openai/slowbig", 10<<20)
	first := make(chan hResp, 1)
	go func() { first <- h.do("POST", "/v1/chat/completions", bytes.NewReader(body)) }()
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	r := h.post("/v1/chat/completions", chatBody("openai/m1", ""))
	if r.status != 503 || r.code() != "body_budget_exhausted" || r.header.Get("Retry-After") == "" || time.Since(t0) < 400*time.Millisecond {
		t.Fatalf("over the budget: %d %s (Retry-After %q) after %v", r.status, r.body, r.header.Get("Retry-After"), time.Since(t0))
	}
	if r := <-first; r.status != 200 {
		t.Fatalf("the request holding the budget: %d %.200s", r.status, r.body)
	}
	if r := h.post("/v1/chat/completions", chatBody("openai/m1", "")); r.status != 200 {
		t.Fatalf("after the budget was released: %d %s", r.status, r.body)
	}

	// A 9 MB answer (the echo of a 9 MB prompt) to a client with a tiny
	// receive window that reads nothing: cut after the write timeout.
	for _, stream := range []string{"", `,"stream":true`} {
		prompt := strings.Repeat("y", 9<<20)
		reqBody := `{"model":"openai/m1","messages":[{"role":"user","content":"` + prompt + `"}]` + stream + `}`
		d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			var err error
			_ = c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			return err
		}}
		conn, err := d.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(rawPost("/v1/chat/completions", "", reqBody)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second) // the gateway writes, the client reads nothing
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := io.Copy(io.Discard, conn)
		conn.Close()
		if err != nil || n >= int64(len(prompt)) {
			t.Fatalf("stream=%q: the client read %d bytes (%v), want the gateway to have cut it short of the %d-byte answer", stream, n, err, len(prompt))
		}
		t.Logf("stream=%q: the stalled client was cut after %d bytes", stream, n)
	}
}
