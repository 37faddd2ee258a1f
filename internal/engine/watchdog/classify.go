package watchdog

import (
	"bytes"

	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
)

// Format is the wire format of a stream.
type Format int

// The stream formats a watchdog understands.
const (
	// OpenAIChat is OpenAI Chat Completions (chat.completion.chunk events
	// ended by "data: [DONE]").
	OpenAIChat Format = iota
	// AnthropicMessages is the Anthropic Messages event stream.
	AnthropicMessages
	// OpenAIResponses is the OpenAI Responses event stream.
	OpenAIResponses
)

// String returns the format's name.
func (f Format) String() string {
	switch f {
	case OpenAIChat:
		return "openai_chat"
	case AnthropicMessages:
		return "anthropic_messages"
	case OpenAIResponses:
		return "openai_responses"
	}
	return "unknown"
}

// Frame is what one stream event means to the watchdogs.
type Frame int

// Frame kinds. Only FrameContent, FrameReasoning and FrameToolCall are
// model output; only FrameContent carries useful bytes.
const (
	// FrameLifecycle is structure or metadata: message/response start,
	// block start/stop of text, an empty text delta, a finish chunk.
	FrameLifecycle Frame = iota
	// FrameContent is a non-empty text delta of the assistant's answer.
	FrameContent
	// FrameReasoning is reasoning: thinking deltas (even empty), signatures,
	// redacted thinking, Responses reasoning items and summaries.
	FrameReasoning
	// FrameToolCall is a tool call being streamed.
	FrameToolCall
	// FramePing is a keep-alive: an SSE comment or a ping event.
	FramePing
	// FrameError is an error event from upstream.
	FrameError
	// FrameUsage is a usage-only event.
	FrameUsage
	// FrameDone is the stream's final event ([DONE], message_stop,
	// response.completed or response.incomplete).
	FrameDone
)

// String returns the frame kind's name.
func (f Frame) String() string {
	switch f {
	case FrameLifecycle:
		return "lifecycle"
	case FrameContent:
		return "content"
	case FrameReasoning:
		return "reasoning"
	case FrameToolCall:
		return "tool_call"
	case FramePing:
		return "ping"
	case FrameError:
		return "error"
	case FrameUsage:
		return "usage"
	case FrameDone:
		return "done"
	}
	return "unknown"
}

// Output reports whether the frame is model output (content, reasoning or a
// tool call), the progress the content-stall watchdog waits for.
func (f Frame) Output() bool {
	return f == FrameContent || f == FrameReasoning || f == FrameToolCall
}

// Info is what Inspect learns from one event.
type Info struct {
	Frame Frame
	// Bytes is the UTF-8 length of the event's assistant text (text deltas
	// only; never reasoning, tool arguments or metadata).
	Bytes int
	// Terminal reports that the model has finished its turn with this
	// event (a finish_reason, a stop_reason, or the final event): an
	// end of stream after it is not an early EOF.
	Terminal bool
	// Usage reports that the event carries a token usage object.
	Usage bool
}

// Classify returns the frame kind of ev in format and its useful bytes
// (the UTF-8 length of text deltas only). It is Inspect without the extra
// flags. It is pure and goroutine-safe.
func Classify(format Format, ev sse.Event) (Frame, int) {
	in := Inspect(format, ev)
	return in.Frame, in.Bytes
}

var doneData = []byte("[DONE]")

// Inspect classifies one upstream event of the given format. Comments and
// blocks without data are pings; data that is not a JSON object is
// lifecycle. It is pure and goroutine-safe; it never retains ev.
func Inspect(format Format, ev sse.Event) Info {
	if ev.Comment || len(ev.Data) == 0 || ev.Event == "ping" || ev.Event == "keepalive" {
		return Info{Frame: FramePing}
	}
	data := bytes.TrimSpace(ev.Data)
	if bytes.Equal(data, doneData) {
		return Info{Frame: FrameDone, Terminal: true}
	}
	if ev.Event == "error" {
		return Info{Frame: FrameError}
	}
	var t topLevel
	t.read(data)
	switch format {
	case AnthropicMessages:
		return t.anthropic(ev.Event)
	case OpenAIResponses:
		return t.responses(ev.Event)
	default:
		return t.chat()
	}
}

// topLevel holds the raw top-level members of an event's JSON that
// classification looks at.
type topLevel struct {
	typ, choices, usage, errObj, delta, block, item, message, response []byte
	object                                                             bool
}

func (t *topLevel) read(data []byte) {
	members(data, func(k, v []byte) bool {
		t.object = true
		switch string(k) {
		case "type":
			t.typ = stringValue(v)
		case "choices":
			t.choices = v
		case "usage":
			t.usage = v
		case "error":
			t.errObj = v
		case "delta":
			t.delta = v
		case "content_block":
			t.block = v
		case "item":
			t.item = v
		case "message":
			t.message = v
		case "response":
			t.response = v
		}
		return true
	})
	if !t.object && len(data) >= 2 && data[0] == '{' {
		t.object = true // an empty object
	}
}

