package mock

import "strconv"

// Anthropic Messages encoders. Streams follow the real event sequence:
// message_start, content_block_start, ping, content_block_delta...,
// content_block_stop, message_delta, message_stop.

const mockSignature = "EqQBCkYIBRgCKkBtb2NrLXNpZ25hdHVyZS1icmVha3dhdGVyLW1vY2stdXBzdHJlYW0tdGhpbmtpbmctYmxvY2sSDG1vY2tzaWduYXR1cmU="

func (c *call) textIndex() int64 {
	if c.reasoning != "" {
		return 1
	}
	return 0
}

func (c *call) anOutputTokens() int { return c.completionTokens() + c.reasoningTokens() }

func (c *call) anUsage(b []byte, output int) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(c.promptTokens-c.cachedTokens()), 10)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, int64(c.cachedTokens()), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(output), 10)
	return append(b, '}')
}

func (c *call) anMessageHead(b []byte) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, c.id...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	return appendJSONString(b, c.model)
}

func (c *call) anWhole(b []byte) []byte {
	b = c.anMessageHead(b)
	b = append(b, `,"content":[`...)
	if c.reasoning != "" {
		b = append(b, `{"type":"thinking","thinking":`...)
		b = appendJSONString(b, c.reasoning)
		b = append(b, `,"signature":"`+mockSignature+`"},`...)
	}
	b = append(b, `{"type":"text","text":`...)
	b = appendJSONString(b, c.text)
	b = append(b, `}],"stop_reason":"`...)
	b = append(b, c.stopReason()...)
	b = append(b, `","stop_sequence":null,"usage":`...)
	b = c.anUsage(b, c.anOutputTokens())
	return append(b, "}\n"...)
}

func anEvent(b []byte, name string) []byte {
	b = append(b, "event: "...)
	b = append(b, name...)
	return append(b, "\ndata: "...)
}

func (c *call) anStart(b []byte) []byte {
	b = anEvent(b, "message_start")
	b = append(b, `{"type":"message_start","message":`...)
	b = c.anMessageHead(b)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	b = c.anUsage(b, 1)
	return append(b, "}}\n\n"...)
}

func (c *call) anBlockStart(b []byte, index int64, block string) []byte {
	b = anEvent(b, "content_block_start")
	b = append(b, `{"type":"content_block_start","index":`...)
	b = strconv.AppendInt(b, index, 10)
	b = append(b, `,"content_block":`...)
	b = append(b, block...)
	b = append(b, "}\n\n"...)
	if !c.pinged {
		c.pinged = true
		b = append(b, "event: ping\ndata: {\"type\": \"ping\"}\n\n"...)
	}
	return b
}

func anBlockStop(b []byte, index int64) []byte {
	b = anEvent(b, "content_block_stop")
	b = append(b, `{"type":"content_block_stop","index":`...)
	b = strconv.AppendInt(b, index, 10)
	return append(b, "}\n\n"...)
}

// anReasoningStart opens the thinking block and sends one empty
// thinking_delta, as real streams sometimes do.
func (c *call) anReasoningStart(b []byte) []byte {
	b = c.anBlockStart(b, 0, `{"type":"thinking","thinking":"","signature":""}`)
	return c.anDelta(b, 0, "thinking_delta", "thinking", "")
}

// anReasoningEnd sends the signature_delta and closes the thinking block.
func (c *call) anReasoningEnd(b []byte) []byte {
	b = c.anDelta(b, 0, "signature_delta", "signature", mockSignature)
	return anBlockStop(b, 0)
}

func (c *call) anTextStart(b []byte) []byte {
	return c.anBlockStart(b, c.textIndex(), `{"type":"text","text":""}`)
}

func (c *call) anDelta(b []byte, index int64, deltaType, field, piece string) []byte {
	b = anEvent(b, "content_block_delta")
	b = append(b, `{"type":"content_block_delta","index":`...)
	b = strconv.AppendInt(b, index, 10)
	b = append(b, `,"delta":{"type":"`...)
	b = append(b, deltaType...)
	b = append(b, `","`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = appendJSONString(b, piece)
	return append(b, "}}\n\n"...)
}

func (c *call) anFinish(b []byte) []byte {
	b = anBlockStop(b, c.textIndex())
	b = anEvent(b, "message_delta")
	b = append(b, `{"type":"message_delta","delta":{"stop_reason":"`...)
	b = append(b, c.stopReason()...)
	b = append(b, `","stop_sequence":null},"usage":`...)
	b = c.anUsage(b, c.anOutputTokens())
	b = append(b, "}\n\n"...)
	b = anEvent(b, "message_stop")
	return append(b, `{"type":"message_stop"}`+"\n\n"...)
}

func anErrorEvent(b []byte, ee *ErrorEvent) []byte {
	typ, msg := ee.Type, ee.Message
	if typ == "" {
		typ = "overloaded_error"
	}
	if msg == "" {
		msg = "Overloaded"
	}
	b = anEvent(b, "error")
	b = append(b, `{"type":"error","error":{"type":`...)
	b = appendJSONString(b, typ)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, msg)
	return append(b, "}}\n\n"...)
}
