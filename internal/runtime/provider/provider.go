// Package provider holds one adapter per provider kind (openai, anthropic):
// everything the gateway must know about a kind's wire protocol. An
// Adapter builds upstream URLs, sets the credential and the client
// headers a kind forwards (anthropic-version, anthropic-beta), and, for
// each client wire format, says how a request reaches the kind: which of
// its endpoints serves it and which translators (runtime/translate) and
// stream event reader (runtime/frames) the attempt uses. The `switch` on a
// provider kind appears once, in ForKind; a (client format, upstream
// format) pair that needs translation is one entry of the translations
// table.
//
// Today's rule: OpenAI Chat Completions and Anthropic Messages reach both
// kinds (translated where they differ); OpenAI Responses is passed through
// to OpenAI-kind providers only, since no Responses translator exists yet.
//
// Adapters are immutable and goroutine-safe.
package provider

import (
	"net/http"

	"github.com/breakwater-dev/breakwater/internal/runtime/frames"
	"github.com/breakwater-dev/breakwater/internal/runtime/translate"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Provider kinds, as written in the configuration's providers[].kind.
const (
	KindOpenAI    = "openai"
	KindAnthropic = "anthropic"
)

// defaultAnthropicVersion is the anthropic-version sent when the client
// sends none.
const defaultAnthropicVersion = "2023-06-01"

// Adapter is one provider kind's wire protocol. Get it with ForKind.
type Adapter struct {
	kind string
	// native is the format of the kind's main endpoint, the one other
	// client formats are translated to.
	native wire.Format
	// exchanges[f] is how a client speaking f reaches the kind (nil: it
	// cannot).
	exchanges [wire.NumFormats]*Exchange
	// auth sets the credential header.
	auth func(h http.Header, key string)
	// forward lists the client headers passed on, with their defaults
	// ("" = not sent when the client sends none).
	forward []wire.Header
	// usageWall marks a kind whose subscription accounts have the usage
	// wall of docs/resilience.md §2b.
	usageWall bool
}

// endpoint is one endpoint of a kind: the format it speaks and its path
// under the provider's base URL.
type endpoint struct {
	format wire.Format
	path   string
}

var (
	openAI = newAdapter(KindOpenAI, []endpoint{
		{wire.FormatChat, "/chat/completions"},
		{wire.FormatResponses, "/responses"},
	}, func(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) }, nil, false)

	anthropic = newAdapter(KindAnthropic, []endpoint{
		{wire.FormatMessages, "/messages"},
	}, func(h http.Header, key string) { h.Set("x-api-key", key) },
		[]wire.Header{{Name: "anthropic-version", Value: defaultAnthropicVersion}, {Name: "anthropic-beta"}}, true)
)

// ForKind returns the adapter of a provider kind (providers[].kind).
func ForKind(kind string) (*Adapter, bool) {
	switch kind {
	case KindOpenAI:
		return openAI, true
	case KindAnthropic:
		return anthropic, true
	}
	return nil, false
}

// Kinds lists the provider kinds ForKind knows, for validation messages.
func Kinds() []string { return []string{KindOpenAI, KindAnthropic} }

// Forwardable lists the client header names some kind forwards upstream;
// the server copies only these from a client request.
func Forwardable() []string { return forwardable }

var forwardable = func() []string {
	var out []string
	for _, a := range []*Adapter{openAI, anthropic} {
		for _, h := range a.forward {
			out = append(out, h.Name)
		}
	}
	return out
}()

// newAdapter builds an adapter: a client format the kind has an endpoint
// for is passed through to it; any other format reaches the first
// (native) endpoint when the translations table has the pair.
func newAdapter(kind string, eps []endpoint, auth func(http.Header, string), forward []wire.Header, usageWall bool) *Adapter {
	a := &Adapter{kind: kind, native: eps[0].format, auth: auth, forward: forward, usageWall: usageWall}
	for f := range wire.NumFormats {
		to, path := a.native, eps[0].path
		for _, ep := range eps {
			if ep.format == f {
				to, path = f, ep.path
			}
		}
		if p := pairs[f][to]; p != nil {
			e := *p
			e.path = path
			a.exchanges[f] = &e
		}
	}
	return a
}

// Kind returns the kind's name ("openai", "anthropic").
func (a *Adapter) Kind() string { return a.kind }

// UsageWall reports whether the kind's subscription connections may opt
// into the usage-wall handling of docs/resilience.md §2b.
func (a *Adapter) UsageWall() bool { return a.usageWall }

// Exchange returns how a client speaking f reaches this kind, or nil when
// it cannot (the gateway answers 400 wrong_endpoint).
func (a *Adapter) Exchange(f wire.Format) *Exchange { return a.exchanges[f] }

// SetHeaders sets the credential key and the forwarded client headers
// (client; a forwarded header the client did not send takes its default)
// on an upstream request's headers.
func (a *Adapter) SetHeaders(h http.Header, key string, client []wire.Header) {
	a.auth(h, key)
	for _, fh := range a.forward {
		v := fh.Value
		for _, c := range client {
			if c.Name == fh.Name && c.Value != "" {
				v = c.Value
			}
		}
		if v != "" {
			h.Set(fh.Name, v)
		}
	}
}

// Exchange is how one client format reaches one provider kind: the
// upstream endpoint, and the translators of a pair whose formats differ.
// It is immutable.
type Exchange struct {
	// Client is the client's format; Upstream the endpoint's.
	Client, Upstream wire.Format
	path             string
	events           frames.Reader
	t                *translation
}

// Translated reports whether the formats differ, so requests, answers,
// errors and streams are translated.
func (e *Exchange) Translated() bool { return e.t != nil }

// URL is the endpoint under a provider's base URL.
func (e *Exchange) URL(base string) string { return base + e.path }

// Request returns the upstream body for a client body whose routing
// fields are req, addressed to the upstream model: the model replaced (in
// a copy), or the whole request translated. A body that cannot be
// translated is the client's error (a *wire.FieldError).
func (e *Exchange) Request(body []byte, req wire.Request, model string) ([]byte, error) {
	if e.t != nil {
		return e.t.request(body, model)
	}
	out := req.RewriteModel(body, model)
	if len(out) > 0 && &out[0] == &body[0] {
		out = append([]byte(nil), body...) // a stream may outlive the caller's buffer
	}
	return out, nil
}

// Response translates a whole 2xx upstream answer to the client's format;
// an untranslated exchange returns it as is.
func (e *Exchange) Response(body []byte, model string) ([]byte, error) {
	if e.t == nil {
		return body, nil
	}
	return e.t.response(body, model)
}

// Error translates an upstream error body to the client's format.
func (e *Exchange) Error(status int, body []byte) []byte {
	if e.t == nil {
		return body
	}
	return e.t.error(status, body)
}

// Stream returns a translator of the upstream stream to the client's
// format, or nil (the identity) when the formats agree.
func (e *Exchange) Stream(model string) translate.Translator {
	if e.t == nil {
		return nil
	}
	return e.t.stream(model)
}

// Events returns the reader of the upstream format's stream events, which
// feeds the stream watchdogs.
func (e *Exchange) Events() frames.Reader { return e.events }

// Translation returns the exchange that carries a client speaking from to
// an endpoint speaking to (no URL), or nil when no translator exists; the
// orchestrations use it to speak OpenAI Chat Completions to every client.
func Translation(from, to wire.Format) *Exchange { return pairs[from][to] }
