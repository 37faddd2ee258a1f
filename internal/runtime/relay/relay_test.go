package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/engine/watchdog"
	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Real-shaped upstream events.
const (
	oaRole    = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
	oaHello   = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n"
	oaWorld   = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" world\"},\"finish_reason\":null}]}\n\n"
	oaThink   = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hmm\"},\"finish_reason\":null}]}\n\n"
	oaFinish  = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
	oaUsage   = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11}}\n\n"
	oaDone    = "data: [DONE]\n\n"
	oaError   = "data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n"
	keepAlive = ": keep-alive\n\n"

	anStart      = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n"
	anBlockText  = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	anBlockThink = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n"
	anPing       = "event: ping\ndata: {\"type\": \"ping\"}\n\n"
	anText       = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	anThinkEmpty = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"\"}}\n\n"
	anThink      = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"step\"}}\n\n"
	anSignature  = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQB\"}}\n\n"
	anBlockStop  = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	anMsgDelta   = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n"
	anMsgStop    = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	anOverloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
)

func anthropicCfg(commit string) Config {
	return Config{ClientFormat: wire.FormatMessages, Events: readerOf(wire.FormatMessages), CommitPoint: commit,
		Stall: watchdog.StallConfig{FirstContent: 10 * time.Second, BetweenContent: 10 * time.Second}}
}

func openaiCfg(commit string) Config {
	return Config{CommitPoint: commit, Stall: watchdog.StallConfig{FirstContent: 10 * time.Second, BetweenContent: 10 * time.Second}}
}

func assertFailure(t *testing.T, f *Failure, reason string, status int, committed bool) {
	t.Helper()
	if f == nil {
		t.Fatalf("no failure, want %s", reason)
	}
	if f.Reason != reason || f.Status != status || f.Committed != committed || f.Err == nil {
		t.Fatalf("failure = {%s %d committed=%v err=%v}, want {%s %d committed=%v}", f.Reason, f.Status, f.Committed, f.Err, reason, status, committed)
	}
}

// A stream that sends two lifecycle events and stalls before its commit
// point fails without a byte for the client, and the attempt is cancelled:
// the caller fails over and the client sees one clean stream.
func TestPreCommitStallFailsOver(t *testing.T) {
	h := newHarness(t, anthropicCfg(CommitFirstContent))
	ch := h.prime()
	h.send(anStart, anBlockText, anPing)
	assertPending(t, ch)
	if h.advance(10*time.Second - time.Millisecond) {
		t.Fatal("timer fired before the stall budget")
	}
	assertPending(t, ch)
	h.advance(time.Millisecond)
	p := recvPrimed(t, ch)
	if p.s != nil {
		t.Fatal("a failed Prime returned a stream")
	}
	assertFailure(t, p.f, ReasonContentStall, 502, false)
	if !h.cancelled.Load() {
		t.Fatal("the upstream was not cancelled")
	}
}

// With first_byte, keep-alives alone do not commit, so a stall before any
// data event still fails over.
func TestPreCommitStallFirstByteKeepAlivesOnly(t *testing.T) {
	h := newHarness(t, openaiCfg(""))
	ch := h.prime()
	for range 4 {
		h.send(keepAlive)
		h.advance(2 * time.Second)
	}
	assertPending(t, ch)
	h.advance(2 * time.Second)
	p := recvPrimed(t, ch)
	assertFailure(t, p.f, ReasonContentStall, 502, false)
}

func TestErrorEventBeforeCommit(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		events []string
		err    string
	}{
		{"openai first event", openaiCfg(CommitFirstByte), []string{oaError}, oaError},
		{"anthropic first event", anthropicCfg(CommitFirstByte), []string{anOverloaded}, anOverloaded},
		{"anthropic after ping", anthropicCfg(CommitFirstByte), []string{anPing, anOverloaded}, anOverloaded},
		{"anthropic after message_start, first_content", anthropicCfg(CommitFirstContent), []string{anStart, anPing, anOverloaded}, anOverloaded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.cfg)
			ch := h.prime()
			last := len(tt.events) - 1
			h.send(tt.events[:last]...)
			h.write(tt.events[last])
			p := recvPrimed(t, ch)
			assertFailure(t, p.f, ReasonUpstreamErrorEvent, 502, false)
			want := strings.TrimSuffix(tt.err[strings.Index(tt.err, "data: ")+6:], "\n\n")
			if string(p.f.Data) != want {
				t.Fatalf("Data = %s, want %s", p.f.Data, want)
			}
		})
	}
}

