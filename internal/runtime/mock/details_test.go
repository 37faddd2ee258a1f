package mock

import (
	"strings"
	"testing"
)

// cached_tokens and truncated change the usage and the ending of every
// format, whole and streamed: OpenAI cached_tokens and finish_reason
// length, Anthropic cache_read_input_tokens (input_tokens the rest) and
// stop_reason max_tokens, Responses cached_tokens and status incomplete.
func TestCachedTokensAndTruncated(t *testing.T) {
	m := startMock(t, `rules: [{model: detail, responses: [{cached_tokens: 5, truncated: true}]}, {model: huge, responses: [{cached_tokens: 100000}]}]`)
	chat := `{"model":"detail","messages":[{"role":"user","content":"a prompt of some length, long enough for a few tokens"}]%s}`
	cases := []struct {
		path, body string
		want       []string
	}{
		{"/v1/chat/completions", strings.Replace(chat, "%s", "", 1), []string{`"cached_tokens":5`, `"finish_reason":"length"`}},
		{"/v1/chat/completions", strings.Replace(chat, "%s", `,"stream":true,"stream_options":{"include_usage":true}`, 1), []string{`"cached_tokens":5`, `"finish_reason":"length"`}},
		{"/v1/completions", `{"model":"detail","prompt":"hi"}`, []string{`"finish_reason":"length"`}},
		{"/v1/messages", strings.Replace(chat, "%s", `,"max_tokens":9`, 1), []string{`"cache_read_input_tokens":5`, `"stop_reason":"max_tokens"`}},
		{"/v1/messages", strings.Replace(chat, "%s", `,"max_tokens":9,"stream":true`, 1), []string{`"cache_read_input_tokens":5`, `"stop_reason":"max_tokens"`}},
		{"/v1/responses", `{"model":"detail","input":"a prompt of some length"}`, []string{`"cached_tokens":5`, `"status":"incomplete"`, `"incomplete_details":{"reason":"max_output_tokens"}`}},
		{"/v1/responses", `{"model":"detail","input":"a prompt of some length","stream":true}`, []string{`"cached_tokens":5`, "event: response.incomplete", `"status":"incomplete"`}},
	}
	for _, tc := range cases {
		status, _, body := m.post(tc.path, "k", tc.body)
		if status != 200 {
			t.Fatalf("%s: %d %s", tc.path, status, body)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(body), w) {
				t.Errorf("%s %s: lacks %s:\n%s", tc.path, tc.body, w, body)
			}
		}
		if strings.Contains(string(body), "response.completed") || strings.Contains(string(body), `"end_turn"`) {
			t.Errorf("%s: a truncated answer must not end as complete: %s", tc.path, body)
		}
	}
	// The cached part never exceeds the prompt; Anthropic input_tokens is
	// the uncached rest (here none).
	_, _, body := m.post("/v1/messages", "k", `{"model":"huge","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`)
	if !strings.Contains(string(body), `"input_tokens":0,`) || strings.Contains(string(body), `"cache_read_input_tokens":100000`) {
		t.Fatalf("cached beyond the prompt: %s", body)
	}
}
