package translate

import (
	"encoding/json"
	"testing"
)

// anMsg is an Anthropic message rebuilt from a stream, the way an SDK
// accumulates it.
type anMsg struct {
	ID, Model  string
	Blocks     []anAccBlock
	StopReason string
	Input      int
	Output     int
	CacheRead  int
	CacheWrite int
}

type anAccBlock struct {
	Type, Text, Thinking, Signature, ID, Name string
	// Input accumulates input_json_delta fragments.
	Input string `json:"-"`
}

// accumulateAnthropic rebuilds the message of an Anthropic event stream and
// fails on any protocol-order violation: message_start first, block
// indexes consecutive from 0, deltas only inside an open block of the
// matching type, message_delta after every block closed, message_stop last.
func accumulateAnthropic(t *testing.T, events []Event) anMsg {
	t.Helper()
	var m anMsg
	open := map[int]bool{}
	state := "start"
	for i, ev := range events {
		var e struct {
			Type    string `json:"type"`
			Index   int    `json:"index"`
			Message struct {
				ID    string  `json:"id"`
				Model string  `json:"model"`
				Usage anUsage `json:"usage"`
			} `json:"message"`
			ContentBlock anAccBlock `json:"content_block"`
			Delta        struct {
				Type        string  `json:"type"`
				Text        string  `json:"text"`
				Thinking    string  `json:"thinking"`
				Signature   string  `json:"signature"`
				PartialJSON string  `json:"partial_json"`
				StopReason  *string `json:"stop_reason"`
			} `json:"delta"`
			Usage *anUsage `json:"usage"`
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			t.Fatalf("event %d: %v: %s", i, err, ev.Data)
		}
		if ev.Event != "" && ev.Event != e.Type {
			t.Fatalf("event %d: name %q but data type %q", i, ev.Event, e.Type)
		}
		if state == "stopped" {
			t.Fatalf("event %d (%s) after message_stop", i, e.Type)
		}
		if state == "start" && e.Type != "message_start" {
			t.Fatalf("event %d: first event is %s, want message_start", i, e.Type)
		}
		switch e.Type {
		case "message_start":
			if state != "start" {
				t.Fatalf("event %d: second message_start", i)
			}
			state = "content"
			m.ID, m.Model = e.Message.ID, e.Message.Model
			m.Input, m.CacheRead, m.CacheWrite = deref(e.Message.Usage.InputTokens), deref(e.Message.Usage.CacheReadInputTokens), deref(e.Message.Usage.CacheCreationInputTokens)
		case "content_block_start":
			if state != "content" || e.Index != len(m.Blocks) || len(open) > 0 {
				t.Fatalf("event %d: content_block_start index %d with %d blocks, open %v, state %s", i, e.Index, len(m.Blocks), open, state)
			}
			open[e.Index] = true
			b := e.ContentBlock
			b.Input = ""
			m.Blocks = append(m.Blocks, b)
		case "content_block_delta":
			if !open[e.Index] {
				t.Fatalf("event %d: delta for block %d which is not open", i, e.Index)
			}
			b := &m.Blocks[e.Index]
			want := map[string]string{"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "thinking", "input_json_delta": "tool_use"}[e.Delta.Type]
			if want != b.Type {
				t.Fatalf("event %d: %s into a %s block", i, e.Delta.Type, b.Type)
			}
			b.Text += e.Delta.Text
			b.Thinking += e.Delta.Thinking
			b.Signature += e.Delta.Signature
			b.Input += e.Delta.PartialJSON
		case "content_block_stop":
			if !open[e.Index] {
				t.Fatalf("event %d: stop for block %d which is not open", i, e.Index)
			}
			delete(open, e.Index)
		case "message_delta":
			if len(open) > 0 || state != "content" {
				t.Fatalf("event %d: message_delta with open blocks %v (state %s)", i, open, state)
			}
			state = "delta"
			if e.Delta.StopReason != nil {
				m.StopReason = *e.Delta.StopReason
			}
			if u := e.Usage; u != nil {
				m.Output = deref(u.OutputTokens)
				if u.InputTokens != nil {
					m.Input = *u.InputTokens
				}
				if u.CacheReadInputTokens != nil {
					m.CacheRead = *u.CacheReadInputTokens
				}
				if u.CacheCreationInputTokens != nil {
					m.CacheWrite = *u.CacheCreationInputTokens
				}
			}
		case "message_stop":
			if state != "delta" {
				t.Fatalf("event %d: message_stop before message_delta", i)
			}
			state = "stopped"
		case "ping":
		case "error":
			state = "stopped"
		default:
			t.Fatalf("event %d: unknown type %q", i, e.Type)
		}
	}
	if state != "stopped" {
		t.Fatalf("stream did not end with message_stop (state %s)", state)
	}
	for i := range m.Blocks {
		if m.Blocks[i].Type == "tool_use" && m.Blocks[i].Input == "" {
			m.Blocks[i].Input = "{}"
		}
	}
	return m
}

// oaMsg is an OpenAI completion rebuilt from chunks.
type oaMsg struct {
	ID, Model  string
	Content    string
	Reasoning  string
	ToolCalls  []oaToolCall
	Finish     string
	Usage      *oaUsage
	ErrorChunk map[string]any
}

// accumulateOpenAI rebuilds the completion of an OpenAI chunk stream and
// fails on order violations: a role chunk first, every tool call's first
// delta with id and name and consecutive indexes, one finish_reason, the
// usage chunk after it, [DONE] last, one id/model throughout. An error
// chunk must be the last event. With lenient, usage may ride on any chunk
// (as some upstreams send it) instead of a final choices-less chunk.
func accumulateOpenAI(t *testing.T, events []Event, lenient bool) oaMsg {
	t.Helper()
	var m oaMsg
	done := false
	for i, ev := range events {
		if done {
			t.Fatalf("event %d after [DONE]: %s", i, ev.Data)
		}
		if m.ErrorChunk != nil {
			t.Fatalf("event %d after an error chunk: %s", i, ev.Data)
		}
		if ev.Event != "" {
			t.Fatalf("event %d: OpenAI chunks carry no event name, got %q", i, ev.Event)
		}
		if string(ev.Data) == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Model   string `json:"model"`
			Created int64  `json:"created"`
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Role             string  `json:"role"`
					Content          *string `json:"content"`
					ReasoningContent *string `json:"reasoning_content"`
					ToolCalls        []struct {
						Index    *int           `json:"index"`
						ID       string         `json:"id"`
						Type     string         `json:"type"`
						Function oaFunctionCall `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *oaUsage        `json:"usage"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if c.Error != nil {
			m.ErrorChunk = obj(t, ev.Data)
			continue
		}
		if c.Object != "chat.completion.chunk" || c.Created == 0 {
			t.Fatalf("event %d: object %q created %d", i, c.Object, c.Created)
		}
		if i == 0 {
			m.ID, m.Model = c.ID, c.Model
			if len(c.Choices) != 1 || c.Choices[0].Delta.Role != "assistant" {
				t.Fatalf("first chunk must carry the assistant role: %s", ev.Data)
			}
		} else if c.ID != m.ID || c.Model != m.Model {
			t.Fatalf("event %d: id/model changed: %s", i, ev.Data)
		}
		if c.Usage != nil {
			if !lenient && (len(c.Choices) != 0 || m.Finish == "") {
				t.Fatalf("event %d: usage chunk must have no choices and follow finish_reason", i)
			}
			m.Usage = c.Usage
		}
		for _, ch := range c.Choices {
			if m.Finish != "" {
				t.Fatalf("event %d: choice delta after finish_reason %q", i, m.Finish)
			}
			d := ch.Delta
			if d.Content != nil {
				m.Content += *d.Content
			}
			if d.ReasoningContent != nil {
				m.Reasoning += *d.ReasoningContent
			}
			for _, tc := range d.ToolCalls {
				if tc.Index == nil {
					t.Fatalf("event %d: tool call delta without index", i)
				}
				k := *tc.Index
				switch {
				case k == len(m.ToolCalls):
					if tc.ID == "" || tc.Function.Name == "" || tc.Type != "function" {
						t.Fatalf("event %d: first delta of tool %d lacks id/type/name: %s", i, k, ev.Data)
					}
					m.ToolCalls = append(m.ToolCalls, oaToolCall{ID: tc.ID, Type: "function", Function: oaFunctionCall{Name: tc.Function.Name}})
				case k > len(m.ToolCalls) || tc.ID != "" || tc.Function.Name != "":
					t.Fatalf("event %d: bad tool call delta %s", i, ev.Data)
				}
				m.ToolCalls[k].Function.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				m.Finish = *ch.FinishReason
			}
		}
	}
	if !done && m.ErrorChunk == nil {
		t.Fatalf("stream did not end with [DONE]")
	}
	return m
}
