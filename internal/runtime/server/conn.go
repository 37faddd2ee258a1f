package server

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/runtime/coding"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// readTimeout bounds the reading of one request (headers and body).
const readTimeout = 60 * time.Second

// installConnHooks sets what runs on a connection outside the handlers:
// the body budget's HeaderReceived hook, and connError for requests that
// cannot be read. fasthttp's own error messages may quote the request's
// bytes (client keys, the admin token): SecureErrorLogMessage keeps them
// out, and connError never logs them anyway.
func (s *Server) installConnHooks() {
	srv := s.app.Server()
	srv.SecureErrorLogMessage = true
	srv.HeaderReceived = s.budget.headerReceived
	srv.ErrorHandler = s.connError
	srv.Handler = s.admit(srv.Handler)
}

// connError answers a request fasthttp could not read: 431 for headers
// over the read buffer, 413 for a body over server.max_request_bytes, 503
// for one the body budget refused room, 408 for a read that timed out,
// 400 for anything else that does not parse as HTTP. The log line (debug)
// names the kind of fault and the client's address, never the request's
// bytes. The connection is closed after the answer.
func (s *Server) connError(ctx *fasthttp.RequestCtx, err error) {
	refused := s.budget.release(&ctx.Request.Header)
	e := connErrorAnswer(err, s.bodyLimit())
	if refused {
		e = budgetRefusal()
	}
	if s.log.IsDebug() {
		s.log.Debug("unreadable request refused", "client_ip", ctx.RemoteIP().String(), "status", e.Status, "code", e.Code)
	}
	writeConnError(ctx, e)
	ctx.SetConnectionClose()
}

// writeConnError answers e on a fasthttp request, in the Anthropic error
// shape on /v1/messages, else OpenAI's.
func writeConnError(ctx *fasthttp.RequestCtx, e *wire.APIError) {
	ctx.Response.Reset()
	if ra := e.RetryAfterSeconds(); ra != "" {
		ctx.Response.Header.Set("Retry-After", ra)
	}
	ctx.SetContentType(fiber.MIMEApplicationJSON)
	ctx.SetStatusCode(e.Status)
	f := wire.FormatChat
	if string(ctx.Path()) == "/v1/messages" {
		f = wire.FormatMessages
	}
	ctx.SetBody(e.Body(f))
}

// connErrorAnswer maps a fasthttp read error to the client's answer. Its
// message is the gateway's own: fasthttp's may quote the request.
func connErrorAnswer(err error, maxBody int64) *wire.APIError {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.As(err, &small):
		return &wire.APIError{Status: 431, Type: "invalid_request_error", Code: "request_header_fields_too_large",
			Message: "the request's headers are too large"}
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return bodyTooLarge(maxBody)
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout(), errors.Is(err, fasthttp.ErrTimeout):
		return &wire.APIError{Status: 408, Type: "invalid_request_error", Code: "request_timeout",
			Message: "the request was not received in time"}
	case errors.Is(err, fasthttp.ErrGetOnly):
		return &wire.APIError{Status: 405, Type: "invalid_request_error", Code: "method_not_allowed", Message: "method not allowed"}
	}
	return &wire.APIError{Status: 400, Type: "invalid_request_error", Code: "malformed_request",
		Message: "the request is not well-formed HTTP/1.1"}
}

// bodyTooLarge is the 413 of a body over server.max_request_bytes.
func bodyTooLarge(maxBody int64) *wire.APIError {
	return &wire.APIError{Status: 413, Type: "invalid_request_error", Code: "request_too_large",
		Message: "request body exceeds server.max_request_bytes (" + strconv.FormatInt(maxBody, 10) + " bytes)"}
}

// budgetRefusal is the 503 of a request the body budget found no room
// for within the queue-wait budget.
func budgetRefusal() *wire.APIError {
	return &wire.APIError{Status: 503, Type: "server_error", Code: "body_budget_exhausted", RetryAfter: time.Second,
		Message: "the gateway holds as many request bodies as server.max_inflight_body_bytes allows; retry shortly"}
}

// admit wraps Fiber's request handler. Before it, a request takes its
// share of the body budget (503 when it was refused room), an unknown
// method is answered 405, and a compressed body is decoded (decodeBody).
// A client API call on its exact path (leanRoute) is then served without
// Fiber, by the same authentication and handler Fiber's route runs;
// everything else goes to Fiber.
// After it, the share is released — unless a committed stream took the
// body over (bodyHeldLocal) and releases it when it ends. Wrapping the
// handler rather than adding a route middleware covers what Fiber answers
// without running one.
func (s *Server) admit(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		h := &ctx.Request.Header
		var e *wire.APIError
		refused := s.budget.claim(h)
		switch {
		case refused:
			e = budgetRefusal()
		case !knownMethod(ctx.Method()):
			e = &wire.APIError{Status: 405, Type: "invalid_request_error", Code: "method_not_allowed", Message: "method not allowed"}
		default:
			e = s.decodeBody(&ctx.Request)
		}
		if e != nil {
			s.budget.release(h)
			writeConnError(ctx, e)
			if refused {
				ctx.SetConnectionClose()
			}
			return
		}
		if f, path, ok := leanRoute(ctx); ok {
			if s.authClient(ctx, errorFormat(utils.UnsafeString(path))) {
				s.serveClient(ctx, f)
			}
		} else {
			next(ctx)
		}
		if ctx.UserValue(bodyHeldLocal) == nil {
			s.doneWithBody(&ctx.Request)
		}
	}
}

