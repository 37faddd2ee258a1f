package frames

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/breakwater-dev/breakwater/internal/engine/watchdog"
	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
)

func data(d string) sse.Event        { return sse.Event{Data: []byte(d)} }
func named(name, d string) sse.Event { return sse.Event{Event: name, Data: []byte(d)} }
func comment(text string) sse.Event  { return sse.Event{Comment: true, Data: []byte(text)} }
func chunk(delta string) string      { return chatChunk(delta, "null") }
func chatChunk(delta, finish string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]}`
}

type classifyCase struct {
	name  string
	ev    sse.Event
	frame watchdog.Frame
	bytes int
	term  bool
	usage bool
}

func runClassify(t *testing.T, read Reader, tests []classifyCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := read(tt.ev)
			if in.Frame != tt.frame || in.Bytes != tt.bytes || in.Terminal != tt.term || in.Usage != tt.usage {
				t.Fatalf("read = %+v (%s), want frame %s bytes %d terminal %v usage %v", in, in.Frame, tt.frame, tt.bytes, tt.term, tt.usage)
			}
		})
	}
}

func TestChat(t *testing.T) {
	runClassify(t, Chat, []classifyCase{
		{name: "role chunk with empty content", ev: data(chunk(`{"role":"assistant","content":""}`)), frame: watchdog.FrameLifecycle},
		{name: "content", ev: data(chunk(`{"content":"Hello"}`)), frame: watchdog.FrameContent, bytes: 5},
		{name: "content utf8", ev: data(chunk(`{"content":"héllo 世界"}`)), frame: watchdog.FrameContent, bytes: len("héllo 世界")},
		{name: "content escapes", ev: data(chunk(`{"content":"a\nb\"\u00e9\ud83d\ude00"}`)), frame: watchdog.FrameContent, bytes: len("a\nb\"é😀")},
		{name: "reasoning_content", ev: data(chunk(`{"reasoning_content":"Let me think"}`)), frame: watchdog.FrameReasoning},
		{name: "reasoning (openrouter)", ev: data(chunk(`{"content":"","reasoning":"hmm"}`)), frame: watchdog.FrameReasoning},
		{name: "reasoning_details", ev: data(chunk(`{"reasoning_details":[{"type":"reasoning.encrypted","data":"x"}]}`)), frame: watchdog.FrameReasoning},
		{name: "empty reasoning_content", ev: data(chunk(`{"reasoning_content":""}`)), frame: watchdog.FrameLifecycle},
		{name: "tool_calls start", ev: data(chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`)), frame: watchdog.FrameToolCall},
		{name: "tool_calls arguments", ev: data(chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`)), frame: watchdog.FrameToolCall},
		{name: "empty tool_calls", ev: data(chunk(`{"tool_calls":[]}`)), frame: watchdog.FrameLifecycle},
		{name: "legacy function_call", ev: data(chunk(`{"function_call":{"name":"f","arguments":""}}`)), frame: watchdog.FrameToolCall},
		{name: "refusal", ev: data(chunk(`{"refusal":"I can't"}`)), frame: watchdog.FrameContent, bytes: 7},
		{name: "empty delta", ev: data(chunk(`{}`)), frame: watchdog.FrameLifecycle},
		{name: "finish", ev: data(chatChunk(`{}`, `"stop"`)), frame: watchdog.FrameLifecycle, term: true},
		{name: "content with finish", ev: data(chatChunk(`{"content":"end."}`, `"length"`)), frame: watchdog.FrameContent, bytes: 4, term: true},
		{name: "usage null on content chunk", ev: data(`{"id":"x","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":null}`), frame: watchdog.FrameContent, bytes: 2},
		{name: "usage-only", ev: data(`{"id":"x","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`), frame: watchdog.FrameUsage, usage: true},
		{name: "done", ev: data("[DONE]"), frame: watchdog.FrameDone, term: true},
		{name: "error object", ev: data(`{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`), frame: watchdog.FrameError},
		{name: "error event name", ev: named("error", `{"message":"x"}`), frame: watchdog.FrameError},
		{name: "comment keep-alive", ev: comment("OPENROUTER PROCESSING"), frame: watchdog.FramePing},
		{name: "empty data", ev: data(""), frame: watchdog.FramePing},
		{name: "not json", ev: data("hello"), frame: watchdog.FrameLifecycle},
		{name: "truncated json", ev: data(`{"choices":[{"delta":{"content":"ab`), frame: watchdog.FrameLifecycle},
		{name: "multiple choices", ev: data(`{"choices":[{"index":0,"delta":{"content":"ab"}},{"index":1,"delta":{"content":"cde"}}]}`), frame: watchdog.FrameContent, bytes: 5},
	})
}

