package translate

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

func oaToAn(t *testing.T, fixture string) map[string]any {
	t.Helper()
	out, err := OpenAIToAnthropicRequest(readFile(t, filepath.Join("testdata", "openai", "requests", fixture)), anthropicModel)
	if err != nil {
		t.Fatal(err)
	}
	return obj(t, out)
}

func anToOa(t *testing.T, fixture string) map[string]any {
	t.Helper()
	out, err := AnthropicToOpenAIRequest(readFile(t, filepath.Join("testdata", "anthropic", "requests", fixture)), openaiModel)
	if err != nil {
		t.Fatal(err)
	}
	return obj(t, out)
}

func TestOpenAIToAnthropicRequestSystemAndSampling(t *testing.T) {
	m := oaToAn(t, "system_multiturn.json")
	eq(t, "model", m["model"], anthropicModel)
	eq(t, "system[0].text", at(t, m, "system", 0, "text"), "You are a concise assistant for a travel agency.")
	eq(t, "system[1].text (developer)", at(t, m, "system", 1, "text"), "Answer in British English.")
	msgs := at(t, m, "messages").([]any)
	eq(t, "message count", len(msgs), 3)
	for i, role := range []string{"user", "assistant", "user"} {
		eq(t, "role", at(t, msgs, i, "role"), role)
	}
	eq(t, "messages[2].content", at(t, msgs, 2, "content"), "And its population?")
	eq(t, "max_tokens", m["max_tokens"], 1024.0)
	eq(t, "temperature", m["temperature"], 0.7)
	eq(t, "top_p", m["top_p"], 0.9)
	eq(t, "stop_sequences", m["stop_sequences"], []any{"\n\nHuman:", "END"})
	eq(t, "metadata.user_id", at(t, m, "metadata", "user_id"), "user-7f3a9c")
	for _, k := range []string{"frequency_penalty", "presence_penalty", "seed", "user", "stream", "stop"} {
		if has(m, k) {
			t.Errorf("%s must not be sent to Anthropic", k)
		}
	}
}

func TestOpenAIToAnthropicRequestImages(t *testing.T) {
	m := oaToAn(t, "images.json")
	c := at(t, m, "messages", 0, "content")
	eq(t, "text", at(t, c, 0, "text"), "Compare these two pictures.")
	eq(t, "data URL → base64 source", at(t, c, 1, "source"), map[string]any{
		"type": "base64", "media_type": "image/png",
		"data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
	})
	eq(t, "https URL → url source", at(t, c, 2, "source"), map[string]any{
		"type": "url", "url": "https://upload.wikimedia.org/wikipedia/commons/a/a7/Camponotus_flavomarginatus_ant.jpg",
	})
	eq(t, "max_completion_tokens → max_tokens", m["max_tokens"], 300.0)
	eq(t, "temperature 1.6 clamped to Anthropic's 1", m["temperature"], 1.0)
}

func TestOpenAIToAnthropicRequestTools(t *testing.T) {
	m := oaToAn(t, "tools.json")
	eq(t, "system string", m["system"], "You can call tools to answer questions about the weather.")
	eq(t, "stream", m["stream"], true)
	if has(m, "stream_options") {
		t.Error("stream_options must be dropped")
	}
	if !jsonEq(t, mustJSON(t, at(t, m, "tools", 0, "input_schema")), `{"type":"object","properties":{"location":{"type":"string","description":"The city and country, e.g. Paris, France"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"],"additionalProperties":false}`) {
		t.Error("parameters must become input_schema unchanged")
	}
	eq(t, "function without parameters", at(t, m, "tools", 1, "input_schema"), map[string]any{"type": "object", "properties": map[string]any{}})
	eq(t, "tool_choice", m["tool_choice"], map[string]any{"type": "tool", "name": "get_time", "disable_parallel_tool_use": true})

	asst := at(t, m, "messages", 1)
	eq(t, "assistant role", at(t, asst, "role"), "assistant")
	eq(t, "tool_use[0]", at(t, asst, "content", 0), map[string]any{
		"type": "tool_use", "id": "call_FthC9qRpsL5kBpwwyw6c7j4k", "name": "get_weather",
		"input": map[string]any{"location": "Paris, France", "unit": "celsius"},
	})
	eq(t, "tool_use[1].id", at(t, asst, "content", 1, "id"), "call_RtvQKxYnDWp1JAq9vfhXnGzB")

	// Both tool messages and the follow-up user text merge into one user
	// message, tool_result blocks first.
	msgs := at(t, m, "messages").([]any)
	eq(t, "message count", len(msgs), 3)
	user := at(t, m, "messages", 2)
	eq(t, "user role", at(t, user, "role"), "user")
	eq(t, "tool_result[0]", at(t, user, "content", 0), map[string]any{
		"type": "tool_result", "tool_use_id": "call_FthC9qRpsL5kBpwwyw6c7j4k", "content": `{"temperature": 14, "condition": "light rain"}`,
	})
	eq(t, "tool_result[1] from text parts", at(t, user, "content", 1, "content"), `{"temperature": 22, "condition": "sunny"}`)
	eq(t, "text after tool results", at(t, user, "content", 2), map[string]any{"type": "text", "text": "Also, what time is it in Tokyo?"})
}

