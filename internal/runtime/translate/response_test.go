package translate

import (
	"path/filepath"
	"testing"
)

func anRespToOa(t *testing.T, fixture string) map[string]any {
	t.Helper()
	out, err := anthropicToOpenAIResponse(readFile(t, filepath.Join("testdata", "anthropic", "responses", fixture)), "", fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	return obj(t, out)
}

func oaRespToAn(t *testing.T, fixture string) map[string]any {
	t.Helper()
	out, err := OpenAIToAnthropicResponse(readFile(t, filepath.Join("testdata", "openai", "responses", fixture)), "")
	if err != nil {
		t.Fatal(err)
	}
	return obj(t, out)
}

func TestAnthropicToOpenAIResponse(t *testing.T) {
	m := anRespToOa(t, "text.json")
	eq(t, "object", m["object"], "chat.completion")
	eq(t, "id", m["id"], "msg_01XFDUDYJgAACzvnptvVoYEL")
	eq(t, "created", m["created"], float64(fixedNow.Unix()))
	eq(t, "model", m["model"], "claude-sonnet-4-5-20250929")
	eq(t, "content", at(t, m, "choices", 0, "message", "content"), "Canberra has about 470,000 residents (2023 estimate).")
	eq(t, "finish_reason", at(t, m, "choices", 0, "finish_reason"), "stop")
	// input 93 + cache creation 0 + cache read 1024.
	eq(t, "usage", m["usage"], map[string]any{"prompt_tokens": 1117.0, "completion_tokens": 17.0, "total_tokens": 1134.0, "prompt_tokens_details": map[string]any{"cached_tokens": 1024.0}})

	m = anRespToOa(t, "tool_use.json")
	msg := at(t, m, "choices", 0, "message")
	eq(t, "text with tool calls", at(t, msg, "content"), "I'll check the weather in both cities.")
	eq(t, "tool_calls[1]", at(t, msg, "tool_calls", 1), map[string]any{"id": "toolu_01BRq3xkBDLJQgtM6bX5TtWm", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"location":"Tokyo, Japan","unit":"celsius"}`}})
	eq(t, "finish_reason", at(t, m, "choices", 0, "finish_reason"), "tool_calls")

	m = anRespToOa(t, "thinking.json")
	msg = at(t, m, "choices", 0, "message")
	eq(t, "reasoning_content", at(t, msg, "reasoning_content"), "Compare 9.11 and 9.8: the tenths digit 1 < 8, so 9.11 < 9.8.")
	eq(t, "content (redacted_thinking dropped)", at(t, msg, "content"), "9.11 is smaller than 9.8.")
	eq(t, "prompt_tokens with cache creation", at(t, m, "usage", "prompt_tokens"), 41.0+2048)

	eq(t, "stop_sequence", at(t, anRespToOa(t, "stop_sequence.json"), "choices", 0, "finish_reason"), "stop")
	eq(t, "max_tokens", at(t, anRespToOa(t, "max_tokens.json"), "choices", 0, "finish_reason"), "length")

	out, err := AnthropicToOpenAIResponse(readFile(t, "testdata/anthropic/responses/text.json"), "claude-sonnet-4-5")
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "model override", obj(t, out)["model"], "claude-sonnet-4-5")
}

func TestStopReasonMapping(t *testing.T) {
	toOpenAI := map[string]string{
		"end_turn": "stop", "max_tokens": "length", "stop_sequence": "stop", "tool_use": "tool_calls",
		"pause_turn": "stop", "refusal": "content_filter", "model_context_window_exceeded": "length",
	}
	for reason, want := range toOpenAI {
		body := `{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"x"}],"stop_reason":"` + reason + `","usage":{"input_tokens":1,"output_tokens":1}}`
		out, err := AnthropicToOpenAIResponse([]byte(body), "")
		if err != nil {
			t.Fatal(err)
		}
		eq(t, reason, at(t, obj(t, out), "choices", 0, "finish_reason"), want)
	}
	toAnthropic := map[string]string{"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use", "content_filter": "refusal"}
	for reason, want := range toAnthropic {
		body := `{"id":"c1","object":"chat.completion","model":"g","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"` + reason + `"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
		out, err := OpenAIToAnthropicResponse([]byte(body), "")
		if err != nil {
			t.Fatal(err)
		}
		eq(t, reason, obj(t, out)["stop_reason"], want)
	}
}

