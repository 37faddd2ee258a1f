package translate

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// oaKind names an OpenAI chunk for order assertions: role, content,
// reasoning, tool_start:N, tool_args:N, finish:R, usage, done, error.
func oaKind(t *testing.T, ev Event) string {
	t.Helper()
	if string(ev.Data) == "[DONE]" {
		return "done"
	}
	m := obj(t, ev.Data)
	if has(m, "error") {
		return "error"
	}
	choices := m["choices"].([]any)
	if len(choices) == 0 {
		if !has(m, "usage") {
			t.Fatalf("chunk without choices or usage: %s", ev.Data)
		}
		return "usage"
	}
	ch := choices[0].(map[string]any)
	if r, ok := ch["finish_reason"].(string); ok {
		return "finish:" + r
	}
	d := ch["delta"].(map[string]any)
	switch {
	case has(d, "role"):
		return "role"
	case has(d, "reasoning_content"):
		return "reasoning"
	case has(d, "content"):
		return "content"
	case has(d, "tool_calls"):
		tc := at(t, d, "tool_calls", 0).(map[string]any)
		if has(tc, "id") {
			return fmt.Sprintf("tool_start:%v", tc["index"])
		}
		return fmt.Sprintf("tool_args:%v", tc["index"])
	}
	t.Fatalf("unclassified chunk %s", ev.Data)
	return ""
}

func oaKinds(t *testing.T, events []Event) string {
	t.Helper()
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = oaKind(t, e)
	}
	return strings.Join(out, " ")
}

// anKinds names Anthropic events, with the block type for block starts and
// the delta type for deltas.
func anKinds(t *testing.T, events []Event) string {
	t.Helper()
	out := make([]string, len(events))
	for i, e := range events {
		m := obj(t, e.Data)
		k := e.Event
		switch k {
		case "content_block_start":
			k = fmt.Sprintf("start:%v:%v", m["index"], at(t, m, "content_block", "type"))
		case "content_block_delta":
			k = fmt.Sprintf("delta:%v:%v", m["index"], at(t, m, "delta", "type"))
		case "content_block_stop":
			k = fmt.Sprintf("stop:%v", m["index"])
		case "message_delta":
			k = fmt.Sprintf("message_delta:%v", at(t, m, "delta", "stop_reason"))
		}
		out[i] = k
	}
	return strings.Join(out, " ")
}

func TestAnthropicToOpenAIStreams(t *testing.T) {
	cases := []struct {
		fixture, kinds string
		check          func(t *testing.T, m oaMsg)
	}{
		{"text.sse", "role content content content finish:stop usage done", func(t *testing.T, m oaMsg) {
			eq(t, "content", m.Content, "Canberra has about 470,000 residents (2023 estimate).\n\"Quoted\" \\ tab\there")
			eq(t, "id", m.ID, "msg_01XFDUDYJgAACzvnptvVoYEL")
			// 93 input + 1024 cache read; output restated by message_delta.
			eq(t, "usage", *m.Usage, oaUsage{PromptTokens: 1117, CompletionTokens: 17, TotalTokens: 1134, PromptTokensDetails: m.Usage.PromptTokensDetails})
			eq(t, "cached", m.Usage.cached(), 1024)
		}},
		{"tool_use.sse", "role content content tool_start:0 tool_args:0 tool_args:0 tool_args:0 tool_start:1 tool_args:1 tool_args:1 finish:tool_calls usage done", func(t *testing.T, m oaMsg) {
			eq(t, "tool calls", len(m.ToolCalls), 2)
			eq(t, "tool 0 id", m.ToolCalls[0].ID, "toolu_01T1x1fJ34qAmk2tNTrN7Up6")
			eq(t, "tool 0 name", m.ToolCalls[0].Function.Name, "get_weather")
			if !jsonEq(t, m.ToolCalls[0].Function.Arguments, `{"location":"Paris, France","unit":"celsius"}`) {
				t.Errorf("tool 0 arguments %s", m.ToolCalls[0].Function.Arguments)
			}
			if !jsonEq(t, m.ToolCalls[1].Function.Arguments, `{"location":"Tokyo, Japan","unit":"celsius"}`) {
				t.Errorf("tool 1 arguments %s", m.ToolCalls[1].Function.Arguments)
			}
			eq(t, "usage", m.Usage.PromptTokens+m.Usage.CompletionTokens, 472+128)
		}},
		{"thinking.sse", "role reasoning reasoning content content finish:stop usage done", func(t *testing.T, m oaMsg) {
			eq(t, "reasoning", m.Reasoning, "Compare 9.11 and 9.8: the tenths digit 1 < 8, so 9.11 < 9.8.")
			eq(t, "content", m.Content, "9.11 is smaller than 9.8.")
			eq(t, "prompt incl. cache creation", m.Usage.PromptTokens, 41+2048)
			eq(t, "completion", m.Usage.CompletionTokens, 312)
		}},
		{"error.sse", "role content error", func(t *testing.T, m oaMsg) {
			eq(t, "error", m.ErrorChunk, map[string]any{"error": map[string]any{"message": "Overloaded", "type": "server_error", "param": nil, "code": "overloaded_error"}})
		}},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			out := runStream(t, newA2O(""), readSSE(t, filepath.Join("testdata", "anthropic", "streams", c.fixture)))
			eq(t, "order", oaKinds(t, out), c.kinds)
			c.check(t, accumulateOpenAI(t, out, false))
		})
	}
}