func TestOpenAIToAnthropicRequestToolChoice(t *testing.T) {
	m := oaToAn(t, "tool_choice_required.json")
	eq(t, "required → any", m["tool_choice"], map[string]any{"type": "any"})
	eq(t, "stop string → stop_sequences", m["stop_sequences"], []any{"STOP"})
	eq(t, "temperature 0 kept", m["temperature"], 0.0)
	eq(t, "safety_identifier → metadata.user_id", at(t, m, "metadata", "user_id"), "hash-81a0")

	cases := []struct {
		name, choice, parallel string
		want                   any
	}{
		{"auto", `"auto"`, "", map[string]any{"type": "auto"}},
		{"none", `"none"`, "", map[string]any{"type": "none"}},
		{"required", `"required"`, "", map[string]any{"type": "any"}},
		{"named", `{"type":"function","function":{"name":"f"}}`, "", map[string]any{"type": "tool", "name": "f"}},
		{"absent", ``, "", nil},
		{"parallel off", ``, `false`, map[string]any{"type": "auto", "disable_parallel_tool_use": true}},
		{"parallel off with none", `"none"`, `false`, map[string]any{"type": "none"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]`
			if c.choice != "" {
				body += `,"tool_choice":` + c.choice
			}
			if c.parallel != "" {
				body += `,"parallel_tool_calls":` + c.parallel
			}
			out, err := OpenAIToAnthropicRequest([]byte(body+"}"), "")
			if err != nil {
				t.Fatal(err)
			}
			m := obj(t, out)
			eq(t, "tool_choice", m["tool_choice"], c.want)
			eq(t, "model kept when none given", m["model"], "m")
		})
	}
	out, err := OpenAIToAnthropicRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":"none"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if has(obj(t, out), "tool_choice") {
		t.Error("tool_choice without tools must be dropped")
	}
}

func TestOpenAIToAnthropicRequestReasoning(t *testing.T) {
	m := oaToAn(t, "reasoning.json")
	eq(t, "thinking", m["thinking"], map[string]any{"type": "enabled", "budget_tokens": 8192.0})
	eq(t, "max_tokens", m["max_tokens"], 16000.0)
	if has(m, "temperature") {
		t.Error("temperature must be dropped when thinking is on")
	}
	eq(t, "assistant reasoning_content dropped", at(t, m, "messages", 1, "content"), "Suppose √2 = p/q in lowest terms…")

	cases := []struct {
		effort   string
		maxField string
		want     any // thinking budget, nil for off
		maxOut   float64
	}{
		{"minimal", "", 1024.0, 1024 + DefaultMaxTokens},
		{"low", "", 2048.0, 2048 + DefaultMaxTokens},
		{"medium", "", 8192.0, 8192 + DefaultMaxTokens},
		{"high", "", 16384.0, 16384 + DefaultMaxTokens},
		{"none", "", nil, DefaultMaxTokens},
		{"high", `"max_completion_tokens":2000`, 1999.0, 2000},
		{"low", `"max_tokens":1024`, nil, 1024},
	}
	for _, c := range cases {
		t.Run(c.effort+c.maxField, func(t *testing.T) {
			body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"reasoning_effort":"` + c.effort + `"`
			if c.maxField != "" {
				body += "," + c.maxField
			}
			out, err := OpenAIToAnthropicRequest([]byte(body+"}"), "")
			if err != nil {
				t.Fatal(err)
			}
			m := obj(t, out)
			eq(t, "max_tokens", m["max_tokens"], c.maxOut)
			if c.want == nil {
				if has(m, "thinking") {
					t.Errorf("thinking must stay off: %v", m["thinking"])
				}
				eq(t, "temperature kept without thinking", m["temperature"], 0.5)
				return
			}
			eq(t, "budget", at(t, m, "thinking", "budget_tokens"), c.want)
		})
	}
}

