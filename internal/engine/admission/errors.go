package admission

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Error codes of the typed admission errors (docs/resilience.md §5, §7;
// docs/api.md error codes).
const (
	// CodeQueueFull: max_queue_depth requests are already queued (429).
	CodeQueueFull = "RATE_LIMIT_QUEUE_FULL"
	// CodeQueueTimeout: the queue-wait budget max_wait_ms ran out, or a
	// limiter pause ends after it (429 with Retry-After).
	CodeQueueTimeout = "RATE_LIMIT_QUEUE_TIMEOUT"
	// CodeExecutionTimeout: the execution budget after dispatch ran out (504).
	CodeExecutionTimeout = "RATE_LIMIT_EXECUTION_TIMEOUT"
	// CodeSemaphoreTimeout: the composite concurrency gate was not free
	// within the queue-wait budget (503).
	CodeSemaphoreTimeout = "SEMAPHORE_TIMEOUT"
	// CodeSemaphoreQueueFull: too many requests already wait on a full gate
	// (429).
	CodeSemaphoreQueueFull = "SEMAPHORE_QUEUE_FULL"
	// CodeCanceled labels client cancellations in ConnStats and Observer
	// callbacks; Acquire reports them as the wrapped context error, never as
	// an *Error.
	CodeCanceled = "CLIENT_CANCELED"
)

// minRetryAfter is the smallest Retry-After an *Error carries.
const minRetryAfter = time.Second

// ErrUnknownConnection is wrapped by every error about a provider+connection
// that was never registered with the Manager.
var ErrUnknownConnection = errors.New("unknown connection")

// Error is a typed, local admission error. Status is the HTTP status the
// server answers with, Code the error code of the response body and
// RetryAfter (≥ 1 s when set) the Retry-After to send. Message names the
// connection and, where one applies, the setting; it never holds a secret.
// An *Error never reflects upstream health: callers must not record it as an
// upstream outcome. Error values are immutable once returned.
type Error struct {
	Code       string
	Status     int
	Message    string
	RetryAfter time.Duration
	Provider   string
	Connection string
}

// Error returns "CODE: message".
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// CheckQueueDepth is the pure queue admission function of docs/resilience.md §7:
// with queued requests already waiting for a connection whose
// max_queue_depth is depth, it returns nil to admit the next one or a 429
// RATE_LIMIT_QUEUE_FULL *Error naming max_queue_depth and the connection.
// depth ≤ 0 means unbounded and always admits. It does not allocate when it
// admits.
func CheckQueueDepth(queued, depth int, connection string) error {
	if depth <= 0 || queued < depth {
		return nil
	}
	return queueFullError(queued, depth, connection)
}

// queueFullError is the 429 RATE_LIMIT_QUEUE_FULL error of CheckQueueDepth.
func queueFullError(queued, depth int, connection string) *Error {
	return &Error{
		Code:       CodeQueueFull,
		Status:     http.StatusTooManyRequests,
		Message:    fmt.Sprintf("request queue of connection %q is full: %d queued, max_queue_depth is %d", connection, queued, depth),
		RetryAfter: minRetryAfter,
		Connection: connection,
	}
}

// ExecutionTimeoutError returns the 504 RATE_LIMIT_EXECUTION_TIMEOUT error
// the server answers with when an attempt dispatched on provider/connection
// exceeded its execution budget (Ticket.ExecutionBudget).
func ExecutionTimeoutError(provider, connection string, budget time.Duration) *Error {
	return &Error{
		Code:       CodeExecutionTimeout,
		Status:     http.StatusGatewayTimeout,
		Message:    fmt.Sprintf("connection %q of provider %q did not answer within the execution budget execution_max_wait_ms (%d ms)", connection, provider, budget.Milliseconds()),
		Provider:   provider,
		Connection: connection,
	}
}

// queueTimeoutError is the 429 RATE_LIMIT_QUEUE_TIMEOUT error.
func queueTimeoutError(c *conn, maxWait, retry time.Duration, paused bool) *Error {
	msg := fmt.Sprintf("request waited longer than max_wait_ms (%d ms) in the queue of connection %q", maxWait.Milliseconds(), c.id)
	if paused {
		msg = fmt.Sprintf("the limiter of connection %q is paused for %d ms by an upstream retry hint, longer than the request's remaining queue time (max_wait_ms %d ms)", c.id, retry.Milliseconds(), maxWait.Milliseconds())
	}
	return &Error{
		Code:       CodeQueueTimeout,
		Status:     http.StatusTooManyRequests,
		Message:    msg,
		RetryAfter: max(retry, minRetryAfter),
		Provider:   c.provider,
		Connection: c.id,
	}
}

// semaphoreTimeoutError is the 503 SEMAPHORE_TIMEOUT error.
func semaphoreTimeoutError(c *conn, maxWait time.Duration) *Error {
	return &Error{
		Code:       CodeSemaphoreTimeout,
		Status:     http.StatusServiceUnavailable,
		Message:    fmt.Sprintf("no concurrency slot for connection %q within max_wait_ms (%d ms)", c.id, maxWait.Milliseconds()),
		RetryAfter: minRetryAfter,
		Provider:   c.provider,
		Connection: c.id,
	}
}

// semaphoreQueueFullError is the 429 SEMAPHORE_QUEUE_FULL error.
func semaphoreQueueFullError(c *conn, limit int) *Error {
	return &Error{
		Code:       CodeSemaphoreQueueFull,
		Status:     http.StatusTooManyRequests,
		Message:    fmt.Sprintf("too many requests wait for a concurrency slot of connection %q (limit %d waiters per gate)", c.id, limit),
		RetryAfter: minRetryAfter,
		Provider:   c.provider,
		Connection: c.id,
	}
}
