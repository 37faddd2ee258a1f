package relay

import "encoding/json"

// usageAcc accumulates the token usage a stream reports. Upstreams report
// it in different places: Chat Completions in a top-level usage object
// (prompt_tokens, completion_tokens), Anthropic in message_start's
// message.usage then cumulatively in message_delta's usage (input,
// cache and output tokens), Responses in response.completed's
// response.usage. Later values replace earlier ones field by field.
type usageAcc struct {
	input, cacheWrite, cacheRead, output int64
	seen                                 bool
}

type usageFields struct {
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
	InputTokens      *int64 `json:"input_tokens"`
	OutputTokens     *int64 `json:"output_tokens"`
	CacheWrite       *int64 `json:"cache_creation_input_tokens"`
	CacheRead        *int64 `json:"cache_read_input_tokens"`
}

type usageHolder struct {
	Usage *usageFields `json:"usage"`
}

type usageDoc struct {
	Usage    *usageFields `json:"usage"`
	Message  *usageHolder `json:"message"`
	Response *usageHolder `json:"response"`
}

// add reads the usage of one event's data; malformed data is ignored.
// It runs only on the few events that carry usage.
func (u *usageAcc) add(data []byte) {
	var d usageDoc
	if json.Unmarshal(data, &d) != nil {
		return
	}
	f := d.Usage
	if f == nil && d.Message != nil {
		f = d.Message.Usage
	}
	if f == nil && d.Response != nil {
		f = d.Response.Usage
	}
	if f == nil {
		return
	}
	u.seen = true
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&u.input, f.PromptTokens)
	set(&u.input, f.InputTokens)
	set(&u.cacheWrite, f.CacheWrite)
	set(&u.cacheRead, f.CacheRead)
	set(&u.output, f.CompletionTokens)
	set(&u.output, f.OutputTokens)
}

func (u *usageAcc) result() Usage {
	return Usage{PromptTokens: u.input + u.cacheWrite + u.cacheRead, CompletionTokens: u.output, Seen: u.seen}
}