func TestOpenAIToAnthropicRequestDefaults(t *testing.T) {
	out, err := OpenAIToAnthropicRequest([]byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`), "claude-haiku-4-5")
	if err != nil {
		t.Fatal(err)
	}
	m := obj(t, out)
	eq(t, "default max_tokens", m["max_tokens"], float64(DefaultMaxTokens))
	eq(t, "model replaced", m["model"], "claude-haiku-4-5")
	eq(t, "content", at(t, m, "messages", 0, "content"), "hi")
}

func TestOpenAIToAnthropicRequestLegacyFunctions(t *testing.T) {
	m := oaToAn(t, "legacy_functions.json")
	eq(t, "tool_use id", at(t, m, "messages", 1, "content", 0, "id"), "call_fn_1")
	eq(t, "tool_result pairs with it", at(t, m, "messages", 2, "content", 0, "tool_use_id"), "call_fn_1")
	eq(t, "functions → tools", at(t, m, "tools", 0, "name"), "convert_currency")
	eq(t, "function_call auto", m["tool_choice"], map[string]any{"type": "auto"})
}

func TestOpenAIToAnthropicRequestErrors(t *testing.T) {
	const user = `{"role":"user","content":"hi"}`
	cases := []struct{ name, body, field string }{
		{"not json", `{"model":`, "body"},
		{"messages not array", `{"model":"m","messages":"hi"}`, "messages"},
		{"temperature string", `{"model":"m","messages":[` + user + `],"temperature":"hot"}`, "temperature"},
		{"no messages", `{"model":"m","messages":[]}`, "messages"},
		{"unknown role", `{"model":"m","messages":[{"role":"critic","content":"x"}]}`, "messages[0].role"},
		{"n>1", `{"model":"m","messages":[` + user + `],"n":2}`, "n"},
		{"logprobs", `{"model":"m","messages":[` + user + `],"logprobs":true}`, "logprobs"},
		{"json_object", `{"model":"m","messages":[` + user + `],"response_format":{"type":"json_object"}}`, "response_format.type"},
		{"json_schema without schema", `{"model":"m","messages":[` + user + `],"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}`, "response_format.json_schema.schema"},
		{"audio out", `{"model":"m","messages":[` + user + `],"modalities":["text","audio"]}`, "modalities"},
		{"input_audio", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, "messages[0].content[1].type"},
		{"bmp image", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/bmp;base64,Qk0="}}]}]}`, "messages[0].content[0].image_url.url"},
		{"not base64", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,raw"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"ftp image", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x/y.png"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"file id", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}}]}]}`, "messages[0].content[0].file.file_data"},
		{"bad arguments", `{"model":"m","messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{oops"}}]}]}`, "messages[1].tool_calls[0].function.arguments"},
		{"array arguments", `{"model":"m","messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[1].tool_calls[0].function.arguments"},
		{"tool without id", `{"model":"m","messages":[` + user + `,{"role":"tool","content":"x"}]}`, "messages[1].tool_call_id"},
		{"custom tool", `{"model":"m","messages":[` + user + `],"tools":[{"type":"custom","custom":{"name":"x"}}]}`, "tools[0].type"},
		{"tool_choice value", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"sometimes"}`, "tool_choice"},
		{"tool_choice allowed_tools", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"allowed_tools"}}`, "tool_choice.type"},
		{"reasoning effort", `{"model":"m","messages":[` + user + `],"reasoning_effort":"extreme"}`, "reasoning_effort"},
		{"forced tool with thinking", `{"model":"m","messages":[` + user + `],"reasoning_effort":"low","tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`, "tool_choice"},
		{"max tokens zero", `{"model":"m","messages":[` + user + `],"max_tokens":0}`, "max_tokens"},
		{"max completion tokens negative", `{"model":"m","messages":[` + user + `],"max_completion_tokens":-5}`, "max_completion_tokens"},
		{"stop number", `{"model":"m","messages":[` + user + `],"stop":5}`, "stop"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := OpenAIToAnthropicRequest([]byte(c.body), "")
			var fe *wire.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FieldError", err)
			}
			eq(t, "field", fe.Field, c.field)
		})
	}
}

