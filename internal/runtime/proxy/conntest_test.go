package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstreamtest"
)

// seen is one upstream call as the handler received it.
type seen struct {
	path string
	hdr  http.Header
	body map[string]any
}

// recordingUpstream serves with next after noting each call; refuse, when
// it returns a body, answers 400 with it instead.
func recordingUpstream(next http.Handler, refuse func(map[string]any) string) (*upstreamtest.Upstream, func() []seen) {
	var mu sync.Mutex
	var calls []seen
	up := upstreamtest.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		calls = append(calls, seen{path: r.URL.Path, hdr: r.Header.Clone(), body: m})
		mu.Unlock()
		if refuse != nil {
			if msg := refuse(m); msg != "" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(400)
				_, _ = w.Write([]byte(msg))
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		next.ServeHTTP(w, r)
	}))
	return up, func() []seen { mu.Lock(); defer mu.Unlock(); return append([]seen(nil), calls...) }
}

// conn returns provider/connection of loopConfig's topology.
func conn(t *testing.T, l *loop, provider, id string) *topology.Connection {
	t.Helper()
	p, ok := l.p.Routing().Topology.Provider(provider)
	if !ok {
		t.Fatalf("no provider %s", provider)
	}
	for _, c := range p.Connections {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no connection %s/%s", provider, id)
	return nil
}

// The test request is one user message, one output token, not streamed,
// in the kind's own format, with the connection's credential.
func TestTestConnectionRequestShape(t *testing.T) {
	m := mock.New(nil, nil)
	t.Cleanup(func() { _ = m.Close() })
	up, calls := recordingUpstream(m.Handler(), nil)
	l := newLoop(t, loopConfig, "", func(s *setup) { s.proxy.Upstream = up })

	res, err := l.p.TestConnection(context.Background(), conn(t, l, "alpha", "a2"), "m1")
	if err != nil || !res.OK || res.Status != 200 || res.Model != "m1" || res.BreakerBefore != "CLOSED" || res.BreakerAfter != "CLOSED" {
		t.Fatalf("alpha/a2: %+v %v", res, err)
	}
	res, err = l.p.TestConnection(context.Background(), conn(t, l, "claude", "k1"), "c1")
	if err != nil || !res.OK || res.Status != 200 {
		t.Fatalf("claude/k1: %+v %v", res, err)
	}
	got := calls()
	if len(got) != 2 {
		t.Fatalf("%d upstream calls, want 2", len(got))
	}
	for i, want := range []struct{ path, header, value, model string }{
		{"/v1/chat/completions", "Authorization", "Bearer sk-a2", "m1"},
		{"/v1/messages", "X-Api-Key", "sk-k1", "c1"},
	} {
		c := got[i]
		if c.path != want.path || c.hdr.Get(want.header) != want.value || c.body["model"] != want.model ||
			c.body["max_tokens"] != float64(1) || c.body["stream"] != false || len(c.body["messages"].([]any)) != 1 {
			t.Errorf("call %d: %s %v %v, want %s with %s and a one-token %s request", i, c.path, c.hdr, c.body, want.path, want.header, want.model)
		}
	}
	if v := got[1].hdr.Get("anthropic-version"); v != "2023-06-01" {
		t.Errorf("anthropic-version %q, want the default 2023-06-01", v)
	}
	if l.up.Calls() != 0 {
		t.Fatal("the test went through another upstream client")
	}
}

// OpenAI's reasoning models refuse max_tokens and name
// max_completion_tokens: the test asks once more with it and passes.
func TestTestConnectionRetriesWithMaxCompletionTokens(t *testing.T) {
	m := mock.New(nil, nil)
	t.Cleanup(func() { _ = m.Close() })
	up, calls := recordingUpstream(m.Handler(), func(body map[string]any) string {
		if _, ok := body["max_tokens"]; ok {
			return `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`
		}
		return ""
	})
	l := newLoop(t, loopConfig, "", func(s *setup) { s.proxy.Upstream = up })
	res, err := l.p.TestConnection(context.Background(), conn(t, l, "alpha", "a1"), "m1")
	got := calls()
	if err != nil || !res.OK || len(got) != 2 || got[1].body["max_completion_tokens"] != float64(1) || got[1].body["max_tokens"] != nil {
		t.Fatalf("%+v %v after %d calls (%v)", res, err, len(got), got)
	}
	// Any other 400 is the answer: no second call.
	up2, calls2 := recordingUpstream(m.Handler(), func(map[string]any) string {
		return `{"error":{"message":"The model 'm1' does not exist","type":"invalid_request_error","code":"model_not_found"}}`
	})
	l2 := newLoop(t, loopConfig, "", func(s *setup) { s.proxy.Upstream = up2 })
	res, err = l2.p.TestConnection(context.Background(), conn(t, l2, "alpha", "a1"), "m1")
	if err != nil || res.OK || res.Status != 400 || res.Message != "The model 'm1' does not exist" || len(calls2()) != 1 {
		t.Fatalf("plain 400: %+v %v after %d calls", res, err, len(calls2()))
	}
	if st := l2.eng.BreakerSnapshot("alpha"); st.FailureCount != 0 {
		t.Fatalf("a failed test was recorded: %+v", st)
	}
}