func TestEarlyEOFBeforeCommit(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cfg    Config
		events []string
	}{
		{"empty body", openaiCfg(CommitFirstByte), nil},
		{"keep-alive only", openaiCfg(CommitFirstByte), []string{keepAlive}},
		{"lifecycle only, first_content", anthropicCfg(CommitFirstContent), []string{anStart, anBlockText}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.cfg)
			ch := h.prime()
			h.send(tt.events...)
			h.eof()
			p := recvPrimed(t, ch)
			assertFailure(t, p.f, ReasonEarlyEOF, 502, false)
		})
	}
	// A truncated last event is an early EOF too.
	h := newHarness(t, openaiCfg(CommitFirstByte))
	ch := h.prime()
	h.write("data: {\"choices\":[{\"delta\":{\"content\":\"Hel")
	h.eof()
	assertFailure(t, recvPrimed(t, ch).f, ReasonEarlyEOF, 502, false)
}

func TestReadErrorBeforeCommit(t *testing.T) {
	h := newHarness(t, openaiCfg(CommitFirstByte))
	ch := h.prime()
	reset := errors.New("connection reset by peer")
	h.pw.CloseWithError(reset)
	p := recvPrimed(t, ch)
	assertFailure(t, p.f, ReasonReadError, 502, false)
	if !errors.Is(p.f, reset) {
		t.Fatalf("failure %v does not wrap the read error", p.f)
	}
}

// parseTerminal reads the last event of a client stream and decodes it.
func parseTerminal(t *testing.T, out string) (sse.Event, map[string]any) {
	t.Helper()
	rd := sse.NewReader(strings.NewReader(out))
	var last sse.Event
	n := 0
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("client stream is not well-formed SSE: %v\n%s", err, out)
		}
		last = sse.Event{Event: ev.Event, Data: append([]byte(nil), ev.Data...)}
		n++
	}
	if n == 0 {
		t.Fatal("no events")
	}
	var doc map[string]any
	if err := json.Unmarshal(last.Data, &doc); err != nil {
		t.Fatalf("terminal event data is not JSON: %s", last.Data)
	}
	return last, doc
}

// After the commit point a stall is never replayed: the client gets what
// was relayed plus one terminal error event in its own format, and no
// [DONE] / message_stop.
func TestCommittedStallEndsWithTerminalError(t *testing.T) {
	tests := []struct {
		name   string
		format wire.Format
		events []string
		check  func(t *testing.T, ev sse.Event, doc map[string]any)
	}{
		{"openai", wire.FormatChat, []string{oaRole, oaHello}, func(t *testing.T, ev sse.Event, doc map[string]any) {
			e, _ := doc["error"].(map[string]any)
			if ev.Event != "" || e["code"] != "stream_content_stall" || e["type"] != "stream_error" || e["message"] == "" {
				t.Fatalf("terminal = %s %v", ev.Event, doc)
			}
		}},
		{"anthropic", wire.FormatMessages, []string{anStart, anBlockText, anText}, func(t *testing.T, ev sse.Event, doc map[string]any) {
			e, _ := doc["error"].(map[string]any)
			if ev.Event != "error" || doc["type"] != "error" || e["type"] != "stream_error" || e["code"] != "stream_content_stall" || e["message"] == "" {
				t.Fatalf("terminal = %s %v", ev.Event, doc)
			}
		}},
		{"responses", wire.FormatResponses, []string{
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}\n\n",
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n",
		}, func(t *testing.T, ev sse.Event, doc map[string]any) {
			if ev.Event != "error" || doc["type"] != "error" || doc["code"] != "stream_content_stall" {
				t.Fatalf("terminal = %s %v", ev.Event, doc)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{ClientFormat: tt.format, Events: readerOf(tt.format),
				Stall: watchdog.StallConfig{FirstContent: 90 * time.Second, BetweenContent: 60 * time.Second}}
			h := newHarness(t, cfg)
			ch := h.prime()
			h.write(tt.events[0])
			p := recvPrimed(t, ch)
			if p.f != nil {
				t.Fatalf("Prime failed: %v", p.f)
			}
			c := &client{failAt: -1}
			rc := run(p.s, c)
			h.waitIdle()
			h.send(tt.events[1:]...)
			h.send(keepAlive)
			if h.advance(60*time.Second - time.Millisecond) {
				t.Fatal("fired early")
			}
			h.advance(time.Millisecond)
			r := recvResult(t, rc)
			if r.End != EndFailed {
				t.Fatalf("End = %s", r.End)
			}
			assertFailure(t, r.Failure, ReasonContentStall, 502, true)
			out := c.String()
			want := strings.Join(tt.events, "") + keepAlive
			if !strings.HasPrefix(out, want) {
				t.Fatalf("client got %q, want prefix %q", out, want)
			}
			if strings.Contains(out, "[DONE]") || strings.Contains(out, "message_stop") {
				t.Fatal("a failed stream must not end with a success marker")
			}
			ev, doc := parseTerminal(t, out)
			tt.check(t, ev, doc)
			if !h.cancelled.Load() {
				t.Fatal("upstream not cancelled")
			}
		})
	}
}

