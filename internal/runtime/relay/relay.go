package relay

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/engine/watchdog"
	"github.com/breakwater-dev/breakwater/internal/runtime/frames"
	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Commit points (Config.CommitPoint).
const (
	// CommitFirstByte commits at the first client-visible data event.
	CommitFirstByte = "first_byte"
	// CommitFirstContent commits at the first model output that answers:
	// text or a tool call (reasoning before it is held back).
	CommitFirstContent = "first_content"
)

// ValidCommitPoint reports whether s names a commit point ("" is the
// default, first_byte).
func ValidCommitPoint(s string) bool {
	return s == "" || s == CommitFirstByte || s == CommitFirstContent
}

// Failure reasons (Failure.Reason). They are also the "code" of the
// terminal error event a committed stream ends with.
const (
	ReasonUpstreamErrorEvent = "upstream_error_event"
	ReasonContentStall       = "stream_content_stall"
	ReasonThroughputTooLow   = watchdog.ReasonThroughputTooLow
	ReasonEarlyEOF           = "stream_early_eof"
	ReasonIdleTimeout        = "idle_timeout"
	ReasonAttemptDeadline    = "attempt_deadline"
	ReasonReadError          = "read_error"
	ReasonTranslateError     = "translate_error"
	// ReasonCancelled is a local end (the context passed to Prime was
	// cancelled), not upstream health.
	ReasonCancelled = "cancelled"
)

const (
	// maxHoldback bounds the bytes buffered before the commit point.
	maxHoldback = 1 << 20
	// drainGrace is how long the final event may wait for the upstream's
	// end of body (read to EOF so the connection is reused).
	drainGrace = time.Second
)

// Translator converts upstream events into client-format events. The
// identity (a nil Translator) passes events through byte for byte. SSE
// comments (keep-alives) are format-neutral: the relay forwards them
// itself and never passes them to a Translator. A Translator is used by
// one goroutine at a time.
type Translator interface {
	// Event converts one upstream event. ev's slices are valid only during
	// the call; the returned events are serialised before the next call.
	Event(ev sse.Event) ([]sse.Event, error)
	// Finish returns the events that close the client stream cleanly once
	// the upstream stream has ended cleanly (may be nil). It is called at
	// most once, never after a failure.
	Finish() []sse.Event
}

// Config configures the relay of one attempt. The zero value relays an
// OpenAI Chat stream unchanged, commits at the first byte, runs the
// content-stall watchdog with its default budgets, and has no throughput
// watchdog, idle timeout or hard deadline.
type Config struct {
	// ClientFormat is the wire format the client speaks; terminal error
	// events are written in it.
	ClientFormat wire.Format
	// Events reads the upstream events into the frames the watchdogs
	// judge; the provider adapter supplies the reader of the upstream
	// format. Nil reads OpenAI Chat Completions events (frames.Chat).
	Events frames.Reader
	// CommitPoint is CommitFirstByte ("" or unknown) or CommitFirstContent.
	CommitPoint string
	// Stall configures the content-stall watchdog; zero budgets take the
	// defaults, Disabled turns it off.
	Stall watchdog.StallConfig
	// Throughput configures the throughput watchdog (normalised; off unless
	// Enabled). It judges in both phases: before the commit point a slow
	// attempt fails over, after it the stream ends with a terminal error.
	Throughput watchdog.ThroughputConfig
	// Idle ends the attempt when no event at all (keep-alives included)
	// arrives for this long; 0 disables it.
	Idle time.Duration
	// HardDeadline bounds the whole attempt from Attempt.Start, whatever
	// the output; 0 disables it.
	HardDeadline time.Duration
	// Clock tells the time and makes the timer every watchdog waits on;
	// nil is the system clock.
	Clock admission.Clock
	// Redact, when set, removes credentials from the data of an upstream
	// error event before it is relayed to the client after the commit
	// point (the one upstream text a committed stream passes on as it
	// came: an upstream may quote the gateway's key in it).
	Redact func([]byte) []byte

	// newTimer replaces the real timer in tests.
	newTimer func() timer
	// onBlock, when set (tests), is called each time the stream is about
	// to block waiting for upstream, the timer or the context.
	onBlock func()
}

