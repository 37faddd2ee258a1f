package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/redact"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// failures returns the breaker failure count of provider p.
func (l *loop) failures(p string) int { return l.eng.Health().Providers[p].FailureCount }

// The §6 wait of a request whose client leaves ends at once: the answer
// is 499 client_closed_request, and no further attempt is made (issue 19
// item 7: "an abandoned request kept making new attempts").
func TestClientGoneEndsTheWait(t *testing.T) {
	for _, c := range []struct {
		cause        error
		status       int
		code         string
		clientFacing bool
	}{
		{proxy.ErrClientGone, 499, "client_closed_request", false},
		{proxy.ErrRequestDeadline, 504, "request_deadline_exceeded", true},
		{context.Canceled, 503, "shutting_down", true},
	} {
		t.Run(c.code, func(t *testing.T) {
			l := newLoop(t, loopConfig, `
rules:
  - {key: sk-a1, responses: [{status: 429, headers: {Retry-After: "2"}}]}
  - {key: sk-a2, responses: [{status: 429, headers: {Retry-After: "2"}}]}
`)
			ctx, cancel := context.WithCancelCause(context.Background())
			done := make(chan *proxy.Result, 1)
			go func() { done <- l.p.Serve(ctx, l.request(wire.FormatChat, chat("alpha/m1", ""))) }()
			l.waitTimer()
			calls := l.up.Calls()
			cancel(c.cause)
			res := recv(t, done)
			if res.Status != c.status || res.Code != c.code || errorCode(t, string(res.Body)) != c.code {
				t.Fatalf("answer %d %s %s", res.Status, res.Code, res.Body)
			}
			l.clock.Advance(3 * time.Second)
			if got := l.up.Calls(); got != calls {
				t.Fatalf("%d upstream calls after the request ended, want %d", got, calls)
			}
			if n := l.failures("alpha"); n != 0 {
				t.Fatalf("breaker failure count %d", n)
			}
		})
	}
}

// A client that leaves while its streamed attempt waits for the upstream's
// first byte: the call is cancelled, the request answers 499 and nothing
// is recorded against the provider (a client abort is not upstream health).
func TestClientGoneDuringAnAttemptRecordsNothing(t *testing.T) {
	l := newLoop(t, loopConfig, `rules: [{key: sk-a1, responses: [{latency_ms: 10000}]}]`)
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan *proxy.Result, 1)
	go func() {
		done <- l.p.Serve(ctx, l.request(wire.FormatChat, chat("alpha/m1", `,"stream":true`)))
	}()
	deadline := time.Now().Add(5 * time.Second)
	for l.mock.Stats().InFlight == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the attempt never reached the upstream")
		}
		time.Sleep(time.Millisecond)
	}
	cancel(proxy.ErrClientGone)
	res := recv(t, done)
	if res.Status != 499 || res.Stream != nil {
		t.Fatalf("answer %d stream=%v %s", res.Status, res.Stream != nil, res.Body)
	}
	if got := l.up.Calls(); got != 1 {
		t.Fatalf("%d upstream calls, want 1 (no failover after the client left)", got)
	}
	if n := l.failures("alpha"); n != 0 {
		t.Fatalf("breaker failure count %d after a client abort", n)
	}
	if got := l.counter("breakwater_attempts_total", nil); got != 0 {
		t.Fatalf("%v attempts recorded", got)
	}
}

// An upstream that keeps a stream open with keep-alives and no output
// stalls the attempt; the target is tried once more, then not again in
// this request (issue 19 item 7: 10 attempts × the stall budget before).
func TestKeepAliveOnlyStreamIsTriedTwice(t *testing.T) {
	l := newLoop(t, loopConfig, `rules: [{model: m2, responses: [{keepalive_only: true, ping_every_ms: 50, stall_ms: 5000}]}]`)
	t0 := time.Now()
	done := l.serveAsync(l.request(wire.FormatChat, chat("beta/m2", `,"stream":true`)))
	for range 2 {
		l.waitTimer()                           // the relay's stall timer
		l.clock.Advance(300 * time.Millisecond) // the stall budget, on the fake clock
	}
	res := recv(t, done)
	body := string(res.Body)
	if res.Status != 502 || res.Stream != nil || errorCode(t, body) != "stream_content_stall" {
		t.Fatalf("answer %d %s", res.Status, body)
	}
	if got := l.calls("sk-b1", "m2"); got != 2 {
		t.Fatalf("%d attempts on the keep-alive-only upstream, want 2", got)
	}
	if took := time.Since(t0); took > 3*time.Second {
		t.Fatalf("took %v for two 300 ms stall budgets", took)
	}
	if n := l.failures("beta"); n != 0 {
		t.Fatalf("breaker failure count %d after stalls", n)
	}
}

