package proxy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/translate"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// endpointsConfig has one provider of each kind, an OpenAI-kind provider
// without the Responses API (responses_api: translate), combos that mix
// the kinds, and a fusion combo.
const endpointsConfig = `
server: {listen: 127.0.0.1:0}
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: oa
    kind: openai
    base_url: http://upstream.test/v1
    models: [m1, emb]
    connections:
      - {id: a1, api_key: sk-a1}
      - {id: a2, api_key: sk-a2}
  - id: chatonly
    kind: openai
    responses_api: translate
    base_url: http://upstream.test/v1
    models: [m3]
    connections: [{id: t1, api_key: sk-t1}]
  - id: an
    kind: anthropic
    base_url: http://upstream.test/v1
    models: [c1]
    connections: [{id: k1, api_key: sk-k1}]
combos:
  - name: an-then-oa
    strategy: priority
    targets: [{model: an/c1}, {model: oa/m1}]
  - name: panel
    strategy: fusion
    judge: oa/m1
    targets: [{model: oa/m1}, {model: an/c1}]
`

// responseText is the output text of a Responses API answer.
func responseText(t *testing.T, body string) (status, text string) {
	t.Helper()
	var r struct {
		Object, Status string
		Output         []struct {
			Type    string
			Content []struct{ Type, Text string }
		}
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Object != "response" {
		t.Fatalf("not a Response object (%v): %s", err, body)
	}
	for _, it := range r.Output {
		for _, c := range it.Content {
			text += c.Text
		}
	}
	return r.Status, text
}

// The Responses API reaches every kind: translated to Messages for the
// anthropic kind, to Chat Completions for an OpenAI-kind provider with
// responses_api: translate, passed through to /responses otherwise; each
// streams the Responses event sequence.
func TestResponsesReachEveryKind(t *testing.T) {
	l := newLoop(t, endpointsConfig, "")
	for _, model := range []string{"an/c1", "chatonly/m3", "oa/m1"} {
		res, body := l.serve(l.request(wire.FormatResponses, `{"model":"`+model+`","instructions":"Be brief.","input":"hello there","store":false}`))
		if res.Status != 200 {
			t.Fatalf("%s: %d %s", model, res.Status, body)
		}
		if st, text := responseText(t, body); st != "completed" || text != "echo: hello there" {
			t.Fatalf("%s: status %q text %q", model, st, text)
		}
		res, body = l.serve(l.request(wire.FormatResponses, `{"model":"`+model+`","input":"hello there","stream":true}`))
		if res.Status != 200 || !strings.HasPrefix(res.HeaderValue("Content-Type"), "text/event-stream") {
			t.Fatalf("%s stream: %d %v", model, res.Status, res.Header)
		}
		var kinds []string
		var text strings.Builder
		for _, line := range strings.Split(body, "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Type  string
				Delta string
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("%s: event %q: %v", model, data, err)
			}
			kinds = append(kinds, ev.Type)
			if ev.Type == "response.output_text.delta" {
				text.WriteString(ev.Delta)
			}
		}
		if len(kinds) < 3 || kinds[0] != "response.created" || kinds[len(kinds)-1] != "response.completed" || text.String() != "echo: hello there" {
			t.Fatalf("%s stream events %v, text %q", model, kinds, text.String())
		}
	}
	for key, want := range map[string]uint64{"sk-k1|c1": 2, "sk-t1|m3": 2, "sk-a1|m1": 2} {
		if got := l.calls(strings.Split(key, "|")[0], strings.Split(key, "|")[1]); got != want {
			t.Errorf("%s: %d upstream calls, want %d", key, got, want)
		}
	}
}