// leanRoutes are the client API calls served without Fiber's router and
// context: the same paths Fiber routes to clientAuth and serveClient,
// spelled exactly (Fiber also accepts other cases and a trailing slash;
// those still go through it).
var leanRoutes = map[string]wire.Format{
	"/v1/chat/completions":      wire.FormatChat,
	"/v1/messages":              wire.FormatMessages,
	"/v1/responses":             wire.FormatResponses,
	"/v1/messages/count_tokens": wire.FormatCountTokens,
	"/v1/embeddings":            wire.FormatEmbeddings,
	"/v1/completions":           wire.FormatCompletions,
}

// leanRoute reports the format and the path (requestPath) of a POST to
// one of leanRoutes.
func leanRoute(ctx *fasthttp.RequestCtx) (wire.Format, []byte, bool) {
	if string(ctx.Method()) != fasthttp.MethodPost {
		return 0, nil, false
	}
	path := requestPath(ctx)
	f, ok := leanRoutes[string(path)]
	return f, path, ok
}

// requestPath is the request's path as the client sent it
// (URI.PathOriginal), read without parsing the URI when plainPath can.
func requestPath(ctx *fasthttp.RequestCtx) []byte {
	if p, ok := plainPath(&ctx.Request.Header); ok {
		return p
	}
	return ctx.URI().PathOriginal()
}

// requestHost is the request's host as fasthttp's URI holds it
// (Request.Host: the Host header, lower-cased, or an absolute target's
// host), read without parsing the URI when plainPath vouches for the
// request and its Host has no upper-case letter: the parse then keeps the
// Host header as it is.
func requestHost(req *fasthttp.Request) []byte {
	if _, ok := plainPath(&req.Header); ok {
		host := req.Header.Host()
		if !hasUpper(host) {
			return host
		}
	}
	return req.Host()
}

// hasUpper reports whether b holds an ASCII upper-case letter.
func hasUpper(b []byte) bool {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}

// plainPath returns the path of a request whose target is a plain
// absolute path — no query, fragment, control byte or "//" — sent with a
// plain Host (a name or address of letters, digits, dots and dashes, an
// optional port): fasthttp's URI parse cannot fail on such a request, and
// its PathOriginal is the target itself. ok is false for any other
// request, whose URI the caller parses.
func plainPath(h *fasthttp.RequestHeader) (path []byte, ok bool) {
	t := h.RequestURI()
	if len(t) == 0 || t[0] != '/' || bytes.Contains(t, doubleSlash) {
		return nil, false
	}
	for _, c := range t {
		if c < ' ' || c == 0x7f || c == '?' || c == '#' {
			return nil, false
		}
	}
	host := h.Host()
	if i := bytes.IndexByte(host, ':'); i >= 0 {
		for _, c := range host[i+1:] {
			if c < '0' || c > '9' {
				return nil, false
			}
		}
		host = host[:i]
	}
	for _, c := range host {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return nil, false
		}
	}
	return t, true
}

var doubleSlash = []byte("//")

// doneWithBody releases a request's share of the body budget and lets the
// garbage collector have a large body's buffer, which fasthttp would
// otherwise keep in its pool for the next request — memory the budget no
// longer counts.
func (s *Server) doneWithBody(req *fasthttp.Request) {
	s.budget.release(&req.Header)
	req.ReleaseBody(largeBody)
}

// knownMethod reports whether m is a method some route may serve.
func knownMethod(m []byte) bool {
	switch string(m) {
	case fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut, fiber.MethodPatch, fiber.MethodDelete, fiber.MethodOptions:
		return true
	}
	return false
}

// bodyHeldLocal marks a request whose committed stream holds its body.
const bodyHeldLocal = "bw.body-held"

// decodeBody makes a compressed request body plain, in place: one layer
// of gzip or deflate, decoded up to server.max_request_bytes (413 past
// it; a decompression bomb stops there), Content-Encoding removed. A
// stacked or other coding is refused with 415, a body that does not
// decode with 400. Fiber's Ctx.Body, which would decode without a bound,
// then finds nothing to decode.
func (s *Server) decodeBody(req *fasthttp.Request) *wire.APIError {
	v := req.Header.ContentEncoding() // Peek's answer, without normalising the name
	if len(v) == 0 {
		return nil
	}
	cd, ok := coding.Parse(string(v))
	if !ok {
		return &wire.APIError{Status: 415, Type: "invalid_request_error", Code: "unsupported_content_encoding", Param: "Content-Encoding",
			Message: "request bodies may be sent plain or with one layer of gzip or deflate (got Content-Encoding " + quote(cd) + ")"}
	}
	if cd != "" {
		out, err := coding.DecodeAll(cd, req.Body(), s.bodyLimit())
		switch {
		case errors.Is(err, coding.ErrTooLarge):
			e := bodyTooLarge(s.bodyLimit())
			e.Message = "decoded " + e.Message
			return e
		case err != nil:
			return &wire.APIError{Status: 400, Type: "invalid_request_error", Code: "invalid_body_encoding", Param: "Content-Encoding",
				Message: "the request body does not decode as " + cd}
		}
		req.SetBodyRaw(out)
	}
	req.Header.Del(fiber.HeaderContentEncoding)
	return nil
}
