package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/runtime/coding"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Bounds of an upstream answer, on both clients.
const (
	// MaxResponseHeaderBytes bounds an answer's status line and headers.
	// Larger header blocks fail with a ProtocolError wrapping
	// ErrHeaderTooLarge.
	MaxResponseHeaderBytes = 64 << 10
	// MaxBodyBytes bounds a buffered answer (DoBuffered) and the decoded
	// size of a compressed answer on any path. Beyond it reads fail with a
	// ProtocolError wrapping ErrBodyTooLarge.
	MaxBodyBytes = 64 << 20
	// MaxRedirectBody bounds the body of a 3xx answer, which is never
	// followed (see Pool.Do).
	MaxRedirectBody = 64 << 10
)

// The faults a ProtocolError reports.
var (
	// ErrHeaderTooLarge: the answer's headers exceed MaxResponseHeaderBytes.
	ErrHeaderTooLarge = errors.New("response headers exceed 64 KiB")
	// ErrBodyTooLarge: the (decoded) answer exceeds MaxBodyBytes.
	ErrBodyTooLarge = errors.New("response body exceeds 64 MiB")
	// ErrContentEncoding: the answer has a Content-Encoding the client
	// cannot decode (only gzip and deflate are decoded, one layer), or a
	// body that does not decode.
	ErrContentEncoding = errors.New("undecodable content encoding")
	// ErrMalformedResponse: the status line or headers do not parse as
	// HTTP.
	ErrMalformedResponse = errors.New("malformed HTTP response")
	// ErrMalformedBody: a 2xx answer's body is not the JSON object its
	// API promises (an HTML error page, truncated JSON).
	ErrMalformedBody = errors.New("2xx answer is not a JSON object")
	// ErrNotEventStream: the 2xx answer to a streaming request is not an
	// event stream (a JSON or HTML body instead).
	ErrNotEventStream = errors.New("2xx answer to a streaming request is not an event stream")
)

// maxValidatedBody is the size up to which CheckJSONBody parses a whole
// body (about 2 µs for a typical 450-byte chat answer, no allocation;
// BenchmarkCheckJSONBody); a larger one is only checked to start and end
// like an object.
const maxValidatedBody = 64 << 10

// CheckJSONBody checks that a 2xx non-streaming answer is a JSON object,
// cheaply: it must start with '{' and end with '}' (spaces aside), and up
// to 64 KiB it must parse (json.Valid). Otherwise it returns a
// *ProtocolError wrapping ErrMalformedBody: the upstream answered
// "success" with a body no client can use, which fails over like any
// broken answer.
func CheckJSONBody(b []byte) error {
	t := bytes.TrimSpace(b)
	if len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}' || len(t) <= maxValidatedBody && !wire.Valid(t) {
		return protocolErr(ErrMalformedBody, "")
	}
	return nil
}

// WholeJSON returns b without the whitespace around it, and whether
// CheckJSONBody would check that body's whole grammar (it looks like an
// object and is at most 64 KiB): a reader that checks the grammar as it
// reads (provider.Exchange.ValidAnswer) then stands in for CheckJSONBody
// — a body it finds valid, CheckJSONBody accepts.
func WholeJSON(b []byte) ([]byte, bool) {
	t := bytes.TrimSpace(b)
	return t, len(t) >= 2 && t[0] == '{' && t[len(t)-1] == '}' && len(t) <= maxValidatedBody
}

// CheckEventStream checks the Content-Type of a 2xx answer to a streaming
// request: text/event-stream, or none at all (some servers omit it).
// Another type fails with a *ProtocolError wrapping ErrNotEventStream.
func CheckEventStream(h http.Header) error {
	ct := h.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, _ := strings.Cut(ct, ";")
	if !strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
		return protocolErr(ErrNotEventStream, safeType(mt))
	}
	return nil
}

// safeType renders a media type for messages: lower case, at most 40
// bytes, letters, digits and "/.+-" only.
func safeType(v string) string {
	v = strings.ToLower(strings.TrimSpace(v))
	if len(v) > 40 {
		v = v[:40]
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("/.+-", r) {
			return r
		}
		return '?'
	}, v)
}

// ProtocolError is an upstream answer that arrived but breaks the HTTP
// contract the gateway relies on: oversized headers, an oversized or
// undecodable body, a response that does not parse. It is the provider's
// fault, not a transport failure: callers classify it as an upstream
// protocol error (engine.DefaultClassifier does, through the
// engine.ProtocolFault interface it implements: server_error in
// connection scope, failed over, never tripping the provider breaker). Its
// message never echoes upstream bytes.
type ProtocolError struct {
	// Err is one of ErrHeaderTooLarge, ErrBodyTooLarge, ErrContentEncoding
	// or ErrMalformedResponse.
	Err error
	// Detail is a short, safe qualifier (the content coding), or "".
	Detail string
}

// Error implements error.
func (e *ProtocolError) Error() string { return "upstream protocol error: " + e.ProtocolFault() }

// Unwrap returns Err, so errors.Is(err, ErrHeaderTooLarge) works.
func (e *ProtocolError) Unwrap() error { return e.Err }

// ProtocolFault describes the fault in a few words (engine.ProtocolFault).
func (e *ProtocolError) ProtocolFault() string {
	if e.Detail != "" {
		return e.Err.Error() + " (" + e.Detail + ")"
	}
	return e.Err.Error()
}

