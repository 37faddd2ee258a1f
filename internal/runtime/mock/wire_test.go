package mock

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestOpenAIEchoNonStream(t *testing.T) {
	m := startMock(t, "")
	tests := []struct {
		name, body string
	}{
		{"string content", chatBody("gpt-4o", "hello world", false, false)},
		{"content parts", `{"model":"gpt-4o","messages":[{"role":"user","content":"first"},` +
			`{"role":"assistant","content":"x"},` +
			`{"role":"user","content":[{"type":"text","text":"hello "},{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"world"}]}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, data := m.post("/v1/chat/completions", "k1", tc.body)
			if status != http.StatusOK {
				t.Fatalf("status = %d, want 200: %s", status, data)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			v := mustJSON(t, data)
			if id, _ := v["id"].(string); !strings.HasPrefix(id, "chatcmpl-") {
				t.Errorf("id = %q, want chatcmpl- prefix", id)
			}
			if v["object"] != "chat.completion" || v["model"] != "gpt-4o" {
				t.Errorf("object/model = %v/%v", v["object"], v["model"])
			}
			if got := dig(v, "choices", 0, "message", "content"); got != "echo: hello world" {
				t.Errorf("content = %q, want %q", got, "echo: hello world")
			}
			if got := dig(v, "choices", 0, "message", "role"); got != "assistant" {
				t.Errorf("role = %v", got)
			}
			if got := dig(v, "choices", 0, "finish_reason"); got != "stop" {
				t.Errorf("finish_reason = %v", got)
			}
			p, _ := dig(v, "usage", "prompt_tokens").(float64)
			c, _ := dig(v, "usage", "completion_tokens").(float64)
			tot, _ := dig(v, "usage", "total_tokens").(float64)
			if p <= 0 || c <= 0 || tot != p+c {
				t.Errorf("usage = %v", v["usage"])
			}
		})
	}
}

// contentFrames returns the OpenAI chunks before [DONE], failing when [DONE]
// is not the last event.
func openAIChunks(t *testing.T, evs []sseEvent) []map[string]any {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %+v", evs)
	}
	var out []map[string]any
	for _, ev := range evs[:len(evs)-1] {
		if ev.comment != "" {
			continue
		}
		out = append(out, ev.json(t))
	}
	return out
}

func TestOpenAIEchoStream(t *testing.T) {
	m := startMock(t, "")
	tests := []struct {
		name         string
		user         string
		includeUsage bool
	}{
		{"plain", "hello world", false},
		{"include_usage", "hello world", true},
		{"multibyte", "héllo wörld 🌊", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chunks := openAIChunks(t, m.streamOf("/v1/chat/completions", "k1", chatBody("gpt-4o", tc.user, true, tc.includeUsage)))
			want := "echo: " + tc.user
			wantPieces := splitRunes(want, 4)
			if len(wantPieces) != 4 {
				t.Fatalf("test text too short")
			}
			// 4 content chunks, then the finish chunk, then (include_usage) the usage chunk.
			wantLen := 5
			if tc.includeUsage {
				wantLen = 6
			}
			if len(chunks) != wantLen {
				t.Fatalf("got %d chunks, want %d: %v", len(chunks), wantLen, chunks)
			}
			var id any
			for i, ch := range chunks {
				if ch["object"] != "chat.completion.chunk" || ch["model"] != "gpt-4o" {
					t.Errorf("chunk %d object/model = %v/%v", i, ch["object"], ch["model"])
				}
				if i == 0 {
					id = ch["id"]
				} else if ch["id"] != id {
					t.Errorf("chunk %d id %v != %v", i, ch["id"], id)
				}
				u, has := ch["usage"]
				switch {
				case !tc.includeUsage && has:
					t.Errorf("chunk %d has usage without include_usage", i)
				case tc.includeUsage && i < 5 && (!has || u != nil):
					t.Errorf("chunk %d usage = %v (present %v), want null", i, u, has)
				}
			}
			for i := 0; i < 4; i++ {
				got, _ := dig(chunks[i], "choices", 0, "delta", "content").(string)
				if got != wantPieces[i] || !utf8.ValidString(got) {
					t.Errorf("chunk %d content = %q, want %q", i, got, wantPieces[i])
				}
				if r := dig(chunks[i], "choices", 0, "delta", "role"); (i == 0) != (r == "assistant") {
					t.Errorf("chunk %d role = %v", i, r)
				}
				if fr := dig(chunks[i], "choices", 0, "finish_reason"); fr != nil {
					t.Errorf("chunk %d finish_reason = %v, want null", i, fr)
				}
			}
			if fr := dig(chunks[4], "choices", 0, "finish_reason"); fr != "stop" {
				t.Errorf("finish chunk finish_reason = %v", fr)
			}
			if tc.includeUsage {
				last := chunks[5]
				if ch, _ := last["choices"].([]any); ch == nil || len(ch) != 0 {
					t.Errorf("usage chunk choices = %v, want []", last["choices"])
				}
				if p, _ := dig(last, "usage", "total_tokens").(float64); p <= 0 {
					t.Errorf("usage chunk usage = %v", last["usage"])
				}
			}
		})
	}
}

func TestAnthropicEchoNonStream(t *testing.T) {
	m := startMock(t, "")
	status, _, data := m.post("/v1/messages", "x:ak", messagesBody("claude-haiku-4", "hello world", false))
	if status != http.StatusOK {
		t.Fatalf("status = %d: %s", status, data)
	}
	v := mustJSON(t, data)
	if id, _ := v["id"].(string); !strings.HasPrefix(id, "msg_") {
		t.Errorf("id = %q", id)
	}
	if v["type"] != "message" || v["role"] != "assistant" || v["model"] != "claude-haiku-4" {
		t.Errorf("type/role/model = %v/%v/%v", v["type"], v["role"], v["model"])
	}
	if dig(v, "content", 0, "type") != "text" || dig(v, "content", 0, "text") != "echo: hello world" {
		t.Errorf("content = %v", v["content"])
	}
	if v["stop_reason"] != "end_turn" {
		t.Errorf("stop_reason = %v", v["stop_reason"])
	}
	if in, _ := dig(v, "usage", "input_tokens").(float64); in <= 0 {
		t.Errorf("usage = %v", v["usage"])
	}
	if out, _ := dig(v, "usage", "output_tokens").(float64); out <= 0 {
		t.Errorf("usage = %v", v["usage"])
	}
}

// eventNames lists the event names of a stream, "ping" for pings.
func eventNames(evs []sseEvent) []string {
	names := make([]string, len(evs))
	for i, ev := range evs {
		names[i] = ev.name
		if ev.comment != "" {
			names[i] = ": " + ev.comment
		}
	}
	return names
}

func TestAnthropicEchoStream(t *testing.T) {
	m := startMock(t, "")
	evs := m.streamOf("/v1/messages", "x:ak", messagesBody("claude-haiku-4", "hello world", true))
	want := []string{"message_start", "content_block_start", "ping",
		"content_block_delta", "content_block_delta", "content_block_delta", "content_block_delta",
		"content_block_stop", "message_delta", "message_stop"}
	if got := eventNames(evs); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("events = %v\nwant     %v", got, want)
	}
	var text strings.Builder
	for i, ev := range evs {
		v := ev.json(t)
		if v["type"] != ev.name {
			t.Errorf("event %d: data.type %v != event %q", i, v["type"], ev.name)
		}
		if ev.name == "content_block_delta" {
			if dig(v, "delta", "type") != "text_delta" || dig(v, "index") != 0.0 {
				t.Errorf("delta %d = %v", i, v)
			}
			text.WriteString(dig(v, "delta", "text").(string))
		}
	}
	if text.String() != "echo: hello world" {
		t.Errorf("text = %q", text.String())
	}
	start := evs[0].json(t)
	if dig(start, "message", "model") != "claude-haiku-4" || dig(start, "message", "role") != "assistant" {
		t.Errorf("message_start = %v", start)
	}
	md := evs[8].json(t)
	if dig(md, "delta", "stop_reason") != "end_turn" {
		t.Errorf("message_delta = %v", md)
	}
	if out, _ := dig(md, "usage", "output_tokens").(float64); out <= 0 {
		t.Errorf("message_delta usage = %v", md["usage"])
	}
}

func TestReasoningFrames(t *testing.T) {
	m := startMock(t, `
rules:
  - responses:
      - {reasoning_chunks: 3, chunks: 2, reasoning_text: "think hard now", text: "done!"}
`)
	t.Run("openai stream", func(t *testing.T) {
		chunks := openAIChunks(t, m.streamOf("/v1/chat/completions", "", chatBody("o3", "q", true, false)))
		var kinds []string
		var reasoning, content string
		for _, ch := range chunks[:len(chunks)-1] {
			d, _ := dig(ch, "choices", 0, "delta").(map[string]any)
			if r, ok := d["reasoning_content"].(string); ok {
				kinds = append(kinds, "r")
				reasoning += r
			}
			if c, ok := d["content"].(string); ok {
				kinds = append(kinds, "c")
				content += c
			}
		}
		if strings.Join(kinds, "") != "rrrcc" {
			t.Errorf("frame kinds = %v, want 3 reasoning then 2 content", kinds)
		}
		if reasoning != "think hard now" || content != "done!" {
			t.Errorf("reasoning %q content %q", reasoning, content)
		}
	})
	t.Run("openai whole", func(t *testing.T) {
		_, _, data := m.post("/v1/chat/completions", "", chatBody("o3", "q", false, false))
		v := mustJSON(t, data)
		if dig(v, "choices", 0, "message", "reasoning_content") != "think hard now" {
			t.Errorf("message = %v", dig(v, "choices", 0, "message"))
		}
		if r, _ := dig(v, "usage", "completion_tokens_details", "reasoning_tokens").(float64); r <= 0 {
			t.Errorf("reasoning_tokens = %v", r)
		}
	})
	t.Run("anthropic stream", func(t *testing.T) {
		evs := m.streamOf("/v1/messages", "", messagesBody("claude-sonnet-4", "q", true))
		var got []string
		var thinking, text string
		emptyThinking, signature := 0, 0
		for _, ev := range evs {
			v := ev.json(t)
			desc := ev.name
			switch ev.name {
			case "content_block_start":
				desc += "/" + dig(v, "content_block", "type").(string)
			case "content_block_delta":
				kind := dig(v, "delta", "type").(string)
				desc += "/" + kind
				switch kind {
				case "thinking_delta":
					s := dig(v, "delta", "thinking").(string)
					if s == "" {
						emptyThinking++
					}
					thinking += s
					if dig(v, "index") != 0.0 {
						t.Errorf("thinking delta index = %v", dig(v, "index"))
					}
				case "signature_delta":
					if s, _ := dig(v, "delta", "signature").(string); s != "" {
						signature++
					}
				case "text_delta":
					text += dig(v, "delta", "text").(string)
					if dig(v, "index") != 1.0 {
						t.Errorf("text delta index = %v", dig(v, "index"))
					}
				}
			}
			got = append(got, desc)
		}
		want := []string{"message_start", "content_block_start/thinking", "ping",
			"content_block_delta/thinking_delta", // the empty one
			"content_block_delta/thinking_delta", "content_block_delta/thinking_delta", "content_block_delta/thinking_delta",
			"content_block_delta/signature_delta", "content_block_stop",
			"content_block_start/text", "content_block_delta/text_delta", "content_block_delta/text_delta",
			"content_block_stop", "message_delta", "message_stop"}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("events = %v\nwant     %v", got, want)
		}
		if thinking != "think hard now" || text != "done!" || emptyThinking != 1 || signature != 1 {
			t.Errorf("thinking %q text %q empty %d signature %d", thinking, text, emptyThinking, signature)
		}
	})
	t.Run("anthropic whole", func(t *testing.T) {
		_, _, data := m.post("/v1/messages", "", messagesBody("claude-sonnet-4", "q", false))
		v := mustJSON(t, data)
		if dig(v, "content", 0, "type") != "thinking" || dig(v, "content", 0, "thinking") != "think hard now" {
			t.Errorf("content = %v", v["content"])
		}
		if s, _ := dig(v, "content", 0, "signature").(string); s == "" {
			t.Errorf("thinking block without signature")
		}
		if dig(v, "content", 1, "text") != "done!" {
			t.Errorf("content = %v", v["content"])
		}
	})
}

func TestResponsesEndpoint(t *testing.T) {
	m := startMock(t, "")
	for _, body := range []string{
		`{"model":"gpt-4o","input":"hi there"}`,
		`{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_text","text":"hi there"}]}]}`,
	} {
		status, _, data := m.post("/v1/responses", "k", body)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, data)
		}
		v := mustJSON(t, data)
		if v["object"] != "response" || v["status"] != "completed" {
			t.Errorf("response = %v", v)
		}
		if got := dig(v, "output", 0, "content", 0, "text"); got != "echo: hi there" {
			t.Errorf("text = %v", got)
		}
	}
	evs := m.streamOf("/v1/responses", "k", `{"model":"gpt-4o","input":"hi there","stream":true}`)
	var text string
	for i, ev := range evs {
		v := ev.json(t)
		if v["type"] != ev.name || dig(v, "sequence_number") != float64(i) {
			t.Errorf("event %d %q: type %v seq %v", i, ev.name, v["type"], v["sequence_number"])
		}
		if ev.name == "response.output_text.delta" {
			text += v["delta"].(string)
		}
	}
	if text != "echo: hi there" {
		t.Errorf("deltas = %q", text)
	}
	if last := evs[len(evs)-1]; last.name != "response.completed" {
		t.Errorf("last event = %q", last.name)
	}
}