// Attempt is one upstream streamed response whose status was 2xx.
type Attempt struct {
	// Body is the upstream response body. Close (or Cancel) must unblock
	// a Read in progress, as net/http bodies and io.Pipe do.
	Body io.ReadCloser
	// Cancel cancels the upstream request; may be nil.
	Cancel context.CancelFunc
	// Translator converts events to the client format; nil is the
	// identity.
	Translator Translator
	// Start is when the upstream request was sent; the first stall budget
	// and the hard deadline run from it. Zero means the call to Prime.
	Start time.Time
}

// Failure is how an attempt failed.
type Failure struct {
	// Reason is one of the Reason constants.
	Reason string
	// Status is the HTTP status that describes the failure to a client
	// (502, or 504 for the idle timeout and the hard deadline).
	Status int
	// Err describes the failure; it never holds credentials.
	Err error
	// Committed reports that the client had already been sent bytes: the
	// stream was ended with a terminal error event and must not be retried.
	Committed bool
	// Data is the upstream error event's data (ReasonUpstreamErrorEvent),
	// for classification.
	Data []byte
}

// Error implements error.
func (f *Failure) Error() string {
	if f.Err != nil {
		return f.Reason + ": " + f.Err.Error()
	}
	return f.Reason
}

// Unwrap returns the underlying error.
func (f *Failure) Unwrap() error { return f.Err }

// End is how a relayed stream ended.
type End int

// Stream ends.
const (
	// EndComplete: the upstream finished and the client got everything.
	EndComplete End = iota
	// EndClientGone: a write or flush to the client failed; the upstream
	// call was cancelled. Not upstream health.
	EndClientGone
	// EndFailed: the upstream failed after the commit point; the client got
	// a terminal error event. Result.Failure says why.
	EndFailed
)

// String returns the end's name.
func (e End) String() string {
	switch e {
	case EndComplete:
		return "complete"
	case EndClientGone:
		return "client_gone"
	case EndFailed:
		return "failed"
	}
	return "unknown"
}

// Usage is the token usage reported by the upstream stream.
type Usage struct {
	// PromptTokens counts input tokens, cache reads and writes included.
	PromptTokens int64
	// CompletionTokens counts output tokens (reasoning included).
	CompletionTokens int64
	// Seen reports that the stream carried a usage object.
	Seen bool
}

// Result is the single outcome of Run.
type Result struct {
	End     End
	Failure *Failure
	Usage   Usage
	// ContentBytes counts the useful text bytes (UTF-8) the upstream sent.
	ContentBytes int64
	// ToolCall reports that the upstream sent a tool call. A complete
	// stream with no content and no tool call is an empty answer
	// (reasoning only, or nothing): see Empty.
	ToolCall bool
	// FirstContentAt is when the first text delta arrived (zero if none).
	FirstContentAt time.Time
}

// Empty reports whether a stream that ended with r is an empty answer
// (docs/resilience.md §9): complete, with neither text nor a tool call.
func (r Result) Empty() bool {
	return r.End == EndComplete && r.ContentBytes == 0 && !r.ToolCall
}

// Stream is a primed attempt, committed to the client and ready to Run.
// Its methods are called by one goroutine, the one that reads the
// upstream: the watchdogs' alarm and the context's end reach it by
// ending the attempt (Attempt.Cancel, Body.Close), which fails the read.
type Stream struct {
	cfg   Config
	ctx   context.Context
	a     Attempt
	clk   admission.Clock
	clock func() time.Time
	r     *sse.Reader

	// mu guards the stream's state, shared by the reading goroutine and
	// the alarm (and the context's end); the reading goroutine holds it
	// except while it reads.
	mu sync.Mutex
	al *alarm
	// armedAt is the deadline the alarm is armed for (zero: disarmed).
	armedAt time.Time
	stopCtx func() bool
	// blocking: wait is about to read the next event (tests' onBlock is
	// told at its first read).
	blocking bool

	events    frames.Reader
	stall     watchdog.Stall
	tput      watchdog.Throughput
	start     time.Time
	lastEvent time.Time

	firstContent bool // commit point is first_content
	committed    bool
	terminal     bool // the model finished; an end of body is not early
	done         bool // the final event was seen; draining to EOF
	doneAt       time.Time
	ended        bool // upstream finished cleanly
	finished     bool // Translator.Finish emitted
	fail         *Failure
	out          []byte // client bytes not yet written
	pulled       bool   // Next has handed out the primed prefix
	handed       int    // bytes at the front of out the caller of Next holds

	usage    usageAcc
	res      Result
	ran      bool
	released bool
}