// An upstream error event after the commit point is passed through in the
// client's format and ends the stream.
func TestCommittedUpstreamErrorPassesThrough(t *testing.T) {
	h := newHarness(t, anthropicCfg(CommitFirstByte))
	c, rc := h.relaying(anStart)
	h.send(anBlockText, anText)
	h.write(anOverloaded)
	r := recvResult(t, rc)
	assertFailure(t, r.Failure, ReasonUpstreamErrorEvent, 502, true)
	if want := anStart + anBlockText + anText + anOverloaded; c.String() != want {
		t.Fatalf("client got %q", c.String())
	}
}

// A writer that fails means the client went away: Run returns
// EndClientGone and cancels the upstream at once.
func TestClientGone(t *testing.T) {
	for _, failAt := range []int{0, len(oaRole) + 10} {
		h := newHarness(t, openaiCfg(CommitFirstByte))
		ch := h.prime()
		h.write(oaRole)
		p := recvPrimed(t, ch)
		c := &client{failAt: failAt}
		rc := run(p.s, c)
		if failAt > 0 {
			h.waitIdle()
			h.write(oaHello)
		}
		r := recvResult(t, rc)
		if r.End != EndClientGone || r.Failure != nil {
			t.Fatalf("failAt %d: result %+v", failAt, r)
		}
		if !h.cancelled.Load() {
			t.Fatalf("failAt %d: upstream not cancelled", failAt)
		}
	}
}

// first_content holds lifecycle frames back until the first model output,
// then the client gets them byte for byte.
func TestFirstContentBuffersLifecycle(t *testing.T) {
	h := newHarness(t, anthropicCfg(CommitFirstContent))
	ch := h.prime()
	h.send(anStart, anBlockText, anPing)
	assertPending(t, ch)
	h.write(anText)
	p := recvPrimed(t, ch)
	if p.f != nil {
		t.Fatal(p.f)
	}
	c := &client{failAt: -1}
	rc := run(p.s, c)
	h.waitIdle()
	if want := anStart + anBlockText + anPing + anText; c.String() != want {
		t.Fatalf("prefix = %q, want %q", c.String(), want)
	}
	h.send(anBlockStop, anMsgDelta, anMsgStop)
	h.eof()
	r := recvResult(t, rc)
	if r.End != EndComplete || r.Failure != nil {
		t.Fatalf("result %+v", r)
	}
	if want := anStart + anBlockText + anPing + anText + anBlockStop + anMsgDelta + anMsgStop; c.String() != want {
		t.Fatalf("client got %q", c.String())
	}
	if r.Usage != (Usage{PromptTokens: 30, CompletionTokens: 15, Seen: true}) {
		t.Fatalf("usage = %+v", r.Usage)
	}
	if r.ContentBytes != 2 || !r.FirstContentAt.Equal(epoch) {
		t.Fatalf("content bytes %d first at %v", r.ContentBytes, r.FirstContentAt)
	}
}

// first_byte commits at the first data event.
func TestFirstByteCommitsAtFirstDataEvent(t *testing.T) {
	h := newHarness(t, anthropicCfg(""))
	ch := h.prime()
	h.send(anPing)
	assertPending(t, ch)
	h.write(anStart)
	p := recvPrimed(t, ch)
	if p.f != nil {
		t.Fatal(p.f)
	}
	p.s.Close()
	if !h.cancelled.Load() {
		t.Fatal("Close must cancel the attempt")
	}
	// Run after Close writes nothing.
	c := &client{failAt: -1}
	if r := p.s.Run(nil); r.End != EndClientGone || c.String() != "" {
		t.Fatalf("Run after Close = %+v", r)
	}
}

