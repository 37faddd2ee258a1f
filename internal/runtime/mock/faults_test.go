package mock

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// contentFrame reports whether ev carries assistant text.
func contentFrame(ev sseEvent) bool {
	return strings.Contains(ev.data, `"content":`) && strings.Contains(ev.data, "chat.completion.chunk") ||
		strings.Contains(ev.data, `"text_delta"`)
}

func TestStallThenClientCancel(t *testing.T) {
	m := startMock(t, `
rules:
  - responses: [{stall_after_chunks: 2, chunks: 4}]
`)
	for _, tc := range []struct{ name, path, body string }{
		{"openai", "/v1/chat/completions", chatBody("m", "hello world", true, false)},
		{"anthropic", "/v1/messages", messagesBody("m", "hello world", true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m.srv.ResetStats()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp, err := m.do(ctx, http.MethodPost, tc.path, "k1", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			sr := newSSEReader(resp.Body)
			frames := 0
			for frames < 2 {
				ev, err := sr.next()
				if err != nil {
					t.Fatalf("after %d frames: %v", frames, err)
				}
				if contentFrame(ev) {
					frames++
				}
			}
			if st := m.srv.Stats(); st.InFlight != 1 || st.Cancellations != 0 {
				t.Fatalf("while stalled: %+v", st)
			}
			cancel()
			st := m.waitStats(func(s Stats) bool { return s.InFlight == 0 })
			if st.Total != 1 || st.Cancellations != 1 || st.Completed != 0 {
				t.Errorf("stats = %+v, want 1 call, 1 cancellation", st)
			}
			if ks := st.ByKey["k1"]; ks.Cancellations != 1 || ks.Calls != 1 || ks.InFlight != 0 {
				t.Errorf("by key = %+v", ks)
			}
		})
	}
}

func TestStallRunsOutWithoutDone(t *testing.T) {
	m := startMock(t, `
rules:
  - path: /v1/chat/completions
    responses: [{stall_after_chunks: 1, stall_ms: 30}]
  - path: /v1/messages
    responses: [{stall_after_chunks: 0, stall_ms: 30}]
`)
	start := time.Now()
	evs := m.streamOf("/v1/chat/completions", "", chatBody("m", "hello world", true, false))
	if time.Since(start) < 30*time.Millisecond {
		t.Errorf("stall ended after %v, want >= 30ms", time.Since(start))
	}
	if len(evs) != 1 || !contentFrame(evs[0]) {
		t.Errorf("events = %+v, want exactly one content chunk and no [DONE]", evs)
	}
	evs = m.streamOf("/v1/messages", "", messagesBody("m", "hello world", true))
	if got := strings.Join(eventNames(evs), ","); got != "message_start,content_block_start,ping" {
		t.Errorf("anthropic events = %v, want the preamble only", got)
	}
	st := m.srv.Stats()
	if st.Completed != 2 || st.Cancellations != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestResetBeforeHeaders(t *testing.T) {
	m := startMock(t, "rules:\n  - responses: [{reset: true}]\n")
	for _, stream := range []bool{false, true} {
		resp, err := m.do(context.Background(), http.MethodPost, "/v1/chat/completions", "", chatBody("m", "hi", stream, false))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("stream=%v: got status %d, want a transport error", stream, resp.StatusCode)
		}
	}
	if st := m.waitStats(func(s Stats) bool { return s.InFlight == 0 }); st.Total != 2 || st.Completed != 2 {
		t.Errorf("stats = %+v", st)
	}
}

func TestResetAfterChunks(t *testing.T) {
	m := startMock(t, "rules:\n  - responses: [{reset_after_chunks: 2, chunks: 4}]\n")
	for _, tc := range []struct{ name, path, body string }{
		{"openai", "/v1/chat/completions", chatBody("m", "hello world", true, false)},
		{"anthropic", "/v1/messages", messagesBody("m", "hello world", true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := m.do(context.Background(), http.MethodPost, tc.path, "", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			evs, err := readAllSSE(resp.Body)
			if err == nil || errors.Is(err, io.EOF) {
				t.Fatalf("stream ended cleanly (err %v), want an abrupt close; events %+v", err, evs)
			}
			frames := 0
			for _, ev := range evs {
				if contentFrame(ev) {
					frames++
				}
				if ev.data == "[DONE]" || ev.name == "message_stop" {
					t.Errorf("got end-of-stream event %+v", ev)
				}
			}
			if frames != 2 {
				t.Errorf("content frames before the reset = %d, want 2", frames)
			}
		})
	}
	t.Run("non-stream", func(t *testing.T) {
		resp, err := m.do(context.Background(), http.MethodPost, "/v1/chat/completions", "", chatBody("m", "hello", false, false))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); err == nil {
			t.Errorf("non-stream body read cleanly, want an error")
		}
	})
}

func TestStallEndsInReset(t *testing.T) {
	m := startMock(t, "rules:\n  - responses: [{stall_after_chunks: 1, stall_ms: 20, reset_after_chunks: 1}]\n")
	resp, err := m.do(context.Background(), http.MethodPost, "/v1/chat/completions", "", chatBody("m", "hello world", true, false))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	evs, err := readAllSSE(resp.Body)
	if err == nil || countContent(evs) != 1 {
		t.Errorf("err %v, %d content frames; want an abrupt close after 1 frame", err, countContent(evs))
	}
	if d := time.Since(start); d < 15*time.Millisecond {
		t.Errorf("reset after %v, want after the 20ms stall", d)
	}
}

func TestErrorEvent(t *testing.T) {
	m := startMock(t, `
rules:
  - key: plain
    responses: [{error_event: true}]
  - key: typed
    responses: [{error_event: {type: api_error, message: boom}}]
  - key: cont
    responses: [{error_event: true, continue_after_error: true}]
`)
	evs := m.streamOf("/v1/chat/completions", "plain", chatBody("m", "hi", true, false))
	if len(evs) != 1 || dig(evs[0].json(t), "error", "type") != "server_error" {
		t.Errorf("openai error stream = %+v", evs)
	}
	evs = m.streamOf("/v1/messages", "plain", messagesBody("m", "hi", true))
	if len(evs) != 1 || evs[0].name != "error" || dig(evs[0].json(t), "error", "type") != "overloaded_error" {
		t.Errorf("anthropic error stream = %+v", evs)
	}
	evs = m.streamOf("/v1/messages", "typed", messagesBody("m", "hi", true))
	if v := evs[0].json(t); dig(v, "error", "type") != "api_error" || dig(v, "error", "message") != "boom" {
		t.Errorf("typed error event = %+v", evs)
	}
	evs = m.streamOf("/v1/chat/completions", "cont", chatBody("m", "hi", true, false))
	if dig(evs[0].json(t), "error", "type") != "server_error" || evs[len(evs)-1].data != "[DONE]" || len(evs) < 4 {
		t.Errorf("continue_after_error stream = %+v", evs)
	}
}

func TestPingsWhileWaiting(t *testing.T) {
	m := startMock(t, `
rules:
  - responses: [{stall_after_chunks: 1, stall_ms: 80, ping_every_ms: 5}]
`)
	evs := m.streamOf("/v1/chat/completions", "", chatBody("m", "hello", true, false))
	pings := 0
	for _, ev := range evs {
		if ev.comment == "ping" {
			pings++
		}
	}
	if pings < 3 {
		t.Errorf("openai: %d ping comments during an 80ms stall at 5ms, want >= 3", pings)
	}
	evs = m.streamOf("/v1/messages", "", messagesBody("m", "hello", true))
	pings = 0
	for _, ev := range evs {
		if ev.name == "ping" {
			pings++
		}
	}
	if pings < 4 { // the one after content_block_start plus keep-alives
		t.Errorf("anthropic: %d ping events, want >= 4", pings)
	}
}

func TestTimings(t *testing.T) {
	m := startMock(t, `
rules:
  - key: latency
    responses: [{latency_ms: 40}]
  - key: interval
    responses: [{chunks: 3, chunk_interval_ms: 20}]
  - key: trickle
    responses: [{trickle_bytes_per_sec: 200, text: "aaaaaaaaaaaaaaaaaaaabbbbbbbbbbbbbbbbbbbbcccccccccccccccccccc"}]
`)
	start := time.Now()
	if status, _, _ := m.post("/v1/chat/completions", "latency", chatBody("m", "hi", false, false)); status != 200 {
		t.Fatalf("status %d", status)
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Errorf("latency_ms 40 answered in %v", d)
	}

	start = time.Now()
	evs := m.streamOf("/v1/chat/completions", "interval", chatBody("m", "hello world", true, false))
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Errorf("3 chunks at 20ms intervals took %v, want >= 40ms", d)
	}
	if n := countContent(evs); n != 3 {
		t.Errorf("content chunks = %d, want 3", n)
	}

	start = time.Now()
	evs = m.streamOf("/v1/chat/completions", "trickle", chatBody("m", "hi", true, false))
	if d := time.Since(start); d < 190*time.Millisecond {
		t.Errorf("60 bytes at 200 B/s took %v, want >= 200ms minus the first piece", d)
	}
	var pieces []string
	for _, ev := range openAIChunks(t, evs) {
		if s, ok := dig(ev, "choices", 0, "delta", "content").(string); ok {
			pieces = append(pieces, s)
		}
	}
	if strings.Join(pieces, "|") != strings.Repeat("a", 20)+"|"+strings.Repeat("b", 20)+"|"+strings.Repeat("c", 20) {
		t.Errorf("trickle pieces = %q, want three 20-byte pieces", pieces)
	}
}

func countContent(evs []sseEvent) int {
	n := 0
	for _, ev := range evs {
		if contentFrame(ev) {
			n++
		}
	}
	return n
}

func TestCloseEndsStalls(t *testing.T) {
	sc, err := ParseScript([]byte("rules:\n  - responses: [{stall_after_chunks: 0}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv := New(sc, nil)
	addr, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	resp, err := client.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(chatBody("m", "hi", true, false)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(resp.Body); done <- err }()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not end the stalled stream")
	}
	if _, err := srv.Start("127.0.0.1:0"); err == nil {
		t.Error("Start after Close succeeded")
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