// IsProtocolError reports whether err is or wraps a *ProtocolError.
func IsProtocolError(err error) bool {
	var pe *ProtocolError
	return errors.As(err, &pe)
}

// protocolErr returns a *ProtocolError for fault.
func protocolErr(fault error, detail string) error {
	return &ProtocolError{Err: fault, Detail: detail}
}

// fastError turns a fasthttp client error into the package's errors: a
// phasedConn's idle cut stays its *TimeoutError, the call's deadline (the
// first-byte limit, firstByte) becomes a *TimeoutError for
// TimerFirstByte, oversized or unparseable answers a ProtocolError,
// anything else (dial, reset, EOF) a transport error. fasthttp reports a
// header it cannot parse as a plain error whose text starts "error when
// reading response headers"; a connection that closes mid-headers wraps
// io.EOF and stays a transport error.
func fastError(err error, firstByte time.Duration) error {
	var small *fasthttp.ErrSmallBuffer
	if te, ok := AsTimeout(err); ok {
		return te
	}
	switch {
	case errors.Is(err, fasthttp.ErrTimeout):
		return &TimeoutError{Timer: TimerFirstByte, Limit: firstByte}
	case errors.As(err, &small):
		return protocolErr(ErrHeaderTooLarge, "")
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return protocolErr(ErrBodyTooLarge, "")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
	case strings.HasPrefix(err.Error(), "error when reading response headers"):
		return protocolErr(ErrMalformedResponse, "")
	}
	return fmt.Errorf("upstream call: %w", err)
}

// netError turns a net/http client error into the package's errors:
// oversized or unparseable answers into a ProtocolError (net/http reports
// them only as text), anything else into "upstream call: " and the cause
// without the request URL (which may carry a key in its query), the cause
// still reachable with errors.Is and errors.As.
func netError(err error) error {
	s := err.Error()
	switch {
	case strings.Contains(s, "server response headers exceeded"):
		return protocolErr(ErrHeaderTooLarge, "")
	case strings.Contains(s, "malformed HTTP"), strings.Contains(s, "malformed MIME header"):
		return protocolErr(ErrMalformedResponse, "")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("upstream call: %w", ue.Err)
	}
	return err
}

// contentCoding reads a Content-Encoding header (coding.Parse): "" for
// none, the coding the client decodes, or false for one it cannot (with
// a safe rendering of the value).
func contentCoding(v string) (string, bool) { return coding.Parse(v) }

// decodeAll decodes a whole compressed body, bounded by limit bytes.
func decodeAll(cd string, body []byte, limit int) ([]byte, error) {
	out, err := coding.DecodeAll(cd, body, int64(limit))
	switch {
	case errors.Is(err, coding.ErrTooLarge):
		return nil, protocolErr(ErrBodyTooLarge, cd)
	case err != nil:
		return nil, protocolErr(ErrContentEncoding, cd)
	}
	return out, nil
}

// decodedBody decodes a compressed streamed body as it is read, bounded
// by limit decoded bytes. The decoder is made on the first Read,
// so Do does not wait for the first body bytes.
type decodedBody struct {
	raw    io.ReadCloser
	coding string
	limit  int64
	dec    io.ReadCloser
	n      int64
	err    error
}

// Read implements io.Reader.
func (b *decodedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.dec == nil {
		d, err := coding.NewReader(b.coding, b.raw)
		switch {
		case err == io.EOF:
			b.err = io.EOF
			return 0, io.EOF
		case err != nil:
			b.err = b.fault(err)
			return 0, b.err
		}
		b.dec = d
	}
	n, err := b.dec.Read(p)
	b.n += int64(n)
	if b.n > b.limit {
		b.err = protocolErr(ErrBodyTooLarge, b.coding)
		return 0, b.err
	}
	if err != nil && err != io.EOF {
		err = b.fault(err)
		b.err = err
	}
	return n, err
}

// fault keeps a read error of the raw body (idle timeout, reset) and
// turns a decoding error into a ProtocolError.
func (b *decodedBody) fault(err error) error {
	if coding.IsCorrupt(err) {
		return protocolErr(ErrContentEncoding, b.coding)
	}
	return err
}

// Close closes the raw body.
func (b *decodedBody) Close() error {
	if b.dec != nil {
		_ = b.dec.Close()
	}
	return b.raw.Close()
}

// decodeResponse makes resp's body plain: a gzip or deflate body is
// decoded as it is read (bounded by limit bytes) and the Content-Encoding
// and Content-Length headers dropped, so a compressed body is never
// relayed as plain bytes; an encoding the client cannot decode is a
// ProtocolError (the body is closed). A 3xx body is cut to
// MaxRedirectBody.
func decodeResponse(resp *http.Response, limit int) error {
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		resp.Body = limitedBody{io.LimitReader(resp.Body, MaxRedirectBody), resp.Body}
	}
	coding, ok := contentCoding(resp.Header.Get("Content-Encoding"))
	if !ok {
		resp.Body.Close()
		return protocolErr(ErrContentEncoding, coding)
	}
	if coding == "" {
		return nil
	}
	resp.Body = &decodedBody{raw: resp.Body, coding: coding, limit: int64(limit)}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
	return nil
}

// limitedBody reads through a LimitReader and closes the original body.
type limitedBody struct {
	io.Reader
	io.Closer
}
