package mock

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"net/http"
	"strings"
	"testing"
)

const toolsScript = "answer_tools: true\n"

// chatToolsBody is a Chat Completions request offering a write tool and a
// read-only one (picked first), with the given extra messages.
func chatToolsBody(stream bool, extra string) string {
	s := `{"model":"gpt-4o","stream":` + map[bool]string{true: "true", false: "false"}[stream] + `,"stream_options":{"include_usage":true},
"tools":[{"type":"function","function":{"name":"write_file","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}}},
{"type":"function","function":{"name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer","minimum":1}},"required":["path","limit"]}}}],
"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"Please read /tmp/x/notes.txt and quote it."}` + extra + `]}`
	return s
}

func TestToolCallsChat(t *testing.T) {
	m := startMock(t, toolsScript)
	status, _, body := m.post("/v1/chat/completions", "k", chatToolsBody(false, ""))
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	v := mustJSON(t, body)
	if got := dig(v, "choices", 0, "finish_reason"); got != "tool_calls" {
		t.Errorf("finish_reason = %v, want tool_calls", got)
	}
	tc := dig(v, "choices", 0, "message", "tool_calls", 0)
	if dig(tc, "function", "name") != "read_file" {
		t.Errorf("tool = %v, want the read-only read_file", dig(tc, "function", "name"))
	}
	if got := dig(tc, "function", "arguments"); got != `{"limit":1,"path":"/tmp/x/notes.txt"}` {
		t.Errorf("arguments = %v", got)
	}
	if id, _ := dig(tc, "id").(string); !strings.HasPrefix(id, "call_") {
		t.Errorf("id = %q", id)
	}

	evs := m.streamOf("/v1/chat/completions", "k", chatToolsBody(true, ""))
	var args strings.Builder
	finish := ""
	for _, e := range evs {
		if e.data == "[DONE]" {
			continue
		}
		c := e.json(t)
		if d := dig(c, "choices", 0, "delta", "tool_calls", 0, "function", "arguments"); d != nil {
			args.WriteString(d.(string))
		}
		if f, ok := dig(c, "choices", 0, "finish_reason").(string); ok {
			finish = f
		}
	}
	if evs[len(evs)-1].data != "[DONE]" || finish != "tool_calls" || args.String() != `{"limit":1,"path":"/tmp/x/notes.txt"}` {
		t.Errorf("stream: finish %q, arguments %q, last %q", finish, args.String(), evs[len(evs)-1].data)
	}

	// The tool result comes back: the answer quotes it.
	_, _, body = m.post("/v1/chat/completions", "k", chatToolsBody(false, `,{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"hello from the file"}`))
	v = mustJSON(t, body)
	if got := dig(v, "choices", 0, "message", "content"); got != `The tool returned: "hello from the file"` {
		t.Errorf("final text = %v", got)
	}
	if got := dig(v, "choices", 0, "finish_reason"); got != "stop" {
		t.Errorf("final finish_reason = %v", got)
	}
}

const claudeTools = `"tools":[{"name":"Bash","input_schema":{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number"}},"required":["command"]}},
{"name":"Read","input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"offset":{"type":"integer","minimum":0}},"required":["file_path"]}},
{"type":"web_search_20250305","name":"web_search"}]`

func TestToolCallsAnthropic(t *testing.T) {
	m := startMock(t, toolsScript)
	req := `{"model":"claude-opus-4-6","max_tokens":100,"stream":%s,` + claudeTools + `,"messages":[{"role":"user","content":[{"type":"text","text":"Read /work/a b/notes.txt"}]},{"role":"system","content":"env"}]}`
	status, _, body := m.post("/v1/messages?beta=true", "x:k", strings.Replace(req, "%s", "false", 1))
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	v := mustJSON(t, body)
	if dig(v, "stop_reason") != "tool_use" || dig(v, "content", 0, "name") != "Read" {
		t.Fatalf("answer = %s", body)
	}
	if got := dig(v, "content", 0, "input", "file_path"); got != "/work/a" {
		t.Errorf("file_path = %v (the first absolute path of the user text)", got)
	}
	evs := m.streamOf("/v1/messages", "x:k", strings.Replace(req, "%s", "true", 1))
	names := eventNames(evs)
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("events = %v, want %v", names, want)
	}
	var partial strings.Builder
	for _, e := range evs {
		if e.name == "content_block_delta" {
			partial.WriteString(dig(e.json(t), "delta", "partial_json").(string))
		}
	}
	if partial.String() != `{"file_path":"/work/a"}` {
		t.Errorf("partial_json = %q", partial.String())
	}
	if dig(evs[1].json(t), "content_block", "type") != "tool_use" || dig(evs[6].json(t), "delta", "stop_reason") != "tool_use" {
		t.Errorf("block start %s / delta %s", evs[1].data, evs[6].data)
	}

	final := `{"model":"m","max_tokens":100,` + claudeTools + `,"messages":[{"role":"user","content":"Read it"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"     1\thello"}]},{"type":"text","text":"<system-reminder>x</system-reminder>"}]}]}`
	_, _, body = m.post("/v1/messages", "x:k", final)
	v = mustJSON(t, body)
	if got := dig(v, "content", 0, "text"); got != `The tool returned: "     1\thello"` {
		t.Errorf("final text = %v", got)
	}
	if dig(v, "stop_reason") != "end_turn" {
		t.Errorf("stop_reason = %v", dig(v, "stop_reason"))
	}
}

