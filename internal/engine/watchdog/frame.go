package watchdog

// Frame is what one stream event means to the watchdogs. The stream event
// readers of the provider side (runtime/frames) produce frames; the
// watchdogs never see wire formats.
type Frame int

// Frame kinds. Only FrameContent, FrameReasoning and FrameToolCall are
// model output; only FrameContent carries useful bytes.
const (
	// FrameLifecycle is structure or metadata: message/response start,
	// block start/stop of text, an empty text delta, a finish chunk.
	FrameLifecycle Frame = iota
	// FrameContent is a non-empty text delta of the assistant's answer.
	FrameContent
	// FrameReasoning is reasoning: thinking deltas (even empty), signatures,
	// redacted thinking, Responses reasoning items and summaries.
	FrameReasoning
	// FrameToolCall is a tool call being streamed.
	FrameToolCall
	// FramePing is a keep-alive: an SSE comment or a ping event.
	FramePing
	// FrameError is an error event from upstream.
	FrameError
	// FrameUsage is a usage-only event.
	FrameUsage
	// FrameDone is the stream's final event ([DONE], message_stop,
	// response.completed or response.incomplete).
	FrameDone
)

// String returns the frame kind's name.
func (f Frame) String() string {
	switch f {
	case FrameLifecycle:
		return "lifecycle"
	case FrameContent:
		return "content"
	case FrameReasoning:
		return "reasoning"
	case FrameToolCall:
		return "tool_call"
	case FramePing:
		return "ping"
	case FrameError:
		return "error"
	case FrameUsage:
		return "usage"
	case FrameDone:
		return "done"
	}
	return "unknown"
}

// Output reports whether the frame is model output (content, reasoning or a
// tool call), the progress the content-stall watchdog waits for.
func (f Frame) Output() bool {
	return f == FrameContent || f == FrameReasoning || f == FrameToolCall
}
