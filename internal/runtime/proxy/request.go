package proxy

import (
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/leaseapi"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Request is one request to the gateway as the loop sees it. It is a plain
// value: Serve reads it and never modifies it or anything it points to.
// Its slices and strings must stay valid until the Result is rendered —
// for a stream, until Stream.Run returns (copy what a framework reuses).
type Request struct {
	// ID names the request in logs; the caller sends it as X-Request-Id.
	ID string
	// Format is the client's wire format.
	Format wire.Format
	// Body is the request body; Parsed holds its routing fields (model,
	// the stream flag, ...) as wire.Parse or wire.ParseResponses read
	// them from Body.
	Body   []byte
	Parsed wire.Request
	// Forward holds the client headers a provider kind may forward
	// upstream (the names of provider.Forwardable that the client sent).
	Forward []wire.Header
	// Extra are upstream headers an on_request plugin asked for ("" removes
	// one); never the credential.
	Extra map[string]string
	// Session is the affinity session id, "" for none.
	Session string
	// Lease is the session lease the request claims to dispatch under.
	Lease LeaseClaim
	// Key is the authenticated client key (zero without client keys).
	Key leaseapi.KeyInfo
	// Internal marks a call of an orchestration (a fusion panel member or
	// judge, a pipeline step, a context-relay summary): it must not
	// stream, writes no access line and is counted in
	// breakwater_internal_requests_total, not breakwater_requests_total.
	Internal bool
	// Start is when the request arrived, for the access line's total
	// time; zero means when Serve was called.
	Start time.Time
}

// LeaseClaim is what a request's headers say about its session lease
// (X-Breakwater-Lease-Owner and X-Breakwater-Lease-Generation). The zero
// value claims none.
type LeaseClaim struct {
	Owner, Generation string
}

// Result is the answer to a Request. Exactly one of Body and Stream
// carries the content.
type Result struct {
	// Status is the HTTP status.
	Status int
	// Header lists the response headers to set, in order.
	Header []wire.Header
	// Body is the whole answer (nil for a stream).
	Body []byte
	// Stream, when set, is a committed stream: send Status and Header,
	// then call Stream.Run with the response writer (or Stream.Close when
	// the response cannot be sent). It finalises the request exactly once.
	Stream *Stream
	// Route is the route the request took.
	Route Route
	// Code is the error code of a failed request ("" on success), as the
	// access line and metrics record it.
	Code string
}

// Route is where a request went: the provider, connection and upstream
// model of the final attempt (empty when none was made) and the number
// of upstream attempts.
type Route struct {
	Provider, Connection, Model string
	Attempts                    int
}

// set adds a response header.
func (r *Result) set(name, value string) {
	r.Header = append(r.Header, wire.Header{Name: name, Value: value})
}

// HeaderValue returns the value of the last header named name, or "".
// Names compare exactly (the proxy writes canonical names).
func (r *Result) HeaderValue(name string) string {
	for i := len(r.Header) - 1; i >= 0; i-- {
		if r.Header[i].Name == name {
			return r.Header[i].Value
		}
	}
	return ""
}