func TestToolCallsResponses(t *testing.T) {
	m := startMock(t, toolsScript)
	req := `{"model":"gpt-5.2","stream":%s,"tools":[{"type":"namespace","name":"agents","description":"d","tools":[{"type":"function","name":"close_agent","parameters":{"type":"object","properties":{"target":{"type":"string"}},"required":["target"]}}]},
{"type":"function","name":"exec_command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}},{"type":"web_search"}],
"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"be brief"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"What does notes.txt say?"}]}]}`
	_, _, body := m.post("/v1/responses", "k", strings.Replace(req, "%s", "false", 1))
	v := mustJSON(t, body)
	item := dig(v, "output", 0)
	if dig(item, "type") != "function_call" || dig(item, "name") != "exec_command" || dig(item, "arguments") != `{"cmd":"cat notes.txt"}` {
		t.Fatalf("output = %s", body)
	}
	if dig(v, "status") != "completed" {
		t.Errorf("status = %v", dig(v, "status"))
	}
	evs := m.streamOf("/v1/responses", "k", strings.Replace(req, "%s", "true", 1))
	names := eventNames(evs)
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("events = %v, want %v", names, want)
	}
	for i, e := range evs {
		if got := dig(e.json(t), "sequence_number"); got != float64(i) {
			t.Errorf("event %d sequence_number = %v", i, got)
		}
	}
	if got := dig(evs[5].json(t), "arguments"); got != `{"cmd":"cat notes.txt"}` {
		t.Errorf("arguments.done = %v", got)
	}

	// Only a namespaced tool: the call names its namespace.
	ns := `{"model":"m","tools":[{"type":"namespace","name":"agents","tools":[{"type":"function","name":"close_agent","parameters":{"type":"object","properties":{"target":{"type":"string"}},"required":["target"]}}]}],"input":"stop it"}`
	_, _, body = m.post("/v1/responses", "k", ns)
	v = mustJSON(t, body)
	if dig(v, "output", 0, "namespace") != "agents" || dig(v, "output", 0, "name") != "close_agent" || dig(v, "output", 0, "arguments") != `{"target":"mock"}` {
		t.Errorf("namespaced call = %s", body)
	}

	final := `{"model":"m","tools":[{"type":"function","name":"exec_command","parameters":{}}],"input":[{"role":"user","content":"x"},{"type":"function_call","call_id":"c1","name":"exec_command","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"hello"}]}`
	_, _, body = m.post("/v1/responses", "k", final)
	if got := dig(mustJSON(t, body), "output", 0, "content", 0, "text"); got != `The tool returned: "hello"` {
		t.Errorf("final text = %v", got)
	}
}

func TestToolCallsOnlyWhenAsked(t *testing.T) {
	// Without answer_tools the echo answer stays, tools or not.
	m := startMock(t, "")
	_, _, body := m.post("/v1/chat/completions", "k", chatToolsBody(false, ""))
	if got := dig(mustJSON(t, body), "choices", 0, "message", "content"); got != "echo: Please read /tmp/x/notes.txt and quote it." {
		t.Errorf("content = %v", got)
	}
	// With it, a request without tools is echoed, and a scripted text wins.
	m = startMock(t, toolsScript+"rules:\n  - model: scripted\n    responses: [{text: fixed}]\n")
	_, _, body = m.post("/v1/chat/completions", "k", chatBody("gpt-4o", "hi", false, false))
	if got := dig(mustJSON(t, body), "choices", 0, "message", "content"); got != "echo: hi" {
		t.Errorf("no tools: content = %v", got)
	}
	_, _, body = m.post("/v1/chat/completions", "k", strings.Replace(chatToolsBody(false, ""), `"gpt-4o"`, `"scripted"`, 1))
	if got := dig(mustJSON(t, body), "choices", 0, "message", "content"); got != "fixed" {
		t.Errorf("scripted: content = %v", got)
	}
}

