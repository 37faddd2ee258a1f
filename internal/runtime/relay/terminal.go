package relay

import (
	"encoding/json"

	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// errorType is the "type" of the gateway's terminal stream errors.
const errorType = "stream_error"

// messages are the client-facing texts of the failure reasons. They never
// carry upstream details.
var messages = map[string]string{
	ReasonUpstreamErrorEvent: "the upstream reported an error in the middle of the stream",
	ReasonContentStall:       "the upstream stopped producing output; the stream was ended by the content-stall watchdog",
	ReasonThroughputTooLow:   "the upstream produced output too slowly",
	ReasonEarlyEOF:           "the upstream stream ended before completion",
	ReasonIdleTimeout:        "the upstream sent no data within the idle timeout",
	ReasonAttemptDeadline:    "the upstream attempt exceeded its deadline",
	ReasonReadError:          "reading the upstream stream failed",
	ReasonTranslateError:     "the upstream stream could not be converted to this API's format",
	ReasonCancelled:          "the request was cancelled",
}

// appendTerminalError appends the event that ends a committed stream with
// failure f, in the client's wire format:
//
//	OpenAI Chat:  data: {"error":{"message":…,"type":"stream_error","code":…}}
//	Anthropic:    event: error / data: {"type":"error","error":{"type":"stream_error","code":…,"message":…}}
//	Responses:    event: error / data: {"type":"error","code":…,"message":…,"param":null}
//
// Nothing follows it (no [DONE], no message_stop).
func appendTerminalError(dst []byte, f wire.Format, fl *Failure) []byte {
	msg := messages[fl.Reason]
	if msg == "" {
		msg = "the upstream stream failed"
	}
	var doc any
	switch f {
	case wire.FormatMessages:
		doc = struct {
			Type  string   `json:"type"`
			Error errorObj `json:"error"`
		}{"error", errorObj{Type: errorType, Code: fl.Reason, Message: msg}}
		dst = append(dst, "event: error\n"...)
	case wire.FormatResponses:
		doc = struct {
			Type    string  `json:"type"`
			Code    string  `json:"code"`
			Message string  `json:"message"`
			Param   *string `json:"param"`
		}{"error", fl.Reason, msg, nil}
		dst = append(dst, "event: error\n"...)
	default:
		doc = struct {
			Error errorObj `json:"error"`
		}{errorObj{Type: errorType, Code: fl.Reason, Message: msg}}
	}
	b, err := json.Marshal(doc)
	if err != nil { // cannot happen: fixed shapes of strings
		b = []byte(`{"error":{"message":"stream failed","type":"stream_error"}}`)
	}
	dst = append(dst, "data: "...)
	dst = append(dst, b...)
	return append(dst, "\n\n"...)
}

type errorObj struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}