// Prime starts relaying attempt a and reads it up to the commit point
// under every watchdog, writing nothing to the client. On success the
// returned Stream holds the client-format bytes to write first, and owns
// the attempt. On a failure before the commit point it returns a *Failure
// (Committed false) after cancelling and closing the attempt; closing it
// again is harmless, and the caller fails over. A stream that ends cleanly
// before its commit point (an empty answer) is committed at its end.
// Prime is Prepare then Stream.Prime.
func Prime(ctx context.Context, cfg Config, a Attempt) (*Stream, *Failure) {
	return Prepare(cfg).Prime(ctx, a)
}

// Prepare makes ready the relay of an attempt under cfg before the
// attempt's answer is in: the stream's state, its event reader and its
// alarm's timer, so that a caller waiting for an upstream's first byte
// does that work in the wait rather than after the byte arrived. The
// returned Stream is started by its Prime method, once; one never primed
// holds nothing that needs releasing (its timer is made stopped, no
// goroutine runs for it).
func Prepare(cfg Config) *Stream {
	clk := cfg.Clock
	if clk == nil {
		clk = admission.SystemClock()
	}
	events := cfg.Events
	if events == nil {
		events = frames.Chat
	}
	s := &Stream{
		cfg:          cfg,
		events:       events,
		clk:          clk,
		clock:        clk.Now,
		firstContent: cfg.CommitPoint == CommitFirstContent,
	}
	s.r = sse.NewReader(upstreamBody{s})
	if cfg.newTimer == nil {
		// A test's timer starts a goroutine: made by Prime, which the
		// stream's end joins.
		s.al = newAlarm(clk, nil, &s.mu, s.alarm)
	}
	return s
}

// Prime starts relaying attempt a on a stream made by Prepare, as the
// function Prime does, and returns s itself on success. Call it once.
func (s *Stream) Prime(ctx context.Context, a Attempt) (*Stream, *Failure) {
	if ctx == nil {
		ctx = context.Background()
	}
	if a.Body == nil {
		if a.Cancel != nil {
			a.Cancel()
		}
		return nil, &Failure{Reason: ReasonReadError, Status: 502, Err: errors.New("relay: the attempt has no body")}
	}
	now := s.clock()
	start := a.Start
	if start.IsZero() || start.After(now) {
		start = now
	}
	s.ctx, s.a = ctx, a
	s.stall = watchdog.NewStall(s.cfg.Stall, start)
	s.tput = watchdog.NewThroughput(s.cfg.Throughput, start)
	s.start, s.lastEvent = start, now
	s.mu.Lock()
	if s.al == nil {
		s.al = newAlarm(s.clk, s.cfg.newTimer, &s.mu, s.alarm)
	}
	s.stopCtx = context.AfterFunc(ctx, s.ctxDone)
	for !s.committed && !s.over() {
		s.wait()
	}
	if f := s.fail; f != nil {
		s.release()
		s.mu.Unlock()
		s.al.join()
		return nil, f
	}
	s.mu.Unlock()
	return s, nil
}

// Empty reports whether the primed stream already ended — its final event
// arrived before the commit point — with neither text nor a tool call: an
// empty answer detected before any byte reached the client, which the
// caller may still fail over (then Close, not Run).
func (s *Stream) Empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fail == nil && (s.done || s.ended) && s.res.ContentBytes == 0 && !s.res.ToolCall
}

// Run writes the buffered prefix, then relays the rest of the stream to w,
// flushing after each event. It returns once, when the stream has ended:
//   - EndComplete after the upstream's final event (and any
//     Translator.Finish events) reached the client;
//   - EndFailed after a failure past the commit point, once the terminal
//     error event in the client's format was written;
//   - EndClientGone as soon as a write or flush fails; the upstream call is
//     cancelled at once.
//
// The attempt is cancelled and closed before Run returns. Call Run at most
// once; a later call (or a call after Close) returns without writing. Run
// is Next and End driven by a writer; a caller whose writer pulls (an
// io.Reader handed to the HTTP server) calls those itself.
func (s *Stream) Run(w *bufio.Writer) Result {
	s.mu.Lock()
	over := s.ran || s.released
	s.mu.Unlock()
	if over {
		return s.End(true)
	}
	gone := false
	for {
		b, more := s.Next()
		if !write(w, b) {
			gone = true
			break
		}
		if !more {
			break
		}
	}
	return s.End(gone)
}