func TestToolArgs(t *testing.T) {
	cases := []struct{ schema, user, want string }{
		{`{"type":"object","properties":{"q":{"type":"string"}}}`, "", `{}`},
		{`{"type":"object","properties":{"unit":{"type":"string","enum":["celsius","fahrenheit"]},"n":{"type":["integer","null"],"exclusiveMinimum":0},"ok":{"type":"boolean"},"tags":{"type":"array","minItems":1,"items":{"type":"string"}},"loc":{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}},"required":["unit","n","ok","tags","loc"]}`, "",
			`{"loc":{"url":"https://example.com/"},"n":1,"ok":false,"tags":["mock"],"unit":"celsius"}`},
		{`{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"]}`, "show main.go please", `{"command":["cat","main.go"]}`},
		{`{"properties":{"mode":{"const":"fast"}},"required":["mode"]}`, "", `{"mode":"fast"}`},
		{`not json`, "", `{}`},
	}
	for _, c := range cases {
		if got := toolArgs([]byte(c.schema), c.user); got != c.want {
			t.Errorf("toolArgs(%s) = %s, want %s", c.schema, got, c.want)
		}
	}
}

func TestOtherEndpoints(t *testing.T) {
	m := startMock(t, "")
	body := messagesBody("claude-haiku-4", "count me", false)
	status, _, out := m.post("/v1/messages/count_tokens", "x:k", body)
	if status != 200 || dig(mustJSON(t, out), "input_tokens") != float64(estimateTokens(len(body))) {
		t.Errorf("count_tokens: %d %s", status, out)
	}

	status, _, out = m.post("/v1/embeddings", "k", `{"model":"text-embedding-3-small","input":["a","b"],"encoding_format":"float","dimensions":4}`)
	v := mustJSON(t, out)
	vec, _ := dig(v, "data", 1, "embedding").([]any)
	if status != 200 || dig(v, "object") != "list" || len(vec) != 4 || dig(v, "data", 1, "index") != 1.0 {
		t.Fatalf("embeddings: %d %s", status, out)
	}
	var norm float64
	for _, x := range vec {
		norm += x.(float64) * x.(float64)
	}
	if math.Abs(norm-1) > 1e-3 {
		t.Errorf("embedding is not a unit vector: |v|² = %v", norm)
	}
	_, _, out = m.post("/v1/embeddings", "k", `{"model":"text-embedding-3-small","input":"a","encoding_format":"base64"}`)
	raw, err := base64.StdEncoding.DecodeString(dig(mustJSON(t, out), "data", 0, "embedding").(string))
	if err != nil || len(raw) != 4*defaultEmbeddingDims {
		t.Fatalf("base64 embedding: %v, %d bytes", err, len(raw))
	}
	again := embedding("a", defaultEmbeddingDims)
	if got := math.Float32frombits(binary.LittleEndian.Uint32(raw)); got != again[0] {
		t.Errorf("base64 vector[0] = %v, want the deterministic %v", got, again[0])
	}

	status, _, out = m.post("/v1/completions", "k", `{"model":"gpt-3.5-turbo-instruct","prompt":"Say this is a test"}`)
	v = mustJSON(t, out)
	if status != 200 || dig(v, "object") != "text_completion" || dig(v, "choices", 0, "text") != "echo: Say this is a test" {
		t.Errorf("completions: %d %s", status, out)
	}
	evs := m.streamOf("/v1/completions", "k", `{"model":"gpt-3.5-turbo-instruct","prompt":["x","last"],"stream":true,"stream_options":{"include_usage":true}}`)
	var text strings.Builder
	for _, e := range evs[:len(evs)-1] {
		text.WriteString(dig(e.json(t), "choices", 0, "text").(string))
	}
	if text.String() != "echo: last" || evs[len(evs)-1].data != "[DONE]" || dig(evs[len(evs)-2].json(t), "usage", "total_tokens") == nil {
		t.Errorf("completions stream: %q, %v", text.String(), evs)
	}

	// Scripted faults apply to these endpoints too, in their error shape.
	m = startMock(t, "rules:\n  - responses: [{status: 429}]\n")
	status, _, out = m.post("/v1/messages/count_tokens", "x:k", body)
	if status != http.StatusTooManyRequests || dig(mustJSON(t, out), "error", "type") != "rate_limit_error" {
		t.Errorf("count_tokens 429: %d %s", status, out)
	}
	status, _, out = m.post("/v1/embeddings", "k", `{"model":"e","input":"a"}`)
	if status != http.StatusTooManyRequests || dig(mustJSON(t, out), "error", "code") != "rate_limit_exceeded" {
		t.Errorf("embeddings 429: %d %s", status, out)
	}
}
