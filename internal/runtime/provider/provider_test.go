package provider

import (
	"net/http"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/frames"
	"github.com/breakwater-dev/breakwater/internal/runtime/sse"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Every (kind, client format) pair: the endpoint, whether it is
// translated, and today's rule that Responses reaches OpenAI-kind
// providers only.
func TestExchanges(t *testing.T) {
	tests := []struct {
		kind       string
		client     wire.Format
		url        string // "" = not served
		translated bool
		upstream   wire.Format
	}{
		{KindOpenAI, wire.FormatChat, "https://u/v1/chat/completions", false, wire.FormatChat},
		{KindOpenAI, wire.FormatMessages, "https://u/v1/chat/completions", true, wire.FormatChat},
		{KindOpenAI, wire.FormatResponses, "https://u/v1/responses", false, wire.FormatResponses},
		{KindAnthropic, wire.FormatChat, "https://u/v1/messages", true, wire.FormatMessages},
		{KindAnthropic, wire.FormatMessages, "https://u/v1/messages", false, wire.FormatMessages},
		{KindAnthropic, wire.FormatResponses, "", false, 0},
	}
	for _, tt := range tests {
		a, ok := ForKind(tt.kind)
		if !ok {
			t.Fatalf("ForKind(%q) unknown", tt.kind)
		}
		e := a.Exchange(tt.client)
		if tt.url == "" {
			if e != nil {
				t.Errorf("%s ← %s: served at %s, want no exchange", tt.kind, tt.client, e.URL("https://u/v1"))
			}
			continue
		}
		if e == nil {
			t.Fatalf("%s ← %s: no exchange", tt.kind, tt.client)
		}
		if got := e.URL("https://u/v1"); got != tt.url || e.Translated() != tt.translated || e.Upstream != tt.upstream || e.Client != tt.client {
			t.Errorf("%s ← %s: url %s translated %v upstream %s", tt.kind, tt.client, got, e.Translated(), e.Upstream)
		}
		if (e.Stream("m") != nil) != tt.translated {
			t.Errorf("%s ← %s: stream translator present = %v", tt.kind, tt.client, e.Stream("m") != nil)
		}
	}
	if _, ok := ForKind("bedrock"); ok {
		t.Error("an unknown kind must not resolve")
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
	oa, _ := ForKind(KindOpenAI)
	out, err := oa.Exchange(wire.FormatChat).Request(body, req, "gpt-x")
	if err != nil || !strings.Contains(string(out), `"model":"gpt-x"`) || !strings.Contains(string(body), `"alias"`) {
		t.Fatalf("rewrite: %s %v (original %s)", out, err, body)
	}
	same, _ := oa.Exchange(wire.FormatChat).Request(body, req, "alias")
	if &same[0] == &body[0] {
		t.Fatal("an unchanged body must still be copied")
	}
	an, _ := ForKind(KindAnthropic)
	out, err = an.Exchange(wire.FormatChat).Request(body, req, "claude-x")
	if err != nil || !strings.Contains(string(out), `"max_tokens"`) {
		t.Fatalf("translated: %s %v", out, err)
	}
	if Translation(wire.FormatMessages, wire.FormatChat) == nil || !Translation(wire.FormatMessages, wire.FormatChat).Translated() {
		t.Fatal("messages → chat must be a translation")
	}
	if e := Translation(wire.FormatChat, wire.FormatChat); e == nil || e.Translated() {
		t.Fatal("chat → chat is the identity")
	}
	if Translation(wire.FormatResponses, wire.FormatChat) != nil {
		t.Fatal("no responses → chat translator exists yet")
	}
}
