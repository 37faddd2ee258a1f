package frames

import (
	"bytes"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// readerPairs pairs each format's lenient reader with its validating
// one.
var readerPairs = []struct {
	name  string
	read  AnswerReader
	valid ValidReader
}{
	{"chat", ChatAnswer, ValidChatAnswer},
	{"messages", MessagesAnswer, ValidMessagesAnswer},
	{"responses", ResponsesAnswer, ValidResponsesAnswer},
	{"object", func([]byte) Answer { return Answer{} }, ValidObject},
}

// checkValidReader asserts a ValidReader's contract on body: ok exactly
// when body is one JSON object with nothing around it (wire.Valid, the
// check it stands in for), and then the same Answer as the lenient
// reader.
func checkValidReader(t *testing.T, name string, read AnswerReader, valid ValidReader, body []byte) {
	t.Helper()
	tb := bytes.TrimSpace(body)
	want := len(tb) > 0 && tb[0] == '{' && wire.Valid(body)
	a, ok := valid(body)
	if ok != want {
		t.Fatalf("%s: ok = %v for %q, wire.Valid says %v", name, ok, body, want)
	}
	if ok {
		if r := read(body); a != r {
			t.Fatalf("%s: %q read as %+v, the lenient reader reads %+v", name, body, a, r)
		}
	}
}

// validAnswerBodies are answers of every shape the readers look into,
// valid and broken.
var validAnswerBodies = []string{
	`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi \u00e9\ud83d\ude00","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
	`{"choices":[{"message":{"content":"","reasoning_content":"think"}}]}`,
	`{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"refusal","refusal":"b"}]}}]}`,
	`{"choices":[{"message":{"content":null,"tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`,
	`{"choices":[{"message":{"content":null,"function_call":{"name":"f"}}},{"delta":{"content":"x"}}]}`,
	`{"choices":[{"text":"legacy","index":0}], "choices":[{"text":"second"}]}`,
	`{"choices":{"text":"not an array"},"choices":[{"text":"later"}]}`,
	`{"choices":[1,"two",[3],null,{"message":[]},{"message":{"content":5}}]}`,
	` { "choices" : [ { "message" : { "content" : "spaced" } } ] } `,
	`{"choices":[]}`,
	`{}`,
	`{"type":"message","content":[{"type":"text","text":"hello"},{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"x","input":{}}]}`,
	`{"content":[{"type":"text","text":""},{"text":"x","type":"text"},{"type":"redacted_thinking","data":"d"}]}`,
	`{"content":[{"type":"server_tool_use"},{"type":"mcp_tool_use"},{"type":"text","type":"thinking"}]}`,
	`{"object":"response","output":[{"type":"message","content":[{"type":"output_text","text":"a"}]},{"type":"reasoning","summary":[]},{"type":"function_call","name":"f"}]}`,
	`{"output":[{"content":[{"text":"before type"}],"type":"message","type":"reasoning"}]}`,
	`{"output":[{"type":"message","content":[{"refusal":"no"}],"content":[]}]}`,
	`{"data":[{"embedding":[0.1,-2e5,3.5E+2]}],"ok":true,"no":false,"nil":null}`,
	// Broken bodies.
	`{"choices":[{"message":{"content":"x"}}]`,
	`{"choices":[{"message":{"content":"x"}},]}`,
	`{"choices":[{"message":{"content":"x",}}]}`,
	`{"choices":[{"message":{"content":"x" "role":"y"}}]}`,
	`{"choices":[{"message":{"content":"a\x01b"}}]}`,
	`{"choices":[{"message":{"content":"\q"}}]}`,
	`{"choices":[{"message":{"content":01}}]}`,
	`{"choices":[{"message":{"content":tru}}]}`,
	`{"choices"[]}`,
	`{choices:[]}`,
	`{"a":1}{"b":2}`,
	`{"a":1} x`,
	`[{"choices":[]}]`,
	`{"content":[{"type":"text","text":"x"}],}`,
	`{"output":[{"type":"message","content":[{"text":"x"]}]}`,
	``,
	`{`,
}

// The validating readers read a valid answer exactly as the lenient ones
// do and refuse exactly what wire.Valid refuses, so that one pass stands
// in for the two (docs/resilience.md §9, the broken 2xx answer).
func TestValidReadersMatchLenientReadersAndValid(t *testing.T) {
	for _, p := range readerPairs {
		for _, body := range validAnswerBodies {
			checkValidReader(t, p.name, p.read, p.valid, []byte(body))
		}
		for _, path := range []string{"openai/responses/text.json", "openai/responses/reasoning.json", "openai/responses/tool_calls.json",
			"anthropic/responses/text.json", "anthropic/responses/thinking.json", "anthropic/responses/tool_use.json",
			"golden/chat_to_responses/responses/text.json", "golden/chat_to_responses/responses/tool_calls.json"} {
			checkValidReader(t, p.name, p.read, p.valid, bytes.TrimSpace(fixture(t, path)))
		}
	}
	// A body nested deeper than encoding/json allows is refused.
	deep := []byte(`{"choices":[{"message":{"content":` + string(bytes.Repeat([]byte("["), 10001)) + string(bytes.Repeat([]byte("]"), 10001)) + `}}]}`)
	for _, p := range readerPairs {
		checkValidReader(t, p.name, p.read, p.valid, deep)
	}
}

// Reading and checking a whole answer allocates nothing.
func TestValidAnswerReadAllocatesNothing(t *testing.T) {
	body := []byte(validAnswerBodies[0])
	if n := testing.AllocsPerRun(100, func() { ValidChatAnswer(body) }); n != 0 {
		t.Errorf("ValidChatAnswer allocates %v times per read, want 0", n)
	}
}

func FuzzValidReaders(f *testing.F) {
	for _, b := range validAnswerBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range readerPairs {
			checkValidReader(t, p.name, p.read, p.valid, body)
		}
	})
}

// BenchmarkAnswerCheck compares, on a typical chat answer, the lenient
// reading plus wire.Valid (two passes) with the validating reader (one).
func BenchmarkAnswerCheck(b *testing.B) {
	long := `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("The quick brown fox jumps over the lazy dog. ", 24) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`
	for _, c := range []struct{ name, body string }{{"short", validAnswerBodies[0]}, {"1KB", long}} {
		body := []byte(c.body)
		b.Run(c.name+"/two-passes", func(b *testing.B) {
			for b.Loop() {
				if ChatAnswer(body).Empty() || !wire.Valid(body) {
					b.Fatal("misread")
				}
			}
		})
		b.Run(c.name+"/one-pass", func(b *testing.B) {
			for b.Loop() {
				if a, ok := ValidChatAnswer(body); !ok || a.Empty() {
					b.Fatal("misread")
				}
			}
		})
	}
}
