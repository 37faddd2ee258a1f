package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestReadStream(t *testing.T) {
	long := "data: " + strings.Repeat("x", 10000) + "\n\n"
	tests := []struct {
		name     string
		body     string
		wantErr  string
		wantData bool
	}{
		{"complete", "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n", "", true},
		{"keep-alive comment first", ": ping\n\ndata: {}\n\ndata: [DONE]\n\n", "", true},
		{"long frame", long + "data: [DONE]\n\n", "", true},
		{"no DONE", "data: {}\n\n", "stream ended without data: [DONE]", true},
		{"DONE inside a long line does not count", "data: " + strings.Repeat("y", 5000) + "data: [DONE]\n", "stream ended without data: [DONE]", true},
		{"empty", "", "stream ended without data: [DONE]", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := readStream(strings.NewReader(tt.body), time.Now())
			if o.errKind != tt.wantErr {
				t.Fatalf("errKind = %q, want %q", o.errKind, tt.wantErr)
			}
			if got := o.firstData > 0; got != tt.wantData {
				t.Fatalf("first data seen = %v (%v), want %v", got, o.firstData, tt.wantData)
			}
		})
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestReadStreamCutMidBody(t *testing.T) {
	r := io.MultiReader(strings.NewReader("data: {}\n\n"), failingReader{io.ErrUnexpectedEOF})
	if o := readStream(r, time.Now()); o.errKind != "unexpected EOF" {
		t.Fatalf("errKind = %q, want unexpected EOF", o.errKind)
	}
}

func TestClassifyHidesURL(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&url.Error{Op: "Post", URL: "http://127.0.0.1:1/v1/chat/completions", Err: syscall.ECONNREFUSED}, "connection refused"},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), "connection reset"},
		{&url.Error{Op: "Post", URL: "http://127.0.0.1:1/secret", Err: errors.New("boom")}, "boom"},
		{io.ErrUnexpectedEOF, "unexpected EOF"},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("classify(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestErrorBookCapsKinds(t *testing.T) {
	var b errorBook
	for i := range maxErrorKinds + 5 {
		b.add(fmt.Sprintf("kind %d", i))
	}
	b.add("kind 0")
	m := b.snapshot()
	if len(m) != maxErrorKinds+1 {
		t.Fatalf("%d kinds kept, want %d plus other", len(m), maxErrorKinds)
	}
	if m["other"] != 5 || m["kind 0"] != 2 {
		t.Fatalf("counts = %v, want other=5 and kind 0=2", m)
	}
}