// previous_response_id needs a provider that keeps responses: a
// translated target is a 400 naming the field, and a combo skips such a
// target (no upstream call, no failure recorded) for one that passes the
// request through.
func TestStatefulResponsesNeedANativeProvider(t *testing.T) {
	l := newLoop(t, endpointsConfig, "")
	stateful := `,"input":"hi","previous_response_id":"resp_1"}`
	res, body := l.serve(l.request(wire.FormatResponses, `{"model":"an/c1"`+stateful))
	if res.Status != 400 || !has(body, `"param":"previous_response_id"`) {
		t.Fatalf("anthropic kind: %d %s", res.Status, body)
	}
	res, body = l.serve(l.request(wire.FormatResponses, `{"model":"an/c1","input":"hi","store":true}`))
	if res.Status != 400 || !has(body, `"param":"store"`) {
		t.Fatalf("store: true to the anthropic kind: %d %s", res.Status, body)
	}
	res, body = l.serve(l.request(wire.FormatResponses, `{"model":"chatonly/m3"`+stateful))
	if res.Status != 400 || !has(body, `"param":"previous_response_id"`) {
		t.Fatalf("responses_api: translate: %d %s", res.Status, body)
	}
	res, body = l.serve(l.request(wire.FormatResponses, `{"model":"an-then-oa"`+stateful))
	if res.Status != 200 || res.Route.Provider != "oa" || res.Route.Attempts != 1 {
		t.Fatalf("combo: %d %+v %s", res.Status, res.Route, body)
	}
	if l.calls("sk-k1", "c1") != 0 {
		t.Fatal("the untranslatable target was called")
	}
	if h := l.eng.Health(); h.Providers["an"].FailureCount != 0 {
		t.Fatalf("a refused body is not an upstream failure: %+v", h)
	}
}

// count_tokens is forwarded to the anthropic kind and estimated by the
// gateway for the openai kind, after model resolution; a combo fails over
// from a failing Anthropic target to the estimate.
func TestCountTokensPerKind(t *testing.T) {
	l := newLoop(t, endpointsConfig, "")
	body := `{"model":"%s","messages":[{"role":"user","content":"Say hello to the compatibility suite."}]}`
	res, out := l.serve(l.request(wire.FormatCountTokens, strings.Replace(body, "%s", "an/c1", 1)))
	if res.Status != 200 || !has(out, `"input_tokens"`) || res.Route.Provider != "an" || res.Route.Attempts != 1 || l.calls("sk-k1", "c1") != 1 {
		t.Fatalf("forwarded: %d %+v %s", res.Status, res.Route, out)
	}
	if res.HeaderValue("X-Breakwater-Token-Count") != "" {
		t.Fatal("a forwarded count is not an estimate")
	}
	oaBody := strings.Replace(body, "%s", "oa/m1", 1)
	res, out = l.serve(l.request(wire.FormatCountTokens, oaBody))
	want, _ := translate.CountTokens([]byte(oaBody))
	if res.Status != 200 || out != string(want) || res.Route.Provider != "oa" || res.Route.Attempts != 0 || res.HeaderValue("X-Breakwater-Token-Count") != "estimated" {
		t.Fatalf("estimated: %d %+v %s (want %s)", res.Status, res.Route, out, want)
	}
	if l.up.Calls() != 1 {
		t.Fatalf("the estimate called the upstream: %d calls", l.up.Calls())
	}
	res, out = l.serve(l.request(wire.FormatCountTokens, strings.Replace(body, "%s", "nope", 1)))
	if res.Status != 404 || !has(out, `"type":"error"`) {
		t.Fatalf("unknown model: %d %s (want 404 in the Anthropic shape)", res.Status, out)
	}
	l2 := newLoop(t, endpointsConfig, `rules: [{key: sk-k1, responses: [{status: 529}]}]`)
	res, out = l2.serve(l2.request(wire.FormatCountTokens, strings.Replace(body, "%s", "an-then-oa", 1)))
	if res.Status != 200 || res.Route.Provider != "oa" || !has(out, `"input_tokens"`) {
		t.Fatalf("failover to the estimate: %d %+v %s", res.Status, res.Route, out)
	}
	if got := l2.counter("breakwater_attempts_total", map[string]string{"connection": "k1"}); got != 1 {
		t.Fatalf("the overloaded Anthropic target's failure recorded %v times, want 1", got)
	}
}

