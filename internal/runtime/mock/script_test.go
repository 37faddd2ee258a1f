package mock

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseScript(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string // substring; "" = must parse
		check   func(t *testing.T, s *Script)
	}{
		{name: "empty", in: "  \n", check: func(t *testing.T, s *Script) {
			if len(s.Rules) != 0 {
				t.Errorf("rules = %v", s.Rules)
			}
		}},
		{name: "yaml", in: `
rules:
  - key: k1
    model: "gpt-*"
    path: /v1/chat/completions
    responses:
      - {status: 429, headers: {Retry-After: "7"}, times: 2}
      - {stall_after_chunks: 0, stall_ms: 10, error_event: true}
      - {error_event: overloaded_error}
      - {error_event: {type: api_error, message: boom}, first_byte_ms: 5}
`, check: func(t *testing.T, s *Script) {
			st := s.Rules[0].Responses
			if st[0].Status != 429 || st[0].Times != 2 || st[0].Headers["Retry-After"] != "7" {
				t.Errorf("step 0 = %+v", st[0])
			}
			if st[1].StallAfterChunks == nil || *st[1].StallAfterChunks != 0 || st[1].ErrorEvent == nil || *st[1].ErrorEvent != (ErrorEvent{}) {
				t.Errorf("step 1 = %+v", st[1])
			}
			if st[2].ErrorEvent == nil || st[2].ErrorEvent.Type != "overloaded_error" {
				t.Errorf("step 2 = %+v", st[2])
			}
			if st[3].ErrorEvent == nil || *st[3].ErrorEvent != (ErrorEvent{Type: "api_error", Message: "boom"}) || st[3].latency().Milliseconds() != 5 {
				t.Errorf("step 3 = %+v", st[3])
			}
		}},
		{name: "json with tabs", in: "{\n\t\"rules\": [\n\t\t{\"model\": \"m\", \"mode\": \"random\", \"seed\": 3,\n\t\t \"responses\": [{\"status\": 503, \"weight\": 2}]}\n\t]\n}", check: func(t *testing.T, s *Script) {
			r := s.Rules[0]
			if r.Mode != "random" || r.Seed != 3 || r.Responses[0].Status != 503 || *r.Responses[0].Weight != 2 {
				t.Errorf("rule = %+v", r)
			}
		}},
		{name: "unknown field", in: "rules:\n  - responses: [{stauts: 500}]\n", wantErr: "stauts"},
		{name: "bad status", in: "rules:\n  - responses: [{status: 42}]\n", wantErr: "rules[0].responses[0].status"},
		{name: "negative times", in: "rules:\n  - responses: [{}, {times: -1}]\n", wantErr: "rules[0].responses[1].times"},
		{name: "bad mode", in: "rules:\n  - mode: roundrobin\n", wantErr: "rules[0].mode"},
		{name: "random all zero weight", in: "rules:\n  - mode: random\n    responses: [{weight: 0}]\n", wantErr: "weight > 0"},
		{name: "error_event false", in: "rules:\n  - responses: [{error_event: false}]\n", wantErr: "error_event"},
		{name: "not yaml", in: "rules: [", wantErr: "parse mock script"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseScript([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseScript: %v", err)
			}
			tc.check(t, s)
		})
	}
}

func TestLoadScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte("rules:\n  - responses: [{status: 500}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadScript(path)
	if err != nil || s.Rules[0].Responses[0].Status != 500 {
		t.Fatalf("LoadScript = %+v, %v", s, err)
	}
	if _, err := LoadScript(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("missing file: no error")
	}
}

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"", "anything", true},
		{"*", "", true},
		{"gpt-4o", "gpt-4o", true},
		{"gpt-4o", "gpt-4o-mini", false},
		{"gpt-*", "gpt-4o-mini", true},
		{"gpt-*", "claude", false},
		{"*-mini", "gpt-4o-mini", true},
		{"claude-*-4*", "claude-sonnet-4-5", true},
		{"claude-*-4*", "claude-sonnet-3", false},
		{"a*a", "a", false},
		{"openai/*", "openai/gpt-4o", true},
	}
	for _, tc := range tests {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

func TestScripted429ThenSuccess(t *testing.T) {
	m := startMock(t, `
rules:
  - key: k1
    model: "gpt-*"
    responses:
      - {status: 429, headers: {Retry-After: "7"}, times: 2}
      - {status: 200, text: "ok now"}
  - path: /v1/messages
    model: claude-opus-4
    responses:
      - {status: 529}
`)
	type call struct {
		key, model string
		status     int
		retryAfter string
		content    string
	}
	seq := []call{
		{"k1", "gpt-4o", 429, "7", ""},
		{"k2", "gpt-4o", 200, "", "echo: hi"},   // other key: rule does not match
		{"k1", "claude-x", 200, "", "echo: hi"}, // other model: rule does not match
		{"k1", "gpt-4o-mini", 429, "7", ""},     // second (times: 2) 429
		{"k1", "gpt-4o", 200, "", "ok now"},     // then success
		{"k1", "gpt-4o", 200, "", "ok now"},     // the last step repeats
		{"x:k1", "gpt-4o", 200, "", "ok now"},   // x-api-key is the same key
		{"k1", "gpt-4o", 200, "", "ok now"},
	}
	for i, c := range seq {
		status, hdr, data := m.post("/v1/chat/completions", c.key, chatBody(c.model, "hi", false, false))
		if status != c.status {
			t.Fatalf("call %d: status %d, want %d: %s", i, status, c.status, data)
		}
		if got := hdr.Get("Retry-After"); got != c.retryAfter {
			t.Errorf("call %d: Retry-After %q, want %q", i, got, c.retryAfter)
		}
		v := mustJSON(t, data)
		if c.status == 429 {
			if dig(v, "error", "code") != "rate_limit_exceeded" || dig(v, "error", "type") != "requests" {
				t.Errorf("call %d: 429 body = %s", i, data)
			}
			if msg, _ := dig(v, "error", "message").(string); !strings.Contains(msg, c.model) {
				t.Errorf("call %d: message %q does not name the model", i, msg)
			}
			continue
		}
		if got := dig(v, "choices", 0, "message", "content"); got != c.content {
			t.Errorf("call %d: content %v, want %q", i, got, c.content)
		}
	}

	status, _, data := m.post("/v1/messages", "", messagesBody("claude-opus-4", "hi", true))
	if status != 529 {
		t.Fatalf("anthropic: status %d", status)
	}
	v := mustJSON(t, data)
	if v["type"] != "error" || dig(v, "error", "type") != "overloaded_error" {
		t.Errorf("anthropic 529 body = %s", data)
	}
	// The same model on the OpenAI path does not match the path rule.
	if status, _, _ := m.post("/v1/chat/completions", "", chatBody("claude-opus-4", "hi", false, false)); status != 200 {
		t.Errorf("path rule matched another path: %d", status)
	}
}

func TestRawBodyAndHeaders(t *testing.T) {
	m := startMock(t, `
rules:
  - responses:
      - status: 403
        headers: {x-custom: "1"}
        body: '{"error":{"message":"用户额度不足","type":"forbidden"}}'
      - {status: 200, body: "plain text", headers: {Content-Type: text/x-custom}}
`)
	status, hdr, data := m.post("/v1/chat/completions", "", chatBody("m", "hi", false, false))
	if status != 403 || string(data) != `{"error":{"message":"用户额度不足","type":"forbidden"}}` {
		t.Errorf("got %d %s", status, data)
	}
	if hdr.Get("x-custom") != "1" || hdr.Get("Content-Type") != "application/json" {
		t.Errorf("headers = %v", hdr)
	}
	status, hdr, data = m.post("/v1/chat/completions", "", chatBody("m", "hi", true, false))
	if status != 200 || string(data) != "plain text" || hdr.Get("Content-Type") != "text/x-custom" {
		t.Errorf("got %d %q %v", status, data, hdr)
	}
}

// statuses runs n calls and returns their statuses.
func statuses(t *testing.T, m *testMock, n int) []int {
	t.Helper()
	out := make([]int, n)
	for i := range out {
		out[i], _, _ = m.post("/v1/chat/completions", "k", chatBody("m", "hi", false, false))
	}
	return out
}

func TestRandomModeDeterministic(t *testing.T) {
	script := func(seed int) string {
		return fmt.Sprintf(`
rules:
  - mode: random
    seed: %d
    responses:
      - {status: 200, weight: 3}
      - {status: 503, weight: 1}
      - {status: 429, weight: 0}
`, seed)
	}
	const n = 60
	a := statuses(t, startMock(t, script(42)), n)
	b := statuses(t, startMock(t, script(42)), n)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("same seed, different draws:\n%v\n%v", a, b)
	}
	count := map[int]int{}
	for _, s := range a {
		count[s]++
	}
	if count[200] == 0 || count[503] == 0 || count[429] != 0 || count[200] <= count[503] {
		t.Errorf("draw counts = %v (weights 3:1:0)", count)
	}

	m := startMock(t, script(7))
	c := statuses(t, m, n)
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Errorf("seeds 42 and 7 drew the same %d statuses", n)
	}
	// Replacing the script restarts the generator.
	sc, err := ParseScript([]byte(script(42)))
	if err != nil {
		t.Fatal(err)
	}
	m.srv.SetScript(sc)
	if d := statuses(t, m, n); fmt.Sprint(a) != fmt.Sprint(d) {
		t.Errorf("after SetScript, draws differ:\n%v\n%v", a, d)
	}
}

