// Package frames reads upstream stream events: it tells what one SSE event
// of a wire format means to the stream watchdogs (docs/resilience.md §8,
// §9) — model output (text, reasoning, tool call), lifecycle, keep-alive,
// usage, error or the final event — and how many useful bytes of assistant
// text it carries. The provider adapters (runtime/provider) hand the
// reader of their upstream format to the stream relay; the watchdogs of
// engine/watchdog only ever see the resulting frames.
//
// The readers never decode an event: a minimal JSON walker visits the few
// members they need. They are pure, goroutine-safe and never retain an
// event.
package frames

import (
	"bytes"

	"github.com/breakwater-dev/breakwater/internal/engine/watchdog"
	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
)

// Reader tells what one upstream event of its wire format means. Chat,
// Messages and Responses are the readers of the three formats.
type Reader func(ev sse.Event) Info

// Info is what a Reader learns from one event.
type Info struct {
	Frame watchdog.Frame
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

var doneData = []byte("[DONE]")

// Chat reads an OpenAI Chat Completions event (chat.completion.chunk
// objects ended by "data: [DONE]").
func Chat(ev sse.Event) Info {
	var t topLevel
	if in, ok := t.common(ev); !ok {
		return in
	}
	return t.chat()
}

// Messages reads an Anthropic Messages event.
func Messages(ev sse.Event) Info {
	var t topLevel
	if in, ok := t.common(ev); !ok {
		return in
	}
	return t.anthropic(ev.Event)
}

// Responses reads an OpenAI Responses event.
func Responses(ev sse.Event) Info {
	var t topLevel
	if in, ok := t.common(ev); !ok {
		return in
	}
	return t.responses(ev.Event)
}

// common handles what every format shares: comments and blocks without
// data are pings, "[DONE]" is the final event, an event named "error" is
// an error. Otherwise it reads the event's top-level members and reports
// ok; data that is not a JSON object is then lifecycle.
func (t *topLevel) common(ev sse.Event) (Info, bool) {
	if ev.Comment || len(ev.Data) == 0 || ev.Event == "ping" || ev.Event == "keepalive" {
		return Info{Frame: watchdog.FramePing}, false
	}
	data := bytes.TrimSpace(ev.Data)
	if bytes.Equal(data, doneData) {
		return Info{Frame: watchdog.FrameDone, Terminal: true}, false
	}
	if ev.Event == "error" {
		return Info{Frame: watchdog.FrameError}, false
	}
	t.read(data)
	return Info{}, true
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
		return Info{Frame: watchdog.FrameError}
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
		in.Frame = watchdog.FrameContent
	case tool:
		in.Frame = watchdog.FrameToolCall
	case reasoning:
		in.Frame = watchdog.FrameReasoning
	case in.Usage && !in.Terminal:
		in.Frame = watchdog.FrameUsage
	default:
		in.Frame = watchdog.FrameLifecycle
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
		return Info{Frame: watchdog.FramePing}
	case "error":
		return Info{Frame: watchdog.FrameError}
	case "message_start":
		return Info{Frame: watchdog.FrameLifecycle, Usage: isObject(field(t.message, "usage"))}
	case "content_block_start":
		switch string(stringValue(field(t.block, "type"))) {
		case "thinking", "redacted_thinking":
			return Info{Frame: watchdog.FrameReasoning}
		case "tool_use", "server_tool_use", "mcp_tool_use":
			return Info{Frame: watchdog.FrameToolCall}
		case "text":
			if n := textBytes(field(t.block, "text")); n > 0 {
				return Info{Frame: watchdog.FrameContent, Bytes: n}
			}
		}
		return Info{Frame: watchdog.FrameLifecycle}
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
				return Info{Frame: watchdog.FrameContent, Bytes: n}
			}
			return Info{Frame: watchdog.FrameLifecycle}
		case "thinking_delta", "signature_delta", "redacted_thinking_delta":
			return Info{Frame: watchdog.FrameReasoning}
		case "input_json_delta":
			return Info{Frame: watchdog.FrameToolCall}
		}
		return Info{Frame: watchdog.FrameLifecycle}
	case "message_delta":
		in := Info{Frame: watchdog.FrameLifecycle, Usage: isObject(t.usage)}
		if present(field(t.delta, "stop_reason")) {
			in.Terminal = true
		}
		if in.Usage {
			in.Frame = watchdog.FrameUsage
		}
		return in
	case "message_stop":
		return Info{Frame: watchdog.FrameDone, Terminal: true}
	}
	if !t.object && typ == "" {
		return Info{Frame: watchdog.FramePing}
	}
	return Info{Frame: watchdog.FrameLifecycle}
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
			return Info{Frame: watchdog.FrameContent, Bytes: n}
		}
		return Info{Frame: watchdog.FrameLifecycle}
	case "response.completed", "response.incomplete":
		return Info{Frame: watchdog.FrameDone, Terminal: true, Usage: isObject(field(t.response, "usage"))}
	case "response.failed", "error":
		return Info{Frame: watchdog.FrameError}
	case "keepalive", "ping":
		return Info{Frame: watchdog.FramePing}
	case "response.output_item.added", "response.output_item.done":
		it := stringValue(field(t.item, "type"))
		switch {
		case string(it) == "reasoning":
			return Info{Frame: watchdog.FrameReasoning}
		case bytes.HasSuffix(it, []byte("_call")):
			return Info{Frame: watchdog.FrameToolCall}
		}
		return Info{Frame: watchdog.FrameLifecycle}
	}
	switch {
	case bytes.HasPrefix(typ, []byte("response.reasoning")):
		// reasoning_text / reasoning_summary_text / reasoning_summary_part
		return Info{Frame: watchdog.FrameReasoning}
	case bytes.HasPrefix(typ, []byte("response.function_call_arguments.")),
		bytes.HasPrefix(typ, []byte("response.custom_tool_call_input.")),
		bytes.HasPrefix(typ, []byte("response.mcp_call")),
		bytes.Contains(typ, []byte("_call.")),
		bytes.Contains(typ, []byte("_call_")):
		return Info{Frame: watchdog.FrameToolCall}
	}
	if !t.object && len(typ) == 0 {
		return Info{Frame: watchdog.FramePing}
	}
	return Info{Frame: watchdog.FrameLifecycle}
}
