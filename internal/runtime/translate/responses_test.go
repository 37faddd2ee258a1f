package translate

import (
	"errors"
	"testing"
)

func TestResponsesToChatRequestRules(t *testing.T) {
	c := parseRS(t, "testdata/responses/requests/sdk_full.json")
	out, err := c.ChatRequest("")
	if err != nil {
		t.Fatal(err)
	}
	m := obj(t, out)
	eq(t, "model kept", m["model"], "gpt-5.2")
	eq(t, "instructions → leading system message", at(t, m, "messages", 0), map[string]any{"role": "system", "content": "You are a weather assistant. Answer in JSON."})
	eq(t, "input_image → image_url with detail", at(t, m, "messages", 1, "content", 1, "image_url", "detail"), "high")
	eq(t, "input_file → file part", at(t, m, "messages", 1, "content", 2, "file", "filename"), "brief.pdf")
	eq(t, "assistant text and the function call in one message", at(t, m, "messages", 2, "content"), "Let me check the forecast for Paris.")
	eq(t, "function_call → tool_calls", at(t, m, "messages", 2, "tool_calls", 0, "function", "name"), "get_weather")
	eq(t, "function_call_output → tool message", at(t, m, "messages", 3), map[string]any{"role": "tool", "tool_call_id": "call_12345xyz", "content": `{"temperature": 14, "condition": "light rain"}`})
	eq(t, "developer → system, in place", at(t, m, "messages", 4), map[string]any{"role": "system", "content": "Keep the summary under 20 words."})
	eq(t, "max_output_tokens → max_completion_tokens", m["max_completion_tokens"], 2048.0)
	eq(t, "reasoning.effort → reasoning_effort", m["reasoning_effort"], "low")
	eq(t, "text.format json_schema → response_format", at(t, m, "response_format", "json_schema", "name"), "weather_report")
	eq(t, "strict kept", at(t, m, "response_format", "json_schema", "strict"), true)
	eq(t, "parallel_tool_calls", m["parallel_tool_calls"], false)
	eq(t, "tool_choice", m["tool_choice"], "auto")
	eq(t, "stream_options.include_usage for the final usage", m["stream_options"], map[string]any{"include_usage": true})
	eq(t, "user", m["user"], "user-7f3a9c")
	eq(t, "function tool", at(t, m, "tools", 0, "function", "strict"), true)
	for _, k := range []string{"metadata", "store", "instructions", "input", "text", "reasoning", "max_output_tokens"} {
		if has(m, k) {
			t.Errorf("%s must not be sent to Chat Completions", k)
		}
	}

	codex := parseRS(t, "testdata/responses/requests/codex.json")
	out, err = codex.ChatRequest("")
	if err != nil {
		t.Fatal(err)
	}
	m = obj(t, out)
	roles := []string{}
	for _, msg := range at(t, m, "messages").([]any) {
		roles = append(roles, msg.(map[string]any)["role"].(string))
	}
	eq(t, "reasoning item dropped", roles, []string{"system", "user", "user", "assistant", "tool", "assistant", "tool"})
	eq(t, "namespaced call flattened", at(t, m, "messages", 5, "tool_calls", 0, "function", "name"), "multi_agent_v1__close_agent")
	eq(t, "namespace tools flattened", at(t, m, "tools", 2, "function", "name"), "multi_agent_v1__close_agent")
	eq(t, "output parts joined", at(t, m, "messages", 6, "content"), "closed")
	for _, k := range []string{"include", "prompt_cache_key", "client_metadata", "store", "reasoning_effort"} {
		if has(m, k) {
			t.Errorf("%s must not be sent to Chat Completions", k)
		}
	}
}

