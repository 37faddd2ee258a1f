package mock

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawClient neither follows redirects nor decodes compressed bodies, so a
// test sees the mock's answer byte for byte.
var rawClient = &http.Client{
	Transport:     &http.Transport{DisableCompression: true},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func rawPost(t *testing.T, m *testMock, ctx context.Context, path, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

func TestRedirectFault(t *testing.T) {
	m := startMock(t, `
rules:
  - model: temp
    responses: [{redirect: "http://127.0.0.1:1/v1/chat/completions", status: 307}]
  - responses: [{redirect: "https://evil.example/steal?x=<1>"}]
`)
	resp := rawPost(t, m, context.Background(), "/v1/messages", "k", messagesBody("m", "hi", false))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "https://evil.example/steal?x=<1>" ||
		!strings.Contains(string(body), `href="https://evil.example/steal?x=&lt;1&gt;"`) || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp = rawPost(t, m, context.Background(), "/v1/chat/completions", "k", chatBody("temp", "hi", true, false))
	resp.Body.Close()
	if resp.StatusCode != 307 || resp.Header.Get("Location") != "http://127.0.0.1:1/v1/chat/completions" {
		t.Fatalf("307: %d %v", resp.StatusCode, resp.Header)
	}
	if _, err := ParseScript([]byte(`rules: [{responses: [{redirect: "http://x", status: 200}]}]`)); err == nil ||
		!strings.Contains(err.Error(), "rules[0].responses[0].status: 200 is not a redirect") {
		t.Fatalf("redirect with a non-3xx status: %v", err)
	}
}

func TestEchoKeyFault(t *testing.T) {
	m := startMock(t, `
rules:
  - responses: [{echo_key: true}]
`)
	status, _, body := m.post("/v1/chat/completions", "sk-proj-SECRET123", chatBody("m", "hi", false, false))
	var oa struct {
		Error struct{ Message, Type, Code string } `json:"error"`
	}
	if err := json.Unmarshal(body, &oa); err != nil || status != 401 ||
		oa.Error.Message != "Incorrect API key provided: sk-proj-SECRET123. You can find your API key at https://platform.openai.com/account/api-keys." ||
		oa.Error.Code != "invalid_api_key" {
		t.Fatalf("openai: %d %s", status, body)
	}
	status, _, body = m.post("/v1/messages", "x:sk-ant-SECRET456", messagesBody("m", "hi", false))
	if status != 401 || !strings.Contains(string(body), `"message":"invalid x-api-key: sk-ant-SECRET456"`) || !strings.Contains(string(body), `"authentication_error"`) {
		t.Fatalf("anthropic: %d %s", status, body)
	}
}

func TestKeepaliveOnlyFault(t *testing.T) {
	m := startMock(t, `
rules:
  - model: bounded
    responses: [{keepalive_only: true, ping_every_ms: 10, stall_ms: 100}]
  - responses: [{keepalive_only: true, ping_every_ms: 10}]
`)
	start := time.Now()
	resp := rawPost(t, m, context.Background(), "/v1/chat/completions", "k", chatBody("bounded", "hi", true, false))
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %v %v", resp.StatusCode, resp.Header, err)
	}
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Fatalf("ended after %v, want stall_ms 100", took)
	}
	frames := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
	if len(frames) < 3 {
		t.Fatalf("only %d frames: %q", len(frames), body)
	}
	for _, f := range frames {
		if f != ": keepalive" {
			t.Fatalf("a frame that is not a keep-alive: %q", f)
		}
	}
	// Unbounded: it runs until the client leaves.
	ctx, cancel := context.WithCancel(context.Background())
	resp = rawPost(t, m, ctx, "/v1/messages", "k", messagesBody("m", "hi", true))
	buf := make([]byte, 64)
	if n, _ := io.ReadAtLeast(resp.Body, buf, len(": keepalive\n\n")); string(buf[:n]) != ": keepalive\n\n"[:n] {
		t.Fatalf("first bytes %q", buf[:n])
	}
	cancel()
	resp.Body.Close()
	m.waitStats(func(s Stats) bool { return s.InFlight == 0 && s.Cancellations == 1 })
}

func TestHeaderBytesFault(t *testing.T) {
	m := startMock(t, `
rules:
  - responses: [{header_bytes: 70000}]
`)
	resp := rawPost(t, m, context.Background(), "/v1/chat/completions", "k", chatBody("m", "hi", false, false))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	n := 0
	for k, vs := range resp.Header {
		if strings.HasPrefix(k, "X-Mock-Filler-") {
			n += len(k) + 4 + len(vs[0])
		}
	}
	if n < 69000 || n > 71000 || resp.StatusCode != 200 || !json.Valid(body) {
		t.Fatalf("%d bytes of filler headers, status %d", n, resp.StatusCode)
	}
	if _, err := ParseScript([]byte(`rules: [{responses: [{header_bytes: 2000000}]}]`)); err == nil {
		t.Fatal("header_bytes over 1 MiB accepted")
	}
}

// TestBrokenBodyFaults: the hostile 200s a gateway must not relay as
// success are plain raw bodies.
func TestBrokenBodyFaults(t *testing.T) {
	m := startMock(t, `
rules:
  - model: html
    responses: [{body: "<html><body>Service Unavailable</body></html>", headers: {Content-Type: text/html}}]
  - model: badjson
    responses: [{body: '{"id": "chatcmpl-1", "choices": [', headers: {Content-Type: application/json}}]
`)
	for model, ct := range map[string]string{"html": "text/html", "badjson": "application/json"} {
		status, h, body := m.post("/v1/chat/completions", "k", chatBody(model, "hi", false, false))
		if status != 200 || h.Get("Content-Type") != ct || json.Valid(body) {
			t.Fatalf("%s: %d %s %q", model, status, h.Get("Content-Type"), body)
		}
	}
}

func TestGzipFault(t *testing.T) {
	m := startMock(t, `
rules:
  - model: err
    responses: [{status: 503, gzip: true}]
  - responses: [{gzip: true, chunks: 3, chunk_interval_ms: 5}]
`)
	gunzip := func(t *testing.T, resp *http.Response) []byte {
		t.Helper()
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Content-Encoding") != "gzip" || (resp.ContentLength >= 0 && resp.ContentLength != int64(len(raw))) {
			t.Fatalf("headers %v for %d bytes", resp.Header, len(raw))
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("not gzip: %v (%q)", err, raw)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("gzip body: %v", err)
		}
		return plain
	}
	whole := gunzip(t, rawPost(t, m, context.Background(), "/v1/chat/completions", "k", chatBody("m", "hello", false, false)))
	if !strings.Contains(string(whole), `"content":"echo: hello"`) {
		t.Fatalf("whole answer %s", whole)
	}
	stream := gunzip(t, rawPost(t, m, context.Background(), "/v1/messages", "k", messagesBody("m", "hello", true)))
	evs, err := readAllSSE(bytes.NewReader(stream))
	if err != nil || eventNames(evs)[len(evs)-1] != "message_stop" {
		t.Fatalf("stream %v: %s", err, stream)
	}
	resp := rawPost(t, m, context.Background(), "/v1/chat/completions", "k", chatBody("err", "hello", false, false))
	if resp.StatusCode != 503 || !strings.Contains(string(gunzip(t, resp)), "overloaded") {
		t.Fatalf("error answer %d", resp.StatusCode)
	}
}
