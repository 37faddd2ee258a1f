package mock

import "strconv"

// OpenAI Chat Completions encoders. Each appends complete JSON (or SSE
// frames) to b.

func (c *call) oaUsage(b []byte) []byte {
	completion := c.completionTokens() + c.reasoningTokens()
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(c.promptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(c.promptTokens+completion), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(c.cachedTokens()), 10)
	b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(c.reasoningTokens()), 10)
	return append(b, `}}`...)
}

func (c *call) oaHead(b []byte, object string) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, c.id...)
	b = append(b, `","object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, c.created, 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, c.model)
	return append(b, `,"system_fingerprint":"fp_mock","choices":[`...)
}

func (c *call) oaWhole(b []byte) []byte {
	b = c.oaHead(b, "chat.completion")
	b = append(b, `{"index":0,"message":{"role":"assistant","content":`...)
	b = appendJSONString(b, c.text)
	if c.reasoning != "" {
		b = append(b, `,"reasoning_content":`...)
		b = appendJSONString(b, c.reasoning)
	}
	b = append(b, `,"refusal":null},"logprobs":null,"finish_reason":"`...)
	b = append(b, c.finishReason()...)
	b = append(b, `"}],"usage":`...)
	b = c.oaUsage(b)
	return append(b, "}\n"...)
}

// oaDelta is one streamed chunk whose delta carries field (content or
// reasoning_content); the first chunk also carries the role.
func (c *call) oaDelta(b []byte, field, piece string) []byte {
	b = append(b, "data: "...)
	b = c.oaHead(b, "chat.completion.chunk")
	b = append(b, `{"index":0,"delta":{`...)
	if c.first {
		b = append(b, `"role":"assistant",`...)
		c.first = false
	}
	b = append(b, '"')
	b = append(b, field...)
	b = append(b, `":`...)
	b = appendJSONString(b, piece)
	b = append(b, `},"logprobs":null,"finish_reason":null}]`...)
	if c.includeUsage {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

// oaFinish is the finish_reason chunk, the usage chunk when
// stream_options.include_usage is set, and [DONE].
func (c *call) oaFinish(b []byte) []byte {
	b = append(b, "data: "...)
	b = c.oaHead(b, "chat.completion.chunk")
	b = append(b, `{"index":0,"delta":{`...)
	if c.first {
		b = append(b, `"role":"assistant"`...)
		c.first = false
	}
	b = append(b, `},"logprobs":null,"finish_reason":"`...)
	b = append(b, c.finishReason()...)
	b = append(b, `"}]`...)
	if c.includeUsage {
		b = append(b, `,"usage":null}`...)
		b = append(b, "\n\ndata: "...)
		b = c.oaHead(b, "chat.completion.chunk")
		b = append(b, `],"usage":`...)
		b = c.oaUsage(b)
	}
	return append(b, "}\n\ndata: [DONE]\n\n"...)
}

func oaErrorEvent(b []byte, ee *ErrorEvent) []byte {
	typ, msg := ee.Type, ee.Message
	if typ == "" {
		typ = "server_error"
	}
	if msg == "" {
		msg = "The server had an error while processing your request. Sorry about that!"
	}
	b = append(b, `data: {"error":{"message":`...)
	b = appendJSONString(b, msg)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, typ)
	return append(b, `,"param":null,"code":null}}`+"\n\n"...)
}
