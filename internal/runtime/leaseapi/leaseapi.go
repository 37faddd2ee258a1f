// Package leaseapi holds the HTTP semantics of POST /api/v1/session-leases
// (docs/resilience.md §2d), independent of any HTTP framework: the server passes
// the authenticated key, the Content-Type and X-Breakwater-Lease-Owner
// headers and the body, and writes back the Response.
package leaseapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine/lease"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Scope is the client key scope that allows session leases.
const Scope = "lease:exclusive"

// Lease headers. Both are stripped from logs, stored request snapshots and
// upstream requests.
const (
	OwnerHeader      = "X-Breakwater-Lease-Owner"
	GenerationHeader = "X-Breakwater-Lease-Generation"
)

// Headers lists the lease headers, for stripping.
var Headers = []string{OwnerHeader, GenerationHeader}

// Actions of the lease API body.
const (
	ActionAcquire = "acquire"
	ActionRenew   = "renew"
	ActionRelease = "release"
)

// KeyInfo is the client API key a request authenticated with.
// Authenticated is false when no valid key was presented.
type KeyInfo struct {
	ID                 string
	Scopes             []string
	AllowedConnections []string
	Authenticated      bool
}

// Response is an HTTP answer: status, headers and body.
type Response struct {
	Status  int
	Headers map[string]string
	Body    []byte
	// Err is the internal error behind a 500, for the caller's log; nil
	// otherwise. It never contains the owner value.
	Err error
}

// request is the body of a lease call.
type request struct {
	Action     string          `json:"action"`
	Model      string          `json:"model"`
	Generation json.RawMessage `json:"generation"`
}

// reply is the body of a successful lease call. It never carries the
// connection id or the owner value.
type reply struct {
	State      string `json:"state"`
	Generation int64  `json:"generation,omitempty"`
	ExpiresAt  string `json:"expires_at,omitempty"`
}

// Authorize checks that key may hold session leases: it must be
// authenticated (else 401), carry Scope and have a non-empty
// allowed_connections list (else 403). The gateway runs it on inference
// requests that carry lease headers as well.
func Authorize(key KeyInfo) error {
	if !key.Authenticated || key.ID == "" {
		return lease.ErrUnauthenticated
	}
	hasScope := false
	for _, s := range key.Scopes {
		hasScope = hasScope || s == Scope
	}
	if !hasScope || len(key.AllowedConnections) == 0 {
		return lease.ErrNotPermitted
	}
	return nil
}

// ParseGeneration parses an X-Breakwater-Lease-Generation value: a
// positive decimal integer. Empty is lease.ErrContextRequired, anything
// else malformed lease.ErrContextInvalid.
func ParseGeneration(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, &lease.Error{Status: 400, Type: "invalid_request_error", Code: lease.CodeContextRequired,
			Message: "header " + GenerationHeader + " is required with " + OwnerHeader}
	}
	g, err := strconv.ParseInt(s, 10, 64)
	if err != nil || g < 1 {
		return 0, &lease.Error{Status: 400, Type: "invalid_request_error", Code: lease.CodeContextInvalid,
			Message: "header " + GenerationHeader + " must be a positive integer"}
	}
	return g, nil
}

// Handle answers one POST /api/v1/session-leases. Checks run in this
// order: key (401/403), Content-Type application/json (415), owner header
// (400 LEASE_CONTEXT_REQUIRED / LEASE_CONTEXT_INVALID), body (400 naming
// the field), then the action. acquire and renew answer 200 {"state":
// "ACTIVE", "generation", "expires_at"}; release answers 200 {"state":
// "RELEASED"}. It is goroutine-safe.
func Handle(ctx context.Context, m *lease.Manager, key KeyInfo, contentType, ownerHeader string, body []byte) Response {
	if err := Authorize(key); err != nil {
		return ErrorResponse(err)
	}
	if mt, _, err := mime.ParseMediaType(contentType); err != nil || mt != "application/json" {
		return ErrorResponse(lease.ErrUnsupportedMediaType)
	}
	owner := strings.TrimSpace(ownerHeader)
	if _, err := lease.OwnerHash(owner); err != nil {
		return ErrorResponse(err)
	}
	req, gen, apiErr := parseBody(body)
	if apiErr != nil {
		return render(apiErr)
	}
	switch req.Action {
	case ActionAcquire:
		l, err := m.Acquire(ctx, key.ID, owner, req.Model)
		if err != nil {
			return ErrorResponse(err)
		}
		return active(l)
	case ActionRenew:
		l, err := m.Renew(ctx, key.ID, owner, gen)
		if err != nil {
			return ErrorResponse(err)
		}
		return active(l)
	case ActionRelease:
		if err := m.Release(ctx, key.ID, owner, gen); err != nil {
			return ErrorResponse(err)
		}
		return ok(reply{State: lease.StateReleased})
	case "":
		return render(wire.InvalidRequest("action", "is required: acquire, renew or release"))
	default:
		return render(wire.InvalidRequest("action", "must be acquire, renew or release"))
	}
}

// parseBody decodes the request body; generation is 0 when absent.
func parseBody(body []byte) (request, int64, *wire.APIError) {
	var req request
	if len(bytes.TrimSpace(body)) == 0 {
		return req, 0, wire.InvalidRequest("body", "a JSON object with an action is required")
	}
	if err := json.Unmarshal(body, &req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return req, 0, wire.InvalidRequest(te.Field, "has the wrong type")
		}
		return req, 0, wire.InvalidRequest("body", "is not a valid JSON object")
	}
	var gen int64
	if g := bytes.TrimSpace(req.Generation); len(g) > 0 && !bytes.Equal(g, []byte("null")) {
		if err := json.Unmarshal(g, &gen); err != nil || gen < 1 {
			return req, 0, wire.InvalidRequest("generation", "must be a positive integer")
		}
	}
	return req, gen, nil
}

// active is the 200 answer of acquire and renew.
func active(l lease.Lease) Response {
	return ok(reply{State: lease.StateActive, Generation: l.Generation,
		ExpiresAt: l.ExpiresAt.UTC().Format(time.RFC3339)})
}

// ok is a 200 JSON answer.
func ok(r reply) Response {
	b, err := json.Marshal(r)
	if err != nil {
		return internal(err)
	}
	return Response{Status: 200, Headers: jsonHeaders(), Body: b}
}

// ErrorResponse renders err as the API answers it: a *lease.Error with
// its status, code, state and Retry-After; anything else as a 500 whose
// body hides the cause (kept in Response.Err).
func ErrorResponse(err error) Response {
	var le *lease.Error
	if !errors.As(err, &le) {
		return internal(err)
	}
	e := &wire.APIError{Status: le.Status, Type: le.Type, Code: le.Code, Message: le.Message, RetryAfter: le.RetryAfter}
	if le.State != "" {
		e.Extra = map[string]any{"state": le.State}
	}
	return render(e)
}

// render is the JSON answer of an API error.
func render(e *wire.APIError) Response {
	h := jsonHeaders()
	if ra := e.RetryAfterSeconds(); ra != "" {
		h["Retry-After"] = ra
	}
	return Response{Status: e.Status, Headers: h, Body: e.Body(wire.FormatChat)}
}

// internal is the 500 answer of an unexpected error.
func internal(err error) Response {
	r := render(&wire.APIError{Status: 500, Type: "server_error", Code: "internal_error", Message: "internal error"})
	r.Err = err
	return r
}

// jsonHeaders are the headers of every answer.
func jsonHeaders() map[string]string {
	return map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"}
}
