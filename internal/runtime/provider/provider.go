// Package provider holds one adapter per provider kind (openai, anthropic):
// everything the gateway must know about a kind's wire protocol. An
// Adapter builds upstream URLs, sets the credential and the client
// headers and query parameters a kind forwards (anthropic-version,
// anthropic-beta, ?beta=true), and, for each client endpoint (a
// wire.Format), says how a request reaches the kind: which of its
// endpoints serves it and which translators (runtime/translate) and
// stream event reader (runtime/frames) the attempt uses, or that the
// gateway answers it itself (count_tokens estimated for a kind that
// cannot count). The `switch` on a provider kind appears once, in
// ForKind; a (client format, upstream format) pair that needs translation
// is one entry of the translations table.
//
// The rule: Chat Completions, Messages and Responses reach both kinds
// (translated where they differ; Responses is passed through to an
// OpenAI-kind provider unless it is configured with responses_api:
// translate, then translated to its Chat Completions endpoint);
// count_tokens is forwarded to Anthropic-kind providers and estimated for
// others; embeddings and legacy completions reach OpenAI-kind providers
// only.
//
// Adapters are immutable and goroutine-safe.
package provider

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/breakwater-dev/breakwater/internal/engine/usagewall"
	"github.com/breakwater-dev/breakwater/internal/runtime/frames"
	"github.com/breakwater-dev/breakwater/internal/runtime/translate"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Provider kinds, as written in the configuration's providers[].kind.
const (
	KindOpenAI    = "openai"
	KindAnthropic = "anthropic"
)

// How an OpenAI-kind provider serves the Responses API
// (providers[].responses_api).
const (
	// ResponsesNative passes Responses requests through to the provider's
	// /responses endpoint (stored state, hosted tools and every other
	// Responses feature keep working). The default for the openai kind.
	ResponsesNative = "native"
	// ResponsesTranslate translates them to Chat Completions, statelessly,
	// for OpenAI-compatible servers without the Responses API. Anthropic-kind
	// providers always translate (to Messages).
	ResponsesTranslate = "translate"
)

// defaultAnthropicVersion is the anthropic-version sent when the client
// sends none.
const defaultAnthropicVersion = "2023-06-01"

// Adapter is one provider kind's wire protocol. Get it with ForKind or
// For.
type Adapter struct {
	kind string
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

// endpoint is one endpoint of a kind: the format it speaks, its path
// under the provider's base URL, and the client query parameters passed
// on to it when the client speaks the same format.
type endpoint struct {
	format wire.Format
	path   string
	query  []string
}

// The endpoints of each kind, main endpoint first: a client format the
// kind has no endpoint for is translated to the first endpoint the
// translations table has a pair for.
var (
	openAIEndpoints = []endpoint{
		{format: wire.FormatChat, path: "/chat/completions"},
		{format: wire.FormatResponses, path: "/responses"},
		{format: wire.FormatEmbeddings, path: "/embeddings"},
		{format: wire.FormatCompletions, path: "/completions"},
	}
	// anthropic's ?beta=true is what its SDKs' beta clients (Claude Code)
	// add; the API accepts it, so a same-format request keeps it.
	anthropicEndpoints = []endpoint{
		{format: wire.FormatMessages, path: "/messages", query: []string{"beta"}},
		{format: wire.FormatCountTokens, path: "/messages/count_tokens", query: []string{"beta"}},
	}
)

var (
	bearer = func(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) }

	openAI = newAdapter(KindOpenAI, openAIEndpoints, bearer, nil, false)

	// openAIChatOnly is the openai kind of a provider configured with
	// responses_api: translate.
	openAIChatOnly = newAdapter(KindOpenAI, without(openAIEndpoints, wire.FormatResponses), bearer, nil, false)

	anthropicForward = []wire.Header{{Name: "anthropic-version", Value: defaultAnthropicVersion}, {Name: "anthropic-beta"}}

	anthropic = newAdapter(KindAnthropic, anthropicEndpoints, func(h http.Header, key string) { h.Set("x-api-key", key) },
		anthropicForward, true)

	// anthropicSubscription is the anthropic kind of an oauth-profile
	// provider (Claude subscription accounts): the credential is an OAuth
	// access token, sent as a bearer token with the OAuth beta flag that
	// the Messages API requires for such tokens (added to the client's
	// anthropic-beta values).
	anthropicSubscription = newAdapter(KindAnthropic, anthropicEndpoints, bearer, anthropicForward, true)
)

// ForKind returns the adapter of a provider kind (providers[].kind) with
// its default options.
func ForKind(kind string) (*Adapter, bool) {
	switch kind {
	case KindOpenAI:
		return openAI, true
	case KindAnthropic:
		return anthropic, true
	}
	return nil, false
}