// write writes b to w and flushes it; false means the client is gone.
func write(w *bufio.Writer, b []byte) bool {
	if len(b) > 0 {
		if _, err := w.Write(b); err != nil {
			return false
		}
	}
	return w.Flush() == nil
}

// Next relays the stream up to the next client bytes and returns them:
// first the prefix Prime buffered, then the bytes of each upstream event
// that produced some, and at the end the closing events or the terminal
// error event. The bytes are valid until the next call; the caller writes
// and flushes them before calling again. more is false once the stream
// has ended (b then holds its last bytes, possibly none): the caller
// writes them and calls End. Next reads upstream events under every
// watchdog in the calling goroutine.
func (s *Stream) Next() (b []byte, more bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ran || s.released {
		return nil, false
	}
	// The caller is done with the bytes handed out last; the alarm may
	// have appended a terminal error event after them meanwhile.
	s.out = s.out[:copy(s.out, s.out[s.handed:])]
	s.handed = 0
	if s.pulled {
		for len(s.out) == 0 && !s.over() {
			s.wait()
		}
	}
	s.pulled = true
	s.handed = len(s.out)
	return s.out[:s.handed:s.handed], !s.over()
}

// End ends the stream relayed with Next and returns its Result; gone
// reports that the client could not be written to (or that the caller
// stops before Next reported the end). The attempt is cancelled and
// closed before End returns. Calls after the first (or after Run) return
// the first Result; after Close, EndClientGone.
func (s *Stream) End(gone bool) Result {
	s.mu.Lock()
	defer s.al.join()
	defer s.mu.Unlock()
	if s.ran || s.released {
		if !s.ran {
			s.res.End = EndClientGone
		}
		s.ran = true
		return s.res
	}
	s.ran = true
	switch {
	case s.fail != nil:
		s.res.End = EndFailed
		s.res.Failure = s.fail
	case gone || !s.ended:
		s.res.End = EndClientGone
	default:
		s.res.End = EndComplete
	}
	s.release()
	s.res.Usage = s.usage.result()
	return s.res
}

// Close abandons a primed stream that will not be Run (for example when
// the response could not be started): it cancels and closes the attempt
// and stops its reader. It is idempotent and a no-op after Run.
func (s *Stream) Close() {
	s.mu.Lock()
	s.release()
	s.mu.Unlock()
	s.al.join()
}

// now reads the clock.
func (s *Stream) now() time.Time { return s.clock() }

// over reports whether the stream has ended, one way or the other.
func (s *Stream) over() bool { return s.fail != nil || s.ended }

// wait checks the timers, arms the alarm at the nearest deadline, then
// reads the next upstream event and handles it. It is called with s.mu
// held and returns with it held; the lock is let go during the read,
// which the alarm or the context's end may fail by ending the attempt.
func (s *Stream) wait() {
	now := s.now()
	s.checkTimers(now)
	if s.over() {
		return
	}
	if s.ctx.Err() != nil {
		s.cancelled()
		return
	}
	// An idle stream parks in Await: in a shallow frame, so that the
	// goroutine's stack can shrink back while it waits. Before a read
	// that may block, the reader arms the alarm (upstreamBody).
	s.blocking = true
	s.mu.Unlock()
	s.r.Await()
	s.step()
}

// upstreamBody is the attempt's body as the stream's sse.Reader reads it:
// the reader reads only when it has no whole event buffered, and before
// such a read, which may block, the alarm is armed at the nearest
// deadline. Events already buffered are handled without touching the
// alarm.
type upstreamBody struct{ s *Stream }

// Read implements io.Reader.
func (u upstreamBody) Read(p []byte) (int, error) {
	s := u.s
	s.mu.Lock()
	over := s.over() || s.released
	if !over {
		s.arm(s.now())
		if s.blocking && s.cfg.onBlock != nil {
			s.cfg.onBlock() // once per wait, not per read of a partial event
		}
		s.blocking = false
	}
	s.mu.Unlock()
	if over {
		return 0, errEnded
	}
	return s.a.Body.Read(p)
}

// errEnded is what a read returns once the stream has ended.
var errEnded = errors.New("relay: the stream has ended")

