package orchestrate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
	"go.uber.org/goleak"
)

// upstream is a started mock plus an Exec that POSTs to it with the target
// name as the model, recording what it sent and received.
type upstream struct {
	t      *testing.T
	srv    *mock.Server
	base   string
	client *http.Client

	mu    sync.Mutex
	sent  map[string][][]byte // request bodies by target
	oks   [][]byte            // 2xx response bodies, in completion order
	calls []string            // targets in call order
}

// newUpstream starts the mock with the YAML script and checks for leaked
// goroutines when the test ends.
func newUpstream(t *testing.T, script string) *upstream {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) }) // registered first, runs last
	sc, err := mock.ParseScript([]byte(script))
	if err != nil {
		t.Fatalf("ParseScript: %v", err)
	}
	srv := mock.New(sc, nil)
	addr, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	u := &upstream{t: t, srv: srv, base: "http://" + addr, client: &http.Client{Transport: tr}, sent: map[string][][]byte{}}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("mock Close: %v", err)
		}
		tr.CloseIdleConnections()
	})
	return u
}

// exec is the test's Exec: what the server's executor does, minus the
// resilience — set the model to the target, POST, non-2xx is an error.
func (u *upstream) exec(ctx context.Context, t Target, body []byte) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, fmt.Errorf("exec: bad body: %w", err)
	}
	fields["model"], _ = json.Marshal(t.Name)
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("exec: encode: %w", err)
	}
	u.mu.Lock()
	u.sent[t.Name] = append(u.sent[t.Name], body)
	u.calls = append(u.calls, t.Name)
	u.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.base+"/v1/chat/completions", bytes.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := u.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", t.Name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("exec %s: read: %w", t.Name, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("exec %s: upstream status %d", t.Name, resp.StatusCode)
	}
	u.mu.Lock()
	u.oks = append(u.oks, data)
	u.mu.Unlock()
	return data, nil
}

// sentTo returns the bodies sent to target.
func (u *upstream) sentTo(target string) [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sent[target]
}

// okUsageSum sums prompt/completion/total tokens over every 2xx response.
func (u *upstream) okUsageSum() (prompt, completion, total int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, b := range u.oks {
		var c testCompletion
		if err := json.Unmarshal(b, &c); err != nil {
			u.t.Fatalf("mock answer: %v", err)
		}
		prompt += c.Usage.PromptTokens
		completion += c.Usage.CompletionTokens
		total += c.Usage.TotalTokens
	}
	return prompt, completion, total
}

// testCompletion is the part of a chat.completion the tests read.
type testCompletion struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func decodeCompletion(t *testing.T, b []byte) testCompletion {
	t.Helper()
	var c testCompletion
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("decode completion %s: %v", b, err)
	}
	if len(c.Choices) == 0 {
		t.Fatalf("completion has no choices: %s", b)
	}
	return c
}

// testRequest is the part of a request the tests read.
type testRequest struct {
	Model         string            `json:"model"`
	Stream        *bool             `json:"stream"`
	StreamOptions json.RawMessage   `json:"stream_options"`
	Temperature   *float64          `json:"temperature"`
	Tools         json.RawMessage   `json:"tools"`
	MaxTokens     int               `json:"max_tokens"`
	Messages      []json.RawMessage `json:"messages"`
}

type testMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
}

func decodeRequest(t *testing.T, b []byte) (testRequest, []testMessage) {
	t.Helper()
	var r testRequest
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("decode request %s: %v", b, err)
	}
	msgs := make([]testMessage, len(r.Messages))
	for i, m := range r.Messages {
		if err := json.Unmarshal(m, &msgs[i]); err != nil {
			t.Fatalf("decode message %s: %v", m, err)
		}
	}
	return r, msgs
}

// text returns a message's string content.
func (m testMessage) text() string {
	var s string
	_ = json.Unmarshal(m.Content, &s)
	return s
}

// clientBody is a streaming client request with fields the rewrite must keep.
const clientBody = `{"model":"my-combo","stream":true,"stream_options":{"include_usage":true},"temperature":0.3,
"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}],
"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What is the capital of France?"}]}`