// Reasoning-only frames for longer than the stall budget never trip it;
// keep-alives after reasoning do.
func TestReasoningNeverTripsStall(t *testing.T) {
	h := newHarness(t, anthropicCfg(CommitFirstByte))
	_, rc := h.relaying(anStart)
	h.send(anBlockThink)
	think := []string{anThinkEmpty, anThink, anSignature}
	for i := range 40 { // 6 minutes of thinking against a 10 s budget
		if h.advance(9 * time.Second) {
			t.Fatalf("timer fired at step %d while reasoning", i)
		}
		h.send(think[i%3], anPing)
	}
	h.send(anBlockStop, anBlockText, anText, anBlockStop, anMsgDelta, anMsgStop)
	h.eof()
	r := recvResult(t, rc)
	if r.End != EndComplete {
		t.Fatalf("result %+v", r)
	}
}

// The throughput watchdog aborts an uncommitted attempt that sends only
// lifecycle and keep-alives at exactly warm-up + window.
func TestThroughputAbortsBeforeCommit(t *testing.T) {
	cfg := anthropicCfg(CommitFirstContent)
	cfg.Stall = watchdog.DefaultStall()
	cfg.Throughput = watchdog.ThroughputConfig{Enabled: true, Warmup: time.Second, Window: 2 * time.Second, MinBytesPerSecond: 10, MinBytes: 1}
	h := newHarness(t, cfg)
	ch := h.prime()
	h.send(anStart)
	for range 5 {
		h.advance(500 * time.Millisecond)
		h.send(anPing)
	}
	if h.advance(499 * time.Millisecond) { // 2999 ms
		t.Fatal("fired at 2999 ms")
	}
	assertPending(t, ch)
	h.advance(time.Millisecond) // 3000 ms
	p := recvPrimed(t, ch)
	assertFailure(t, p.f, ReasonThroughputTooLow, 502, false)
}

// docs/resilience.md §8's example in the default configuration (commit at
// the first byte): warm-up 1 s, window 2 s, minimum 10 B/s, only "x" sent
// → no abort at 2999 ms, abort at 3000 ms. The stream committed at its
// first event, so the abort ends it with a terminal error event; a stream
// that keeps its rate is not touched.
func TestThroughputAbortsAfterCommit(t *testing.T) {
	cfg := openaiCfg(CommitFirstByte)
	cfg.Stall = watchdog.DefaultStall()
	cfg.Throughput = watchdog.ThroughputConfig{Enabled: true, Warmup: time.Second, Window: 2 * time.Second, MinBytesPerSecond: 10, MinBytes: 1}
	h := newHarness(t, cfg)
	c, rc := h.relaying(oaRole)
	h.send(strings.Replace(oaHello, "Hello", "x", 1))
	for range 5 {
		if h.advance(500 * time.Millisecond) {
			t.Fatal("fired before 3000 ms")
		}
		h.send(keepAlive)
	}
	if h.advance(499 * time.Millisecond) { // 2999 ms
		t.Fatal("fired at 2999 ms")
	}
	h.advance(time.Millisecond) // 3000 ms
	r := recvResult(t, rc)
	assertFailure(t, r.Failure, ReasonThroughputTooLow, 502, true)
	if _, doc := parseTerminal(t, c.String()); doc["error"].(map[string]any)["code"] != ReasonThroughputTooLow {
		t.Fatalf("terminal event %v", doc)
	}

	// A committed stream at 20 B/s for 20 s is never judged too slow.
	h2 := newHarness(t, cfg)
	_, rc2 := h2.relaying(oaRole)
	for range 40 {
		if h2.advance(500 * time.Millisecond) {
			t.Fatal("a timer fired for a stream above the minimum rate")
		}
		h2.send(strings.Replace(oaHello, "Hello", "0123456789", 1))
	}
	h2.send(oaFinish, oaDone)
	h2.eof()
	if r := recvResult(t, rc2); r.End != EndComplete {
		t.Fatalf("result %+v", r)
	}
}

// The idle timeout is reset by any event, keep-alives included; silence
// trips it.
func TestIdleTimeout(t *testing.T) {
	cfg := anthropicCfg(CommitFirstContent)
	cfg.Stall = watchdog.DefaultStall()
	cfg.Idle = 5 * time.Second
	h := newHarness(t, cfg)
	ch := h.prime()
	for range 5 {
		if h.advance(4 * time.Second) {
			t.Fatal("idle fired while pings arrive")
		}
		h.send(anPing)
	}
	assertPending(t, ch)
	h.advance(5 * time.Second)
	assertFailure(t, recvPrimed(t, ch).f, ReasonIdleTimeout, 504, false)
}