func TestAnthropicToOpenAIRequestSystemAndSampling(t *testing.T) {
	m := anToOa(t, "system_multiturn.json")
	msgs := at(t, m, "messages").([]any)
	eq(t, "message count (system first)", len(msgs), 4)
	eq(t, "system", at(t, msgs, 0), map[string]any{"role": "system", "content": "You are a concise assistant for a travel agency."})
	eq(t, "assistant blocks → string", at(t, msgs, 2, "content"), "Canberra.")
	eq(t, "lone text block → string", at(t, msgs, 3, "content"), "And its population?")
	eq(t, "max_tokens", m["max_tokens"], 1024.0)
	eq(t, "temperature", m["temperature"], 0.7)
	eq(t, "top_p", m["top_p"], 0.9)
	eq(t, "stop", m["stop"], []any{"\n\nHuman:", "END"})
	eq(t, "user", m["user"], "user-7f3a9c")
	for _, k := range []string{"top_k", "stop_sequences", "metadata", "system", "stream", "stream_options"} {
		if has(m, k) {
			t.Errorf("%s must not be sent to OpenAI", k)
		}
	}
}

func TestAnthropicToOpenAIRequestImages(t *testing.T) {
	m := anToOa(t, "system_blocks_images.json")
	eq(t, "system blocks joined", at(t, m, "messages", 0, "content"), "You are an art critic.\n\nKeep answers under 100 words.")
	c := at(t, m, "messages", 1, "content")
	eq(t, "base64 → data URL", at(t, c, 0, "image_url", "url"), "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
	eq(t, "url source", at(t, c, 1, "image_url", "url"), "https://upload.wikimedia.org/wikipedia/commons/a/a7/Camponotus_flavomarginatus_ant.jpg")
	eq(t, "pdf → file part", at(t, c, 2, "file", "file_data"), "data:application/pdf;base64,JVBERi0xLjQKJcOkw7zDtsOfCjIgMCBvYmoKPDwvTGVuZ3RoIDMgMCBSPj4Kc3RyZWFtCg==")
	eq(t, "text without cache_control", at(t, c, 3), map[string]any{"type": "text", "text": "Compare these two pictures using the brief."})
}

func TestAnthropicToOpenAIRequestTools(t *testing.T) {
	m := anToOa(t, "tools.json")
	eq(t, "stream", m["stream"], true)
	eq(t, "stream_options", m["stream_options"], map[string]any{"include_usage": true})
	eq(t, "tool_choice", m["tool_choice"], map[string]any{"type": "function", "function": map[string]any{"name": "get_time"}})
	eq(t, "parallel_tool_calls", m["parallel_tool_calls"], false)
	eq(t, "tools[0]", at(t, m, "tools", 0, "type"), "function")
	if !jsonEq(t, mustJSON(t, at(t, m, "tools", 0, "function", "parameters")), `{"type":"object","properties":{"location":{"type":"string","description":"The city and country, e.g. Paris, France"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}`) {
		t.Error("input_schema must become parameters unchanged")
	}
	msgs := at(t, m, "messages").([]any)
	roles := make([]string, len(msgs))
	for i := range msgs {
		roles[i] = at(t, msgs, i, "role").(string)
	}
	eq(t, "roles", roles, []string{"system", "user", "assistant", "tool", "tool", "user"})
	asst := at(t, msgs, 2)
	eq(t, "thinking dropped, text kept", at(t, asst, "content"), "I'll check both cities.")
	eq(t, "tool_calls[0]", at(t, asst, "tool_calls", 0), map[string]any{
		"id": "toolu_01A09q90qw90lq917835lq9", "type": "function",
		"function": map[string]any{"name": "get_weather", "arguments": `{"location":"Paris, France","unit":"celsius"}`},
	})
	eq(t, "tool message 1", at(t, msgs, 3), map[string]any{"role": "tool", "tool_call_id": "toolu_01A09q90qw90lq917835lq9", "content": `{"temperature": 14, "condition": "light rain"}`})
	eq(t, "tool message 2 text", at(t, msgs, 4, "content"), "Weather service timed out.")
	eq(t, "tool_result image moves to the user message", at(t, msgs, 5, "content", 0, "type"), "image_url")
	eq(t, "user text after", at(t, msgs, 5, "content", 1, "text"), "Also, what time is it in Tokyo?")
}

func TestAnthropicToOpenAIRequestChoiceAndThinking(t *testing.T) {
	m := anToOa(t, "thinking_any.json")
	eq(t, "any → required", m["tool_choice"], "required")
	eq(t, "budget 10000 → medium", m["reasoning_effort"], "medium")
	cases := []struct {
		choice string
		want   any
	}{
		{`{"type":"auto"}`, "auto"},
		{`{"type":"any"}`, "required"},
		{`{"type":"none"}`, "none"},
		{`{"type":"tool","name":"f"}`, map[string]any{"type": "function", "function": map[string]any{"name": "f"}}},
	}
	for _, c := range cases {
		out, err := AnthropicToOpenAIRequest([]byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":`+c.choice+`}`), "")
		if err != nil {
			t.Fatal(err)
		}
		eq(t, c.choice, obj(t, out)["tool_choice"], c.want)
	}
	for budget, want := range map[string]string{"1024": "low", "4095": "low", "4096": "medium", "16383": "medium", "16384": "high", "32000": "high"} {
		out, err := AnthropicToOpenAIRequest([]byte(`{"model":"m","max_tokens":64000,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":`+budget+`}}`), "")
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "effort for "+budget, obj(t, out)["reasoning_effort"], want)
	}
}

func TestAnthropicToOpenAIRequestErrors(t *testing.T) {
	cases := []struct{ name, body, field string }{
		{"not json", `[`, "body"},
		{"no messages", `{"model":"m","max_tokens":1,"messages":[]}`, "messages"},
		{"unknown role", `{"model":"m","max_tokens":1,"messages":[{"role":"critic","content":"x"}]}`, "messages[0].role"},
		{"system role with an image", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"system","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]}`, "messages[1].content[0].type"},
		{"thinking type", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"sometimes"}}`, "thinking.type"},
		{"effort", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"output_config":{"effort":"extreme"}}`, "output_config.effort"},
		{"output format", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"output_config":{"format":{"type":"xml"}}}`, "output_config.format.type"},
		{"context edit that changes the prompt", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"},{"type":"clear_tool_uses_20250919"}]}}`, "context_management.edits[1].type"},
		{"compaction", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"context_management":{"edits":[{"type":"compact_20260112"}]}}`, "context_management.edits[0].type"},
		{"server tool", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "tools[0].type"},
		{"image file source", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"file_1"}}]}]}`, "messages[0].content[0].source.type"},
		{"search_result", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"search_result","source":"x","title":"t","content":[]}]}]}`, "messages[0].content[0].type"},
		{"server_tool_use", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]}]}`, "messages[1].content[0].type"},
		{"tool_result without id", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, "messages[0].content[0].tool_use_id"},
		{"system number", `{"model":"m","max_tokens":1,"system":5,"messages":[{"role":"user","content":"x"}]}`, "system"},
		{"tool_choice type", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f"}],"tool_choice":{"type":"maybe"}}`, "tool_choice.type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := AnthropicToOpenAIRequest([]byte(c.body), "")
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FieldError", err)
			}
			eq(t, "field", fe.Field, c.field)
		})
	}
}

