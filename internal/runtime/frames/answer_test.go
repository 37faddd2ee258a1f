package frames

import (
	"os"
	"path/filepath"
	"testing"
)

// fixture reads a provider answer kept in the translators' testdata (taken
// from the providers' documentation).
func fixture(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "translate", "testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// docs/resilience.md §9: a whole answer is empty when it has neither text
// nor a tool call — reasoning only, or nothing at all; a body without the
// format's answer shape is never called empty.
func TestWholeAnswersEmptyOrNot(t *testing.T) {
	cases := []struct {
		name  string
		read  AnswerReader
		body  []byte
		empty bool
	}{
		{"chat text", ChatAnswer, fixture(t, "openai/responses/text.json"), false},
		{"chat reasoning and text", ChatAnswer, fixture(t, "openai/responses/reasoning.json"), false},
		{"chat tool calls", ChatAnswer, fixture(t, "openai/responses/tool_calls.json"), false},
		{"chat reasoning only", ChatAnswer, []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"","reasoning_content":"Let me think."},"finish_reason":"length"}]}`), true},
		{"chat null content", ChatAnswer, []byte(` {"choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"stop"}]}`), true},
		{"chat refusal", ChatAnswer, []byte(`{"choices":[{"message":{"role":"assistant","content":null,"refusal":"I can't help with that."}}]}`), false},
		{"chat legacy function call", ChatAnswer, []byte(`{"choices":[{"message":{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}}}]}`), false},
		{"legacy completion text", ChatAnswer, []byte(`{"object":"text_completion","choices":[{"text":"echo: hi","index":0}]}`), false},
		{"not a chat answer", ChatAnswer, []byte(`{"data":[{"embedding":[0.1]}]}`), false},
		{"not JSON", ChatAnswer, []byte(`OK`), false},
		{"messages text", MessagesAnswer, fixture(t, "anthropic/responses/text.json"), false},
		{"messages thinking and text", MessagesAnswer, fixture(t, "anthropic/responses/thinking.json"), false},
		{"messages tool use", MessagesAnswer, fixture(t, "anthropic/responses/tool_use.json"), false},
		{"messages thinking only", MessagesAnswer, []byte(`{"type":"message","role":"assistant","content":[{"type":"thinking","thinking":"step","signature":"EqQB"}],"stop_reason":"max_tokens"}`), true},
		{"messages no content", MessagesAnswer, []byte(`{"type":"message","role":"assistant","content":[],"stop_reason":"end_turn"}`), true},
		{"messages empty text block", MessagesAnswer, []byte(`{"type":"message","content":[{"type":"text","text":""}]}`), true},
		{"responses text", ResponsesAnswer, fixture(t, "golden/chat_to_responses/responses/text.json"), false},
		{"responses tool call", ResponsesAnswer, fixture(t, "golden/chat_to_responses/responses/tool_calls.json"), false},
		{"responses reasoning only", ResponsesAnswer, []byte(`{"object":"response","output":[{"type":"reasoning","id":"rs_1","summary":[]}],"status":"incomplete"}`), true},
		{"responses refusal", ResponsesAnswer, []byte(`{"object":"response","output":[{"type":"message","content":[{"type":"refusal","refusal":"No."}]}]}`), false},
	}
	for _, tc := range cases {
		if got := tc.read(tc.body).Empty(); got != tc.empty {
			t.Errorf("%s: Empty = %v, want %v (%+v)", tc.name, got, tc.empty, tc.read(tc.body))
		}
	}
}

// Reading a whole answer allocates nothing (it runs on every 2xx
// non-streamed answer).
func TestWholeAnswerReadAllocatesNothing(t *testing.T) {
	body := fixture(t, "openai/responses/tool_calls.json")
	if n := testing.AllocsPerRun(100, func() { _ = ChatAnswer(body) }); n != 0 {
		t.Fatalf("ChatAnswer allocates %v times", n)
	}
}