func TestModelsAndErrors(t *testing.T) {
	m := startMock(t, "models: [alpha, beta/gamma]\n")
	resp, err := m.do(context.Background(), http.MethodGet, "/v1/models", "", "")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("models status %d", resp.StatusCode)
	}

	req, _ := http.NewRequest(http.MethodGet, m.base+"/v1/models", nil)
	for _, anthropic := range []bool{false, true} {
		if anthropic {
			req.Header.Set("anthropic-version", "2023-06-01")
		}
		resp, err := m.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		data := readBody(t, resp)
		v = mustJSON(t, data)
		if dig(v, "data", 0, "id") != "alpha" || dig(v, "data", 1, "id") != "beta/gamma" {
			t.Errorf("models = %s", data)
		}
		if anthropic && (dig(v, "data", 0, "type") != "model" || v["has_more"] != false) {
			t.Errorf("anthropic models = %s", data)
		}
		if !anthropic && v["object"] != "list" {
			t.Errorf("openai models = %s", data)
		}
	}

	tests := []struct {
		name, path, body string
		status           int
		errType          string
	}{
		{"bad json openai", "/v1/chat/completions", "{", 400, "invalid_request_error"},
		{"bad json anthropic", "/v1/messages", "not json", 400, "invalid_request_error"},
		{"unknown path", "/v2/whatever", "{}", 404, "invalid_request_error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _, data := m.post(tc.path, "", tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, data)
			}
			v := mustJSON(t, data)
			if dig(v, "error", "type") != tc.errType {
				t.Errorf("body = %s", data)
			}
		})
	}
	resp, err = m.do(context.Background(), http.MethodGet, "/v1/chat/completions", "", "")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET chat: %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func readBody(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return data
}
