package upstreamtest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newMock(t *testing.T, script string) *Upstream {
	t.Helper()
	var sc *mock.Script
	if script != "" {
		var err error
		if sc, err = mock.ParseScript([]byte(script)); err != nil {
			t.Fatal(err)
		}
	}
	m := mock.New(sc, nil)
	t.Cleanup(func() { _ = m.Close() })
	return New(m.Handler())
}

func post(t *testing.T, ctx context.Context, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-x")
	req.Header.Set("Content-Type", "application/json")
	return req
}

const streamBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`

// A streamed answer arrives through the body as the handler writes it;
// closing the body ends the handler.
func TestDoStreams(t *testing.T) {
	u := newMock(t, "")
	resp, err := u.Do(post(t, context.Background(), streamBody), upstream.Route{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), "data: [DONE]") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %v %q %v", resp.StatusCode, err, b, resp.Header)
	}
	if u.Calls() != 1 {
		t.Fatalf("calls %d", u.Calls())
	}
}

// A stalled stream ends when the body is closed; the reset before any
// header is a transport error; a reset mid-body truncates it.
func TestDoFaults(t *testing.T) {
	u := newMock(t, `rules:
  - {key: sk-x, model: stall, responses: [{stall_after_chunks: 1}]}
  - {key: sk-x, model: reset, responses: [{reset: true}]}
  - {key: sk-x, model: cut, responses: [{reset_after_chunks: 1}]}
`)
	resp, err := u.Do(post(t, context.Background(), strings.Replace(streamBody, `"m"`, `"stall"`, 1)), upstream.Route{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // returns only once the stalled handler ended
	if _, err := u.Do(post(t, context.Background(), strings.Replace(streamBody, `"m"`, `"reset"`, 1)), upstream.Route{}, nil); err == nil {
		t.Fatal("a reset before the header must be an error")
	}
	resp, err = u.Do(post(t, context.Background(), strings.Replace(streamBody, `"m"`, `"cut"`, 1)), upstream.Route{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a cut body read %v", err)
	}
}

// DoBuffered returns the whole answer, or ErrDeadline when the handler
// outruns the deadline.
func TestDoBuffered(t *testing.T) {
	u := newMock(t, `rules: [{model: slow, responses: [{latency_ms: 2000}]}, {model: err, responses: [{status: 429, headers: {Retry-After: "3"}}]}]`)
	h := http.Header{"Authorization": {"Bearer sk-x"}}
	b, err := u.DoBuffered(http.MethodPost, "http://upstream.test/v1/chat/completions", h,
		[]byte(`{"model":"err","messages":[{"role":"user","content":"hi"}]}`), upstream.Route{}, time.Now().Add(5*time.Second))
	if err != nil || b.Status != 429 || b.Header.Get("Retry-After") != "3" || !strings.Contains(string(b.Body), "rate_limit") {
		t.Fatalf("%v %+v", err, b)
	}
	_, err = u.DoBuffered(http.MethodPost, "http://upstream.test/v1/chat/completions", h,
		[]byte(`{"model":"slow","messages":[{"role":"user","content":"hi"}]}`), upstream.Route{}, time.Now().Add(50*time.Millisecond))
	if !errors.Is(err, upstream.ErrDeadline) {
		t.Fatalf("slow call: %v", err)
	}
}
