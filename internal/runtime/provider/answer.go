package provider

import (
	"github.com/breakwater-dev/breakwater/internal/runtime/frames"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// answers[f] reads a whole 2xx answer of format f.
var answers = [wire.NumFormats]frames.AnswerReader{
	wire.FormatChat:      frames.ChatAnswer,
	wire.FormatMessages:  frames.MessagesAnswer,
	wire.FormatResponses: frames.ResponsesAnswer,
}

// EmptyAnswer reports whether a whole 2xx upstream answer (in the
// upstream's format, before translation) carries neither content nor a
// tool call: an empty answer (docs/resilience.md §9). It reads the body
// without decoding it and allocates nothing; a body it cannot read is not
// called empty.
func (e *Exchange) EmptyAnswer(body []byte) bool {
	read := answers[e.Upstream]
	return read != nil && read(body).Empty()
}