func TestOpenAIToAnthropicStreams(t *testing.T) {
	cases := []struct {
		fixture, kinds string
		check          func(t *testing.T, m anMsg)
	}{
		{"text.sse", "message_start start:0:text delta:0:text_delta delta:0:text_delta delta:0:text_delta stop:0 message_delta:end_turn message_stop", func(t *testing.T, m anMsg) {
			eq(t, "text", m.Blocks[0].Text, "Canberra has about 470,000 residents.\n\"Quoted\" \\ <tag> & more")
			eq(t, "id", m.ID, "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT")
			eq(t, "model", m.Model, "gpt-4o-2024-08-06")
			// usage-only chunk after finish_reason: prompt 1117 with 1024 cached.
			eq(t, "usage", [3]int{m.Input, m.CacheRead, m.Output}, [3]int{93, 1024, 46})
		}},
		{"tool_calls.sse", "message_start start:0:tool_use delta:0:input_json_delta delta:0:input_json_delta delta:0:input_json_delta stop:0 start:1:tool_use delta:1:input_json_delta delta:1:input_json_delta stop:1 message_delta:tool_use message_stop", func(t *testing.T, m anMsg) {
			eq(t, "ids", [2]string{m.Blocks[0].ID, m.Blocks[1].ID}, [2]string{"call_FthC9qRpsL5kBpwwyw6c7j4k", "call_RtvQKxYnDWp1JAq9vfhXnGzB"})
			eq(t, "name", m.Blocks[1].Name, "get_weather")
			if !jsonEq(t, m.Blocks[0].Input, `{"location":"Paris, France","unit":"celsius"}`) || !jsonEq(t, m.Blocks[1].Input, `{"location":"Tokyo, Japan","unit":"celsius"}`) {
				t.Errorf("inputs %s / %s", m.Blocks[0].Input, m.Blocks[1].Input)
			}
			eq(t, "usage", [2]int{m.Input, m.Output}, [2]int{82, 51})
		}},
		{"reasoning.sse", "message_start start:0:thinking delta:0:thinking_delta delta:0:thinking_delta stop:0 start:1:text delta:1:text_delta delta:1:text_delta stop:1 message_delta:end_turn message_stop", func(t *testing.T, m anMsg) {
			eq(t, "thinking", m.Blocks[0].Thinking, "Compare 9.11 and 9.8: the tenths digit 1 < 8, so 9.11 < 9.8.")
			eq(t, "text", m.Blocks[1].Text, "9.11 is smaller than 9.8.")
			// usage rides on the finish_reason chunk here.
			eq(t, "usage", [2]int{m.Input, m.Output}, [2]int{18, 312})
		}},
		{"error.sse", "message_start start:0:text delta:0:text_delta error", func(t *testing.T, m anMsg) {}},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			out := runStream(t, NewOpenAIToAnthropicStream(""), readSSE(t, filepath.Join("testdata", "openai", "streams", c.fixture)))
			eq(t, "order", anKinds(t, out), c.kinds)
			c.check(t, accumulateAnthropic(t, out))
		})
	}
	out := runStream(t, NewOpenAIToAnthropicStream(""), readSSE(t, "testdata/openai/streams/error.sse"))
	last := obj(t, out[len(out)-1].Data)
	eq(t, "error event", last, map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": "The server had an error while processing your request. Sorry about that!"}})
}

