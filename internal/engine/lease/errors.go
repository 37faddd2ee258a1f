package lease

import (
	"fmt"
	"time"
)

// Error codes of the session-lease API (docs/resilience.md §2d). The spec names
// LEASE_CONTEXT_REQUIRED, LEASE_CONTEXT_INVALID, LEASE_FENCE_STALE and
// LEASE_CAPACITY_UNAVAILABLE; the others complete its error list.
const (
	CodeUnauthenticated      = "invalid_api_key"
	CodeNotPermitted         = "LEASE_NOT_PERMITTED"
	CodeContextRequired      = "LEASE_CONTEXT_REQUIRED"
	CodeContextInvalid       = "LEASE_CONTEXT_INVALID"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeFenceStale           = "LEASE_FENCE_STALE"
	CodeOwnerMismatch        = "LEASE_OWNER_MISMATCH"
	CodeNotActive            = "LEASE_NOT_ACTIVE"
	CodeCapacityUnavailable  = "LEASE_CAPACITY_UNAVAILABLE"
)

// Lease states as the API reports them.
const (
	StateActive             = "ACTIVE"
	StateReleased           = "RELEASED"
	StateExpired            = "EXPIRED"
	StateWaitingForCapacity = "WAITING_FOR_CAPACITY"
)

// Bounds of the Retry-After of a LEASE_CAPACITY_UNAVAILABLE answer.
const (
	MinRetryAfter = time.Second
	MaxRetryAfter = 300 * time.Second
)

// Error is a lease error answered to a client: its HTTP status, error type
// and code, an optional lease state and an optional wait. Messages never
// contain the owner value. Errors are immutable once returned; errors.Is
// matches two Errors with the same Code.
type Error struct {
	Status  int
	Type    string
	Code    string
	Message string
	// State is the lease state to report, "" for none.
	State string
	// RetryAfter, when positive, is the wait to send as Retry-After.
	RetryAfter time.Duration
}

// Error implements error.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, ErrFenceStale) matches every stale-fence error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// with returns a copy of e with another message and state.
func (e *Error) with(msg, state string) *Error {
	c := *e
	c.Message = msg
	c.State = state
	return &c
}

// The lease errors, one per code. Manager methods return copies with a more
// specific message or state; compare with errors.Is.
var (
	// ErrUnauthenticated: the request carries no valid client API key (401).
	ErrUnauthenticated = &Error{Status: 401, Type: "authentication_error", Code: CodeUnauthenticated,
		Message: "session leases need a client API key (send Authorization: Bearer KEY or x-api-key: KEY)"}
	// ErrNotPermitted: the key lacks scope lease:exclusive or has an empty
	// allowed_connections list (403).
	ErrNotPermitted = &Error{Status: 403, Type: "permission_error", Code: CodeNotPermitted,
		Message: "this API key may not hold session leases: it needs scope lease:exclusive and a non-empty allowed_connections list"}
	// ErrContextRequired: the X-Breakwater-Lease-Owner header (or, on an
	// inference request, the generation header) is missing (400).
	ErrContextRequired = &Error{Status: 400, Type: "invalid_request_error", Code: CodeContextRequired,
		Message: "header X-Breakwater-Lease-Owner is required"}
	// ErrContextInvalid: the owner or generation is malformed (400).
	ErrContextInvalid = &Error{Status: 400, Type: "invalid_request_error", Code: CodeContextInvalid,
		Message: "header X-Breakwater-Lease-Owner must be vlo_ followed by 43 base64url characters"}
	// ErrUnsupportedMediaType: the lease API body is not application/json (415).
	ErrUnsupportedMediaType = &Error{Status: 415, Type: "invalid_request_error", Code: CodeUnsupportedMediaType,
		Message: "Content-Type must be application/json"}
	// ErrFenceStale: the presented generation is not the owner's live
	// generation, or the owner holds no active lease (409).
	ErrFenceStale = &Error{Status: 409, Type: "conflict_error", Code: CodeFenceStale,
		Message: "lease generation is stale: acquire the lease again"}
	// ErrOwnerMismatch: the owner's lease belongs to another API key (409).
	ErrOwnerMismatch = &Error{Status: 409, Type: "conflict_error", Code: CodeOwnerMismatch,
		Message: "this lease owner belongs to another API key"}
	// ErrNotActive: renew of a lease that is released, expired or unknown (409).
	ErrNotActive = &Error{Status: 409, Type: "conflict_error", Code: CodeNotActive,
		Message: "no active lease for this owner: acquire it again"}
	// ErrCapacityUnavailable: every free eligible connection is held by
	// another owner's active lease (429); see Capacity.
	ErrCapacityUnavailable = &Error{Status: 429, Type: "rate_limit_error", Code: CodeCapacityUnavailable,
		State: StateWaitingForCapacity, Message: "every eligible connection is held by another session lease"}
)

// Capacity returns the LEASE_CAPACITY_UNAVAILABLE error (429, state
// WAITING_FOR_CAPACITY) for a routing attempt whose eligible candidates are
// all held by other owners' active leases; holders are those leases'
// expiries (from Holder or HeldError.Until). Retry-After is the time until
// the earliest expiry, clamped to [MinRetryAfter, MaxRetryAfter]. With no
// holders it returns nil: no eligible candidate at all is not lease
// contention, and normal routing errors apply.
func Capacity(holders []time.Time, now time.Time) *Error {
	if len(holders) == 0 {
		return nil
	}
	earliest := holders[0]
	for _, h := range holders[1:] {
		if h.Before(earliest) {
			earliest = h
		}
	}
	wait := min(max(earliest.Sub(now), MinRetryAfter), MaxRetryAfter)
	e := ErrCapacityUnavailable.with(ErrCapacityUnavailable.Message, StateWaitingForCapacity)
	e.RetryAfter = wait
	return e
}

// HeldError is returned by Manager.Bind when another owner's active lease
// holds the connection. Until is when that lease expires unless renewed.
type HeldError struct {
	Until time.Time
}

// Error implements error.
func (e *HeldError) Error() string {
	return fmt.Sprintf("lease: connection is held by another session lease until %s", e.Until.UTC().Format(time.RFC3339))
}