// A healthy stream is never cut by time alone: 12 minutes of steady
// output (a delta every 5 s) under the default watchdogs and the 60 s
// idle timeout completes. Only the hard deadline, when an operator sets
// one, ends a stream that makes progress.
func TestTwelveMinuteStreamCompletes(t *testing.T) {
	cfg := openaiCfg(CommitFirstByte)
	cfg.Stall = watchdog.DefaultStall()
	cfg.Idle = time.Minute
	h := newHarness(t, cfg)
	c, rc := h.relaying(oaRole)
	for range 12 * 60 / 5 {
		if h.advance(5 * time.Second) {
			t.Fatal("a timer fired while the stream flowed")
		}
		h.send(oaHello)
	}
	h.send(oaFinish, oaDone)
	h.eof()
	if r := recvResult(t, rc); r.End != EndComplete || h.clock.Now().Sub(epoch) != 12*time.Minute {
		t.Fatalf("result %+v after %v", r, h.clock.Now().Sub(epoch))
	}
	if n := strings.Count(c.String(), "Hello"); n != 144 {
		t.Fatalf("client got %d deltas, want 144", n)
	}
}

// The hard deadline ends even a healthy committed stream.
func TestHardDeadline(t *testing.T) {
	cfg := openaiCfg(CommitFirstByte)
	cfg.HardDeadline = 30 * time.Second
	h := newHarness(t, cfg)
	c, rc := h.relaying(oaRole)
	for range 29 {
		h.advance(time.Second)
		h.send(oaHello)
	}
	h.advance(time.Second)
	r := recvResult(t, rc)
	assertFailure(t, r.Failure, ReasonAttemptDeadline, 504, true)
	_, doc := parseTerminal(t, c.String())
	if e, _ := doc["error"].(map[string]any); e["code"] != ReasonAttemptDeadline {
		t.Fatalf("terminal = %v", doc)
	}
}

// A complete OpenAI stream is relayed byte for byte, with usage.
func TestCompleteOpenAIStream(t *testing.T) {
	h := newHarness(t, openaiCfg(CommitFirstByte))
	c, rc := h.relaying(oaRole)
	h.advance(time.Second)
	h.send(oaThink, oaHello, oaWorld, oaFinish, oaUsage, oaDone)
	h.eof()
	r := recvResult(t, rc)
	if r.End != EndComplete {
		t.Fatalf("result %+v", r)
	}
	if want := oaRole + oaThink + oaHello + oaWorld + oaFinish + oaUsage + oaDone; c.String() != want {
		t.Fatalf("client got %q", c.String())
	}
	if r.Usage != (Usage{PromptTokens: 9, CompletionTokens: 2, Seen: true}) || r.ContentBytes != 11 || !r.FirstContentAt.Equal(epoch.Add(time.Second)) {
		t.Fatalf("result %+v", r)
	}
}

// An end of body after the finish_reason chunk, without [DONE], is a
// complete stream; so is an upstream that never closes after [DONE].
func TestCompletionWithoutDoneOrEOF(t *testing.T) {
	h := newHarness(t, openaiCfg(CommitFirstByte))
	ch := h.prime()
	h.write(oaRole)
	p := recvPrimed(t, ch)
	rc := run(p.s, &client{failAt: -1})
	h.waitIdle()
	h.send(oaHello, oaFinish)
	h.eof()
	if r := recvResult(t, rc); r.End != EndComplete {
		t.Fatalf("EOF after finish_reason: %+v", r)
	}

	h = newHarness(t, openaiCfg(CommitFirstByte))
	ch = h.prime()
	h.write(oaRole)
	p = recvPrimed(t, ch)
	c := &client{failAt: -1}
	rc = run(p.s, c)
	h.waitIdle()
	h.send(oaHello, oaDone, oaHello) // anything after [DONE] is dropped
	h.advance(drainGrace)
	if r := recvResult(t, rc); r.End != EndComplete {
		t.Fatalf("no EOF after [DONE]: %+v", r)
	}
	if c.String() != oaRole+oaHello+oaDone {
		t.Fatalf("client got %q", c.String())
	}
}

// Early EOF after the commit point ends with a stream_early_eof event.
func TestCommittedEarlyEOF(t *testing.T) {
	h := newHarness(t, anthropicCfg(CommitFirstByte))
	c, rc := h.relaying(anStart)
	h.send(anBlockText, anText)
	h.eof()
	r := recvResult(t, rc)
	assertFailure(t, r.Failure, ReasonEarlyEOF, 502, true)
	ev, doc := parseTerminal(t, c.String())
	if e, _ := doc["error"].(map[string]any); ev.Event != "error" || e["code"] != "stream_early_eof" {
		t.Fatalf("terminal = %v", doc)
	}
}