func TestHTTPErrorKind(t *testing.T) {
	tests := []struct {
		status int
		body   string
		want   string
	}{
		{503, `{"error":{"message":"m","type":"server_error","code":"all_targets_cooling_down"}}`, "HTTP 503 all_targets_cooling_down"},
		{429, `{"error":{"message":"m","type":"requests","code":"rate_limit_exceeded"}}`, "HTTP 429 rate_limit_exceeded"},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"m"}}`, "HTTP 529 overloaded_error"},
		{500, `{"error":{"message":"m","type":"server_error","code":null}}`, "HTTP 500 server_error"},
		{400, `{"error":{"message":"m","code":400}}`, "HTTP 400"},
		{502, `<html>bad gateway</html>`, "HTTP 502"},
		{504, ``, "HTTP 504"},
		{503, `{"error":{"code":"` + strings.Repeat("x", 80) + `"}}`, "HTTP 503 " + strings.Repeat("x", 60)},
	}
	for _, tt := range tests {
		if got := httpErrorKind(tt.status, []byte(tt.body)); got != tt.want {
			t.Errorf("httpErrorKind(%d, %q) = %q, want %q", tt.status, tt.body, got, tt.want)
		}
	}
}

// TestOpenLoopHeadersTallyAndFirstData sends a handful of requests to a
// local server: extra request headers reach it, tallied response headers
// are counted per outcome, error answers are named by their code, and
// streams get a first-data time.
func TestOpenLoopHeadersTallyAndFirstData(t *testing.T) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k1" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		w.Header().Set("X-Attempts", strconv.Itoa(1+i%2))
		if i%3 == 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"all_targets_cooling_down"}}`)
			return
		}
		if r.Header.Get("Accept") == "text/event-stream" {
			_, _ = io.WriteString(w, "data: {}\n\ndata: [DONE]\n\n")
			return
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	c := NewClient(4, 5*time.Second)
	defer c.CloseIdleConnections()
	for _, stream := range []bool{false, true} {
		mu.Lock()
		n = 0
		mu.Unlock()
		req := Request{URL: srv.URL, Body: []byte(`{}`), Stream: stream,
			Header: map[string]string{"Authorization": "Bearer k1"}, Tally: []string{"X-Attempts", "X-Absent"}}
		r, err := OpenLoop(context.Background(), c, req, Schedule{Rate: 200, Duration: 30 * time.Millisecond}, 100)
		if err != nil {
			t.Fatalf("OpenLoop: %v", err)
		}
		if r.Sent != 6 || r.OK != 4 || r.Errors["HTTP 503 all_targets_cooling_down"] != 2 {
			t.Fatalf("stream=%v: sent %d, ok %d, errors %v; want 6 sent, 4 ok, 2 × HTTP 503 all_targets_cooling_down", stream, r.Sent, r.OK, r.Errors)
		}
		// Calls 1..6: attempts 2,1,2(503),1,2,1(503).
		want := map[TallyKey]int{
			{"X-Attempts", "1", true}: 2, {"X-Attempts", "2", true}: 2,
			{"X-Attempts", "1", false}: 1, {"X-Attempts", "2", false}: 1,
			{"X-Absent", "", true}: 4, {"X-Absent", "", false}: 2,
		}
		if len(r.Tally) != len(want) {
			t.Fatalf("stream=%v: Tally = %v, want %v", stream, r.Tally, want)
		}
		for k, v := range want {
			if r.Tally[k] != v {
				t.Errorf("stream=%v: Tally[%+v] = %d, want %d", stream, k, r.Tally[k], v)
			}
		}
		if got := len(r.FirstData); stream && got != 4 || !stream && got != 0 {
			t.Errorf("stream=%v: %d first-data samples", stream, got)
		}
	}
}

// TestOpenLoopUntilStopsEarly: a 10 s schedule stopped at its third
// request sends no more than the few arrivals already due, counts only
// those as scheduled, and waits for them.
func TestOpenLoopUntilStopsEarly(t *testing.T) {
	stop := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		if n == 3 {
			once.Do(func() { close(stop) })
		}
		mu.Unlock()
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	c := NewClient(4, 5*time.Second)
	defer c.CloseIdleConnections()
	start := time.Now()
	r, err := OpenLoopUntil(context.Background(), c, Request{URL: srv.URL, Body: []byte(`{}`)},
		Schedule{Rate: 100, Duration: 10 * time.Second}, 100, stop)
	if err != nil {
		t.Fatalf("OpenLoopUntil: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %v: the stop did not end a 10 s schedule early", took)
	}
	if r.Scheduled < 3 || r.Scheduled > 10 || r.Scheduled != r.Sent+r.Dropped || r.OK != r.Sent {
		t.Fatalf("scheduled %d, sent %d, dropped %d, ok %d; want 3..10 scheduled, all sent and answered",
			r.Scheduled, r.Sent, r.Dropped, r.OK)
	}
}

// TestStreamsSpreadStartsWorkersApart: with Spread, the workers' first
// streams start one after the other, Spread/workers apart, instead of in
// one burst. Each stream lasts longer than that gap, so before it has
// passed only the first worker's stream can have arrived; without
// Spread, every worker's has.
func TestStreamsSpreadStartsWorkersApart(t *testing.T) {
	const workers, gap, hold = 4, 200 * time.Millisecond, 250 * time.Millisecond
	for _, tc := range []struct {
		spread time.Duration
		want   int
	}{{0, workers}, {workers * gap, 1}} {
		var mu sync.Mutex
		var arrivals []time.Time
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			arrivals = append(arrivals, time.Now())
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {}\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(hold)
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
		}))
		start := time.Now()
		res, err := Streams(context.Background(), NewClient(workers, 5*time.Second), Request{URL: srv.URL, Spread: tc.spread}, workers, 2*gap)
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		early := 0
		for _, at := range arrivals {
			if at.Sub(start) < gap {
				early++
			}
		}
		if early != tc.want {
			t.Errorf("spread %v: %d streams arrived in the first %v, want %d", tc.spread, early, gap, tc.want)
		}
		if res.OK == 0 {
			t.Errorf("spread %v: no stream completed", tc.spread)
		}
	}
}
