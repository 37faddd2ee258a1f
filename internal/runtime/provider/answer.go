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

// validAnswers[f] reads a whole 2xx answer of format f while checking its
// grammar.
var validAnswers = [wire.NumFormats]frames.ValidReader{
	wire.FormatChat:      frames.ValidChatAnswer,
	wire.FormatMessages:  frames.ValidMessagesAnswer,
	wire.FormatResponses: frames.ValidResponsesAnswer,
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

// ValidAnswer is EmptyAnswer and the check that the body is one valid
// JSON object (wire.Valid's grammar, no whitespace around it) in a single
// pass: ok is false when it is not, and empty is then false.
func (e *Exchange) ValidAnswer(body []byte) (empty, ok bool) {
	read := validAnswers[e.Upstream]
	if read == nil {
		read = frames.ValidObject
	}
	a, ok := read(body)
	return ok && a.Empty(), ok
}