func TestContextCancelled(t *testing.T) {
	h := newHarness(t, openaiCfg(CommitFirstByte))
	ctx, cancel := context.WithCancel(context.Background())
	h.ctx = ctx
	ch := h.prime()
	cancel()
	p := recvPrimed(t, ch)
	assertFailure(t, p.f, ReasonCancelled, 503, false)
	if !errors.Is(p.f, context.Canceled) {
		t.Fatalf("failure %v", p.f)
	}
}

// upper is a test Translator: it upper-cases data, drops ping events, and closes
// the stream with a "done" event.
type upper struct {
	finishes int
	comments int
	fail     bool
}

func (u *upper) Event(ev sse.Event) ([]sse.Event, error) {
	if u.fail {
		return nil, errors.New("unsupported block")
	}
	if ev.Comment {
		u.comments++
	}
	if ev.Event == "ping" {
		return nil, nil
	}
	return []sse.Event{{Event: ev.Event, Data: []byte(strings.ToUpper(string(ev.Data)))}}, nil
}

func (u *upper) Finish() []sse.Event {
	u.finishes++
	return []sse.Event{{Event: "done", Data: []byte("{}")}}
}

func TestTranslator(t *testing.T) {
	h := newHarness(t, Config{ClientFormat: wire.FormatChat, Events: readerOf(wire.FormatMessages)})
	tr := &upper{}
	h.tr = tr
	ch := h.prime()
	h.send(anPing) // translates to nothing: no client byte, no commit
	assertPending(t, ch)
	h.write(anStart)
	p := recvPrimed(t, ch)
	c := &client{failAt: -1}
	rc := run(p.s, c)
	h.waitIdle()
	h.send(anText, keepAlive, anMsgStop)
	h.eof()
	r := recvResult(t, rc)
	if r.End != EndComplete || tr.finishes != 1 || tr.comments != 0 {
		t.Fatalf("result %+v finishes %d", r, tr.finishes)
	}
	want := "event: message_start\ndata: " + strings.ToUpper(anStart[strings.Index(anStart, "{"):len(anStart)-2]) + "\n\n" +
		"event: content_block_delta\ndata: " + strings.ToUpper(anText[strings.Index(anText, "{"):len(anText)-2]) + "\n\n" +
		keepAlive +
		"event: message_stop\ndata: {\"TYPE\":\"MESSAGE_STOP\"}\n\n" +
		"event: done\ndata: {}\n\n"
	if c.String() != want {
		t.Fatalf("client got\n%q\nwant\n%q", c.String(), want)
	}

	// A translation error before the commit point is a failure.
	h = newHarness(t, Config{Events: readerOf(wire.FormatMessages)})
	h.tr = &upper{fail: true}
	ch = h.prime()
	h.write(anStart)
	assertFailure(t, recvPrimed(t, ch).f, ReasonTranslateError, 502, false)
}

// The real timer fires the watchdogs when the upstream sends nothing.
func TestRealTimerStall(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	cfg := Config{Stall: watchdog.StallConfig{FirstContent: 30 * time.Millisecond, BetweenContent: time.Second}}
	start := time.Now()
	s, f := Prime(context.Background(), cfg, Attempt{Body: pr, Cancel: func() { pw.CloseWithError(context.Canceled) }})
	if s != nil || f == nil || f.Reason != ReasonContentStall {
		t.Fatalf("stream %v failure %v", s, f)
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Fatalf("stalled after %v, before the 30 ms budget", el)
	}
}

// The system clock's timer is re-armed in place: the relay resets it once
// per event, so a reset allocates nothing, and a re-armed timer fires.
func TestSystemTimerResetAllocatesNothing(t *testing.T) {
	tm := newClockTimer(admission.SystemClock())
	tm.Reset(time.Hour)
	if n := testing.AllocsPerRun(100, func() { tm.Reset(time.Hour) }); n != 0 {
		t.Fatalf("Reset allocates %v times", n)
	}
	tm.Stop()
	if tm.C() != nil {
		t.Fatal("a stopped timer offers a channel")
	}
	tm.Reset(time.Millisecond)
	select {
	case <-tm.C():
	case <-time.After(5 * time.Second):
		t.Fatal("the re-armed timer did not fire")
	}
}