func TestResponsesAnswerSplitsNamespaces(t *testing.T) {
	c := parseRS(t, "testdata/responses/requests/codex.json")
	out, err := c.ChatResponse([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"multi_agent_v1__close_agent","arguments":"{\"target\":\"a\"}"}},{"id":"call_2","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\":\"ls\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	m := obj(t, out)
	eq(t, "namespace", at(t, m, "output", 0, "namespace"), "multi_agent_v1")
	eq(t, "name", at(t, m, "output", 0, "name"), "close_agent")
	eq(t, "plain function", at(t, m, "output", 1, "name"), "exec_command")
	if has(at(t, m, "output", 1), "namespace") {
		t.Error("a function outside a namespace has no namespace")
	}
	eq(t, "status", m["status"], "completed")
	eq(t, "store false (nothing is stored)", m["store"], false)
}

func TestResponsesStatusAndUsage(t *testing.T) {
	c := parseRS(t, rsGoldenRequest)
	for finish, want := range map[string][2]any{
		"stop": {"completed", nil}, "tool_calls": {"completed", nil},
		"length":         {"incomplete", map[string]any{"reason": "max_output_tokens"}},
		"content_filter": {"incomplete", map[string]any{"reason": "content_filter"}},
	} {
		out, err := c.ChatResponse([]byte(`{"id":"chatcmpl-1","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"`+finish+`"}],"usage":{"prompt_tokens":100,"completion_tokens":40,"total_tokens":140,"prompt_tokens_details":{"cached_tokens":60},"completion_tokens_details":{"reasoning_tokens":25}}}`), "")
		if err != nil {
			t.Fatal(err)
		}
		m := obj(t, out)
		eq(t, finish+" status", m["status"], want[0])
		eq(t, finish+" incomplete_details", m["incomplete_details"], want[1])
		eq(t, "usage", m["usage"], map[string]any{"input_tokens": 100.0, "input_tokens_details": map[string]any{"cached_tokens": 60.0},
			"output_tokens": 40.0, "output_tokens_details": map[string]any{"reasoning_tokens": 25.0}, "total_tokens": 140.0})
	}
	out, err := c.anthropicResponse([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"ok"}],"stop_reason":"max_tokens","usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":20,"output_tokens":30,"output_tokens_details":{"thinking_tokens":12}}}`), "", fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	m := obj(t, out)
	eq(t, "max_tokens → incomplete", m["incomplete_details"], map[string]any{"reason": "max_output_tokens"})
	eq(t, "thinking → reasoning summary", at(t, m, "output", 0, "summary", 0, "text"), "hmm")
	eq(t, "input = input + cache creation + cache read", at(t, m, "usage", "input_tokens"), 35.0)
	eq(t, "cached = cache read", at(t, m, "usage", "input_tokens_details", "cached_tokens"), 20.0)
	eq(t, "reasoning = thinking tokens", at(t, m, "usage", "output_tokens_details", "reasoning_tokens"), 12.0)
}

func TestResponsesRequestErrors(t *testing.T) {
	const user = `"input":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, body, field string
		anthropicOnly     bool
	}{
		{"previous_response_id", `{"model":"m",` + user + `,"previous_response_id":"resp_1"}`, "previous_response_id", false},
		{"store true", `{"model":"m",` + user + `,"store":true}`, "store", false},
		{"conversation", `{"model":"m",` + user + `,"conversation":"conv_1"}`, "conversation", false},
		{"prompt", `{"model":"m",` + user + `,"prompt":{"id":"pmpt_1"}}`, "prompt", false},
		{"hosted web_search", `{"model":"m",` + user + `,"tools":[{"type":"web_search"}]}`, "tools[0].type", false},
		{"hosted file_search", `{"model":"m",` + user + `,"tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]}`, "tools[0].type", false},
		{"hosted code_interpreter", `{"model":"m",` + user + `,"tools":[{"type":"function","name":"f"},{"type":"code_interpreter","container":{"type":"auto"}}]}`, "tools[1].type", false},
		{"custom tool", `{"model":"m",` + user + `,"tools":[{"type":"custom","name":"apply_patch"}]}`, "tools[0].type", false},
		{"item_reference", `{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type", false},
		{"computer_call", `{"model":"m","input":[{"role":"user","content":"x"},{"type":"computer_call","call_id":"c"}]}`, "input[1].type", false},
		{"image by file id", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}]}`, "input[0].content[0].image_url", false},
		{"file url", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://x/y.pdf"}]}]}`, "input[0].content[0].file_url", false},
		{"role", `{"model":"m","input":[{"role":"critic","content":"x"}]}`, "input[0].role", false},
		{"call without id", `{"model":"m","input":[{"role":"user","content":"x"},{"type":"function_call","name":"f","arguments":"{}"}]}`, "input[1].call_id", false},
		{"empty input", `{"model":"m","input":[]}`, "input", false},
		{"text.format", `{"model":"m",` + user + `,"text":{"format":{"type":"yaml"}}}`, "text.format.type", false},
		{"json_schema without schema", `{"model":"m",` + user + `,"text":{"format":{"type":"json_schema","name":"x"}}}`, "text.format.schema", false},
		{"tool_choice hosted", `{"model":"m",` + user + `,"tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"file_search"}}`, "tool_choice.type", false},
		{"top_logprobs", `{"model":"m",` + user + `,"top_logprobs":3}`, "top_logprobs", false},
		{"bmp image (Anthropic)", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/bmp;base64,Qk0="}]}]}`, "input[0].content[0].image_url", true},
		{"file id document (Anthropic)", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"x"},{"type":"input_file","file_data":"data:text/csv;base64,YSxi"}]}]}`, "input[0].content[1].file_data", true},
		{"bad arguments (Anthropic)", `{"model":"m","input":[{"role":"user","content":"x"},{"type":"message","role":"assistant","content":"y"},{"type":"function_call","call_id":"c1","name":"f","arguments":"[1]"}]}`, "input[2].arguments", true},
		{"json_object (Anthropic)", `{"model":"m",` + user + `,"text":{"format":{"type":"json_object"}}}`, "text.format.type", true},
		{"effort (Anthropic)", `{"model":"m",` + user + `,"reasoning":{"effort":"extreme"}}`, "reasoning.effort", true},
		{"zero max tokens (Anthropic)", `{"model":"m",` + user + `,"max_output_tokens":0}`, "max_output_tokens", true},
		{"verbosity (Anthropic)", `{"model":"m",` + user + `,"text":{"verbosity":"low"}}`, "text.verbosity", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			call, err := ParseResponses([]byte(c.body))
			if c.anthropicOnly {
				if err != nil {
					t.Fatalf("parse: %v (only the Anthropic translation may refuse this)", err)
				}
				if _, err := call.ChatRequest(""); err != nil {
					t.Fatalf("chat: %v", err)
				}
				_, err = call.AnthropicRequest("")
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FieldError", err)
			}
			eq(t, "field", fe.Field, c.field)
		})
	}
}

// TestResponsesStreamFailedAndTruncated: an in-stream error ends the
// stream with response.failed; a stream cut before its finish_reason gets
// no invented ending.
func TestResponsesStreamFailedAndTruncated(t *testing.T) {
	c := parseRS(t, rsGoldenRequest)
	out := runStream(t, c.NewChatStream(""), parseSSE([]byte("data: {\"id\":\"c1\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"error\":{\"message\":\"Overloaded\",\"type\":\"server_error\",\"code\":null}}\n\n")))
	last := out[len(out)-1]
	eq(t, "last event", last.Event, "response.failed")
	m := obj(t, last.Data)
	eq(t, "error", at(t, m, "response", "error"), map[string]any{"code": "server_error", "message": "Overloaded"})
	eq(t, "status", at(t, m, "response", "status"), "failed")

	out = runStream(t, c.NewChatStream(""), parseSSE([]byte("data: {\"id\":\"c1\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n")))
	for _, e := range out {
		if e.Event == "response.completed" || e.Event == "response.incomplete" {
			t.Fatalf("a truncated upstream must not be completed: %s", e.Data)
		}
	}
	// sequence numbers count from 0 without gaps.
	out = runStream(t, c.NewChatStream(""), readSSE(t, "testdata/openai/streams/reasoning.sse"))
	for i, e := range out {
		eq(t, "sequence_number", obj(t, e.Data)["sequence_number"], float64(i))
	}
}
