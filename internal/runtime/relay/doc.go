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
// flushing after each event. After the commit point a stream is never
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
// One reader goroutine per attempt reads events and hands them over a
// channel; the relaying goroutine waits on that channel and one timer armed
// at the nearest deadline (stall, throughput, idle, hard deadline), so every
// watchdog fires even when the upstream sends nothing. The timer is the
// Config.Clock's, so a test drives a stream of many minutes with a fake
// clock. On any end the
// attempt is cancelled (Attempt.Cancel), its body closed, and the reader
// goroutine joined before Prime, Run or Close returns: no goroutine
// outlives the stream. The idle timeout is reset by every event, keep-alives
// included (it detects a dead connection); keep-alives reset neither
// watchdog.
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
