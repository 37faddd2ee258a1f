package translate

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
)

// oaChunk is an OpenAI chat.completion.chunk (or an error sent in-stream).
type oaChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int     `json:"index"`
		Delta        oaDelta `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage        `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// oaDelta is the delta of a chunk's choice.
type oaDelta struct {
	Content          *string         `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
	Refusal          *string         `json:"refusal"`
	ToolCalls        []oaToolDelta   `json:"tool_calls"`
	FunctionCall     *oaFunctionCall `json:"function_call"`
}

// reasoning is the delta's reasoning text: reasoning_content, else the
// "reasoning" some OpenAI-compatible servers send; nil when absent.
func (d *oaDelta) reasoning() *string {
	if d.ReasoningContent != nil {
		return d.ReasoningContent
	}
	return d.Reasoning
}

// toolKey is the key of a tool_calls fragment: its index, else a new key
// (count) for a fragment that starts a call (an id or a name, or the first
// fragment of all), else the last key.
func toolKey(tc *oaToolDelta, last, count int) int {
	switch {
	case tc.Index != nil:
		return *tc.Index
	case tc.ID != "" || tc.Function.Name != "" || count == 0:
		return count
	}
	return last
}

type oaToolDelta struct {
	Index    *int           `json:"index"`
	ID       string         `json:"id"`
	Function oaFunctionCall `json:"function"`
}

// Kinds of the open Anthropic content block.
const (
	blockNone = iota
	blockText
	blockThinking
	blockTool
)

// functionCallKey is the tool key of a legacy function_call delta.
const functionCallKey = -1

// openAIToAnthropic is the Translator from OpenAI chunks to Anthropic
// events.
type openAIToAnthropic struct {
	model string

	id      string
	started bool // message_start sent
	done    bool // message_stop or an error sent

	open      int // kind of the open block
	openIndex int // its Anthropic index
	nextIndex int
	curTool   int // tool key of the open tool block

	// tools maps an OpenAI tool_calls index (or functionCallKey) to the
	// Anthropic block index of its tool_use.
	tools     map[int]int
	lastTool  int // key of the most recent tool, for deltas without index
	stop      string
	stopSeen  bool
	usage     oaUsage
	usageSeen bool
}

// NewOpenAIToAnthropicStream returns a Translator from an OpenAI
// chat.completion.chunk stream to an Anthropic Messages stream:
// message_start, then content_block_start/delta/stop for thinking
// (reasoning_content or reasoning), text and tool_use (one block per
// tool call, argument fragments as input_json_delta), then message_delta
// with the stop reason and usage and message_stop once [DONE] arrives (the
// usage-only chunk comes between finish_reason and [DONE]). message_start
// reports input_tokens 0, as OpenAI reports usage only at the end;
// message_delta carries the input, cache-read and output counts. An in-stream
// error becomes an Anthropic error event and ends the stream. Upstreams
// are expected to stream tool calls one after another; a late fragment of
// an earlier call is still sent with that call's block index. model, when
// not empty, is reported instead of the upstream's model. The Translator is
// owned by one stream: not safe for concurrent use.
func NewOpenAIToAnthropicStream(model string) Translator {
	return &openAIToAnthropic{model: model}
}

// Event implements Translator.
func (t *openAIToAnthropic) Event(ev sse.Event) ([]sse.Event, error) {
	data := bytes.TrimSpace(ev.Data)
	if t.done || ev.Comment || len(data) == 0 {
		return nil, nil
	}
	if bytes.Equal(data, []byte("[DONE]")) {
		return t.end(nil, true), nil
	}
	var c oaChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("decode openai chunk: %w", err)
	}
	if rawKind(c.Error) != 'n' {
		t.done = true
		return []sse.Event{{Event: "error", Data: ErrorToAnthropic(http500, data)}}, nil
	}
	if len(c.Choices) == 0 && c.Usage == nil {
		return nil, nil // not a chunk (a keep-alive object): nothing to say
	}
	if c.Usage != nil {
		t.usage, t.usageSeen = *c.Usage, true
	}
	var out []sse.Event
	if !t.started {
		out = t.start(c.ID, c.Model, out)
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		d := &ch.Delta
		if reasoning := d.reasoning(); reasoning != nil && *reasoning != "" {
			out = t.ensure(blockThinking, 0, out)
			out = t.delta(`{"type":"thinking_delta","thinking":`, *reasoning, out)
		}
		if d.Content != nil && *d.Content != "" {
			out = t.ensure(blockText, 0, out)
			out = t.delta(`{"type":"text_delta","text":`, *d.Content, out)
		}
		if d.Refusal != nil && *d.Refusal != "" {
			out = t.ensure(blockText, 0, out)
			out = t.delta(`{"type":"text_delta","text":`, *d.Refusal, out)
		}
		for j := range d.ToolCalls {
			tc := &d.ToolCalls[j]
			out = t.toolDelta(toolKey(tc, t.lastTool, len(t.tools)), tc.ID, tc.Function.Name, tc.Function.Arguments, out)
		}
		if fc := d.FunctionCall; fc != nil {
			out = t.toolDelta(functionCallKey, "", fc.Name, fc.Arguments, out)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			out = t.closeBlock(out)
			t.stop, t.stopSeen = stopToAnthropic(*ch.FinishReason), true
		}
	}
	return out, nil
}

// Finish implements Translator: when the upstream sent a finish_reason but
// no [DONE], message_delta and message_stop are still owed.
func (t *openAIToAnthropic) Finish() []sse.Event {
	if t.done || !t.stopSeen {
		return nil
	}
	return t.end(nil, false)
}

func (t *openAIToAnthropic) start(id, model string, out []sse.Event) []sse.Event {
	t.started = true
	if t.model != "" {
		model = t.model
	}
	t.id = id
	b := make([]byte, 0, 192+len(id)+len(model))
	b = append(b, `{"type":"message_start","message":{"id":`...)
	b = appendString(b, id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = appendString(b, model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	u := anthropicUsage(nil)
	if t.usageSeen {
		u = anthropicUsage(&t.usage)
	}
	b = appendInt(b, u.InputTokens)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
	b = appendInt(b, u.CacheReadInputTokens)
	b = append(b, `,"output_tokens":0}}}`...)
	return append(out, sse.Event{Event: "message_start", Data: b})
}

// ensure makes a block of kind (and, for tools, key) the open one.
func (t *openAIToAnthropic) ensure(kind, key int, out []sse.Event) []sse.Event {
	if t.open == kind && (kind != blockTool || t.curTool == key) {
		return out
	}
	out = t.closeBlock(out)
	t.open, t.openIndex, t.curTool = kind, t.nextIndex, key
	t.nextIndex++
	b := make([]byte, 0, 128)
	b = append(b, `{"type":"content_block_start","index":`...)
	b = appendInt(b, t.openIndex)
	if kind == blockThinking {
		b = append(b, `,"content_block":{"type":"thinking","thinking":"","signature":""}}`...)
	} else {
		b = append(b, `,"content_block":{"type":"text","text":""}}`...)
	}
	return append(out, sse.Event{Event: "content_block_start", Data: b})
}

func (t *openAIToAnthropic) closeBlock(out []sse.Event) []sse.Event {
	if t.open == blockNone {
		return out
	}
	t.open = blockNone
	b := make([]byte, 0, 48)
	b = append(b, `{"type":"content_block_stop","index":`...)
	b = appendInt(b, t.openIndex)
	b = append(b, '}')
	return append(out, sse.Event{Event: "content_block_stop", Data: b})
}

// delta sends a content_block_delta for the open block; head is the delta
// object up to its text value.
func (t *openAIToAnthropic) delta(head, text string, out []sse.Event) []sse.Event {
	return t.deltaAt(t.openIndex, head, text, out)
}

func (t *openAIToAnthropic) deltaAt(index int, head, text string, out []sse.Event) []sse.Event {
	b := make([]byte, 0, 64+len(head)+len(text))
	b = append(b, `{"type":"content_block_delta","index":`...)
	b = appendInt(b, index)
	b = append(b, `,"delta":`...)
	b = append(b, head...)
	b = appendString(b, text)
	b = append(b, "}}"...)
	return append(out, sse.Event{Event: "content_block_delta", Data: b})
}

// toolDelta handles one tool call fragment: the first one for a key opens a
// tool_use block, argument fragments become input_json_delta.
func (t *openAIToAnthropic) toolDelta(key int, id, name, args string, out []sse.Event) []sse.Event {
	if t.tools == nil {
		t.tools = make(map[int]int, 2)
	}
	index, seen := t.tools[key]
	if !seen {
		out = t.closeBlock(out)
		if id == "" {
			id = fmt.Sprintf("toolu_%s_%d", t.id, len(t.tools))
		}
		t.open, t.openIndex, t.curTool = blockTool, t.nextIndex, key
		index = t.nextIndex
		t.nextIndex++
		t.tools[key] = index
		b := make([]byte, 0, 96+len(id)+len(name))
		b = append(b, `{"type":"content_block_start","index":`...)
		b = appendInt(b, index)
		b = append(b, `,"content_block":{"type":"tool_use","id":`...)
		b = appendString(b, id)
		b = append(b, `,"name":`...)
		b = appendString(b, name)
		b = append(b, `,"input":{}}}`...)
		out = append(out, sse.Event{Event: "content_block_start", Data: b})
	}
	t.lastTool = key
	if args == "" {
		return out
	}
	return t.deltaAt(index, `{"type":"input_json_delta","partial_json":`, args, out)
}

// end closes the open block and sends message_delta and message_stop.
// clean reports an explicit [DONE]: without a finish_reason the turn is
// taken as end_turn.
func (t *openAIToAnthropic) end(out []sse.Event, clean bool) []sse.Event {
	if t.done {
		return out
	}
	if !t.started {
		out = t.start("", "", out)
	}
	t.done = true
	out = t.closeBlock(out)
	stop := t.stop
	if !t.stopSeen && clean {
		stop = "end_turn"
	}
	u := anthropicUsage(&t.usage)
	b := make([]byte, 0, 192)
	b = append(b, `{"type":"message_delta","delta":{"stop_reason":`...)
	b = appendString(b, stop)
	b = append(b, `,"stop_sequence":null},"usage":{"input_tokens":`...)
	b = appendInt(b, u.InputTokens)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
	b = appendInt(b, u.CacheReadInputTokens)
	b = append(b, `,"output_tokens":`...)
	b = appendInt(b, u.OutputTokens)
	b = append(b, "}}"...)
	return append(out,
		sse.Event{Event: "message_delta", Data: b},
		sse.Event{Event: "message_stop", Data: []byte(`{"type":"message_stop"}`)})
}