func TestScriptEndpoint(t *testing.T) {
	m := startMock(t, "")
	status, _, data := m.post("/_mock/script", "", "rules:\n  - model: m\n    responses: [{status: 503}]\n")
	if status != http.StatusOK {
		t.Fatalf("POST script: %d %s", status, data)
	}
	if v := mustJSON(t, data); v["rules"] != 1.0 {
		t.Errorf("answer = %s", data)
	}
	if status, _, _ := m.post("/v1/chat/completions", "", chatBody("m", "hi", false, false)); status != 503 {
		t.Errorf("after script: status %d, want 503", status)
	}
	// JSON works too.
	if status, _, data := m.post("/_mock/script", "", `{"rules":[{"model":"m","responses":[{"status":502}]}]}`); status != 200 {
		t.Fatalf("POST JSON script: %d %s", status, data)
	}
	if status, _, _ := m.post("/v1/chat/completions", "", chatBody("m", "hi", false, false)); status != 502 {
		t.Errorf("after JSON script: status %d, want 502", status)
	}

	for _, bad := range []struct{ body, want string }{
		{"rules:\n  - responses: [{stauts: 500}]\n", "stauts"},
		{"rules:\n  - responses: [{status: 42}]\n", "rules[0].responses[0].status"},
		{"rules: [", "parse mock script"},
	} {
		status, _, data := m.post("/_mock/script", "", bad.body)
		if status != http.StatusBadRequest {
			t.Errorf("bad script %q: status %d", bad.body, status)
			continue
		}
		msg, _ := dig(mustJSON(t, data), "error", "message").(string)
		if !strings.Contains(msg, bad.want) {
			t.Errorf("bad script: message %q lacks %q", msg, bad.want)
		}
	}
	// A rejected script leaves the previous one in place.
	if status, _, _ := m.post("/v1/chat/completions", "", chatBody("m", "hi", false, false)); status != 502 {
		t.Errorf("after bad script: status %d, want 502", status)
	}
	// An empty script clears the rules.
	if status, _, _ := m.post("/_mock/script", "", ""); status != 200 {
		t.Fatalf("empty script: %d", status)
	}
	if status, _, _ := m.post("/v1/chat/completions", "", chatBody("m", "hi", false, false)); status != 200 {
		t.Errorf("after empty script: status %d, want 200", status)
	}
}