func TestTerminalErrorShapes(t *testing.T) {
	f := &Failure{Reason: ReasonContentStall}
	for _, tt := range []struct {
		format wire.Format
		want   string
	}{
		{wire.FormatChat, `data: {"error":{"type":"stream_error","code":"stream_content_stall","message":"` + messages[ReasonContentStall] + `"}}` + "\n\n"},
		{wire.FormatMessages, "event: error\n" + `data: {"type":"error","error":{"type":"stream_error","code":"stream_content_stall","message":"` + messages[ReasonContentStall] + `"}}` + "\n\n"},
		{wire.FormatResponses, "event: error\n" + `data: {"type":"error","code":"stream_content_stall","message":"` + messages[ReasonContentStall] + `","param":null}` + "\n\n"},
	} {
		if got := string(appendTerminalError(nil, tt.format, f)); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.format, got, tt.want)
		}
	}
}

func TestValidCommitPoint(t *testing.T) {
	for s, want := range map[string]bool{"": true, "first_byte": true, "first_content": true, "first_token": false} {
		if ValidCommitPoint(s) != want {
			t.Errorf("ValidCommitPoint(%q) != %v", s, want)
		}
	}
}

// An empty answer (lifecycle, then the final event) commits at its end
// under first_content and completes with no content bytes; Responses usage
// is read from response.completed.
func TestEmptyAnswerCommitsAtEnd(t *testing.T) {
	cfg := Config{ClientFormat: wire.FormatResponses, Events: readerOf(wire.FormatResponses), CommitPoint: CommitFirstContent}
	h := newHarness(t, cfg)
	ch := h.prime()
	created := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"usage\":null}}\n\n"
	completed := "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"usage\":{\"input_tokens\":7,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":0,\"total_tokens\":7}}}\n\n"
	h.send(created)
	assertPending(t, ch)
	h.write(completed)
	p := recvPrimed(t, ch)
	if p.f != nil {
		t.Fatal(p.f)
	}
	c := &client{failAt: -1}
	rc := run(p.s, c)
	h.waitIdle()
	h.eof()
	r := recvResult(t, rc)
	if r.End != EndComplete || r.ContentBytes != 0 || !r.FirstContentAt.IsZero() {
		t.Fatalf("result %+v", r)
	}
	if r.Usage != (Usage{PromptTokens: 7, CompletionTokens: 0, Seen: true}) {
		t.Fatalf("usage %+v", r.Usage)
	}
	if c.String() != created+completed {
		t.Fatalf("client got %q", c.String())
	}
}

// docs/resilience.md §9: with first_content a turn of reasoning only is
// held back to its end, so it is an empty answer detected before any
// byte reached the client (Stream.Empty) and the caller can fail over.
func TestFirstContentHoldsReasoningOnlyTurnAsEmpty(t *testing.T) {
	h := newHarness(t, anthropicCfg(CommitFirstContent))
	ch := h.prime()
	h.send(anStart, anBlockThink, anThinkEmpty, anThink, anSignature)
	assertPending(t, ch) // reasoning does not commit
	h.send(anBlockStop, anMsgDelta)
	h.write(anMsgStop)
	p := recvPrimed(t, ch)
	if p.f != nil {
		t.Fatal(p.f)
	}
	if !p.s.Empty() {
		t.Fatal("a reasoning-only turn primed under first_content is not reported empty")
	}
	p.s.Close()
}

// Reasoning then text commits at the text, with the reasoning before it;
// the stream is not empty.
func TestFirstContentCommitsAtTextAfterReasoning(t *testing.T) {
	h := newHarness(t, openaiCfg(CommitFirstContent))
	ch := h.prime()
	h.send(oaRole, oaThink)
	assertPending(t, ch)
	h.write(oaHello)
	p := recvPrimed(t, ch)
	if p.f != nil || p.s.Empty() {
		t.Fatalf("primed %v, empty %v", p.f, p.s != nil && p.s.Empty())
	}
	c := &client{failAt: -1}
	rc := run(p.s, c)
	h.send(oaFinish, oaDone)
	h.eof()
	r := recvResult(t, rc)
	if r.End != EndComplete || r.Empty() || c.String() != oaRole+oaThink+oaHello+oaFinish+oaDone {
		t.Fatalf("result %+v, client %q", r, c.String())
	}
}