func TestOpenAIToAnthropicResponse(t *testing.T) {
	m := oaRespToAn(t, "text.json")
	eq(t, "type", m["type"], "message")
	eq(t, "role", m["role"], "assistant")
	eq(t, "id", m["id"], "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG")
	eq(t, "content", m["content"], []any{map[string]any{"type": "text", "text": "Canberra has about 470,000 residents (2023 estimate)."}})
	eq(t, "stop_reason", m["stop_reason"], "end_turn")
	eq(t, "stop_sequence", m["stop_sequence"], nil)
	// prompt 1117 of which 1024 cached.
	eq(t, "usage", m["usage"], map[string]any{"input_tokens": 93.0, "cache_creation_input_tokens": 0.0, "cache_read_input_tokens": 1024.0, "output_tokens": 46.0})

	m = oaRespToAn(t, "tool_calls.json")
	eq(t, "content blocks", len(m["content"].([]any)), 2)
	eq(t, "tool_use[0]", at(t, m, "content", 0), map[string]any{"type": "tool_use", "id": "call_FthC9qRpsL5kBpwwyw6c7j4k", "name": "get_weather", "input": map[string]any{"location": "Paris, France", "unit": "celsius"}})
	eq(t, "stop_reason", m["stop_reason"], "tool_use")

	m = oaRespToAn(t, "reasoning.json")
	eq(t, "thinking first", at(t, m, "content", 0), map[string]any{"type": "thinking", "thinking": "Compare 9.11 and 9.8: the tenths digit 1 < 8, so 9.11 < 9.8.", "signature": ""})
	eq(t, "text second", at(t, m, "content", 1, "text"), "9.11 is smaller than 9.8.")
	eq(t, "output tokens", at(t, m, "usage", "output_tokens"), 312.0)

	eq(t, "length", oaRespToAn(t, "length.json")["stop_reason"], "max_tokens")

	// "reasoning" (OpenRouter, vLLM), refusal, bad arguments, legacy function_call.
	body := `{"id":"gen-1","model":"g","choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning":"hmm","refusal":"I can't help with that.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{not json"}}],"function_call":{"name":"legacy","arguments":"{\"a\":1}"}},"finish_reason":"tool_calls"}]}`
	out, err := OpenAIToAnthropicResponse([]byte(body), "gpt-x")
	if err != nil {
		t.Fatal(err)
	}
	m = obj(t, out)
	eq(t, "model override", m["model"], "gpt-x")
	eq(t, "reasoning", at(t, m, "content", 0, "thinking"), "hmm")
	eq(t, "refusal as text", at(t, m, "content", 1, "text"), "I can't help with that.")
	eq(t, "unparseable arguments → {}", at(t, m, "content", 2, "input"), map[string]any{})
	eq(t, "legacy function_call", at(t, m, "content", 3), map[string]any{"type": "tool_use", "id": "call_fn_gen-1", "name": "legacy", "input": map[string]any{"a": 1.0}})
	eq(t, "missing usage", m["usage"], map[string]any{"input_tokens": 0.0, "cache_creation_input_tokens": 0.0, "cache_read_input_tokens": 0.0, "output_tokens": 0.0})
}

func TestResponseDecodeErrors(t *testing.T) {
	if _, err := AnthropicToOpenAIResponse([]byte(`{"type":"error","error":{"type":"api_error","message":"x"}}`), ""); err == nil {
		t.Error("an Anthropic error body is not a message")
	}
	if _, err := AnthropicToOpenAIResponse([]byte(`<html>`), ""); err == nil {
		t.Error("invalid JSON must fail")
	}
	if _, err := OpenAIToAnthropicResponse([]byte(`{"id":"x","choices":[]}`), ""); err == nil {
		t.Error("no choices must fail")
	}
	if _, err := OpenAIToAnthropicResponse([]byte(`{`), ""); err == nil {
		t.Error("invalid JSON must fail")
	}
}
