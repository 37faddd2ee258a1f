package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
)

// addSeeds adds every file of the testdata directories as a seed.
func addSeeds(f *testing.F, dirs ...string) {
	f.Helper()
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join("testdata", dir, "*"))
		if err != nil {
			f.Fatal(err)
		}
		for _, name := range files {
			b, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

const fuzzModel = "fuzz/model"

// responsesCall is a parsed Responses request (the SDK's full shape) for
// the Responses answer and stream translators.
func responsesCall(tb testing.TB) *ResponsesCall {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "responses", "requests", "sdk_full.json"))
	if err != nil {
		tb.Fatal(err)
	}
	c, err := ParseResponses(b)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// checkFieldError fails unless err is a FieldError naming a field.
func checkFieldError(t *testing.T, name string, err error) {
	t.Helper()
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field == "" {
		t.Fatalf("%s: an error that is not a FieldError: %v", name, err)
	}
}

// checkModel fails unless out is JSON whose model is fuzzModel.
func checkModel(t *testing.T, name string, out []byte) {
	t.Helper()
	var doc struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || doc.Model != fuzzModel {
		t.Fatalf("%s: output %v, model %q:\n%s", name, err, doc.Model, out)
	}
}

// FuzzRequests runs every request translator (Chat Completions ⇄
// Messages, Responses → both, count_tokens): each answers a valid JSON
// body (carrying the requested model where there is one), or a FieldError
// naming a field.
func FuzzRequests(f *testing.F) {
	addSeeds(f, "openai/requests", "anthropic/requests", "responses/requests")
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{}}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for name, tr := range map[string]func([]byte, string) ([]byte, error){
			"openai→anthropic": OpenAIToAnthropicRequest,
			"anthropic→openai": AnthropicToOpenAIRequest,
		} {
			out, err := tr(body, fuzzModel)
			if err != nil {
				checkFieldError(t, name, err)
				continue
			}
			checkModel(t, name, out)
		}
		if c, err := ParseResponses(body); err != nil {
			checkFieldError(t, "responses", err)
		} else {
			for name, tr := range map[string]func(string) ([]byte, error){
				"responses→chat": c.ChatRequest, "responses→anthropic": c.AnthropicRequest,
			} {
				if out, err := tr(fuzzModel); err != nil {
					checkFieldError(t, name, err)
				} else {
					checkModel(t, name, out)
				}
			}
		}
		if out, err := CountTokens(body); err != nil {
			checkFieldError(t, "count_tokens", err)
		} else if !json.Valid(out) {
			t.Fatalf("count_tokens: invalid JSON %s", out)
		}
	})
}

// FuzzResponses runs both response translators and both error
// translators: a translated answer is valid JSON (or an error), an error
// body always becomes valid JSON.
func FuzzResponses(f *testing.F) {
	addSeeds(f, "openai/responses", "anthropic/responses", "openai/errors", "anthropic/errors")
	f.Add([]byte(`<html>502</html>`))
	c := responsesCall(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		for name, tr := range map[string]func([]byte, string) ([]byte, error){
			"anthropic→openai":    AnthropicToOpenAIResponse,
			"openai→anthropic":    OpenAIToAnthropicResponse,
			"chat→responses":      c.ChatResponse,
			"anthropic→responses": c.AnthropicResponse,
		} {
			if out, err := tr(body, fuzzModel); err == nil && !json.Valid(out) {
				t.Fatalf("%s: invalid JSON:\n%s", name, out)
			}
		}
		for _, status := range []int{400, 429, 529} {
			if out := ErrorToOpenAI(status, body); !json.Valid(out) {
				t.Fatalf("ErrorToOpenAI(%d): invalid JSON:\n%s", status, out)
			}
			if out := ErrorToAnthropic(status, body); !json.Valid(out) {
				t.Fatalf("ErrorToAnthropic(%d): invalid JSON:\n%s", status, out)
			}
		}
	})
}

// FuzzStreams runs both stream translators over the events of an
// arbitrary stream: every event they emit carries valid JSON (or the
// OpenAI "[DONE]" marker) and survives SSE framing, until the first event
// they refuse.
func FuzzStreams(f *testing.F) {
	addSeeds(f, "openai/streams", "anthropic/streams")
	c := responsesCall(f)
	f.Fuzz(func(t *testing.T, stream []byte) {
		for name, newTr := range map[string]func(string) Translator{
			"openai→anthropic":    NewOpenAIToAnthropicStream,
			"anthropic→openai":    NewAnthropicToOpenAIStream,
			"chat→responses":      c.NewChatStream,
			"anthropic→responses": c.NewAnthropicStream,
		} {
			tr := newTr(fuzzModel)
			rd := sse.NewReader(bytes.NewReader(stream))
			check := func(evs []sse.Event) {
				for _, ev := range evs {
					if string(ev.Data) != "[DONE]" && !json.Valid(ev.Data) {
						t.Fatalf("%s: emitted invalid JSON %q", name, ev.Data)
					}
					back, err := sse.NewReader(bytes.NewReader(sse.AppendEvent(nil, ev))).Next()
					if err != nil || back.Event != ev.Event || !bytes.Equal(back.Data, ev.Data) {
						t.Fatalf("%s: event %+v does not survive framing: %+v %v", name, ev, back, err)
					}
				}
			}
			for {
				ev, err := rd.Next()
				if err != nil {
					if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Fatalf("%s: reader: %v", name, err)
					}
					check(tr.Finish())
					break
				}
				out, err := tr.Event(ev)
				if err != nil {
					break
				}
				check(out)
			}
		}
	})
}