// TestAnthropicToOpenAIRequestClaudeCode pins the shape current Claude
// Code sends (recorded from @anthropic-ai/claude-code 2.1.328, trimmed): a
// system-role message inside messages, adaptive thinking with
// output_config.effort, context_management, cache_control markers on
// system, text and tool_result blocks, a deferred tool and a JSON
// metadata.user_id.
func TestAnthropicToOpenAIRequestClaudeCode(t *testing.T) {
	m := anToOa(t, "claude_code.json")
	msgs := at(t, m, "messages").([]any)
	roles := make([]string, len(msgs))
	for i := range msgs {
		roles[i] = at(t, msgs, i, "role").(string)
	}
	eq(t, "roles (the system-role message stays in place)", roles, []string{"system", "user", "system", "assistant", "tool"})
	eq(t, "top-level system blocks joined", at(t, msgs, 0, "content"),
		"x-anthropic-billing-header: cc_version=2.1.328.593; cc_entrypoint=sdk-cli;\n\nYou are a Claude agent, built on Anthropic's Claude Agent SDK.\n\n\nYou are an agent working with the user toward their goals.")
	eq(t, "system-role message text", at(t, msgs, 2, "content"), "# Environment\nYou have been invoked in the following environment: \n - Primary working directory: /tmp/work\n - Platform: linux")
	eq(t, "user text parts without cache_control", at(t, msgs, 1, "content", 1), map[string]any{"type": "text", "text": "Read notes.txt and tell me what it says."})
	eq(t, "thinking dropped", at(t, msgs, 3, "content"), "I'll read the file.")
	eq(t, "tool result", at(t, msgs, 4, "content"), "     1\thello from the file\n")
	eq(t, "adaptive thinking + effort medium", m["reasoning_effort"], "medium")
	eq(t, "deferred tool offered like the others", at(t, m, "tools", 2, "function", "name"), "DeferredToolPlaceholder")
	if has(at(t, m, "tools", 2, "function"), "defer_loading") {
		t.Error("defer_loading must not reach an OpenAI-compatible API")
	}
	user := m["user"].(string)
	eq(t, "metadata.user_id longer than 64 → its SHA-256", len(user), 64)
	if user != openAIUser(`{"device_id":"d80314706f7e56a6ddc2ffc1f0c182d6d7d90c56009c1aaf83d89e89499045c1","account_uuid":"","session_id":"42073f05-d5ad-406a-8477-f42b78402278"}`) {
		t.Errorf("user = %s, want the hash of the user_id", user)
	}
	for _, k := range []string{"thinking", "context_management", "output_config", "metadata", "cache_control"} {
		if has(m, k) {
			t.Errorf("%s must not be sent to OpenAI", k)
		}
	}
	eq(t, "max_tokens", m["max_tokens"], 128000.0)
}

