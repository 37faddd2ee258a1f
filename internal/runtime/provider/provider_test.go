package provider

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/frames"
	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
	"github.com/breakwater-dev/breakwater/internal/runtime/translate"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Every (provider, client endpoint) pair: the upstream URL, whether it is
// translated or answered by the gateway, and the upstream format. The
// Responses API reaches every kind (passed through to an OpenAI-kind
// provider unless responses_api: translate); count_tokens is forwarded to
// the anthropic kind and estimated for the openai kind; embeddings and
// legacy completions reach the openai kind only.
func TestExchanges(t *testing.T) {
	const (
		openAIKind = iota
		openAITranslate
		anthropicKind
	)
	adapters := map[int]*Adapter{}
	for i, o := range []struct {
		kind, rs string
	}{{KindOpenAI, ""}, {KindOpenAI, ResponsesTranslate}, {KindAnthropic, ""}} {
		a, err := For(o.kind, Options{ResponsesAPI: o.rs})
		if err != nil {
			t.Fatal(err)
		}
		adapters[i] = a
	}
	tests := []struct {
		adapter    int
		client     wire.Format
		url        string // "" = not served, "local" = answered by the gateway
		translated bool
		upstream   wire.Format
	}{
		{openAIKind, wire.FormatChat, "https://u/v1/chat/completions", false, wire.FormatChat},
		{openAIKind, wire.FormatMessages, "https://u/v1/chat/completions", true, wire.FormatChat},
		{openAIKind, wire.FormatResponses, "https://u/v1/responses", false, wire.FormatResponses},
		{openAIKind, wire.FormatCountTokens, "local", true, wire.FormatChat},
		{openAIKind, wire.FormatEmbeddings, "https://u/v1/embeddings", false, wire.FormatEmbeddings},
		{openAIKind, wire.FormatCompletions, "https://u/v1/completions", false, wire.FormatCompletions},
		{openAITranslate, wire.FormatChat, "https://u/v1/chat/completions", false, wire.FormatChat},
		{openAITranslate, wire.FormatResponses, "https://u/v1/chat/completions", true, wire.FormatChat},
		{openAITranslate, wire.FormatEmbeddings, "https://u/v1/embeddings", false, wire.FormatEmbeddings},
		{anthropicKind, wire.FormatChat, "https://u/v1/messages", true, wire.FormatMessages},
		{anthropicKind, wire.FormatMessages, "https://u/v1/messages", false, wire.FormatMessages},
		{anthropicKind, wire.FormatResponses, "https://u/v1/messages", true, wire.FormatMessages},
		{anthropicKind, wire.FormatCountTokens, "https://u/v1/messages/count_tokens", false, wire.FormatCountTokens},
		{anthropicKind, wire.FormatEmbeddings, "", false, 0},
		{anthropicKind, wire.FormatCompletions, "", false, 0},
	}
	for _, tt := range tests {
		a := adapters[tt.adapter]
		e := a.Exchange(tt.client)
		name := fmt.Sprintf("%s(%d) ← %s", a.Kind(), tt.adapter, tt.client)
		if tt.url == "" {
			if e != nil {
				t.Errorf("%s: served at %s, want no exchange", name, e.URL("https://u/v1", nil))
			}
			continue
		}
		if e == nil {
			t.Fatalf("%s: no exchange", name)
		}
		if tt.url == "local" {
			if !e.Local() {
				t.Errorf("%s: want a local answer", name)
			}
			continue
		}
		if e.Local() {
			t.Errorf("%s: local, want %s", name, tt.url)
		}
		if got := e.URL("https://u/v1", nil); got != tt.url || e.Translated() != tt.translated || e.Upstream != tt.upstream || e.Client != tt.client {
			t.Errorf("%s: url %s translated %v upstream %s", name, got, e.Translated(), e.Upstream)
		}
	}
	if _, ok := ForKind("bedrock"); ok {
		t.Error("an unknown kind must not resolve")
	}
	if got := strings.Join(KindsServing(wire.FormatEmbeddings), ","); got != "openai" {
		t.Errorf("embeddings served by %s", got)
	}
}

