package gateway_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// The client API calls on their exact paths are served without Fiber (the
// server's lean path); the same calls spelled otherwise (upper case, a
// trailing slash) still go through Fiber's router. Both must answer alike:
// same status, same headers, same body shape, same refusals.

// answerShape is what two answers to the same call must share: the
// status, the header names (values such as the request id and the date
// differ per call), the content type and, for errors, the whole body.
func answerShape(t *testing.T, resp *http.Response, wholeBody bool) string {
	t.Helper()
	body := string(readBody(t, resp))
	var names []string
	for k := range resp.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	shape := resp.Status + " " + strings.Join(names, ",") + " " + resp.Header.Get("Content-Type")
	if wholeBody {
		return shape + " " + body
	}
	if !strings.Contains(body, `"choices"`) && !strings.Contains(body, `"content"`) && !strings.Contains(body, `"data"`) {
		t.Fatalf("%s: unexpected body %s", resp.Request.URL.Path, body)
	}
	return shape
}

func TestLeanPathAnswersAsFiberDoes(t *testing.T) {
	h := start(t, baseConfig)
	chat := `{"model":"alpha/m1","messages":[{"role":"user","content":"hi"}]}`
	msgs := `{"model":"claude/c1","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct{ lean, fiber, body string }{
		{"/v1/chat/completions", "/V1/Chat/Completions/", chat},
		{"/v1/messages", "/v1/messages/", msgs},
		{"/v1/chat/completions", "/v1/chat/completions/", `{"model":"alpha/m1","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		lean := answerShape(t, h.post(tc.lean, tc.body), false)
		fiber := answerShape(t, h.post(tc.fiber, tc.body), false)
		if lean != fiber || !strings.HasPrefix(lean, "200 ") || !strings.Contains(lean, "X-Request-Id") {
			t.Errorf("%s vs %s:\n lean  %s\n fiber %s", tc.lean, tc.fiber, lean, fiber)
		}
	}
	// Refusals of the open (keyless, loopback-only) gateway and of the
	// body parser, in each path's error format.
	for _, tc := range []struct {
		lean, fiber, body string
		hdr               []string
	}{
		{"/v1/chat/completions", "/v1/chat/completions/", chat, []string{"Content-Type", "text/plain"}},
		{"/v1/chat/completions", "/v1/Chat/Completions", chat, []string{"Origin", "http://evil.example"}},
		{"/v1/embeddings", "/v1/Embeddings", `{"model":"alpha/m1","input":"x"}`, []string{"Host", "evil.example"}},
		{"/v1/responses", "/v1/responses/", `{"model":`, nil},
	} {
		lean := answerShape(t, h.postWith(tc.lean, tc.body, tc.hdr...), true)
		fiber := answerShape(t, h.postWith(tc.fiber, tc.body, tc.hdr...), true)
		if lean != fiber || strings.HasPrefix(lean, "200 ") {
			t.Errorf("%s vs %s:\n lean  %s\n fiber %s", tc.lean, tc.fiber, lean, fiber)
		}
	}
	// An Anthropic-format refusal on the lean path keeps Anthropic's shape.
	if got := answerShape(t, h.postWith("/v1/messages", msgs, "Origin", "http://evil.example"), true); !strings.HasPrefix(got, "403 ") ||
		!strings.Contains(got, `"code":"forbidden_origin"`) || !strings.HasSuffix(got, `,"type":"error"}`) {
		t.Errorf("/v1/messages refusal: %s", got)
	}
}

func TestLeanPathAuthenticatesAsFiberDoes(t *testing.T) {
	h := start(t, baseConfig+`
keys:
  - {id: app1, key: client-secret-key-abc}
`)
	chat := `{"model":"alpha/m1","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		lean, fiber string
		anthropic   bool // the lean path's errors are in Anthropic's shape
	}{
		{"/v1/chat/completions", "/v1/chat/completions/", false},
		{"/v1/messages", "/V1/MESSAGES", true},
		{"/v1/embeddings", "/v1/embeddings/", false},
		{"/v1/messages/count_tokens", "/v1/messages/count_tokens/", true},
	} {
		for _, key := range []string{"", "wrong-key"} {
			lean := answerShape(t, h.postWith(tc.lean, chat, "Authorization", "Bearer "+key), true)
			fiber := answerShape(t, h.postWith(tc.fiber, chat, "Authorization", "Bearer "+key), true)
			if tc.anthropic {
				if !strings.HasSuffix(lean, `,"type":"error"}`) {
					t.Errorf("%s, key %q: not in Anthropic's shape: %s", tc.lean, key, lean)
				}
				lean = strings.TrimSuffix(lean, `,"type":"error"}`) + "}"
			}
			if lean != fiber || !strings.HasPrefix(lean, "401 ") || !strings.Contains(lean, `"code":"invalid_api_key"`) {
				t.Errorf("%s vs %s, key %q:\n lean  %s\n fiber %s", tc.lean, tc.fiber, key, lean, fiber)
			}
		}
	}
	lean := answerShape(t, h.postWith("/v1/chat/completions", chat, "x-api-key", "client-secret-key-abc"), false)
	fiber := answerShape(t, h.postWith("/v1/Chat/Completions", chat, "x-api-key", "client-secret-key-abc"), false)
	if lean != fiber || !strings.HasPrefix(lean, "200 ") {
		t.Errorf("with the key:\n lean  %s\n fiber %s", lean, fiber)
	}
}

// postWith is post where the header pairs may also replace the Host and
// the Content-Type.
func (h *harness) postWith(path, body string, hdr ...string) *http.Response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}
