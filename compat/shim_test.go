package compat

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
	"github.com/breakwater-dev/breakwater/internal/runtime/translate"
)

// The translator preview: until the request path wires the Responses
// translators (phase 2), a test shim serves POST /v1/responses with them
// in front of the mock's Messages or Chat Completions endpoint, so the
// real Responses clients check the translators' requests, answers and
// event streams today. It is test code only: no routing, no resilience.

// shimTarget is the upstream format a shim translates to.
type shimTarget string

const (
	shimAnthropic shimTarget = "anthropic"
	shimChat      shimTarget = "chat"
)

// startShim serves /v1/responses translated for target, upstream the mock.
func startShim(t *testing.T, mockURL string, target shimTarget) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/responses" || r.Method != http.MethodPost {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		serveShim(w, body, mockURL, target)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func shimError(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func serveShim(w http.ResponseWriter, body []byte, mockURL string, target shimTarget) {
	call, err := translate.ParseResponses(body)
	var up []byte
	if err == nil {
		if target == shimAnthropic {
			up, err = call.AnthropicRequest("")
		} else {
			up, err = call.ChatRequest("")
		}
	}
	if err != nil {
		var fe *translate.FieldError
		if errors.As(err, &fe) {
			shimError(w, http.StatusBadRequest, fmt.Appendf(nil, `{"error":{"message":%q,"type":"invalid_request_error","param":%q,"code":null}}`, fe.Error(), fe.Field))
			return
		}
		shimError(w, http.StatusBadRequest, fmt.Appendf(nil, `{"error":{"message":%q,"type":"invalid_request_error"}}`, err.Error()))
		return
	}
	path := "/v1/chat/completions"
	if target == shimAnthropic {
		path = "/v1/messages"
	}
	req, err := http.NewRequest(http.MethodPost, mockURL+path, bytes.NewReader(up))
	if err != nil {
		shimError(w, http.StatusInternalServerError, []byte(`{"error":{"message":"shim","type":"server_error"}}`))
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-shim")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		shimError(w, http.StatusBadGateway, []byte(`{"error":{"message":"upstream unreachable","type":"server_error"}}`))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		shimError(w, resp.StatusCode, translate.ErrorToOpenAI(resp.StatusCode, b))
		return
	}
	if resp.Header.Get("Content-Type") == "application/json" {
		b, _ := io.ReadAll(resp.Body)
		var out []byte
		if target == shimAnthropic {
			out, err = call.AnthropicResponse(b, "")
		} else {
			out, err = call.ChatResponse(b, "")
		}
		if err != nil {
			shimError(w, http.StatusBadGateway, fmt.Appendf(nil, `{"error":{"message":%q,"type":"server_error"}}`, err.Error()))
			return
		}
		shimError(w, http.StatusOK, out)
		return
	}
	tr := call.NewChatStream("")
	if target == shimAnthropic {
		tr = call.NewAnthropicStream("")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	rd := sse.NewReader(resp.Body)
	var buf []byte
	write := func(evs []sse.Event) {
		buf = buf[:0]
		for _, e := range evs {
			buf = sse.AppendEvent(buf, e)
		}
		_, _ = w.Write(buf)
		if flusher != nil {
			flusher.Flush()
		}
	}
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		out, terr := tr.Event(ev)
		if terr != nil {
			return
		}
		write(out)
	}
	write(tr.Finish())
}
