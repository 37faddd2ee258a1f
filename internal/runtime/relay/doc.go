// Package relay relays one streamed upstream attempt to the client under
// the stream watchdogs, and decides when the stream is committed
// (docs/resilience.md §8, §9; docs/architecture.md, principle 7).
//
// # The two phases
//
// Prime reads the attempt up to its commit point without writing anything
// to the client, buffering the client-format bytes. Any failure before the
// commit point (an error event, an early EOF, a content stall, too-slow
// throughput, the idle timeout, the hard deadline, a read error) is
// returned as a *Failure with Committed false: nothing was sent, so the
// caller records the outcome and fails over to the next target
// transparently. Run then writes the buffered prefix and relays the rest,
// flushing after each event; a caller whose writer pulls the body (the
// HTTP server reads it as the response body) calls Next for each piece of
// client bytes and End once, instead. After the commit point a stream is never
// replayed: a failure ends it with one well-formed terminal error event in
// the client's wire format (no [DONE] or message_stop after it).
//
// # Commit point and its TTFB cost
//
// CommitFirstByte (the default) commits at the first upstream data event
// that produces client bytes and is not a keep-alive or an error: in
// practice Anthropic's message_start, the first Chat Completions chunk (the
// role chunk) or response.created. The client's time to first byte is the
// upstream's, plus the gateway hop. Failover covers HTTP errors, an error
// event as the first event, and a stall, EOF or timeout before that event.
//
// CommitFirstContent holds lifecycle and reasoning events back until the
// first output that answers: a non-empty text delta or a tool call (or the
// final event of an empty answer). A stream that sends message_start and
// then dies, errors (Anthropic's overloaded_error) or stalls before the
// first token still fails over transparently, and so does a turn of
// reasoning only (an empty answer, Stream.Empty, docs/resilience.md §9).
// The cost is time to first byte: the client sees nothing until the
// upstream's time to first token, which adds the model's prompt processing
// to TTFB (typically 0.2–2 s, tens of seconds for very long prompts; for a
// reasoning model, its whole thinking). Keep-alives received before the
// commit point are not forwarded, since response headers are not sent
// until it. A pre-commit buffer over 1 MiB commits early.
//
// Every watchdog applies in both phases: the content-stall watchdog, the
// throughput watchdog, the idle timeout and the hard deadline. An abort
// before the commit point fails over; after it, the stream ends with a
// terminal error event (never a replay). The throughput watchdog once
// judged only before the commit point; since its first judgement comes
// after warm-up plus one window (15 s by default) and CommitFirstByte
// commits at the first data event, it could never act in the default
// configuration, not even on docs/resilience.md §8's own example (warm-up
// 1 s, window 2 s, 10 B/s, only "x" sent → abort at 3000 ms).
//
// # Timers
//
// A stream costs no goroutine of its own: the goroutine that calls Prime,
// then Next (or Run), reads the upstream events itself. Before a read that
// may block it arms one alarm at the nearest deadline (stall, throughput,
// idle, hard deadline); on the system's timers the alarm is a
// time.AfterFunc, so nothing waits while a stream idles. When the alarm
// fires, the timer rules are applied: a rule that ends the stream ends the
// attempt (Attempt.Cancel, Body.Close), which fails the read in progress;
// otherwise the alarm is re-armed. The end of the context passed to Prime
// ends the attempt the same way. So every watchdog fires even when the
// upstream sends nothing. The alarm follows Config.Clock, so a test drives
// a stream of many minutes with a fake clock (a clock with timers of its
// own gets one goroutine that waits on them). An idle stream waits in a
// shallow frame (sse.Reader.Await), so the stack of the goroutine parked
// on it can shrink back. On any end the attempt is cancelled and its body
// closed before Prime, End, Run or Close returns: nothing outlives the
// stream. The idle timeout is reset by every event, keep-alives included
// (it detects a dead connection); keep-alives reset neither watchdog.
//
// # Finalisation
//
// Prime returns either a *Failure (the attempt is already cancelled and
// closed) or a *Stream. Run returns exactly one Result for the stream; the
// caller finalises the request once from it (usage accounting, the
// outcome: EndComplete is a success, EndFailed carries the Failure to
// record, EndClientGone is not upstream health; gate and semaphore
// release). A Stream that will not be Run must be Closed. A content stall
// is reported as Reason "stream_content_stall"; per §2 the caller records it
// on the connection without a cooldown unless stream_stall_cooldown is
// enabled (engine.ReasonStreamStall).
package relay