// step reads the next event (at once when Await brought it in) and, with
// s.mu taken again, handles what the read returned.
func (s *Stream) step() {
	ev, err := s.r.Next()
	s.mu.Lock()
	s.got(ev, err)
}

// got handles what a read returned.
func (s *Stream) got(ev sse.Event, err error) {
	switch {
	case s.over():
		// the alarm or the context ended the stream meanwhile
	case err != nil:
		s.onEnd(err)
	default:
		s.onEvent(ev, s.now())
	}
}

// arm arms the alarm at the nearest deadline (or disarms it).
func (s *Stream) arm(now time.Time) {
	if d, ok := s.nextDeadline(); !ok {
		if !s.armedAt.IsZero() {
			s.al.stop()
			s.armedAt = time.Time{}
		}
	} else if !d.Equal(s.armedAt) {
		s.al.reset(d.Sub(now))
		s.armedAt = d
	}
}

// alarm applies the timer rules when the alarm fires, on the alarm's
// goroutine: a rule that ends the stream ends the attempt, which fails
// the read in progress; otherwise the alarm is re-armed.
func (s *Stream) alarm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released || s.over() {
		return
	}
	s.armedAt = time.Time{}
	now := s.now()
	s.checkTimers(now)
	if s.over() {
		s.endAttempt()
		return
	}
	s.arm(now)
	if s.cfg.onBlock != nil {
		s.cfg.onBlock()
	}
}

// ctxDone ends the stream when its context is cancelled.
func (s *Stream) ctxDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released || s.over() {
		return
	}
	s.cancelled()
	s.endAttempt()
}

// endAttempt cancels the upstream call and closes its body, which makes
// a read in progress return.
func (s *Stream) endAttempt() {
	if s.a.Cancel != nil {
		s.a.Cancel()
	}
	if s.a.Body != nil {
		_ = s.a.Body.Close()
	}
}

// cancelled ends the stream because the context was cancelled.
func (s *Stream) cancelled() {
	s.failWith(ReasonCancelled, 503, fmt.Errorf("relay: %w", context.Cause(s.ctx)))
}

