package mock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testMock is a started mock plus a private HTTP client.
type testMock struct {
	t      *testing.T
	srv    *Server
	base   string
	client *http.Client
}

// startMock starts a mock on 127.0.0.1:0 with the YAML script (may be "").
func startMock(t *testing.T, script string) *testMock {
	t.Helper()
	sc, err := ParseScript([]byte(script))
	if err != nil {
		t.Fatalf("ParseScript: %v", err)
	}
	srv := New(sc, nil)
	addr, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	m := &testMock{t: t, srv: srv, base: "http://" + addr, client: &http.Client{Transport: tr}}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		tr.CloseIdleConnections()
	})
	return m
}

// do sends a request; key goes in Authorization: Bearer unless it starts
// with "x:", then in x-api-key.
func (m *testMock) do(ctx context.Context, method, path, key, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, m.base+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	switch {
	case strings.HasPrefix(key, "x:"):
		req.Header.Set("x-api-key", key[2:])
	case key != "":
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return m.client.Do(req)
}

// post sends a request that must get a response; it returns status,
// headers and the whole body.
func (m *testMock) post(path, key, body string) (int, http.Header, []byte) {
	m.t.Helper()
	resp, err := m.do(context.Background(), http.MethodPost, path, key, body)
	if err != nil {
		m.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		m.t.Fatalf("POST %s: read body: %v", path, err)
	}
	return resp.StatusCode, resp.Header, data
}

// waitStats polls Stats until cond holds or a second passes.
func (m *testMock) waitStats(cond func(Stats) bool) Stats {
	m.t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		st := m.srv.Stats()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("stats condition not met: %+v", st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func chatBody(model, user string, stream, includeUsage bool) string {
	b := map[string]any{
		"model": model,
		"messages": []map[string]any{
			{"role": "system", "content": "be brief"},
			{"role": "user", "content": user},
		},
	}
	if stream {
		b["stream"] = true
	}
	if includeUsage {
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	data, _ := json.Marshal(b)
	return string(data)
}

func messagesBody(model, user string, stream bool) string {
	b := map[string]any{
		"model":      model,
		"max_tokens": 100,
		"system":     "be brief",
		"messages": []map[string]any{
			{"role": "user", "content": []map[string]any{{"type": "text", "text": user}}},
		},
		"stream": stream,
	}
	data, _ := json.Marshal(b)
	return string(data)
}

// sseEvent is one server-sent event or comment.
type sseEvent struct {
	name    string // event: field ("" when absent)
	data    string // joined data: lines
	comment string // comment text for ": ..." lines
}

func (e sseEvent) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(e.data), &v); err != nil {
		t.Fatalf("event %q data is not JSON: %v: %s", e.name, err, e.data)
	}
	return v
}

type sseReader struct{ r *bufio.Reader }

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReader(r)} }

// next returns the next event; io.EOF on a clean end, another error on an
// abrupt one.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data []string
	seen := false
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && line == "" && !seen {
				return ev, io.EOF
			}
			if errors.Is(err, io.EOF) {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if !seen {
				continue
			}
			ev.data = strings.Join(data, "\n")
			return ev, nil
		case strings.HasPrefix(line, ":"):
			ev.comment = strings.TrimSpace(line[1:])
			seen = true
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
			seen = true
		case strings.HasPrefix(line, "data: "):
			data = append(data, line[len("data: "):])
			seen = true
		default:
			return ev, errors.New("bad SSE line: " + line)
		}
	}
}

// readAllSSE reads events to the end; err is nil on a clean end.
func readAllSSE(r io.Reader) ([]sseEvent, error) {
	sr := newSSEReader(r)
	var out []sseEvent
	for {
		ev, err := sr.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// streamOf posts and reads the whole SSE answer, failing on a transport
// error or a non-200 status.
func (m *testMock) streamOf(path, key, body string) []sseEvent {
	m.t.Helper()
	resp, err := m.do(context.Background(), http.MethodPost, path, key, body)
	if err != nil {
		m.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		m.t.Fatalf("POST %s: status %d: %s", path, resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		m.t.Fatalf("Content-Type = %q, want text/event-stream", ct)
	}
	evs, err := readAllSSE(resp.Body)
	if err != nil {
		m.t.Fatalf("read stream: %v", err)
	}
	return evs
}

// dig walks a decoded JSON value by keys and indexes.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func mustJSON(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, data)
	}
	return v
}
