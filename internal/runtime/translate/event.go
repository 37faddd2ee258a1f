package translate

import (
	"fmt"

	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Translator rewrites one upstream stream, event by event, into the other
// wire format; it satisfies relay.Translator. It is stateful and owned by a
// single stream: not safe for concurrent use.
type Translator interface {
	// Event translates one upstream event into zero or more client events.
	// It keeps no reference to ev's slices; the returned events own their
	// Data (only Event and Data are set). Comment events yield nothing. An
	// error means the upstream event was not valid for its format.
	Event(ev sse.Event) ([]sse.Event, error)
	// Finish is called once when the upstream body ended; it returns the
	// events still owed to the client (none when the upstream was
	// truncated before reporting a stop reason).
	Finish() []sse.Event
}

// FieldError is an untranslatable or malformed request field; callers
// answer it with 400 invalid_request_error naming Field. It is the same type
// as wire.FieldError so one errors.As check covers both.
type FieldError = wire.FieldError

// DefaultMaxTokens is the Anthropic max_tokens sent when an OpenAI request
// sets neither max_completion_tokens nor max_tokens.
const DefaultMaxTokens = 4096

func fieldErr(field, format string, args ...any) error {
	if len(args) > 0 {
		return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
	}
	return &FieldError{Field: field, Message: format}
}