// anStream builds a minimal Anthropic stream ending with stop reason.
func anStream(stop string) []Event {
	return parseSSE([]byte(`event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"` + stop + `","stop_sequence":null},"usage":{"output_tokens":2}}

event: message_stop
data: {"type":"message_stop"}

`))
}

// oaStream builds a minimal OpenAI stream ending with finish reason.
func oaStream(finish string) []Event {
	h := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":`
	return []Event{
		{Data: []byte(h + `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)},
		{Data: []byte(h + `[{"index":0,"delta":{"content":"ok"},"finish_reason":null}]}`)},
		{Data: []byte(h + `[{"index":0,"delta":{},"finish_reason":"` + finish + `"}]}`)},
		{Data: []byte(h + `[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`)},
		{Data: []byte("[DONE]")},
	}
}

func TestStreamStopReasons(t *testing.T) {
	for stop, want := range map[string]string{
		"end_turn": "stop", "max_tokens": "length", "stop_sequence": "stop", "tool_use": "tool_calls",
		"pause_turn": "stop", "refusal": "content_filter", "model_context_window_exceeded": "length",
	} {
		out := runStream(t, newA2O(""), anStream(stop))
		eq(t, "anthropic "+stop, oaKinds(t, out), "role content finish:"+want+" usage done")
	}
	for finish, want := range map[string]string{"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use", "content_filter": "refusal"} {
		out := runStream(t, NewOpenAIToAnthropicStream(""), oaStream(finish))
		eq(t, "openai "+finish, anKinds(t, out), "message_start start:0:text delta:0:text_delta stop:0 message_delta:"+want+" message_stop")
		m := accumulateAnthropic(t, out)
		eq(t, "usage", [2]int{m.Input, m.Output}, [2]int{5, 2})
	}
}

func TestStreamFinish(t *testing.T) {
	// Anthropic body cut after message_delta: the usage chunk and [DONE]
	// are still owed.
	ev := anStream("end_turn")
	out := runStream(t, newA2O(""), ev[:len(ev)-1])
	eq(t, "cut before message_stop", oaKinds(t, out), "role content finish:stop usage done")
	// Cut mid-content: nothing is fabricated.
	tr := newA2O("")
	runStream(t, tr, ev[:3])
	eq(t, "finish after truncation", len(tr.Finish()), 0)
	// message_stop without message_delta still reports a finish reason.
	out = runStream(t, newA2O(""), append(ev[:4:4], ev[5]))
	eq(t, "no message_delta", oaKinds(t, out), "role content finish:stop usage done")

	// OpenAI body without [DONE] after finish_reason and usage.
	oe := oaStream("length")
	out = runStream(t, NewOpenAIToAnthropicStream(""), oe[:4])
	eq(t, "no [DONE]", anKinds(t, out), "message_start start:0:text delta:0:text_delta stop:0 message_delta:max_tokens message_stop")
	// Cut mid-content.
	out = runStream(t, NewOpenAIToAnthropicStream(""), oe[:2])
	eq(t, "truncated", anKinds(t, out), "message_start start:0:text delta:0:text_delta")
	// [DONE] without finish_reason ends the turn cleanly.
	out = runStream(t, NewOpenAIToAnthropicStream(""), []Event{oe[0], oe[1], oe[4]})
	eq(t, "[DONE] only", anKinds(t, out), "message_start start:0:text delta:0:text_delta stop:0 message_delta:end_turn message_stop")

	// Events after the end are ignored, Finish is single-shot.
	tr = NewOpenAIToAnthropicStream("")
	runStream(t, tr, oe)
	if got, _ := tr.Event(oe[1]); len(got) != 0 {
		t.Errorf("event after [DONE] produced %d events", len(got))
	}
	if len(tr.Finish()) != 0 {
		t.Error("second Finish produced events")
	}
}

func TestStreamModelOverrideAndMalformed(t *testing.T) {
	out := runStream(t, newA2O("claude-sonnet-4-5"), anStream("end_turn"))
	for _, e := range out[:len(out)-1] {
		eq(t, "model", obj(t, e.Data)["model"], "claude-sonnet-4-5")
	}
	out = runStream(t, NewOpenAIToAnthropicStream("gpt-4o"), oaStream("stop"))
	eq(t, "model", at(t, obj(t, out[0].Data), "message", "model"), "gpt-4o")

	if _, err := newA2O("").Event(Event{Event: "message_start", Data: []byte(`{"type":`)}); err == nil {
		t.Error("malformed Anthropic event must fail")
	}
	if _, err := NewOpenAIToAnthropicStream("").Event(Event{Data: []byte(`{"id":`)}); err == nil {
		t.Error("malformed OpenAI chunk must fail")
	}
	// Empty data, keep-alive comments and pings emit nothing.
	for _, ev := range []Event{{}, {Comment: true, Data: []byte("keep-alive")}, {Event: "ping", Data: []byte(`{"type": "ping"}`)}} {
		if got, err := newA2O("").Event(ev); err != nil || len(got) != 0 {
			t.Errorf("anthropic %q: got %d events, err %v", ev.Data, len(got), err)
		}
		if got, err := NewOpenAIToAnthropicStream("").Event(ev); err != nil || len(got) != 0 {
			t.Errorf("openai %q: got %d events, err %v", ev.Data, len(got), err)
		}
	}
}

// TestOpenAIToAnthropicStreamVariants covers upstream quirks: tool calls
// whole in one chunk without index (Gemini), a fragment without index or
// id continuing the last call, "reasoning" instead of reasoning_content and
// both sent (older vLLM), content and finish_reason in one chunk, text
// after a tool call.
func TestOpenAIToAnthropicStreamVariants(t *testing.T) {
	h := `{"id":"x1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`
	chunk := func(delta, finish string) Event {
		return Event{Data: []byte(h + delta + `,"finish_reason":` + finish + `}]}`)}
	}
	in := []Event{
		chunk(`{"role":"assistant","reasoning":"a","reasoning_content":"a"}`, "null"),
		chunk(`{"reasoning":"b"}`, "null"),
		chunk(`{"content":"Hi"}`, "null"),
		chunk(`{"tool_calls":[{"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}},{"id":"call_b","type":"function","function":{"name":"g","arguments":"{}"}}]}`, "null"),
		chunk(`{"tool_calls":[{"function":{"name":"h","arguments":"{\"y\":"}}]}`, "null"),
		chunk(`{"tool_calls":[{"function":{"arguments":"2}"}}]}`, "null"),
		chunk(`{"content":" done"}`, `"stop"`),
		{Data: []byte("[DONE]")},
	}
	out := runStream(t, NewOpenAIToAnthropicStream(""), in)
	eq(t, "order", anKinds(t, out), "message_start start:0:thinking delta:0:thinking_delta delta:0:thinking_delta stop:0 start:1:text delta:1:text_delta stop:1 "+
		"start:2:tool_use delta:2:input_json_delta stop:2 start:3:tool_use delta:3:input_json_delta stop:3 "+
		"start:4:tool_use delta:4:input_json_delta delta:4:input_json_delta stop:4 start:5:text delta:5:text_delta stop:5 message_delta:end_turn message_stop")
	m := accumulateAnthropic(t, out)
	eq(t, "thinking once per chunk", m.Blocks[0].Thinking, "ab")
	eq(t, "synthetic id", m.Blocks[4].ID, "toolu_x1_2")
	eq(t, "name", m.Blocks[4].Name, "h")
	eq(t, "input", m.Blocks[4].Input, `{"y":2}`)
	eq(t, "text after tools", m.Blocks[5].Text, " done")
}

// TestOpenAIToAnthropicStreamLateFragment: an upstream that interleaves
// parallel tool calls sends a fragment for a call whose block is already
// closed; it goes to that call's block index (SDKs accumulate by index).
func TestOpenAIToAnthropicStreamLateFragment(t *testing.T) {
	h := `{"id":"x2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`
	in := []Event{
		{Data: []byte(h + `{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":null}]}`)},
		{Data: []byte(h + `{"tool_calls":[{"index":1,"id":"call_b","function":{"name":"g","arguments":"{}"}}]},"finish_reason":null}]}`)},
		{Data: []byte(h + `{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":null}]}`)},
		{Data: []byte(h + `{},"finish_reason":"tool_calls"}]}`)},
		{Data: []byte("[DONE]")},
	}
	out := runStream(t, NewOpenAIToAnthropicStream(""), in)
	eq(t, "order", anKinds(t, out), "message_start start:0:tool_use delta:0:input_json_delta stop:0 start:1:tool_use delta:1:input_json_delta delta:0:input_json_delta stop:1 message_delta:tool_use message_stop")
}

// anMessageJSON renders an accumulated Anthropic stream as a message body.
func anMessageJSON(t *testing.T, m anMsg, stop string) []byte {
	t.Helper()
	var blocks []map[string]any
	for _, b := range m.Blocks {
		switch b.Type {
		case "text":
			blocks = append(blocks, map[string]any{"type": "text", "text": b.Text})
		case "thinking":
			blocks = append(blocks, map[string]any{"type": "thinking", "thinking": b.Thinking, "signature": b.Signature})
		case "tool_use":
			blocks = append(blocks, map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": json.RawMessage(b.Input)})
		}
	}
	return []byte(mustJSON(t, map[string]any{
		"id": m.ID, "type": "message", "role": "assistant", "model": m.Model, "content": blocks, "stop_reason": stop,
		"usage": map[string]any{"input_tokens": m.Input, "output_tokens": m.Output, "cache_read_input_tokens": m.CacheRead, "cache_creation_input_tokens": m.CacheWrite},
	}))
}

// oaCompletionJSON renders an accumulated OpenAI stream as a completion.
func oaCompletionJSON(t *testing.T, m oaMsg) []byte {
	t.Helper()
	msg := map[string]any{"role": "assistant", "content": m.Content, "reasoning_content": m.Reasoning}
	if len(m.ToolCalls) > 0 {
		msg["tool_calls"] = m.ToolCalls
	}
	return []byte(mustJSON(t, map[string]any{
		"id": m.ID, "object": "chat.completion", "model": m.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": m.Finish}},
		"usage":   m.Usage,
	}))
}

// sameCompletion compares two OpenAI completions (one accumulated from a
// stream) on what a client reads.
func sameCompletion(t *testing.T, got oaMsg, want map[string]any) {
	t.Helper()
	msg := at(t, want, "choices", 0, "message").(map[string]any)
	content, _ := msg["content"].(string)
	reasoning, _ := msg["reasoning_content"].(string)
	eq(t, "content", got.Content, content)
	eq(t, "reasoning", got.Reasoning, reasoning)
	eq(t, "finish", got.Finish, at(t, want, "choices", 0, "finish_reason"))
	calls, _ := msg["tool_calls"].([]any)
	eq(t, "tool call count", len(got.ToolCalls), len(calls))
	for i, c := range calls {
		eq(t, "tool id", got.ToolCalls[i].ID, at(t, c, "id"))
		eq(t, "tool name", got.ToolCalls[i].Function.Name, at(t, c, "function", "name"))
		if !jsonEq(t, got.ToolCalls[i].Function.Arguments, at(t, c, "function", "arguments").(string)) {
			t.Errorf("tool %d arguments %s, want %s", i, got.ToolCalls[i].Function.Arguments, at(t, c, "function", "arguments"))
		}
	}
	eq(t, "prompt_tokens", float64(got.Usage.PromptTokens), at(t, want, "usage", "prompt_tokens"))
	eq(t, "completion_tokens", float64(got.Usage.CompletionTokens), at(t, want, "usage", "completion_tokens"))
	eq(t, "cached_tokens", float64(got.Usage.cached()), at(t, want, "usage", "prompt_tokens_details", "cached_tokens"))
}

// TestStreamMatchesNonStream: translating a stream and accumulating it
// gives what translating the accumulated upstream message gives.
func TestStreamMatchesNonStream(t *testing.T) {
	for _, name := range []string{"text.sse", "tool_use.sse", "thinking.sse"} {
		t.Run("anthropic/"+name, func(t *testing.T) {
			in := readSSE(t, filepath.Join("testdata", "anthropic", "streams", name))
			up := accumulateAnthropic(t, in)
			whole, err := AnthropicToOpenAIResponse(anMessageJSON(t, up, up.StopReason), "")
			if err != nil {
				t.Fatal(err)
			}
			sameCompletion(t, accumulateOpenAI(t, runStream(t, newA2O(""), in), false), obj(t, whole))
		})
	}
	for _, name := range []string{"text.sse", "tool_calls.sse", "reasoning.sse"} {
		t.Run("openai/"+name, func(t *testing.T) {
			in := readSSE(t, filepath.Join("testdata", "openai", "streams", name))
			up := accumulateOpenAI(t, in, true)
			whole, err := OpenAIToAnthropicResponse(oaCompletionJSON(t, up), "")
			if err != nil {
				t.Fatal(err)
			}
			sameMessage(t, accumulateAnthropic(t, runStream(t, NewOpenAIToAnthropicStream(""), in)), obj(t, whole))
		})
	}
}

// sameMessage compares an Anthropic message accumulated from a stream
// with a message body on what a client reads (signatures aside).
func sameMessage(t *testing.T, got anMsg, want map[string]any) {
	t.Helper()
	blocks := want["content"].([]any)
	eq(t, "block count", len(got.Blocks), len(blocks))
	for i, b := range blocks {
		if i >= len(got.Blocks) {
			break
		}
		g := got.Blocks[i]
		eq(t, "block type", g.Type, at(t, b, "type"))
		switch g.Type {
		case "text":
			eq(t, "text", g.Text, at(t, b, "text"))
		case "thinking":
			eq(t, "thinking", g.Thinking, at(t, b, "thinking"))
		case "tool_use":
			eq(t, "tool id", g.ID, at(t, b, "id"))
			eq(t, "tool name", g.Name, at(t, b, "name"))
			if !jsonEq(t, g.Input, mustJSON(t, at(t, b, "input"))) {
				t.Errorf("tool %d input %s, want %v", i, g.Input, at(t, b, "input"))
			}
		}
	}
	eq(t, "stop_reason", got.StopReason, want["stop_reason"])
	eq(t, "usage", []float64{float64(got.Input), float64(got.CacheRead), float64(got.Output)},
		[]float64{at(t, want, "usage", "input_tokens").(float64), at(t, want, "usage", "cache_read_input_tokens").(float64), at(t, want, "usage", "output_tokens").(float64)})
}
