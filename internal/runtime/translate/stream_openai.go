package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
)

// anStreamEvent is any Anthropic stream event, decoded as a union.
type anStreamEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		ID    string  `json:"id"`
		Model string  `json:"model"`
		Usage anUsage `json:"usage"`
	} `json:"message"`
	ContentBlock *struct {
		Type     string `json:"type"`
		ID       string `json:"id"`
		Name     string `json:"name"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
	} `json:"content_block"`
	Delta *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		Thinking    string  `json:"thinking"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anUsage        `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// anthropicToOpenAI is the Translator from Anthropic events to OpenAI
// chat.completion.chunk events.
type anthropicToOpenAI struct {
	model string
	now   func() time.Time

	head    []byte // {"id":…,"object":…,"created":…,"model":…
	started bool   // role chunk sent
	stopped bool   // finish_reason chunk sent
	done    bool   // [DONE] or an error sent

	// toolIndex maps an Anthropic block index to its OpenAI tool_calls
	// index, -1 for blocks that are not tool_use.
	toolIndex []int
	nextTool  int

	input, output, cacheCreate, cacheRead int
	thinking                              int // -1: not reported
}

// NewAnthropicToOpenAIStream returns a Translator from an Anthropic Messages
// stream to an OpenAI chat.completion.chunk stream: a role chunk first,
// then content, reasoning_content and tool_calls deltas (id, type and name
// first, then argument fragments), a finish_reason chunk, a usage chunk
// (choices empty) and [DONE]. ping and signature_delta produce nothing; an
// error event becomes an OpenAI error chunk and ends the stream. model,
// when not empty, is reported instead of the upstream's model. The
// Translator is owned by one stream: not safe for concurrent use.
func NewAnthropicToOpenAIStream(model string) Translator {
	return &anthropicToOpenAI{model: model, now: time.Now, thinking: -1}
}

// Event implements Translator.
func (t *anthropicToOpenAI) Event(ev sse.Event) ([]sse.Event, error) {
	data := bytes.TrimSpace(ev.Data)
	if t.done || ev.Comment || len(data) == 0 {
		return nil, nil
	}
	var e anStreamEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("decode anthropic %s event: %w", ev.Event, err)
	}
	switch e.Type {
	case "message_start":
		id, model := "", t.model
		if m := e.Message; m != nil {
			id = m.ID
			if model == "" {
				model = m.Model
			}
			t.addUsage(&m.Usage)
		}
		return t.start(id, model, nil), nil
	case "content_block_start":
		return t.blockStart(&e), nil
	case "content_block_delta":
		return t.blockDelta(&e), nil
	case "message_delta":
		if e.Usage != nil {
			t.addUsage(e.Usage)
		}
		if e.Delta == nil || e.Delta.StopReason == nil || t.stopped {
			return nil, nil
		}
		out := t.start("", t.model, nil)
		t.stopped = true
		return append(out, t.finishChunk(stopToOpenAI(*e.Delta.StopReason))), nil
	case "message_stop":
		return t.end(), nil
	case "error":
		t.done = true
		return []sse.Event{{Data: ErrorToOpenAI(http500, data)}}, nil
	}
	// ping, content_block_stop and unknown future events carry nothing an
	// OpenAI client can use.
	return nil, nil
}

// http500 is the status assumed for an error reported inside a stream.
const http500 = 500

// Finish implements Translator: when the upstream reported a stop reason
// but its body ended before message_stop, the usage chunk and [DONE] are
// still owed.
func (t *anthropicToOpenAI) Finish() []sse.Event {
	if t.done || !t.stopped {
		return nil
	}
	return t.end()
}

// addUsage records usage counts present in u (message_delta restates them
// cumulatively).
func (t *anthropicToOpenAI) addUsage(u *anUsage) {
	if u.InputTokens != nil {
		t.input = *u.InputTokens
	}
	if u.OutputTokens != nil {
		t.output = *u.OutputTokens
	}
	if u.CacheCreationInputTokens != nil {
		t.cacheCreate = *u.CacheCreationInputTokens
	}
	if u.CacheReadInputTokens != nil {
		t.cacheRead = *u.CacheReadInputTokens
	}
	if th := u.thinking(); th != nil {
		t.thinking = *th
	}
}

// start sends the role chunk once, appending to out.
func (t *anthropicToOpenAI) start(id, model string, out []sse.Event) []sse.Event {
	if t.started {
		return out
	}
	t.started = true
	h := make([]byte, 0, 96+len(id)+len(model))
	h = append(h, `{"id":`...)
	h = appendString(h, id)
	h = append(h, `,"object":"chat.completion.chunk","created":`...)
	h = strconv.AppendInt(h, t.now().Unix(), 10)
	h = append(h, `,"model":`...)
	h = appendString(h, model)
	t.head = h
	b := t.chunkOpen(32)
	b = append(b, `{"role":"assistant","content":""}`...)
	return append(out, sse.Event{Data: t.chunkClose(b)})
}

// chunkOpen starts a chunk up to its delta value.
func (t *anthropicToOpenAI) chunkOpen(extra int) []byte {
	b := make([]byte, 0, len(t.head)+96+extra)
	b = append(b, t.head...)
	return append(b, `,"choices":[{"index":0,"delta":`...)
}

func (t *anthropicToOpenAI) chunkClose(b []byte) []byte {
	return append(b, `,"logprobs":null,"finish_reason":null}]}`...)
}

func (t *anthropicToOpenAI) textChunk(field, text string) sse.Event {
	b := t.chunkOpen(len(field) + len(text) + 8)
	b = append(b, `{"`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = appendString(b, text)
	b = append(b, '}')
	return sse.Event{Data: t.chunkClose(b)}
}

func (t *anthropicToOpenAI) blockStart(e *anStreamEvent) []sse.Event {
	out := t.start("", t.model, nil)
	cb := e.ContentBlock
	if cb == nil || e.Index < 0 {
		return out
	}
	for len(t.toolIndex) <= e.Index {
		t.toolIndex = append(t.toolIndex, -1)
	}
	switch cb.Type {
	case "text":
		if cb.Text != "" {
			out = append(out, t.textChunk("content", cb.Text))
		}
	case "thinking":
		if cb.Thinking != "" {
			out = append(out, t.textChunk("reasoning_content", cb.Thinking))
		}
	case "tool_use":
		k := t.nextTool
		t.nextTool++
		t.toolIndex[e.Index] = k
		b := t.chunkOpen(len(cb.ID) + len(cb.Name) + 64)
		b = append(b, `{"tool_calls":[{"index":`...)
		b = appendInt(b, k)
		b = append(b, `,"id":`...)
		b = appendString(b, cb.ID)
		b = append(b, `,"type":"function","function":{"name":`...)
		b = appendString(b, cb.Name)
		b = append(b, `,"arguments":""}}]}`...)
		out = append(out, sse.Event{Data: t.chunkClose(b)})
	}
	return out
}

func (t *anthropicToOpenAI) blockDelta(e *anStreamEvent) []sse.Event {
	out := t.start("", t.model, nil)
	d := e.Delta
	if d == nil {
		return out
	}
	switch d.Type {
	case "text_delta":
		if d.Text != "" {
			out = append(out, t.textChunk("content", d.Text))
		}
	case "thinking_delta":
		if d.Thinking != "" {
			out = append(out, t.textChunk("reasoning_content", d.Thinking))
		}
	case "input_json_delta":
		if d.PartialJSON == "" || e.Index < 0 || e.Index >= len(t.toolIndex) || t.toolIndex[e.Index] < 0 {
			return out
		}
		b := t.chunkOpen(len(d.PartialJSON) + 48)
		b = append(b, `{"tool_calls":[{"index":`...)
		b = appendInt(b, t.toolIndex[e.Index])
		b = append(b, `,"function":{"arguments":`...)
		b = appendString(b, d.PartialJSON)
		b = append(b, `}}]}`...)
		out = append(out, sse.Event{Data: t.chunkClose(b)})
	}
	// signature_delta and citations_delta have no OpenAI counterpart.
	return out
}

func (t *anthropicToOpenAI) finishChunk(reason string) sse.Event {
	b := make([]byte, 0, len(t.head)+96)
	b = append(b, t.head...)
	b = append(b, `,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":`...)
	b = appendString(b, reason)
	b = append(b, "}]}"...)
	return sse.Event{Data: b}
}

// end sends the usage chunk and [DONE].
func (t *anthropicToOpenAI) end() []sse.Event {
	if t.done {
		return nil
	}
	out := t.start("", t.model, nil)
	t.done = true
	if !t.stopped {
		t.stopped = true
		out = append(out, t.finishChunk("stop"))
	}
	u := openAIUsage(t.input, t.output, t.cacheCreate, t.cacheRead)
	b := make([]byte, 0, len(t.head)+160)
	b = append(b, t.head...)
	b = append(b, `,"choices":[],"usage":{"prompt_tokens":`...)
	b = appendInt(b, u.PromptTokens)
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, u.CompletionTokens)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, u.TotalTokens)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = appendInt(b, u.PromptTokensDetails.CachedTokens)
	if t.thinking >= 0 {
		b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
		b = appendInt(b, t.thinking)
	}
	b = append(b, "}}}"...)
	return append(out, sse.Event{Data: b}, sse.Event{Data: []byte("[DONE]")})
}