// Embeddings reach OpenAI-kind providers and fail over like chat; an
// Anthropic-kind target is refused with a 400 that says why.
func TestEmbeddingsFailOverAndRefuseAnthropic(t *testing.T) {
	l := newLoop(t, endpointsConfig, `rules: [{key: sk-a1, responses: [{status: 503}]}]`)
	res, body := l.serve(l.request(wire.FormatEmbeddings, `{"model":"oa/emb","input":["alpha","beta"],"encoding_format":"float"}`))
	if res.Status != 200 || res.Route.Connection != "a2" || res.Route.Attempts != 2 {
		t.Fatalf("embeddings: %d %+v %s", res.Status, res.Route, body)
	}
	var doc struct {
		Data []struct{ Embedding []float64 }
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || len(doc.Data) != 2 || len(doc.Data[0].Embedding) == 0 {
		t.Fatalf("embeddings body %s: %v", body, err)
	}
	if got := l.counter("breakwater_attempts_total", map[string]string{"connection": "a1", "reason": "transient"}); got != 1 {
		t.Fatalf("a1's 503 recorded %v times, want 1", got)
	}
	res, body = l.serve(l.request(wire.FormatEmbeddings, `{"model":"an/c1","input":"x"}`))
	if res.Status != 400 || errorCode(t, body) != "wrong_endpoint" || !has(body, "openai-kind providers only") {
		t.Fatalf("embeddings → anthropic: %d %s", res.Status, body)
	}
	res, body = l.serve(l.request(wire.FormatCompletions, `{"model":"an/c1","prompt":"x"}`))
	if res.Status != 400 || errorCode(t, body) != "wrong_endpoint" {
		t.Fatalf("completions → anthropic: %d %s", res.Status, body)
	}
}

// Legacy completions reach OpenAI-kind providers, streaming and not; the
// stream is relayed as is (its watchdogs read the chunks' text).
func TestLegacyCompletions(t *testing.T) {
	l := newLoop(t, endpointsConfig, "")
	res, body := l.serve(l.request(wire.FormatCompletions, `{"model":"oa/m1","prompt":"hello there"}`))
	if res.Status != 200 || !has(body, `"object":"text_completion"`) || !has(body, `"text":"echo: hello there"`) {
		t.Fatalf("completions: %d %s", res.Status, body)
	}
	res, body = l.serve(l.request(wire.FormatCompletions, `{"model":"oa/m1","prompt":"hello there","stream":true}`))
	if res.Status != 200 || !has(body, "data: [DONE]") || !has(body, `"object":"text_completion"`) {
		t.Fatalf("completions stream: %d %s", res.Status, body)
	}
}

// A fusion combo answers a Responses client: the request is translated
// to Chat Completions for the panel and the answer (or its stream) back.
func TestFusionAnswersAResponsesClient(t *testing.T) {
	l := newLoop(t, endpointsConfig, `rules: [{model: m1, responses: [{text: "ALPHA"}]}, {model: c1, responses: [{text: "CLAUDE"}]}]`)
	res, body := l.serve(l.request(wire.FormatResponses, `{"model":"panel","input":"hello there"}`))
	if res.Status != 200 {
		t.Fatalf("fusion: %d %s", res.Status, body)
	}
	if st, text := responseText(t, body); st != "completed" || !has(text, "ALPHA") {
		t.Fatalf("fusion answer %q %q", st, text)
	}
	res, body = l.serve(l.request(wire.FormatResponses, `{"model":"panel","input":"hello there","stream":true}`))
	if res.Status != 200 || !has(body, "event: response.created") || !has(body, "event: response.completed") || !has(body, "ALPHA") {
		t.Fatalf("fusion stream: %d %s", res.Status, body)
	}
}
