package translate

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Round-trip properties: OpenAI→Anthropic→OpenAI keeps messages, tool
// calls, tools and sampling; Anthropic→OpenAI→Anthropic keeps blocks
// (thinking aside, which OpenAI cannot carry back); streams and responses
// survive a trip through the other format.

const roundTrips = 300

var snippets = []string{
	"hello", "Paris, France", "naïve café ☕", `she said "hi"`, "line1\nline2", `back\slash`, "<b>&amp;</b>",
	"tab\there", "日本語のテキスト", "emoji 🚀", "  spaced  ", "{\"json\": true}", "\u2028sep",
}

func randText(r *rand.Rand) string {
	n := 1 + r.IntN(3)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = snippets[r.IntN(len(snippets))]
	}
	return strings.Join(parts, " ")
}

func randArgs(r *rand.Rand) map[string]any {
	m := map[string]any{}
	for i := range r.IntN(4) {
		switch r.IntN(4) {
		case 0:
			m[fmt.Sprintf("s%d", i)] = randText(r)
		case 1:
			m[fmt.Sprintf("n%d", i)] = float64(r.IntN(1000)) / 10
		case 2:
			m[fmt.Sprintf("b%d", i)] = r.IntN(2) == 0
		default:
			m[fmt.Sprintf("a%d", i)] = []any{randText(r), float64(r.IntN(9))}
		}
	}
	return m
}

var imageURLs = []string{
	"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
	"data:image/jpeg;base64,/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8U",
	"https://example.com/photo.webp",
}

// genOpenAIRequest builds a random valid OpenAI request: an optional
// system message, turns of user (text and images), assistant (text and/or
// parallel tool calls), tool results, tools and a tool choice.
func genOpenAIRequest(r *rand.Rand) map[string]any {
	var msgs []any
	if r.IntN(2) == 0 {
		msgs = append(msgs, map[string]any{"role": "system", "content": randText(r)})
	}
	tools := []any{}
	names := []string{"get_weather", "search", "calc"}[:1+r.IntN(3)]
	for _, n := range names {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name": n, "description": randText(r),
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}},
		}})
	}
	call := 0
	for range 1 + r.IntN(4) {
		if r.IntN(3) == 0 {
			parts := []any{map[string]any{"type": "text", "text": randText(r)}}
			for range r.IntN(3) {
				parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": imageURLs[r.IntN(len(imageURLs))]}})
			}
			msgs = append(msgs, map[string]any{"role": "user", "content": parts})
		} else {
			msgs = append(msgs, map[string]any{"role": "user", "content": randText(r)})
		}
		a := map[string]any{"role": "assistant", "content": nil}
		if r.IntN(3) > 0 {
			a["content"] = randText(r)
		}
		var calls []any
		for range r.IntN(3) {
			call++
			args, _ := json.Marshal(randArgs(r))
			calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%04d", call), "type": "function",
				"function": map[string]any{"name": names[r.IntN(len(names))], "arguments": string(args)}})
		}
		if a["content"] == nil && len(calls) == 0 {
			a["content"] = randText(r)
		}
		if len(calls) > 0 {
			a["tool_calls"] = calls
		}
		msgs = append(msgs, a)
		for _, c := range calls {
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c.(map[string]any)["id"], "content": randText(r)})
		}
		if len(calls) > 0 && r.IntN(2) == 0 {
			msgs = append(msgs, map[string]any{"role": "assistant", "content": randText(r)})
		}
	}
	req := map[string]any{"model": "gpt-4o", "messages": msgs, "tools": tools,
		"temperature": float64(r.IntN(101)) / 100, "top_p": float64(50+r.IntN(51)) / 100,
		"max_tokens": float64(1 + r.IntN(8000)), "stream": r.IntN(2) == 0, "user": fmt.Sprintf("u-%d", r.IntN(100))}
	if r.IntN(2) == 0 {
		req["stop"] = []any{"END", randText(r)}
	}
	switch r.IntN(5) {
	case 0:
		req["tool_choice"] = "auto"
	case 1:
		req["tool_choice"] = "none"
	case 2:
		req["tool_choice"] = "required"
	case 3:
		req["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": names[0]}}
	}
	if r.IntN(4) == 0 {
		req["parallel_tool_calls"] = false
	}
	return req
}