// providers[].responses_api: native or translate on the openai kind;
// anthropic has no Responses API to pass through to.
func TestForOptions(t *testing.T) {
	for _, tc := range []struct {
		kind, rs, err string
	}{
		{KindOpenAI, "", ""},
		{KindOpenAI, ResponsesNative, ""},
		{KindOpenAI, ResponsesTranslate, ""},
		{KindAnthropic, ResponsesTranslate, ""},
		{KindAnthropic, ResponsesNative, "no Responses API"},
		{KindOpenAI, "chat", `must be "native" or "translate"`},
		{"bedrock", "", "unknown provider kind"},
	} {
		_, err := For(tc.kind, Options{ResponsesAPI: tc.rs})
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("For(%s, %q) = %v, want %q", tc.kind, tc.rs, err, tc.err)
		}
	}
}

// Query parameters: ?beta=true reaches the anthropic kind's own endpoints
// (escaped), never a translated endpoint; other parameters never do.
func TestURLQuery(t *testing.T) {
	q := []wire.Header{{Name: "beta", Value: "true"}, {Name: "api-version", Value: "x&y"}}
	an, _ := ForKind(KindAnthropic)
	if got := an.Exchange(wire.FormatMessages).URL("https://u/v1", q); got != "https://u/v1/messages?beta=true" {
		t.Errorf("messages URL %s", got)
	}
	if got := an.Exchange(wire.FormatCountTokens).URL("https://u/v1", []wire.Header{{Name: "beta", Value: "a b"}}); got != "https://u/v1/messages/count_tokens?beta=a+b" {
		t.Errorf("count_tokens URL %s", got)
	}
	if got := an.Exchange(wire.FormatChat).URL("https://u/v1", q); got != "https://u/v1/messages" {
		t.Errorf("a chat client's query reached the translated endpoint: %s", got)
	}
	oa, _ := ForKind(KindOpenAI)
	if got := oa.Exchange(wire.FormatMessages).URL("https://u/v1", q); got != "https://u/v1/chat/completions" {
		t.Errorf("openai URL %s", got)
	}
	if got := strings.Join(ForwardableQuery(), ","); got != "beta" {
		t.Errorf("ForwardableQuery = %s", got)
	}
}

