package frames

import "bytes"

// Answer is what a whole (non-streamed) 2xx answer carries, read without
// decoding it: the UTF-8 bytes of its assistant text (refusals included),
// whether it calls a tool, whether it reasons. Known is false when the
// body does not have the format's answer shape (no "choices", "content"
// or "output" array): nothing is then known of it.
type Answer struct {
	Known     bool
	Bytes     int
	ToolCall  bool
	Reasoning bool
}

// Empty reports whether the answer is known to have neither text nor a
// tool call: an empty answer (docs/resilience.md §9), reasoning only or
// nothing.
func (a Answer) Empty() bool { return a.Known && a.Bytes == 0 && !a.ToolCall }

// array returns the member key of the JSON object body when it is an
// array, else nil.
func array(body []byte, key string) []byte {
	v := field(body, key)
	if len(v) < 2 || v[0] != '[' {
		return nil
	}
	return v
}

// AnswerReader reads a whole answer of its wire format. ChatAnswer,
// MessagesAnswer and ResponsesAnswer are the readers of the three formats.
type AnswerReader func(body []byte) Answer

// ChatAnswer reads an OpenAI Chat Completions (or legacy completions)
// answer: its choices' message content and refusal (or text), tool_calls
// and function_call, and reasoning_content / reasoning.
func ChatAnswer(body []byte) Answer {
	choices := array(body, "choices")
	a := Answer{Known: choices != nil}
	elements(choices, func(choice []byte) bool {
		members(choice, func(k, v []byte) bool {
			switch string(k) {
			case "message", "delta":
				members(v, func(mk, mv []byte) bool {
					a.chatMessageMember(mk, mv)
					return true
				})
			case "text":
				a.Bytes += textBytes(v)
			}
			return true
		})
		return true
	})
	return a
}

// chatMessageMember reads one member of a chat answer's message (or
// delta): its content and refusal (text or content parts), tool_calls and
// function_call, reasoning_content / reasoning.
func (a *Answer) chatMessageMember(k, v []byte) {
	switch string(k) {
	case "content", "refusal":
		a.Bytes += textBytes(v)
		if isNonEmptyArray(v) { // content parts
			a.Bytes += partsText(v)
		}
	case "tool_calls":
		a.ToolCall = a.ToolCall || isNonEmptyArray(v)
	case "function_call":
		a.ToolCall = a.ToolCall || isObject(v)
	case "reasoning_content", "reasoning":
		a.Reasoning = a.Reasoning || (isString(v) && len(v) > 2)
	}
}

// messagesBlock reads one content block of a Messages answer, by its
// type and text.
func (a *Answer) messagesBlock(typ, text []byte) {
	switch string(typ) {
	case "text":
		a.Bytes += textBytes(text)
	case "tool_use", "server_tool_use", "mcp_tool_use":
		a.ToolCall = true
	case "thinking", "redacted_thinking":
		a.Reasoning = true
	}
}

// responsesItem reads one output item of a Responses answer, by its type
// and content.
func (a *Answer) responsesItem(typ, content []byte) {
	switch {
	case string(typ) == "message":
		a.Bytes += partsText(content)
	case string(typ) == "reasoning":
		a.Reasoning = true
	case bytes.HasSuffix(typ, []byte("_call")):
		a.ToolCall = true
	}
}

// MessagesAnswer reads an Anthropic Messages answer: its content blocks
// (text, tool uses, thinking).
func MessagesAnswer(body []byte) Answer {
	content := array(body, "content")
	a := Answer{Known: content != nil}
	elements(content, func(block []byte) bool {
		var typ, text []byte
		members(block, func(k, v []byte) bool {
			switch string(k) {
			case "type":
				typ = stringValue(v)
			case "text":
				text = v
			}
			return true
		})
		a.messagesBlock(typ, text)
		return true
	})
	return a
}

// ResponsesAnswer reads an OpenAI Responses answer: its output items
// (message text and refusals, *_call items, reasoning).
func ResponsesAnswer(body []byte) Answer {
	output := array(body, "output")
	a := Answer{Known: output != nil}
	elements(output, func(item []byte) bool {
		typ := stringValue(field(item, "type"))
		var content []byte
		if string(typ) == "message" {
			content = field(item, "content")
		}
		a.responsesItem(typ, content)
		return true
	})
	return a
}

// partsText adds up the text of content parts ([{"type": "output_text" or
// "text" or "refusal", "text"/"refusal": ...}]).
func partsText(parts []byte) int {
	n := 0
	elements(parts, func(part []byte) bool {
		members(part, func(k, v []byte) bool {
			if string(k) == "text" || string(k) == "refusal" {
				n += textBytes(v)
			}
			return true
		})
		return true
	})
	return n
}