// Options are a provider's settings that change its adapter.
type Options struct {
	// ResponsesAPI is providers[].responses_api: ResponsesNative,
	// ResponsesTranslate or "" (the kind's default).
	ResponsesAPI string
	// OAuth marks an oauth-profile provider: for the anthropic kind its
	// connections hold subscription access tokens (bearer authentication).
	OAuth bool
}

// For returns the adapter of a provider of kind with options o. An
// unknown kind or an option the kind does not support is an error (the
// configuration validates both first).
func For(kind string, o Options) (*Adapter, error) {
	a, ok := ForKind(kind)
	if !ok {
		return nil, fmt.Errorf("unknown provider kind %q (known: %s)", kind, strings.Join(Kinds(), ", "))
	}
	switch o.ResponsesAPI {
	case "":
	case ResponsesNative:
		if a.exchanges[wire.FormatResponses].Translated() {
			return nil, fmt.Errorf("responses_api: %s providers have no Responses API; use %q (the default) or leave it unset", kind, ResponsesTranslate)
		}
	case ResponsesTranslate:
		if a == openAI {
			a = openAIChatOnly
		}
	default:
		return nil, fmt.Errorf("responses_api: must be %q or %q (got %q)", ResponsesNative, ResponsesTranslate, o.ResponsesAPI)
	}
	if o.OAuth && a == anthropic {
		a = anthropicSubscription
	}
	return a, nil
}

// Kinds lists the provider kinds ForKind knows, for validation messages.
func Kinds() []string { return []string{KindOpenAI, KindAnthropic} }

// KindsServing lists the kinds (with their default options) that serve a
// client of format f, for error messages.
func KindsServing(f wire.Format) []string {
	var out []string
	for _, a := range []*Adapter{openAI, anthropic} {
		if a.exchanges[f] != nil {
			out = append(out, a.kind)
		}
	}
	return out
}

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

// MaxForwardedValue bounds the value of a client header forwarded
// upstream. anthropic-beta lists a few feature names (~300 bytes in the
// newest clients); a longer value is not a request any provider serves.
const MaxForwardedValue = 2048

// CheckForwarded checks a client header value before it is forwarded
// upstream (name is one of Forwardable): no control byte but tab (a CR,
// LF or NUL cannot be sent, and sending it anyway would fail the upstream
// call — once counted against the provider's health), at most
// MaxForwardedValue bytes. The error is a *wire.FieldError naming the
// header, for the client's 400; it never quotes the value.
func CheckForwarded(name, value string) error {
	switch {
	case len(value) > MaxForwardedValue:
		return &wire.FieldError{Field: name, Message: fmt.Sprintf("header value is %d bytes long; at most %d are forwarded", len(value), MaxForwardedValue)}
	case !wire.ValidHeaderValue(value):
		return &wire.FieldError{Field: name, Message: "header value contains a control character"}
	}
	return nil
}

// ForwardableQuery lists the client query parameters some endpoint
// passes on; the server copies only these from a client request.
func ForwardableQuery() []string { return forwardableQuery }

var forwardableQuery = func() []string {
	var out []string
	for _, eps := range [][]endpoint{openAIEndpoints, anthropicEndpoints} {
		for _, ep := range eps {
			for _, q := range ep.query {
				if !slices.Contains(out, q) {
					out = append(out, q)
				}
			}
		}
	}
	return out
}()

// without returns eps without the endpoint of format f.
func without(eps []endpoint, f wire.Format) []endpoint {
	var out []endpoint
	for _, ep := range eps {
		if ep.format != f {
			out = append(out, ep)
		}
	}
	return out
}