// oaCanon is an OpenAI message reduced to what a model sees.
type oaCanon struct {
	Role, Text, ToolCallID string
	Images                 []string
	Calls                  []string // id|name|canonical args
}

func canonOpenAIMessages(t *testing.T, msgs []any) []oaCanon {
	t.Helper()
	var out []oaCanon
	for _, mv := range msgs {
		m := mv.(map[string]any)
		c := oaCanon{Role: m["role"].(string)}
		c.ToolCallID, _ = m["tool_call_id"].(string)
		switch v := m["content"].(type) {
		case string:
			c.Text = v
		case []any:
			for _, p := range v {
				p := p.(map[string]any)
				switch p["type"] {
				case "text":
					c.Text += p["text"].(string)
				case "image_url":
					c.Images = append(c.Images, at(t, p, "image_url", "url").(string))
				}
			}
		}
		if calls, ok := m["tool_calls"].([]any); ok {
			for _, tc := range calls {
				var args any
				if err := json.Unmarshal([]byte(at(t, tc, "function", "arguments").(string)), &args); err != nil {
					t.Fatal(err)
				}
				c.Calls = append(c.Calls, fmt.Sprintf("%v|%v|%s", at(t, tc, "id"), at(t, tc, "function", "name"), mustJSON(t, args)))
			}
		}
		out = append(out, c)
	}
	return out
}

func TestRoundTripOpenAIAnthropicOpenAI(t *testing.T) {
	r := rand.New(rand.NewPCG(20260101, 7))
	for i := range roundTrips {
		orig := genOpenAIRequest(r)
		body := []byte(mustJSON(t, orig))
		an, err := OpenAIToAnthropicRequest(body, "claude-x")
		if err != nil {
			t.Fatalf("trip %d: to anthropic: %v\n%s", i, err, body)
		}
		back, err := AnthropicToOpenAIRequest(an, "gpt-4o")
		if err != nil {
			t.Fatalf("trip %d: back to openai: %v\n%s", i, err, an)
		}
		got := obj(t, back)
		if g, w := canonOpenAIMessages(t, got["messages"].([]any)), canonOpenAIMessages(t, orig["messages"].([]any)); !reflect.DeepEqual(g, w) {
			t.Fatalf("trip %d: messages differ\n got %+v\nwant %+v\nvia %s", i, g, w, an)
		}
		if !jsonEq(t, mustJSON(t, got["tools"]), mustJSON(t, orig["tools"])) {
			t.Fatalf("trip %d: tools differ: %v vs %v", i, got["tools"], orig["tools"])
		}
		wantChoice := orig["tool_choice"]
		if wantChoice == nil && orig["parallel_tool_calls"] == false {
			wantChoice = "auto" // disable_parallel_tool_use needs a tool_choice; auto is the default
		}
		eq(t, fmt.Sprintf("trip %d tool_choice", i), got["tool_choice"], wantChoice)
		if p, ok := orig["parallel_tool_calls"]; ok && wantChoice != "none" {
			eq(t, fmt.Sprintf("trip %d parallel_tool_calls", i), got["parallel_tool_calls"], p)
		}
		for _, k := range []string{"temperature", "top_p", "max_tokens", "stop", "user"} {
			eq(t, fmt.Sprintf("trip %d %s", i, k), got[k], orig[k])
		}
		if orig["stream"] == true {
			eq(t, fmt.Sprintf("trip %d stream_options", i), got["stream_options"], map[string]any{"include_usage": true})
		} else if has(got, "stream") {
			t.Fatalf("trip %d: stream appeared", i)
		}
	}
}

