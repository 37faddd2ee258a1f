package provider

import (
	"github.com/breakwater-dev/breakwater/internal/runtime/frames"
	"github.com/breakwater-dev/breakwater/internal/runtime/translate"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// translation carries one client format to one upstream format and back.
type translation struct {
	// request turns a client body into the upstream body for model.
	request func(body []byte, model string) ([]byte, error)
	// response turns a whole 2xx upstream answer into the client's.
	response func(body []byte, model string) ([]byte, error)
	// error turns an upstream error body into the client's error shape.
	error func(status int, body []byte) []byte
	// stream returns a translator of the upstream event stream.
	stream func(model string) translate.Translator
}

// translations[client][upstream] is the translation of a format pair; a
// pair without an entry cannot be served (the same format needs none).
// Adding a translator for a new pair is one entry here.
var translations = [wire.NumFormats][wire.NumFormats]*translation{
	wire.FormatChat: {
		wire.FormatMessages: {
			request:  translate.OpenAIToAnthropicRequest,
			response: translate.AnthropicToOpenAIResponse,
			error:    translate.ErrorToOpenAI,
			stream:   translate.NewAnthropicToOpenAIStream,
		},
	},
	wire.FormatMessages: {
		wire.FormatChat: {
			request:  translate.AnthropicToOpenAIRequest,
			response: translate.OpenAIToAnthropicResponse,
			error:    translate.ErrorToAnthropic,
			stream:   translate.NewOpenAIToAnthropicStream,
		},
	},
}

// readers[f] reads the stream events of format f for the watchdogs.
var readers = [wire.NumFormats]frames.Reader{
	wire.FormatChat:      frames.Chat,
	wire.FormatMessages:  frames.Messages,
	wire.FormatResponses: frames.Responses,
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