// newAdapter builds an adapter: a client format the kind has an endpoint
// for is passed through to it (with the endpoint's query parameters); any
// other format reaches the first endpoint the translations table has a
// pair for (a pair without an upstream call is answered by the gateway).
func newAdapter(kind string, eps []endpoint, auth func(http.Header, string), forward []wire.Header, usageWall bool) *Adapter {
	a := &Adapter{kind: kind, auth: auth, forward: forward, usageWall: usageWall}
	for f := range wire.NumFormats {
		for _, ep := range eps {
			if ep.format == f {
				e := *pairs[f][f]
				e.path, e.query = ep.path, ep.query
				a.exchanges[f] = &e
				break
			}
		}
		if a.exchanges[f] != nil {
			continue
		}
		for _, ep := range eps {
			if p := pairs[f][ep.format]; p != nil {
				e := *p
				if p.t.local == nil {
					e.path = ep.path
				}
				a.exchanges[f] = &e
				break
			}
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
	if a == anthropicSubscription {
		h.Set("anthropic-beta", withBeta(h.Get("anthropic-beta"), usagewall.BearerBeta))
	}
}

// withBeta adds flag to a comma-separated anthropic-beta value unless it
// is there already.
func withBeta(v, flag string) string {
	if v == "" {
		return flag
	}
	for f := range strings.SplitSeq(v, ",") {
		if strings.TrimSpace(f) == flag {
			return v
		}
	}
	return v + "," + flag
}

// Exchange is how one client format reaches one provider kind: the
// upstream endpoint, and the translators of a pair whose formats differ.
// It is immutable.
type Exchange struct {
	// Client is the client's format; Upstream the endpoint's.
	Client, Upstream wire.Format
	path             string
	query            []string
	events           frames.Reader
	t                *translation
}

// Translated reports whether the formats differ, so requests, answers,
// errors and streams are translated.
func (e *Exchange) Translated() bool { return e.t != nil }

// Local reports whether the gateway answers the request itself (Answer),
// with no upstream call: count_tokens for a kind that cannot count.
func (e *Exchange) Local() bool { return e.t != nil && e.t.local != nil }

// URL is the endpoint under a provider's base URL, with the client query
// parameters (name, value) this endpoint passes on.
func (e *Exchange) URL(base string, query []wire.Header) string {
	u := base + e.path
	sep := byte('?')
	for _, q := range query {
		if slices.Contains(e.query, q.Name) {
			u += string(sep) + url.QueryEscape(q.Name) + "=" + url.QueryEscape(q.Value)
			sep = '&'
		}
	}
	return u
}

// Request returns the upstream body for the client body b, addressed to
// the upstream model: the model replaced (in a copy), or the whole
// request translated. A body that cannot be translated is the client's
// error (a *wire.FieldError naming the field).
func (e *Exchange) Request(b *Body, model string) ([]byte, error) {
	s, err := e.Splice(b, model)
	return s.Detached(), err // a stream may outlive the caller's buffer
}

// Splice is Request without the copy: the client body around the new
// model value (aliasing b.Bytes), or the whole translated request.
func (e *Exchange) Splice(b *Body, model string) (wire.Splice, error) {
	if e.t != nil {
		out, err := e.t.request(b, model)
		return wire.Owned(out), err
	}
	return b.Parsed.SpliceModel(b.Bytes, model), nil
}

// Answer is the gateway's own answer to a Local exchange's request.
func (e *Exchange) Answer(b *Body) ([]byte, error) { return e.t.local(b) }

// Response translates a whole 2xx upstream answer to the client's format;
// an untranslated exchange returns it as is.
func (e *Exchange) Response(b *Body, body []byte, model string) ([]byte, error) {
	if e.t == nil {
		return body, nil
	}
	return e.t.response(b, body, model)
}

// Error translates an upstream error body to the client's format.
func (e *Exchange) Error(status int, body []byte) []byte {
	if e.t == nil || e.t.error == nil {
		return body
	}
	return e.t.error(status, body)
}

// Stream returns a translator of the upstream stream to the client's
// format, or nil (the identity) when the formats agree.
func (e *Exchange) Stream(b *Body, model string) translate.Translator {
	if e.t == nil || e.t.stream == nil {
		return nil
	}
	return e.t.stream(b, model)
}

// Events returns the reader of the upstream format's stream events, which
// feeds the stream watchdogs.
func (e *Exchange) Events() frames.Reader { return e.events }

// Translation returns the exchange that carries a client speaking from to
// an endpoint speaking to (no URL), or nil when no translator exists; the
// orchestrations use it to speak OpenAI Chat Completions to every client.
func Translation(from, to wire.Format) *Exchange {
	if e := pairs[from][to]; e != nil && !e.Local() {
		return e
	}
	return nil
}

// Body is a client request body as the exchanges read it: its bytes, its
// routing fields, and what a translator parsed from it once (a Responses
// request's translate.ResponsesCall), so that failing over to another
// provider kind, answering and streaming do not parse it again. A Body
// belongs to one request: it is not goroutine-safe.
type Body struct {
	Bytes  []byte
	Parsed wire.Request

	rs     *translate.ResponsesCall
	rsErr  error
	rsRead bool
}

// NewBody returns the Body of a client request.
func NewBody(b []byte, parsed wire.Request) Body { return Body{Bytes: b, Parsed: parsed} }

// Is reports whether the Body holds exactly the bytes b (the same
// memory), so a caller can tell a rewritten body from the one it read.
func (b *Body) Is(bytes []byte) bool {
	return len(b.Bytes) == len(bytes) && (len(bytes) == 0 || &b.Bytes[0] == &bytes[0])
}

// responses returns the body read as a Responses request, parsing it once.
func (b *Body) responses() (*translate.ResponsesCall, error) {
	if !b.rsRead {
		b.rs, b.rsErr = translate.ParseResponses(b.Bytes)
		b.rsRead = true
	}
	return b.rs, b.rsErr
}