func TestAnthropicToOpenAIRequestThinkingAndOutput(t *testing.T) {
	const head = `{"model":"m","max_tokens":64000,"messages":[{"role":"user","content":"hi"}]`
	cases := []struct{ name, extra, effort string }{
		{"adaptive without effort → upstream default", `,"thinking":{"type":"adaptive"}`, ""},
		{"adaptive + effort low", `,"thinking":{"type":"adaptive","display":"summarized"},"output_config":{"effort":"low"}`, "low"},
		{"effort without thinking", `,"output_config":{"effort":"high"}`, "high"},
		{"effort xhigh → high", `,"output_config":{"effort":"xhigh"}`, "high"},
		{"effort max → high", `,"thinking":{"type":"adaptive"},"output_config":{"effort":"max"}`, "high"},
		{"effort wins over the budget", `,"thinking":{"type":"enabled","budget_tokens":2000},"output_config":{"effort":"high"}`, "high"},
		{"disabled → none", `,"thinking":{"type":"disabled"},"output_config":{"effort":"high"}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := AnthropicToOpenAIRequest([]byte(head+c.extra+`}`), "")
			if err != nil {
				t.Fatal(err)
			}
			m := obj(t, out)
			if c.effort == "" {
				if has(m, "reasoning_effort") {
					t.Errorf("reasoning_effort = %v, want none", m["reasoning_effort"])
				}
				return
			}
			eq(t, "reasoning_effort", m["reasoning_effort"], c.effort)
		})
	}
	out, err := AnthropicToOpenAIRequest([]byte(head+`,"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "output_config.format → response_format", obj(t, out)["response_format"], map[string]any{"type": "json_schema", "json_schema": map[string]any{
		"name": "output", "strict": true,
		"schema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}, "additionalProperties": false},
	}})
	out, err = AnthropicToOpenAIRequest([]byte(`{"model":"m","max_tokens":10,"metadata":{"user_id":"u-1"},"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"tool_reference","tool_name":"WebFetch"}]}]}],"tools":[{"name":"f","input_schema":{"type":"object"},"strict":true}]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	m := obj(t, out)
	eq(t, "short user_id kept", m["user"], "u-1")
	eq(t, "tool_reference → text", at(t, m, "messages", 0, "content"), "[tool WebFetch is available]")
	eq(t, "strict kept", at(t, m, "tools", 0, "function", "strict"), true)
}

func TestOpenAIToAnthropicRequestJSONSchema(t *testing.T) {
	out, err := OpenAIToAnthropicRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"city","strict":true,"schema":{"type":"object","properties":{"city":{"type":"string"}}}}}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "response_format → output_config.format", obj(t, out)["output_config"], map[string]any{"format": map[string]any{
		"type": "json_schema", "schema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	}})
	for effort, budget := range map[string]float64{"xhigh": 32768, "max": 65536} {
		out, err := OpenAIToAnthropicRequest([]byte(`{"model":"m","max_completion_tokens":100000,"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"`+effort+`"}`), "")
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "budget for "+effort, at(t, obj(t, out), "thinking", "budget_tokens"), budget)
	}
}
