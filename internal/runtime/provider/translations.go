package provider

import (
	"github.com/breakwater-dev/breakwater/internal/runtime/frames"
	"github.com/breakwater-dev/breakwater/internal/runtime/translate"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// translation carries one client format to one upstream format and back,
// or answers the client without an upstream call (local).
type translation struct {
	// request turns a client body into the upstream body for model.
	request func(b *Body, model string) ([]byte, error)
	// response turns a whole 2xx upstream answer into the client's.
	response func(b *Body, body []byte, model string) ([]byte, error)
	// error turns an upstream error body into the client's error shape.
	error func(status int, body []byte) []byte
	// stream returns a translator of the upstream event stream.
	stream func(b *Body, model string) translate.Translator
	// local, when set, is the gateway's own answer: the pair makes no
	// upstream call.
	local func(b *Body) ([]byte, error)
}

// translations[client][upstream] is the translation of a format pair; a
// pair without an entry cannot be served (the same format needs none).
// Adding a translator for a new pair is one entry here.
var translations = [wire.NumFormats][wire.NumFormats]*translation{
	wire.FormatChat: {
		wire.FormatMessages: {
			request:  bytesIn(translate.OpenAIToAnthropicRequest),
			response: bytesOut(translate.AnthropicToOpenAIResponse),
			error:    translate.ErrorToOpenAI,
			stream:   modelOnly(translate.NewAnthropicToOpenAIStream),
		},
	},
	wire.FormatMessages: {
		wire.FormatChat: {
			request:  bytesIn(translate.AnthropicToOpenAIRequest),
			response: bytesOut(translate.OpenAIToAnthropicResponse),
			error:    translate.ErrorToAnthropic,
			stream:   modelOnly(translate.NewOpenAIToAnthropicStream),
		},
	},
	// The Responses API, statelessly: ParseResponses once per request
	// (Body), then the Chat Completions or Messages form and back.
	wire.FormatResponses: {
		wire.FormatChat: viaResponses((*translate.ResponsesCall).ChatRequest,
			(*translate.ResponsesCall).ChatResponse, (*translate.ResponsesCall).NewChatStream),
		wire.FormatMessages: viaResponses((*translate.ResponsesCall).AnthropicRequest,
			(*translate.ResponsesCall).AnthropicResponse, (*translate.ResponsesCall).NewAnthropicStream),
	},
	// count_tokens on a kind that cannot count: the documented estimate
	// (translate.CountTokens), answered by the gateway.
	wire.FormatCountTokens: {
		wire.FormatChat: {local: func(b *Body) ([]byte, error) { return translate.CountTokens(b.Bytes) }},
	},
}

// viaResponses is the translation of the Responses API to one upstream
// format through the request's translate.ResponsesCall, parsed once
// (Body): its request, answer and stream translators for that format.
func viaResponses(
	request func(*translate.ResponsesCall, string) ([]byte, error),
	response func(*translate.ResponsesCall, []byte, string) ([]byte, error),
	stream func(*translate.ResponsesCall, string) translate.Translator,
) *translation {
	return &translation{
		request: func(b *Body, model string) ([]byte, error) {
			c, err := b.responses()
			if err != nil {
				return nil, err
			}
			return request(c, model)
		},
		response: func(b *Body, body []byte, model string) ([]byte, error) {
			c, err := b.responses()
			if err != nil {
				return nil, err
			}
			return response(c, body, model)
		},
		error: translate.ErrorToOpenAI,
		stream: func(b *Body, model string) translate.Translator {
			c, _ := b.responses() // parsed by request, before any stream
			return stream(c, model)
		},
	}
}

// bytesIn adapts a stateless request translator.
func bytesIn(f func(body []byte, model string) ([]byte, error)) func(*Body, string) ([]byte, error) {
	return func(b *Body, model string) ([]byte, error) { return f(b.Bytes, model) }
}

// bytesOut adapts a stateless answer translator.
func bytesOut(f func(body []byte, model string) ([]byte, error)) func(*Body, []byte, string) ([]byte, error) {
	return func(_ *Body, body []byte, model string) ([]byte, error) { return f(body, model) }
}

// modelOnly adapts a stateless stream translator.
func modelOnly(f func(model string) translate.Translator) func(*Body, string) translate.Translator {
	return func(_ *Body, model string) translate.Translator { return f(model) }
}

// readers[f] reads the stream events of format f for the watchdogs
// (legacy completions chunks are Chat Completions chunks with choices[].text).
var readers = [wire.NumFormats]frames.Reader{
	wire.FormatChat:        frames.Chat,
	wire.FormatMessages:    frames.Messages,
	wire.FormatResponses:   frames.Responses,
	wire.FormatCompletions: frames.Chat,
}

// pairs[from][to] is the exchange of a format pair, nil when there is no
// translation (Translation).
var pairs = func() (out [wire.NumFormats][wire.NumFormats]*Exchange) {
	for from := range wire.NumFormats {
		for to := range wire.NumFormats {
			switch t := translations[from][to]; {
			case from == to:
				out[from][to] = &Exchange{Client: from, Upstream: to, events: readers[to]}
			case t != nil:
				out[from][to] = &Exchange{Client: from, Upstream: to, events: readers[to], t: t}
			}
		}
	}
	return out
}()
