package mock

import "strconv"

// OpenAI Responses encoders: a minimal text-only subset (one message item
// with one output_text part; no reasoning items, no tools).

func (c *call) rsEvent(b []byte, name string) []byte {
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, name...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, int64(c.seq), 10)
	c.seq++
	return b
}

func (c *call) rsItem(b []byte, done bool) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, c.itemID...)
	b = append(b, `","type":"message","status":`...)
	if !done {
		return append(b, `"in_progress","role":"assistant","content":[]}`...)
	}
	b = append(b, `"`...)
	b = append(b, c.rsStatus()...)
	b = append(b, `","role":"assistant","content":[`...)
	b = rsPart(b, c.text)
	return append(b, "]}"...)
}

func rsPart(b []byte, text string) []byte {
	b = append(b, `{"type":"output_text","text":`...)
	b = appendJSONString(b, text)
	return append(b, `,"annotations":[]}`...)
}

func (c *call) rsResponse(b []byte, done bool) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, c.id...)
	b = append(b, `","object":"response","created_at":`...)
	b = strconv.AppendInt(b, c.created, 10)
	if done {
		b = append(b, `,"status":"`...)
		b = append(b, c.rsStatus()...)
		b = append(b, `"`...)
		if c.rsStatus() == "incomplete" {
			b = append(b, `,"incomplete_details":{"reason":"max_output_tokens"}`...)
		}
	} else {
		b = append(b, `,"status":"in_progress"`...)
	}
	b = append(b, `,"model":`...)
	b = appendJSONString(b, c.model)
	if !done {
		return append(b, `,"output":[],"usage":null}`...)
	}
	b = append(b, `,"output":[`...)
	if c.tool != nil {
		b = c.rsToolItem(b, true)
	} else {
		b = c.rsItem(b, true)
	}
	out := c.completionTokens()
	b = append(b, `],"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(c.promptTokens), 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(c.cachedTokens()), 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, int64(out), 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":`...)
	b = strconv.AppendInt(b, int64(c.promptTokens+out), 10)
	return append(b, "}}"...)
}

// rsResponseEvent is an event carrying the whole response (created,
// in_progress, completed).
func (c *call) rsResponseEvent(b []byte, name string, done bool) []byte {
	b = c.rsEvent(b, name)
	b = append(b, `,"response":`...)
	b = c.rsResponse(b, done)
	return append(b, "}\n\n"...)
}

func (c *call) rsWhole(b []byte) []byte {
	b = c.rsResponse(b, true)
	return append(b, '\n')
}

func (c *call) rsPartRef(b []byte) []byte {
	b = append(b, `,"item_id":"`...)
	b = append(b, c.itemID...)
	return append(b, `","output_index":0,"content_index":0`...)
}

func (c *call) rsStart(b []byte) []byte {
	b = c.rsResponseEvent(b, "response.created", false)

	b = c.rsEvent(b, "response.output_item.added")
	b = append(b, `,"output_index":0,"item":`...)
	b = c.rsItem(b, false)
	b = append(b, "}\n\n"...)

	b = c.rsEvent(b, "response.content_part.added")
	b = c.rsPartRef(b)
	b = append(b, `,"part":`...)
	b = rsPart(b, "")
	return append(b, "}\n\n"...)
}

func (c *call) rsDelta(b []byte, piece string) []byte {
	b = c.rsEvent(b, "response.output_text.delta")
	b = c.rsPartRef(b)
	b = append(b, `,"delta":`...)
	b = appendJSONString(b, piece)
	return append(b, "}\n\n"...)
}

func (c *call) rsFinish(b []byte) []byte {
	b = c.rsEvent(b, "response.output_text.done")
	b = c.rsPartRef(b)
	b = append(b, `,"text":`...)
	b = appendJSONString(b, c.text)
	b = append(b, "}\n\n"...)

	b = c.rsEvent(b, "response.content_part.done")
	b = c.rsPartRef(b)
	b = append(b, `,"part":`...)
	b = rsPart(b, c.text)
	b = append(b, "}\n\n"...)

	b = c.rsEvent(b, "response.output_item.done")
	b = append(b, `,"output_index":0,"item":`...)
	b = c.rsItem(b, true)
	b = append(b, "}\n\n"...)

	if c.rsStatus() == "incomplete" {
		return c.rsResponseEvent(b, "response.incomplete", true)
	}
	return c.rsResponseEvent(b, "response.completed", true)
}

// rsStatus is the status of a finished Responses text answer: completed,
// or incomplete when the step truncates it.
func (c *call) rsStatus() string {
	if c.step.Truncated && c.tool == nil {
		return "incomplete"
	}
	return "completed"
}

func (c *call) rsErrorEvent(b []byte, ee *ErrorEvent) []byte {
	typ, msg := ee.Type, ee.Message
	if typ == "" {
		typ = "server_error"
	}
	if msg == "" {
		msg = "The server had an error while processing your request. Sorry about that!"
	}
	b = c.rsEvent(b, "error")
	b = append(b, `,"code":`...)
	b = appendJSONString(b, typ)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, msg)
	return append(b, `,"param":null}`+"\n\n"...)
}