// An upstream that answers the gateway's own key as invalid, quoting it
// (mock echo_key): the client gets 502 upstream_auth_error in its format,
// never the key, never its own 401.
func TestUpstreamRejectingTheGatewayKey(t *testing.T) {
	l := newLoop(t, loopConfig, `rules: [{responses: [{echo_key: true}]}]`)
	for _, c := range []struct {
		f     wire.Format
		body  string
		model string
	}{
		{wire.FormatChat, chat("beta/m2", ""), "sk-b1"},
		{wire.FormatChat, chat("beta/m2", `,"stream":true`), "sk-b1"},
		{wire.FormatMessages, `{"model":"claude/c1","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "sk-k1"},
		{wire.FormatChat, chat("claude/c1", ""), "sk-k1"},
	} {
		l.clock.Advance(time.Hour) // past the connection's auth_error cooldown
		res, body := l.serve(l.request(c.f, c.body))
		if res.Status != 502 || errorCode(t, body) != "upstream_auth_error" || res.Code != "upstream_auth_error" {
			t.Fatalf("%s %s: answer %d %s", c.f, c.body, res.Status, body)
		}
		if strings.Contains(body, c.model) || !strings.Contains(body, "rejected the gateway's credentials") {
			t.Fatalf("answer quotes the key or does not say why: %s", body)
		}
	}
}

// Another upstream error body that quotes a key reaches the client
// redacted: the configured credentials and anything key-shaped.
func TestUpstreamErrorBodiesAreRedacted(t *testing.T) {
	const cfgKey = "b1-configured-credential"
	l := newLoop(t, loopConfig, `rules: [{responses: [{status: 400, headers: {X-Request-Id: "req `+cfgKey+`"},
  body: '{"error":{"message":"bad request for key `+cfgKey+` and sk-proj-AbC123dEf456GhI789jKl012mNo345","type":"invalid_request_error"}}'}]}]`,
		func(s *setup) { s.proxy.Redactor = redact.New(cfgKey) })
	res, body := l.serve(l.request(wire.FormatChat, chat("beta/m2", "")))
	if res.Status != 400 || strings.Contains(body, cfgKey) || strings.Contains(body, "sk-proj-AbC") || !strings.Contains(body, redact.Mask) {
		t.Fatalf("answer %d %s", res.Status, body)
	}
	if v := res.HeaderValue("X-Request-Id"); strings.Contains(v, cfgKey) {
		t.Fatalf("relayed header carries the key: %q", v)
	}
}

// A 2xx whose body is an HTML page or broken JSON is the upstream's
// protocol error: failed over, never relayed as a success, never a
// breaker failure.
func TestBrokenSuccessBodiesFailOver(t *testing.T) {
	for _, bad := range []string{
		`{body: "<html><body>502 Bad Gateway</body></html>", headers: {Content-Type: text/html}}`,
		`{body: '{"id": "chatcmpl-1", "choices": [', headers: {Content-Type: application/json}}`,
		`{body: '{"id": "chatcmpl-1", "choices": [}', headers: {Content-Type: application/json}}`,
	} {
		l := newLoop(t, loopConfig, `rules: [{key: sk-a1, responses: [`+bad+`]}]`)
		for _, stream := range []string{"", `,"stream":true`} {
			l.clock.Advance(time.Minute) // past a1's cooldown
			res, body := l.serve(l.request(wire.FormatChat, chat("alpha/m1", stream)))
			if res.Status != 200 || !has(body, "hel") || res.Route.Connection != "a2" {
				t.Fatalf("%s stream=%q: answer %d via %s %s", bad, stream, res.Status, res.Route.Connection, body)
			}
		}
		if n := l.failures("alpha"); n != 0 {
			t.Fatalf("%s: breaker failure count %d", bad, n)
		}
		if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "a1", "reason": "server_error"}); got != 2 {
			t.Fatalf("%s: a1's broken answers recorded %v times as server_error, want 2", bad, got)
		}
	}
}

// A header value the upstream request cannot carry (a control byte that
// reached the loop) is the gateway's local error: nothing is sent, nothing
// recorded, the client gets 500 local_error (issue 19 item 5: nine such
// requests opened a provider's breaker).
func TestUnsendableHeaderIsALocalError(t *testing.T) {
	l := newLoop(t, loopConfig, "")
	for range 15 {
		req := l.request(wire.FormatMessages, `{"model":"claude/c1","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
		req.Forward = []wire.Header{{Name: "anthropic-beta", Value: "tools-2024-05-16\x01"}}
		for _, stream := range []bool{false, true} {
			req.Parsed.Stream = stream
			res, body := l.serve(req)
			if res.Status != 500 || errorCode(t, body) != "local_error" || strings.Contains(body, "\x01") {
				t.Fatalf("answer %d %q", res.Status, body)
			}
		}
	}
	if l.up.Calls() != 0 || l.failures("claude") != 0 {
		t.Fatalf("%d upstream calls, breaker failure count %d", l.up.Calls(), l.failures("claude"))
	}
}

// A megabyte of model name is not echoed back whole.
func TestUnknownModelIsClipped(t *testing.T) {
	l := newLoop(t, loopConfig, "")
	model := strings.Repeat("x", 1<<20)
	res, body := l.serve(l.request(wire.FormatChat, chat(model, "")))
	if res.Status != 404 || len(body) > 1024 || !strings.Contains(body, "…[+1048320 bytes]") {
		t.Fatalf("answer %d of %d bytes", res.Status, len(body))
	}
}

// A stream whose events do not parse is the upstream's protocol error:
// recorded against the connection, never the breaker.
func TestUntranslatableStreamIsAProtocolError(t *testing.T) {
	l := newLoop(t, loopConfig, `rules: [{model: c1, responses: [{body: "event: message_start\ndata: {not json\n\n", headers: {Content-Type: text/event-stream}}]}]`)
	for range 15 {
		l.clock.Advance(time.Hour) // past the connection's cooldown
		res, body := l.serve(l.request(wire.FormatChat, chat("claude/c1", `,"stream":true`)))
		if res.Status != 502 {
			t.Fatalf("answer %d %s", res.Status, body)
		}
	}
	if n := l.failures("claude"); n != 0 {
		t.Fatalf("breaker failure count %d", n)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "k1", "reason": "server_error"}); got != 15 {
		t.Fatalf("%v attempts recorded as server_error, want 15", got)
	}
}