// genAnthropicRequest builds a random valid Anthropic request.
func genAnthropicRequest(r *rand.Rand) map[string]any {
	var msgs []any
	call := 0
	var pending []string
	for range 1 + r.IntN(4) {
		var blocks []any
		for _, id := range pending {
			blocks = append(blocks, map[string]any{"type": "tool_result", "tool_use_id": id, "content": randText(r)})
		}
		pending = nil
		for range r.IntN(2) {
			switch u := imageURLs[r.IntN(len(imageURLs))]; {
			case strings.HasPrefix(u, "data:"):
				media, data, _ := strings.Cut(strings.TrimPrefix(u, "data:"), ";base64,")
				blocks = append(blocks, map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": media, "data": data}})
			default:
				blocks = append(blocks, map[string]any{"type": "image", "source": map[string]any{"type": "url", "url": u}})
			}
		}
		blocks = append(blocks, map[string]any{"type": "text", "text": randText(r)})
		if len(blocks) == 1 && r.IntN(2) == 0 {
			msgs = append(msgs, map[string]any{"role": "user", "content": randText(r)})
		} else {
			msgs = append(msgs, map[string]any{"role": "user", "content": blocks})
		}
		var ab []any
		if r.IntN(3) > 0 {
			ab = append(ab, map[string]any{"type": "text", "text": randText(r)})
		}
		for range r.IntN(3) {
			call++
			id := fmt.Sprintf("toolu_%04d", call)
			pending = append(pending, id)
			ab = append(ab, map[string]any{"type": "tool_use", "id": id, "name": "lookup", "input": randArgs(r)})
		}
		if len(ab) == 0 {
			ab = append(ab, map[string]any{"type": "text", "text": randText(r)})
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": ab})
	}
	if len(pending) > 0 {
		var blocks []any
		for _, id := range pending {
			blocks = append(blocks, map[string]any{"type": "tool_result", "tool_use_id": id, "content": randText(r)})
		}
		msgs = append(msgs, map[string]any{"role": "user", "content": blocks})
	}
	req := map[string]any{"model": "claude-x", "max_tokens": float64(1 + r.IntN(8000)), "messages": msgs,
		"tools":       []any{map[string]any{"name": "lookup", "description": randText(r), "input_schema": map[string]any{"type": "object", "properties": map[string]any{}}}},
		"temperature": float64(r.IntN(101)) / 100, "stop_sequences": []any{"END"}, "metadata": map[string]any{"user_id": "u-1"}}
	if r.IntN(2) == 0 {
		req["system"] = randText(r)
	}
	switch r.IntN(4) {
	case 0:
		req["tool_choice"] = map[string]any{"type": "auto"}
	case 1:
		req["tool_choice"] = map[string]any{"type": "any", "disable_parallel_tool_use": true}
	case 2:
		req["tool_choice"] = map[string]any{"type": "tool", "name": "lookup"}
	}
	return req
}

// canonAnthropicContent turns string content into one text block.
func canonAnthropicContent(v any) any {
	if s, ok := v.(string); ok {
		return []any{map[string]any{"type": "text", "text": s}}
	}
	return v
}

func TestRoundTripAnthropicOpenAIAnthropic(t *testing.T) {
	r := rand.New(rand.NewPCG(20260101, 8))
	for i := range roundTrips {
		orig := genAnthropicRequest(r)
		body := []byte(mustJSON(t, orig))
		oa, err := AnthropicToOpenAIRequest(body, "gpt-4o")
		if err != nil {
			t.Fatalf("trip %d: to openai: %v\n%s", i, err, body)
		}
		back, err := OpenAIToAnthropicRequest(oa, "claude-x")
		if err != nil {
			t.Fatalf("trip %d: back to anthropic: %v\n%s", i, err, oa)
		}
		got := obj(t, back)
		gm, wm := got["messages"].([]any), orig["messages"].([]any)
		if len(gm) != len(wm) {
			t.Fatalf("trip %d: %d messages, want %d\nvia %s", i, len(gm), len(wm), oa)
		}
		for j := range wm {
			eq(t, "role", at(t, gm, j, "role"), at(t, wm, j, "role"))
			g, w := mustJSON(t, canonAnthropicContent(at(t, gm, j, "content"))), mustJSON(t, canonAnthropicContent(at(t, wm, j, "content")))
			if !jsonEq(t, g, w) {
				t.Fatalf("trip %d message %d differs\n got %s\nwant %s\nvia %s", i, j, g, w, oa)
			}
		}
		for _, k := range []string{"system", "max_tokens", "temperature", "stop_sequences", "metadata", "tools", "tool_choice"} {
			eq(t, fmt.Sprintf("trip %d %s", i, k), got[k], orig[k])
		}
	}
}

func TestRoundTripResponses(t *testing.T) {
	for _, f := range fixtures(t, "openai/responses") {
		t.Run(baseName(f), func(t *testing.T) {
			orig := readFile(t, f)
			an, err := OpenAIToAnthropicResponse(orig, "")
			if err != nil {
				t.Fatal(err)
			}
			back, err := AnthropicToOpenAIResponse(an, "")
			if err != nil {
				t.Fatal(err)
			}
			o, g := obj(t, orig), obj(t, back)
			for _, p := range [][]any{
				{"id"}, {"model"}, {"choices", 0, "finish_reason"}, {"choices", 0, "message", "content"},
				{"usage", "prompt_tokens"}, {"usage", "completion_tokens"}, {"usage", "total_tokens"}, {"usage", "prompt_tokens_details", "cached_tokens"},
			} {
				eq(t, fmt.Sprint(p), at(t, g, p...), at(t, o, p...))
			}
			om := at(t, o, "choices", 0, "message").(map[string]any)
			gm := at(t, g, "choices", 0, "message").(map[string]any)
			eq(t, "reasoning_content", gm["reasoning_content"], om["reasoning_content"])
			eq(t, "tool_calls", canonOpenAIMessages(t, []any{gm}), canonOpenAIMessages(t, []any{om}))
		})
	}
}

// TestRoundTripStreams chains both stream translators: Anthropic events →
// OpenAI chunks → Anthropic events rebuild the same message (signatures
// and the cache-creation split aside), and the other way round.
func TestRoundTripStreams(t *testing.T) {
	for _, name := range []string{"text.sse", "tool_use.sse", "thinking.sse"} {
		t.Run("anthropic/"+name, func(t *testing.T) {
			in := readSSE(t, filepath.Join("testdata", "anthropic", "streams", name))
			want := accumulateAnthropic(t, in)
			got := accumulateAnthropic(t, runStream(t, NewOpenAIToAnthropicStream(""), runStream(t, newA2O(""), in)))
			for i := range want.Blocks {
				want.Blocks[i].Signature = ""
				if want.Blocks[i].Type == "tool_use" {
					compact, _ := compactJSON([]byte(want.Blocks[i].Input))
					want.Blocks[i].Input = string(compact)
					compact, _ = compactJSON([]byte(got.Blocks[i].Input))
					got.Blocks[i].Input = string(compact)
				}
			}
			eq(t, "blocks", got.Blocks, want.Blocks)
			eq(t, "id/model", [2]string{got.ID, got.Model}, [2]string{want.ID, want.Model})
			eq(t, "stop", got.StopReason, want.StopReason)
			eq(t, "output", got.Output, want.Output)
			eq(t, "cache read", got.CacheRead, want.CacheRead)
			eq(t, "all input", got.Input+got.CacheWrite+got.CacheRead, want.Input+want.CacheWrite+want.CacheRead)
		})
	}
	for _, name := range []string{"text.sse", "tool_calls.sse", "reasoning.sse"} {
		t.Run("openai/"+name, func(t *testing.T) {
			in := readSSE(t, filepath.Join("testdata", "openai", "streams", name))
			want := accumulateOpenAI(t, in, true)
			got := accumulateOpenAI(t, runStream(t, newA2O(""), runStream(t, NewOpenAIToAnthropicStream(""), in)), false)
			eq(t, "content", got.Content, want.Content)
			eq(t, "reasoning", got.Reasoning, want.Reasoning)
			eq(t, "tool calls", got.ToolCalls, want.ToolCalls)
			eq(t, "finish", got.Finish, want.Finish)
			eq(t, "id/model", [2]string{got.ID, got.Model}, [2]string{want.ID, want.Model})
			eq(t, "usage", [3]int{got.Usage.PromptTokens, got.Usage.CompletionTokens, got.Usage.cached()}, [3]int{want.Usage.PromptTokens, want.Usage.CompletionTokens, want.Usage.cached()})
		})
	}
}