func TestMessages(t *testing.T) {
	ev := func(name, d string) sse.Event { return named(name, d) }
	runClassify(t, Messages, []classifyCase{
		{name: "message_start", ev: ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`), frame: watchdog.FrameLifecycle, usage: true},
		{name: "content_block_start text", ev: ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`), frame: watchdog.FrameLifecycle},
		{name: "content_block_start thinking", ev: ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`), frame: watchdog.FrameReasoning},
		{name: "content_block_start redacted_thinking", ev: ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4a"}}`), frame: watchdog.FrameReasoning},
		{name: "content_block_start tool_use", ev: ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`), frame: watchdog.FrameToolCall},
		{name: "text_delta", ev: ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, wörld"}}`), frame: watchdog.FrameContent, bytes: len("Hello, wörld")},
		{name: "empty text_delta", ev: ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}`), frame: watchdog.FrameLifecycle},
		{name: "thinking_delta", ev: ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me solve"}}`), frame: watchdog.FrameReasoning},
		{name: "thinking_delta empty", ev: ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":""}}`), frame: watchdog.FrameReasoning},
		{name: "signature_delta", ev: ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}`), frame: watchdog.FrameReasoning},
		{name: "input_json_delta", ev: ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"San Fra"}}`), frame: watchdog.FrameToolCall},
		{name: "content_block_stop", ev: ev("content_block_stop", `{"type":"content_block_stop","index":0}`), frame: watchdog.FrameLifecycle},
		{name: "ping", ev: ev("ping", `{"type": "ping"}`), frame: watchdog.FramePing},
		{name: "message_delta", ev: ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`), frame: watchdog.FrameUsage, term: true, usage: true},
		{name: "message_stop", ev: ev("message_stop", `{"type":"message_stop"}`), frame: watchdog.FrameDone, term: true},
		{name: "error", ev: ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), frame: watchdog.FrameError},
		{name: "error without event name", ev: data(`{"type":"error","error":{"type":"api_error","message":"x"}}`), frame: watchdog.FrameError},
		{name: "type from event name", ev: ev("message_stop", `{}`), frame: watchdog.FrameDone, term: true},
		{name: "unknown", ev: ev("future_event", `{"type":"future_event"}`), frame: watchdog.FrameLifecycle},
	})
}

func TestResponses(t *testing.T) {
	ev := func(name, d string) sse.Event { return named(name, d) }
	runClassify(t, Responses, []classifyCase{
		{name: "created", ev: ev("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}`), frame: watchdog.FrameLifecycle},
		{name: "in_progress", ev: ev("response.in_progress", `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1"}}`), frame: watchdog.FrameLifecycle},
		{name: "message item added", ev: ev("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`), frame: watchdog.FrameLifecycle},
		{name: "content_part added", ev: ev("response.content_part.added", `{"type":"response.content_part.added","item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`), frame: watchdog.FrameLifecycle},
		{name: "output_text delta", ev: ev("response.output_text.delta", `{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi there","sequence_number":4}`), frame: watchdog.FrameContent, bytes: 8},
		{name: "empty output_text delta", ev: ev("response.output_text.delta", `{"type":"response.output_text.delta","delta":""}`), frame: watchdog.FrameLifecycle},
		{name: "output_text done", ev: ev("response.output_text.done", `{"type":"response.output_text.done","text":"Hi there"}`), frame: watchdog.FrameLifecycle},
		{name: "reasoning item added", ev: ev("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[],"encrypted_content":"gAAAA"}}`), frame: watchdog.FrameReasoning},
		{name: "reasoning summary delta", ev: ev("response.reasoning_summary_text.delta", `{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"**Thinking**"}`), frame: watchdog.FrameReasoning},
		{name: "reasoning summary part added", ev: ev("response.reasoning_summary_part.added", `{"type":"response.reasoning_summary_part.added","item_id":"rs_1","part":{"type":"summary_text","text":""}}`), frame: watchdog.FrameReasoning},
		{name: "reasoning text delta", ev: ev("response.reasoning_text.delta", `{"type":"response.reasoning_text.delta","delta":"x"}`), frame: watchdog.FrameReasoning},
		{name: "function call item", ev: ev("response.output_item.added", `{"type":"response.output_item.added","item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":""}}`), frame: watchdog.FrameToolCall},
		{name: "function call arguments", ev: ev("response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","item_id":"fc_1","delta":"{\"a\""}`), frame: watchdog.FrameToolCall},
		{name: "web search call", ev: ev("response.web_search_call.searching", `{"type":"response.web_search_call.searching","item_id":"ws_1"}`), frame: watchdog.FrameToolCall},
		{name: "completed", ev: ev("response.completed", `{"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{"input_tokens":10,"output_tokens":3,"total_tokens":13}}}`), frame: watchdog.FrameDone, term: true, usage: true},
		{name: "incomplete", ev: ev("response.incomplete", `{"type":"response.incomplete","response":{"status":"incomplete","usage":null}}`), frame: watchdog.FrameDone, term: true},
		{name: "failed", ev: ev("response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"x"}}}`), frame: watchdog.FrameError},
		{name: "error", ev: ev("error", `{"type":"error","code":"ERR","message":"x","param":null}`), frame: watchdog.FrameError},
		{name: "keep-alive comment", ev: comment(""), frame: watchdog.FramePing},
	})
}

// textBytes must agree with decoding the string and counting its UTF-8.
func TestTextBytesMatchesDecoding(t *testing.T) {
	for _, s := range []string{
		`""`, `"abc"`, `"é"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00x"`, `"\ud83dx"`,
		`"\n\t\\\"\/"`, `"世界"`, "\"\xff\xfe\"", `"a\u0000b"`, `"\ud800\ud800"`,
	} {
		var dec string
		if err := json.Unmarshal([]byte(s), &dec); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		want := len(dec)
		if !utf8.ValidString(dec) {
			t.Fatalf("decoded %q invalid", dec)
		}
		if got := textBytes([]byte(s)); got != want {
			t.Errorf("textBytes(%s) = %d, want %d", s, got, want)
		}
	}
	if textBytes([]byte(`123`)) != 0 || textBytes([]byte(`null`)) != 0 {
		t.Error("non-strings must count 0")
	}
}

func FuzzTextBytes(f *testing.F) {
	f.Add("héllo \n \u2028 😀")
	f.Fuzz(func(t *testing.T, s string) {
		enc, _ := json.Marshal(s)
		var dec string
		if err := json.Unmarshal(enc, &dec); err != nil {
			t.Skip()
		}
		if got := textBytes(enc); got != len(dec) {
			t.Fatalf("textBytes(%s) = %d, want %d", enc, got, len(dec))
		}
	})
}

// Classification never panics on arbitrary data.
func FuzzReaders(f *testing.F) {
	f.Add(`{"choices":[{"delta":{"content":"x"}}]}`)
	f.Add(`{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}`)
	f.Fuzz(func(t *testing.T, d string) {
		for _, read := range []Reader{Chat, Messages, Responses} {
			in := read(data(d))
			if in.Bytes < 0 || in.Bytes > len(d)*3 {
				t.Fatalf("bytes %d for %q", in.Bytes, d)
			}
		}
	})
}