// chat classifies an OpenAI Chat Completions chunk.
func (t *topLevel) chat() Info {
	if present(t.errObj) {
		return Info{Frame: FrameError}
	}
	var in Info
	var reasoning, tool bool
	elements(t.choices, func(choice []byte) bool {
		members(choice, func(k, v []byte) bool {
			switch string(k) {
			case "delta", "message":
				members(v, func(dk, dv []byte) bool {
					switch string(dk) {
					case "content", "refusal":
						in.Bytes += textBytes(dv)
					case "reasoning_content", "reasoning":
						if isString(dv) && len(dv) > 2 {
							reasoning = true
						}
					case "reasoning_details":
						if isNonEmptyArray(dv) {
							reasoning = true
						}
					case "tool_calls":
						if isNonEmptyArray(dv) {
							tool = true
						}
					case "function_call":
						if isObject(dv) {
							tool = true
						}
					}
					return true
				})
			case "text":
				in.Bytes += textBytes(v)
			case "finish_reason":
				if present(v) {
					in.Terminal = true
				}
			}
			return true
		})
		return true
	})
	in.Usage = isObject(t.usage)
	switch {
	case in.Bytes > 0:
		in.Frame = FrameContent
	case tool:
		in.Frame = FrameToolCall
	case reasoning:
		in.Frame = FrameReasoning
	case in.Usage && !in.Terminal:
		in.Frame = FrameUsage
	default:
		in.Frame = FrameLifecycle
	}
	return in
}

// anthropic classifies an Anthropic Messages event.
func (t *topLevel) anthropic(name string) Info {
	typ := string(t.typ)
	if typ == "" {
		typ = name
	}
	switch typ {
	case "ping":
		return Info{Frame: FramePing}
	case "error":
		return Info{Frame: FrameError}
	case "message_start":
		return Info{Frame: FrameLifecycle, Usage: isObject(field(t.message, "usage"))}
	case "content_block_start":
		switch string(stringValue(field(t.block, "type"))) {
		case "thinking", "redacted_thinking":
			return Info{Frame: FrameReasoning}
		case "tool_use", "server_tool_use", "mcp_tool_use":
			return Info{Frame: FrameToolCall}
		case "text":
			if n := textBytes(field(t.block, "text")); n > 0 {
				return Info{Frame: FrameContent, Bytes: n}
			}
		}
		return Info{Frame: FrameLifecycle}
	case "content_block_delta":
		var dtyp, text []byte
		members(t.delta, func(k, v []byte) bool {
			switch string(k) {
			case "type":
				dtyp = stringValue(v)
			case "text":
				text = v
			}
			return true
		})
		switch string(dtyp) {
		case "text_delta":
			if n := textBytes(text); n > 0 {
				return Info{Frame: FrameContent, Bytes: n}
			}
			return Info{Frame: FrameLifecycle}
		case "thinking_delta", "signature_delta", "redacted_thinking_delta":
			return Info{Frame: FrameReasoning}
		case "input_json_delta":
			return Info{Frame: FrameToolCall}
		}
		return Info{Frame: FrameLifecycle}
	case "message_delta":
		in := Info{Frame: FrameLifecycle, Usage: isObject(t.usage)}
		if present(field(t.delta, "stop_reason")) {
			in.Terminal = true
		}
		if in.Usage {
			in.Frame = FrameUsage
		}
		return in
	case "message_stop":
		return Info{Frame: FrameDone, Terminal: true}
	}
	if !t.object && typ == "" {
		return Info{Frame: FramePing}
	}
	return Info{Frame: FrameLifecycle}
}

// responses classifies an OpenAI Responses event.
func (t *topLevel) responses(name string) Info {
	typ := t.typ
	if len(typ) == 0 {
		typ = []byte(name)
	}
	switch string(typ) {
	case "response.output_text.delta", "response.refusal.delta":
		if n := textBytes(t.delta); n > 0 {
			return Info{Frame: FrameContent, Bytes: n}
		}
		return Info{Frame: FrameLifecycle}
	case "response.completed", "response.incomplete":
		return Info{Frame: FrameDone, Terminal: true, Usage: isObject(field(t.response, "usage"))}
	case "response.failed", "error":
		return Info{Frame: FrameError}
	case "keepalive", "ping":
		return Info{Frame: FramePing}
	case "response.output_item.added", "response.output_item.done":
		it := stringValue(field(t.item, "type"))
		switch {
		case string(it) == "reasoning":
			return Info{Frame: FrameReasoning}
		case bytes.HasSuffix(it, []byte("_call")):
			return Info{Frame: FrameToolCall}
		}
		return Info{Frame: FrameLifecycle}
	}
	switch {
	case bytes.HasPrefix(typ, []byte("response.reasoning")):
		// reasoning_text / reasoning_summary_text / reasoning_summary_part
		return Info{Frame: FrameReasoning}
	case bytes.HasPrefix(typ, []byte("response.function_call_arguments.")),
		bytes.HasPrefix(typ, []byte("response.custom_tool_call_input.")),
		bytes.HasPrefix(typ, []byte("response.mcp_call")),
		bytes.Contains(typ, []byte("_call.")),
		bytes.Contains(typ, []byte("_call_")):
		return Info{Frame: FrameToolCall}
	}
	if !t.object && len(typ) == 0 {
		return Info{Frame: FramePing}
	}
	return Info{Frame: FrameLifecycle}
}