// With first_byte a reasoning-only stream commits at its first event; its
// Result says it was empty, and a tool call is not empty.
func TestResultEmptyAfterCommit(t *testing.T) {
	h := newHarness(t, openaiCfg(CommitFirstByte))
	_, rc := h.relaying(oaRole)
	h.send(oaThink, oaFinish, oaDone)
	h.eof()
	if r := recvResult(t, rc); !r.Empty() || r.ToolCall {
		t.Fatalf("reasoning only: %+v, want Empty", r)
	}
	const oaTool = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"read\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n"
	h2 := newHarness(t, openaiCfg(CommitFirstByte))
	_, rc = h2.relaying(oaRole)
	h2.send(oaTool, oaFinish, oaDone)
	h2.eof()
	if r := recvResult(t, rc); r.Empty() || !r.ToolCall {
		t.Fatalf("tool call: %+v, want not empty", r)
	}
}

// A stream made ready long before its answer arrives (Prepare, while the
// upstream answers) keeps the timers of a stream primed at once: the idle
// timeout runs from Prime, not from Prepare, and the stall budget from
// the attempt's Start.
func TestPreparedStreamTimersRunFromPrime(t *testing.T) {
	cfg := openaiCfg(CommitFirstByte)
	cfg.Stall = watchdog.StallConfig{FirstContent: 30 * time.Second, BetweenContent: 30 * time.Second}
	cfg.Idle = 5 * time.Second
	h := newHarness(t, cfg)
	pre := Prepare(h.cfg)
	h.clock.Advance(4 * time.Second) // the upstream takes its time to answer
	a := h.attempt()
	a.Start = h.clock.Now().Add(-4 * time.Second) // the call was sent at Prepare
	ch := make(chan primed, 1)
	go func() {
		s, f := pre.Prime(h.ctx, a)
		ch <- primed{s, f}
	}()
	h.waitIdle()
	if h.advance(4 * time.Second) {
		t.Fatal("the idle timeout counted the wait before Prime")
	}
	assertPending(t, ch)
	if !h.advance(time.Second) {
		t.Fatal("the idle timeout did not fire 5 s after Prime")
	}
	assertFailure(t, recvPrimed(t, ch).f, ReasonIdleTimeout, 504, false)
}

// A prepared stream primes and relays as Prime does; one never primed
// leaves nothing running (goleak checks the package's goroutines).
func TestPreparedStreamRelaysAsPrime(t *testing.T) {
	_ = Prepare(Config{}) // dropped: nothing to release
	body := oaRole + oaHello + oaFinish + oaDone
	s, f := Prepare(Config{}).Prime(context.Background(), Attempt{Body: io.NopCloser(strings.NewReader(body))})
	if f != nil {
		t.Fatal(f)
	}
	c := &client{failAt: -1}
	if r := s.Run(bufio.NewWriter(c)); r.End != EndComplete {
		t.Fatalf("result %+v", r)
	}
	if got := c.String(); got != body {
		t.Fatalf("client got %q, want %q", got, body)
	}
}

// afterFuncClock is the system clock that counts the timers it makes.
type afterFuncClock struct {
	newTimers, afterFuncs atomic.Int32
}

func (c *afterFuncClock) Now() time.Time { return time.Now() }

func (c *afterFuncClock) NewTimer(d time.Duration) admission.Timer {
	c.newTimers.Add(1)
	return admission.SystemClock().NewTimer(d)
}

func (c *afterFuncClock) AfterFunc(d time.Duration, f func()) *time.Timer {
	c.afterFuncs.Add(1)
	return time.AfterFunc(d, f)
}

// On a clock whose timers are the system's (clock.AfterFuncer), a stream's
// alarm is one time.AfterFunc made with the stream: no probe timer, and
// it still fires the watchdogs.
func TestAlarmOnAfterFuncClock(t *testing.T) {
	clk := &afterFuncClock{}
	pr, pw := io.Pipe()
	defer pw.Close()
	cfg := Config{Clock: clk, Stall: watchdog.StallConfig{FirstContent: 30 * time.Millisecond, BetweenContent: time.Second}}
	s, f := Prime(context.Background(), cfg, Attempt{Body: pr, Cancel: func() { pw.CloseWithError(context.Canceled) }})
	if s != nil || f == nil || f.Reason != ReasonContentStall {
		t.Fatalf("stream %v failure %v", s, f)
	}
	if n, m := clk.newTimers.Load(), clk.afterFuncs.Load(); n != 0 || m != 1 {
		t.Fatalf("%d timers and %d AfterFunc timers made, want 0 and 1", n, m)
	}
}