// nextDeadline returns the nearest time a timer rule may fire.
func (s *Stream) nextDeadline() (time.Time, bool) {
	var d time.Time
	take := func(t time.Time) {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	if s.done {
		take(s.doneAt.Add(drainGrace))
		return d, true
	}
	if s.cfg.HardDeadline > 0 {
		take(s.start.Add(s.cfg.HardDeadline))
	}
	if s.cfg.Idle > 0 {
		take(s.lastEvent.Add(s.cfg.Idle))
	}
	take(s.stall.Deadline())
	take(s.tput.NextCheck())
	return d, !d.IsZero()
}

// checkTimers applies every timer rule at now.
func (s *Stream) checkTimers(now time.Time) {
	if s.over() {
		return
	}
	if s.done {
		if !now.Before(s.doneAt.Add(drainGrace)) {
			s.ended = true
		}
		return
	}
	switch {
	case s.cfg.HardDeadline > 0 && !now.Before(s.start.Add(s.cfg.HardDeadline)):
		s.failWith(ReasonAttemptDeadline, 504, fmt.Errorf("relay: the attempt ran past its %s deadline", s.cfg.HardDeadline))
	case s.cfg.Idle > 0 && !now.Before(s.lastEvent.Add(s.cfg.Idle)):
		s.failWith(ReasonIdleTimeout, 504, fmt.Errorf("relay: no data from upstream for %s", s.cfg.Idle))
	case s.stall.Expired(now):
		s.failWith(ReasonContentStall, 502, fmt.Errorf("relay: no model output for %s", s.stall.Budget()))
	default:
		if abort, reason := s.tput.Check(now); abort {
			c := s.cfg.Throughput.Normalize()
			s.failWith(reason, 502, fmt.Errorf("relay: useful output below %d B/s (min %d bytes) over %s", c.MinBytesPerSecond, c.MinBytes, c.Window))
		}
	}
}

// onEvent handles one upstream event received at now.
func (s *Stream) onEvent(ev sse.Event, now time.Time) {
	s.lastEvent = now
	if s.done {
		return // nothing follows the final event
	}
	in := s.events(ev)
	s.stall.Observe(in.Frame, now)
	s.tput.Observe(in.Frame, in.Bytes, now)
	if in.Usage {
		s.usage.add(ev.Data)
	}
	if in.Frame == watchdog.FrameError {
		s.upstreamError(ev)
		return
	}
	switch in.Frame {
	case watchdog.FrameContent:
		s.res.ContentBytes += int64(in.Bytes)
		if s.res.FirstContentAt.IsZero() {
			s.res.FirstContentAt = now
		}
	case watchdog.FrameToolCall:
		s.res.ToolCall = true
	}
	if in.Terminal {
		s.terminal = true
	}
	before := len(s.out)
	if err := s.translate(ev); err != nil {
		s.failWith(ReasonTranslateError, 502, fmt.Errorf("relay: translating an upstream event: %w", err))
		return
	}
	if in.Frame == watchdog.FrameDone {
		s.done, s.doneAt = true, now
		s.finish()
		s.committed = true
		return
	}
	if !s.committed {
		switch {
		case len(s.out) > maxHoldback:
			s.committed = true
		case s.firstContent:
			// Text or a tool call; reasoning is held back, so that a turn
			// of reasoning only is still an empty answer before commit.
			s.committed = in.Frame == watchdog.FrameContent || in.Frame == watchdog.FrameToolCall
		default:
			s.committed = len(s.out) > before && in.Frame != watchdog.FramePing
		}
	}
}

// onEnd handles the end of the upstream body (err is io.EOF or a read
// error).
func (s *Stream) onEnd(err error) {
	if s.done || s.terminal {
		s.finish()
		s.committed = true
		s.ended = true
		return
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		s.failWith(ReasonEarlyEOF, 502, errors.New("relay: the upstream stream ended before its final event"))
		return
	}
	s.failWith(ReasonReadError, 502, fmt.Errorf("relay: reading the upstream stream: %w", err))
}

// translate appends ev, converted to the client format, to the pending
// client bytes.
func (s *Stream) translate(ev sse.Event) error {
	if s.a.Translator == nil || ev.Comment {
		// Comments (keep-alives) mean the same in every format.
		if ev.Raw != nil {
			s.out = append(s.out, ev.Raw...)
		} else {
			s.out = sse.AppendEvent(s.out, ev)
		}
		return nil
	}
	evs, err := s.a.Translator.Event(ev)
	if err != nil {
		return err
	}
	for _, e := range evs {
		s.out = sse.AppendEvent(s.out, e)
	}
	return nil
}

// finish appends the Translator's closing events, once.
func (s *Stream) finish() {
	if s.finished {
		return
	}
	s.finished = true
	if s.a.Translator == nil {
		return
	}
	for _, e := range s.a.Translator.Finish() {
		s.out = sse.AppendEvent(s.out, e)
	}
}

// upstreamError handles an error event from upstream. Before the commit
// point it is a plain failure; after it the client gets the translated
// error event (or the gateway's own when the translation yields nothing).
func (s *Stream) upstreamError(ev sse.Event) {
	f := &Failure{
		Reason:    ReasonUpstreamErrorEvent,
		Status:    502,
		Err:       errors.New("relay: the upstream sent an error event"),
		Committed: s.committed,
		Data:      append([]byte(nil), ev.Data...),
	}
	s.fail = f
	if !s.committed {
		s.out = s.out[:0]
		return
	}
	if s.cfg.Redact != nil {
		if data := s.cfg.Redact(ev.Data); !bytes.Equal(data, ev.Data) {
			ev.Data, ev.Raw = data, nil // re-serialised from the redacted data
		}
	}
	before := len(s.out)
	if err := s.translate(ev); err != nil || len(s.out) == before {
		s.out = s.out[:before]
		s.out = appendTerminalError(s.out, s.cfg.ClientFormat, f)
	}
}

// failWith ends the stream with a failure; after the commit point the
// terminal error event is appended to the client bytes.
func (s *Stream) failWith(reason string, status int, err error) {
	f := &Failure{Reason: reason, Status: status, Err: err, Committed: s.committed}
	s.fail = f
	if !s.committed {
		s.out = s.out[:0]
		return
	}
	s.out = appendTerminalError(s.out, s.cfg.ClientFormat, f)
}

// release stops the alarm and the context's watch, and cancels and
// closes the attempt. It is called with s.mu held; the caller joins the
// alarm (s.al.join) once it has let go of the lock.
func (s *Stream) release() {
	if s.released {
		return
	}
	s.released = true
	s.al.stop()
	s.al.close()
	s.stopCtx()
	s.endAttempt()
}
