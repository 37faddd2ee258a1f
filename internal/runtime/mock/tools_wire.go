package mock

import "strconv"

// Encoders of tool-call answers in the three generation formats.

// argPieces cuts the arguments into the two fragments a stream sends.
func (c *call) argPieces() []string {
	return splitRunes(c.tool.args, 2)
}

// Chat Completions.

func (c *call) oaToolCall(b []byte, withArgs bool) []byte {
	b = append(b, `{"index":0,"id":"`...)
	b = append(b, c.tool.id...)
	b = append(b, `","type":"function","function":{"name":`...)
	b = appendJSONString(b, c.tool.name)
	b = append(b, `,"arguments":`...)
	if withArgs {
		b = appendJSONString(b, c.tool.args)
	} else {
		b = append(b, `""`...)
	}
	return append(b, "}}"...)
}

func (c *call) oaToolWhole(b []byte) []byte {
	b = c.oaHead(b, "chat.completion")
	b = append(b, `{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[`...)
	b = c.oaToolCall(b, true)
	b = append(b, `],"refusal":null},"logprobs":null,"finish_reason":"tool_calls"}],"usage":`...)
	b = c.oaUsage(b)
	return append(b, "}\n"...)
}

func (c *call) oaToolChunk(b []byte, delta func([]byte) []byte, finish string) []byte {
	b = append(b, "data: "...)
	b = c.oaHead(b, "chat.completion.chunk")
	b = append(b, `{"index":0,"delta":`...)
	b = delta(b)
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	if finish == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, finish)
	}
	b = append(b, "}]"...)
	if c.includeUsage {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

func (c *call) oaToolStream(b []byte) []byte {
	b = c.oaToolChunk(b, func(b []byte) []byte {
		b = append(b, `{"role":"assistant","content":null,"tool_calls":[`...)
		b = c.oaToolCall(b, false)
		return append(b, "]}"...)
	}, "")
	for _, piece := range c.argPieces() {
		b = c.oaToolChunk(b, func(b []byte) []byte {
			b = append(b, `{"tool_calls":[{"index":0,"function":{"arguments":`...)
			b = appendJSONString(b, piece)
			return append(b, "}}]}"...)
		}, "")
	}
	b = c.oaToolChunk(b, func(b []byte) []byte { return append(b, "{}"...) }, "tool_calls")
	if c.includeUsage {
		b = append(b, "data: "...)
		b = c.oaHead(b, "chat.completion.chunk")
		b = append(b, `],"usage":`...)
		b = c.oaUsage(b)
		b = append(b, "}\n\n"...)
	}
	return append(b, "data: [DONE]\n\n"...)
}

// Anthropic Messages.

func (c *call) anToolWhole(b []byte) []byte {
	b = c.anMessageHead(b)
	b = append(b, `,"content":[{"type":"tool_use","id":"`...)
	b = append(b, c.tool.id...)
	b = append(b, `","name":`...)
	b = appendJSONString(b, c.tool.name)
	b = append(b, `,"input":`...)
	b = append(b, c.tool.args...)
	b = append(b, `}],"stop_reason":"tool_use","stop_sequence":null,"usage":`...)
	b = c.anUsage(b, c.anOutputTokens())
	return append(b, "}\n"...)
}

func (c *call) anToolStream(b []byte) []byte {
	b = c.anStart(b)
	block := `{"type":"tool_use","id":"` + c.tool.id + `","name":` + string(appendJSONString(nil, c.tool.name)) + `,"input":{}}`
	b = c.anBlockStart(b, 0, block)
	for _, piece := range c.argPieces() {
		b = c.anDelta(b, 0, "input_json_delta", "partial_json", piece)
	}
	b = anBlockStop(b, 0)
	b = anEvent(b, "message_delta")
	b = append(b, `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":`...)
	b = c.anUsage(b, c.anOutputTokens())
	b = append(b, "}\n\n"...)
	b = anEvent(b, "message_stop")
	return append(b, `{"type":"message_stop"}`+"\n\n"...)
}

// OpenAI Responses.

func (c *call) rsToolItem(b []byte, done bool) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, c.tool.itemID...)
	b = append(b, `","type":"function_call","status":`...)
	if done {
		b = append(b, `"completed","arguments":`...)
		b = appendJSONString(b, c.tool.args)
	} else {
		b = append(b, `"in_progress","arguments":""`...)
	}
	b = append(b, `,"call_id":"`...)
	b = append(b, c.tool.id...)
	b = append(b, `","name":`...)
	b = appendJSONString(b, c.tool.name)
	if c.tool.namespace != "" {
		b = append(b, `,"namespace":`...)
		b = appendJSONString(b, c.tool.namespace)
	}
	return append(b, '}')
}

func (c *call) rsToolStream(b []byte) []byte {
	b = c.rsResponseEvent(b, "response.created", false)

	b = c.rsResponseEvent(b, "response.in_progress", false)

	b = c.rsEvent(b, "response.output_item.added")
	b = append(b, `,"output_index":0,"item":`...)
	b = c.rsToolItem(b, false)
	b = append(b, "}\n\n"...)

	ref := `,"item_id":"` + c.tool.itemID + `","output_index":0`
	for _, piece := range c.argPieces() {
		b = c.rsEvent(b, "response.function_call_arguments.delta")
		b = append(b, ref...)
		b = append(b, `,"delta":`...)
		b = appendJSONString(b, piece)
		b = append(b, "}\n\n"...)
	}
	b = c.rsEvent(b, "response.function_call_arguments.done")
	b = append(b, ref...)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, c.tool.name)
	b = append(b, `,"arguments":`...)
	b = appendJSONString(b, c.tool.args)
	b = append(b, "}\n\n"...)

	b = c.rsEvent(b, "response.output_item.done")
	b = append(b, `,"output_index":0,"item":`...)
	b = c.rsToolItem(b, true)
	b = append(b, "}\n\n"...)

	return c.rsResponseEvent(b, "response.completed", true)
}

// toolIDs gives the call its ids in the wire format's style.
func (c *call) toolIDs() {
	n := c.s.idSeq.Add(1)
	suffix := c.s.idPrefix + strconv.FormatUint(n+1<<40, 36)
	switch c.wire {
	case wireAnthropic:
		c.tool.id = "toolu_01" + suffix
	default:
		c.tool.id = "call_" + suffix
		c.tool.itemID = "fc_" + suffix
	}
}