// The event reader follows the upstream format: an Anthropic text delta
// is content for the anthropic kind whatever the client speaks.
func TestExchangeEventsFollowTheUpstream(t *testing.T) {
	ev := sse.Event{Event: "content_block_delta", Data: []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hey"}}`)}
	an, _ := ForKind(KindAnthropic)
	for _, f := range []wire.Format{wire.FormatChat, wire.FormatMessages} {
		if in := an.Exchange(f).Events()(ev); in.Bytes != 3 {
			t.Errorf("client %s: anthropic text delta read as %+v", f, in)
		}
	}
	oa, _ := ForKind(KindOpenAI)
	if in := oa.Exchange(wire.FormatResponses).Events()(sse.Event{Data: []byte(`{"type":"response.output_text.delta","delta":"hi"}`)}); in.Bytes != 2 {
		t.Errorf("responses delta read as %+v", in)
	}
	if got := frames.Chat(sse.Event{Data: []byte(`{"choices":[{"delta":{"content":"abc"}}]}`)}); oa.Exchange(wire.FormatChat).Events()(sse.Event{Data: []byte(`{"choices":[{"delta":{"content":"abc"}}]}`)}) != got {
		t.Error("openai chat exchange must read chat events")
	}
}

// Credentials and forwarded headers: the openai kind sends a bearer token
// and forwards nothing; the anthropic kind sends x-api-key and forwards
// anthropic-version (default 2023-06-01) and anthropic-beta.
func TestSetHeaders(t *testing.T) {
	oa, _ := ForKind(KindOpenAI)
	h := http.Header{}
	oa.SetHeaders(h, "sk-1", []wire.Header{{Name: "anthropic-version", Value: "2024-01-01"}})
	if h.Get("Authorization") != "Bearer sk-1" || h.Get("anthropic-version") != "" || h.Get("x-api-key") != "" {
		t.Fatalf("openai headers %v", h)
	}
	an, _ := ForKind(KindAnthropic)
	h = http.Header{}
	an.SetHeaders(h, "sk-2", nil)
	if h.Get("x-api-key") != "sk-2" || h.Get("anthropic-version") != "2023-06-01" || h.Get("anthropic-beta") != "" || h.Get("Authorization") != "" {
		t.Fatalf("anthropic defaults %v", h)
	}
	h = http.Header{}
	an.SetHeaders(h, "sk-2", []wire.Header{{Name: "anthropic-version", Value: "2024-01-01"}, {Name: "anthropic-beta", Value: "tools-2024"}})
	if h.Get("anthropic-version") != "2024-01-01" || h.Get("anthropic-beta") != "tools-2024" {
		t.Fatalf("anthropic forwarded %v", h)
	}
	if got := strings.Join(Forwardable(), ","); got != "anthropic-version,anthropic-beta" {
		t.Fatalf("Forwardable = %s", got)
	}
	if !an.UsageWall() || oa.UsageWall() {
		t.Fatal("only the anthropic kind has the usage wall")
	}
}

// Request rewrites the model in a copy when no translation is needed and
// translates otherwise; the orchestrations' Translation covers both ways.
func TestRequestAndTranslation(t *testing.T) {
	body := []byte(`{"model":"alias","messages":[{"role":"user","content":"hi"}]}`)
	req, err := wire.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBody(body, req)
	oa, _ := ForKind(KindOpenAI)
	out, err := oa.Exchange(wire.FormatChat).Request(&b, "gpt-x")
	if err != nil || !strings.Contains(string(out), `"model":"gpt-x"`) || !strings.Contains(string(body), `"alias"`) {
		t.Fatalf("rewrite: %s %v (original %s)", out, err, body)
	}
	same, _ := oa.Exchange(wire.FormatChat).Request(&b, "alias")
	if &same[0] == &body[0] {
		t.Fatal("an unchanged body must still be copied")
	}
	an, _ := ForKind(KindAnthropic)
	out, err = an.Exchange(wire.FormatChat).Request(&b, "claude-x")
	if err != nil || !strings.Contains(string(out), `"max_tokens"`) {
		t.Fatalf("translated: %s %v", out, err)
	}
	if Translation(wire.FormatMessages, wire.FormatChat) == nil || !Translation(wire.FormatMessages, wire.FormatChat).Translated() {
		t.Fatal("messages → chat must be a translation")
	}
	if e := Translation(wire.FormatChat, wire.FormatChat); e == nil || e.Translated() {
		t.Fatal("chat → chat is the identity")
	}
	if e := Translation(wire.FormatResponses, wire.FormatChat); e == nil || !e.Translated() {
		t.Fatal("responses → chat must be a translation (fusion and pipeline combos)")
	}
	if Translation(wire.FormatCountTokens, wire.FormatChat) != nil || Translation(wire.FormatEmbeddings, wire.FormatChat) != nil {
		t.Fatal("count_tokens and embeddings have no chat translation")
	}
}

// A Responses body is parsed once per request: the request, the answer
// and the stream of an exchange, and a failover to the other kind, read
// the same translate.ResponsesCall; the answer echoes the request.
func TestResponsesExchangeParsesOnce(t *testing.T) {
	body := []byte(`{"model":"m","instructions":"Be brief.","input":"hi","tools":[{"type":"function","name":"read_file","parameters":{"type":"object"}}],"store":false}`)
	req, err := wire.ParseResponses(body)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBody(body, req)
	an, _ := ForKind(KindAnthropic)
	ex := an.Exchange(wire.FormatResponses)
	up, err := ex.Request(&b, "claude-x")
	if err != nil || !strings.Contains(string(up), `"system":"Be brief."`) || !strings.Contains(string(up), `"input_schema"`) {
		t.Fatalf("anthropic request: %s %v", up, err)
	}
	first := b.rs
	chatOnly, _ := For(KindOpenAI, Options{ResponsesAPI: ResponsesTranslate})
	up, err = chatOnly.Exchange(wire.FormatResponses).Request(&b, "gpt-x")
	if err != nil || !strings.Contains(string(up), `"role":"system"`) || b.rs != first {
		t.Fatalf("chat request: %s %v (parsed again: %v)", up, err, b.rs != first)
	}
	answer := []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":1}}`)
	out, err := ex.Response(&b, answer, "claude-x")
	if err != nil || !strings.Contains(string(out), `"object":"response"`) || !strings.Contains(string(out), `"instructions":"Be brief."`) {
		t.Fatalf("response: %s %v", out, err)
	}
	if ex.Stream(&b, "claude-x") == nil {
		t.Fatal("a translated Responses exchange streams through a translator")
	}
	if ev := ex.Events()(sse.Event{Data: []byte(`{"type":"content_block_delta","delta":{"type":"text_delta","text":"abc"}}`)}); ev.Bytes != 3 {
		t.Fatalf("the watchdogs read the upstream's (Messages) events: %+v", ev)
	}
	// previous_response_id: a 400 naming it for a translation, passed
	// through to a native Responses API.
	body = []byte(`{"model":"m","input":"hi","previous_response_id":"resp_1"}`)
	req, _ = wire.ParseResponses(body)
	b = NewBody(body, req)
	_, err = ex.Request(&b, "claude-x")
	var fe *wire.FieldError
	if !errors.As(err, &fe) || fe.Field != "previous_response_id" {
		t.Fatalf("stateless translation: %v", err)
	}
	oa, _ := ForKind(KindOpenAI)
	if out, err := oa.Exchange(wire.FormatResponses).Request(&b, "gpt-x"); err != nil || !strings.Contains(string(out), `"previous_response_id":"resp_1"`) {
		t.Fatalf("native pass-through: %s %v", out, err)
	}
}

// count_tokens for a kind that cannot count is the gateway's estimate.
func TestCountTokensLocal(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"Say hello to the compatibility suite."}]}`)
	req, _ := wire.Parse(body)
	b := NewBody(body, req)
	oa, _ := ForKind(KindOpenAI)
	out, err := oa.Exchange(wire.FormatCountTokens).Answer(&b)
	want, _ := translate.CountTokens(body)
	if err != nil || string(out) != string(want) {
		t.Fatalf("estimate %s %v, want %s", out, err, want)
	}
}

// A Claude subscription (oauth-profile anthropic provider) authenticates
// with its access token as a bearer token and the OAuth beta flag, added
// once to whatever beta values the client sent; other kinds and profiles
// are unchanged.
func TestSubscriptionCredentials(t *testing.T) {
	sub, err := For(KindAnthropic, Options{OAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	sub.SetHeaders(h, "sk-ant-oat01-x", nil)
	if h.Get("Authorization") != "Bearer sk-ant-oat01-x" || h.Get("x-api-key") != "" || h.Get("anthropic-beta") != "oauth-2025-04-20" {
		t.Fatalf("subscription headers %v", h)
	}
	for _, client := range []string{"tools-2024", "tools-2024,oauth-2025-04-20", "oauth-2025-04-20, tools-2024"} {
		h = http.Header{}
		sub.SetHeaders(h, "tok", []wire.Header{{Name: "anthropic-beta", Value: client}})
		if got := h.Get("anthropic-beta"); strings.Count(got, "oauth-2025-04-20") != 1 || !strings.Contains(got, "tools-2024") {
			t.Fatalf("client beta %q → %q", client, got)
		}
	}
	if !sub.UsageWall() {
		t.Fatal("subscription accounts have the usage wall")
	}
	oa, _ := For(KindOpenAI, Options{OAuth: true})
	h = http.Header{}
	oa.SetHeaders(h, "tok", nil)
	if h.Get("Authorization") != "Bearer tok" || h.Get("anthropic-beta") != "" {
		t.Fatalf("openai oauth headers %v", h)
	}
}

// TestCheckForwarded: a control byte or an oversized value in a forwarded
// client header is the client's 400 naming the header, never quoting it.
func TestCheckForwarded(t *testing.T) {
	for _, c := range []struct {
		v    string
		want string
	}{
		{"prompt-caching-2024-07-31,interleaved-thinking-2025-05-14", ""},
		{"2023-06-01", ""},
		{"tools-2024-05-16\x01", "anthropic-beta: header value contains a control character"},
		{"x\r\nx-api-key: stolen", "anthropic-beta: header value contains a control character"},
		{strings.Repeat("b", MaxForwardedValue+1), "anthropic-beta: header value is 2049 bytes long; at most 2048 are forwarded"},
	} {
		err := CheckForwarded("anthropic-beta", c.v)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("CheckForwarded(%q) = %q, want %q", c.v, got, c.want)
		}
	}
}
