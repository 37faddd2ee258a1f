package upstreamtest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
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
	resp, err := u.Do(post(t, context.Background(), streamBody), upstream.Route{}, upstream.Limits{})
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
	resp, err := u.Do(post(t, context.Background(), strings.Replace(streamBody, `"m"`, `"stall"`, 1)), upstream.Route{}, upstream.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // returns only once the stalled handler ended
	if _, err := u.Do(post(t, context.Background(), strings.Replace(streamBody, `"m"`, `"reset"`, 1)), upstream.Route{}, upstream.Limits{}); err == nil {
		t.Fatal("a reset before the header must be an error")
	}
	resp, err = u.Do(post(t, context.Background(), strings.Replace(streamBody, `"m"`, `"cut"`, 1)), upstream.Route{}, upstream.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a cut body read %v", err)
	}
}

// DoBuffered returns the whole answer, or the first-byte timer's
// TimeoutError when the handler sends nothing in time.
func TestDoBuffered(t *testing.T) {
	u := newMock(t, `rules: [{model: slow, responses: [{latency_ms: 2000}]}, {model: err, responses: [{status: 429, headers: {Retry-After: "3"}}]}]`)
	h := http.Header{"Authorization": {"Bearer sk-x"}}
	b, err := u.DoBuffered(upstream.Target{Method: http.MethodPost, URL: "http://upstream.test/v1/chat/completions", Header: h},
		wire.Owned([]byte(`{"model":"err","messages":[{"role":"user","content":"hi"}]}`)), upstream.Route{}, 5*time.Second)
	if err != nil || b.Status != 429 || b.Get("Retry-After") != "3" || !strings.Contains(string(b.Body), "rate_limit") {
		t.Fatalf("%v %+v", err, b)
	}
	_, err = u.DoBuffered(upstream.Target{Method: http.MethodPost, URL: "http://upstream.test/v1/chat/completions", Header: h},
		wire.Owned([]byte(`{"model":"slow","messages":[{"role":"user","content":"hi"}]}`)), upstream.Route{}, 50*time.Millisecond)
	if te, ok := upstream.AsTimeout(err); !ok || te.Timer != upstream.TimerFirstByte {
		t.Fatalf("slow call: %v", err)
	}
}

// clockAnswer is a handler paced by a fake clock: the header after
// first, then n pieces of body, one every every.
func clockAnswer(clock *clocktest.Clock, first time.Duration, n int, every time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		wait := func(d time.Duration) bool {
			tm := clock.NewTimer(d)
			defer tm.Stop()
			select {
			case <-tm.C():
				return true
			case <-r.Context().Done():
				return false
			}
		}
		if !wait(first) {
			return
		}
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for i := range n {
			if !wait(every) {
				return
			}
			_, _ = io.WriteString(w, "piece"+strconv.Itoa(i)+";")
			w.(http.Flusher).Flush()
		}
	}
}

// drive advances clock by step each time the call waits on it (two
// timers pending: the handler's and the call's), until done is closed.
func drive(t *testing.T, clock *clocktest.Clock, step time.Duration, done <-chan struct{}) {
	t.Helper()
	for {
		select {
		case <-done:
			return
		default:
		}
		if clock.WaitForTimers(2, 20*time.Millisecond) {
			clock.Advance(step)
		}
	}
}

// The call timers run on the injected clock with the real defaults: an
// answer whose header comes after 9 minutes and whose body then takes 4
// minutes in pieces 30 s apart succeeds through both paths; a body silent
// for 3 minutes is cut by the idle timer (60 s), a header later than 10 minutes by the
// first-byte timer.
func TestTimersOnTheInjectedClock(t *testing.T) {
	for _, tc := range []struct {
		name      string
		first     time.Duration
		n         int
		every     time.Duration
		wantTimer upstream.Timer
	}{
		{"slow header, long flowing body", 9 * time.Minute, 8, 30 * time.Second, ""},
		{"silent body", time.Second, 1, 3 * time.Minute, upstream.TimerIdle},
		{"late header", 10*time.Minute + time.Second, 1, time.Second, upstream.TimerFirstByte},
	} {
		for _, path := range []string{"Do", "DoBuffered"} {
			t.Run(tc.name+"/"+path, func(t *testing.T) {
				clock := clocktest.NewClock(time.Date(2025, 7, 1, 9, 0, 0, 0, time.UTC))
				u := New(clockAnswer(clock, tc.first, tc.n, tc.every)).WithClock(clock)
				done := make(chan struct{})
				var body string
				var err error
				go func() {
					defer close(done)
					if path == "DoBuffered" {
						var b upstream.Buffered
						if b, err = u.DoBuffered(upstream.Target{Method: http.MethodPost, URL: "http://upstream.test/v1/chat/completions"}, wire.Owned([]byte(`{}`)), upstream.Route{}, 0); err == nil {
							body = string(b.Body)
						}
						return
					}
					var resp *http.Response
					if resp, err = u.Do(post(t, context.Background(), `{}`), upstream.Route{}, upstream.Limits{}); err == nil {
						var raw []byte
						raw, err = io.ReadAll(resp.Body)
						resp.Body.Close()
						body = string(raw)
					}
				}()
				step := time.Second
				if tc.every >= 30*time.Second {
					step = 10 * time.Second
				}
				drive(t, clock, step, done)
				if tc.wantTimer == "" {
					if err != nil || !strings.HasSuffix(body, "piece7;") {
						t.Fatalf("body %q err %v", body, err)
					}
					return
				}
				if te, ok := upstream.AsTimeout(err); !ok || te.Timer != tc.wantTimer {
					t.Fatalf("err %v, want the %s timer (body %q, clock %v)", err, tc.wantTimer, body, clock.Now())
				}
			})
		}
	}
}
