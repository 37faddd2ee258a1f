package server

import (
	"context"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/engine/affinity"
	"github.com/breakwater-dev/breakwater/internal/runtime/leaseapi"
	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
	"github.com/breakwater-dev/breakwater/plugins/abi"
)

func (s *Server) handleChat(c *fiber.Ctx) error     { return s.serveRoute(c, wire.FormatChat) }
func (s *Server) handleMessages(c *fiber.Ctx) error { return s.serveRoute(c, wire.FormatMessages) }

// handleResponses serves OpenAI Responses API calls: passed through to
// OpenAI-kind providers, translated for the others (the provider adapter
// decides). A background request is served synchronously, with a warning
// header.
func (s *Server) handleResponses(c *fiber.Ctx) error { return s.serveRoute(c, wire.FormatResponses) }

// serveRoute serves a client API call Fiber routed (the lean path did not
// take it: another spelling of the path, see leanRoute).
func (s *Server) serveRoute(c *fiber.Ctx, f wire.Format) error {
	s.serveClient(c.Context(), f)
	return nil
}

// serveClient is every client API call, once authenticated (clientAuth
// left the key in the request's user values): parse the body, run the
// on_request plugins, build the proxy.Request, serve it and render the
// result. It works on the fasthttp request, so the lean path (leanRoute)
// and Fiber's routes share it.
func (s *Server) serveClient(ctx *fasthttp.RequestCtx, f wire.Format) {
	req := &proxy.Request{ID: s.nextRequestID(), Format: f, Body: ctx.Request.Body(), Start: time.Now()}
	setHeader(&ctx.Response.Header, "X-Request-Id", req.ID)
	var err error
	if req.Parsed, err = wire.ParseFor(f, req.Body); err != nil {
		s.render(ctx, s.proxy.Reject(req, wire.InvalidRequestFor(err, "body")))
		return
	}
	if e := s.onRequest(ctx, req); e != nil {
		s.render(ctx, s.proxy.Reject(req, e))
		return
	}
	if req.Parsed.Background {
		req.Body = req.Parsed.WithoutBackground(req.Body)
		if req.Parsed, err = wire.ParseFor(f, req.Body); err != nil {
			s.render(ctx, s.proxy.Reject(req, wire.InvalidRequestFor(err, "background")))
			return
		}
		setHeader(&ctx.Response.Header, "X-Breakwater-Warning", "background mode is not supported: the response was served synchronously")
	}
	// Strings that outlive the handler (a stream's finaliser pins the
	// session) are cloned: fasthttp reuses the request's buffers.
	rh := &ctx.Request.Header
	req.Session = strings.Clone(affinity.SessionID(func(h string) string { return reqHeader(rh, h) }))
	req.Lease = proxy.LeaseClaim{Owner: strings.Clone(reqHeader(rh, leaseapi.OwnerHeader)), Generation: strings.Clone(reqHeader(rh, leaseapi.GenerationHeader))}
	req.Key = keyInfo(ctx)
	req.Headers = (*routeHeaders)(rh)
	for _, name := range provider.Forwardable() {
		if v := reqHeader(rh, name); v != "" {
			if err := provider.CheckForwarded(name, v); err != nil {
				s.render(ctx, s.proxy.Reject(req, wire.InvalidRequestFor(err, name)))
				return
			}
			req.Forward = append(req.Forward, wire.Header{Name: name, Value: strings.Clone(v)})
		}
	}
	req.Query = forwardQuery(ctx)
	if d := s.cfg.Server.RequestDeadlineMS; d > 0 {
		req.Deadline = req.Start.Add(time.Duration(d) * time.Millisecond)
	}
	sc := s.scopes.open(ctx.Conn(), req.Start, req.Deadline)
	res := s.proxy.Serve(sc.ctx, req)
	sc.settle()
	if res.Stream == nil {
		sc.end()
		s.render(ctx, res)
		s.proxy.Release(res) // render copied its headers; its body is not the state's
		return
	}
	s.renderStream(ctx, res, sc)
}

// reqHeader is a request header's value, valid while the handler runs.
func reqHeader(h *fasthttp.RequestHeader, name string) string {
	return utils.UnsafeString(h.Peek(name))
}

// setHeader is h.Set(name, value) without its copying and rewriting: a
// name already in fasthttp's normal form (what Set would turn it into)
// and a value without a line break (which Set would blank) are handed to
// SetCanonical as they are, which copies them; anything else goes through
// Set. Either way the header stored is the one Set stores. The names the
// gateway writes on every answer are known to be normal; the others (an
// upstream's relayed rate-limit headers) are checked.
func setHeader(h *fasthttp.ResponseHeader, name, value string) {
	if !knownName(name) && !normalName(name) || !plainValue(value) {
		h.Set(name, value)
		return
	}
	h.SetCanonical(utils.UnsafeBytes(name), utils.UnsafeBytes(value))
}

// knownName reports whether name is one of the normal names the gateway
// writes on most answers: its own and the upstream's it relays.
func knownName(name string) bool {
	switch name {
	case "X-Request-Id", "Content-Type", "X-Breakwater-Provider", "X-Breakwater-Connection", "X-Breakwater-Model",
		"X-Breakwater-Attempts", "Retry-After", "Request-Id", "Openai-Processing-Ms":
		return true
	}
	return false
}

// normalName reports whether fasthttp's normalisation of a header name
// (normalizeHeaderKey: the first byte and each byte after a '-' upper
// case, every other byte lower case; ASCII letters only) leaves name as
// it is. It walks the name as that normalisation does.
func normalName(name string) bool {
	if name == "" {
		return true
	}
	if c := name[0]; 'a' <= c && c <= 'z' {
		return false
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if c == '-' {
			i++
			if i < len(name) && 'a' <= name[i] && name[i] <= 'z' {
				return false
			}
			continue
		}
		if 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// plainValue reports that value has no byte at or below '\r', so none
// that Set rewrites ('\r' and '\n'); a value with a tab or another such
// control byte goes through Set, which keeps it or blanks it as before.
func plainValue(value string) bool {
	for i := 0; i < len(value); i++ {
		if value[i] <= '\r' {
			return false
		}
	}
	return true
}

// render writes a proxy.Result whose content is its body.
func (s *Server) render(ctx *fasthttp.RequestCtx, res *proxy.Result) {
	for _, h := range res.Header {
		setHeader(&ctx.Response.Header, h.Name, h.Value)
	}
	ctx.Response.SetStatusCode(res.Status)
	s.sendBody(ctx, res.Body)
}

// renderStream writes a committed stream: its status and headers, then
// the stream as the response body (streamBody), relayed in the
// connection's own goroutine as fasthttp writes it, each write renewing
// the write deadline. The stream holds the request's body (and its share
// of the body budget) and its scope until it ends.
func (s *Server) renderStream(ctx *fasthttp.RequestCtx, res *proxy.Result, sc *scope) {
	for _, h := range res.Header {
		setHeader(&ctx.Response.Header, h.Name, h.Value)
	}
	ctx.Response.SetStatusCode(res.Status)
	ctx.SetUserValue(bodyHeldLocal, true)
	req := &ctx.Request
	ctx.SetBodyStream(&streamBody{st: res.Stream, conn: ctx.Conn(), timeout: s.writeTimeout, done: func() {
		sc.end()
		s.doneWithBody(req)
	}}, -1)
}

// onRequest runs the plugins' on_request hook, once per client request: a
// plugin may rewrite the model, set upstream headers or reject the request
// with a client error.
func (s *Server) onRequest(ctx *fasthttp.RequestCtx, req *proxy.Request) *wire.APIError {
	keyID := ""
	if k, _ := ctx.UserValue(localsKey).(*clientKey); k != nil {
		keyID = k.id
	}
	act, ok := s.plugins.OnRequest(context.Background(), abi.RequestInfo{Model: req.Parsed.Model, Path: utils.UnsafeString(requestPath(ctx)), KeyID: keyID})
	if !ok {
		return nil
	}
	if act.RejectStatus != 0 {
		msg := act.RejectMessage
		if msg == "" {
			msg = "request rejected by a gateway plugin"
		}
		return &wire.APIError{Status: act.RejectStatus, Type: "invalid_request_error", Code: "rejected_by_plugin", Message: msg}
	}
	if len(act.SetHeaders) > 0 {
		req.Extra = act.SetHeaders
	}
	if act.Model != "" && act.Model != req.Parsed.Model {
		req.Body = req.Parsed.RewriteModel(req.Body, act.Model)
		parsed, err := wire.ParseFor(req.Format, req.Body)
		if err != nil {
			return wire.InvalidRequest("model", err.Error())
		}
		req.Parsed = parsed
	}
	return nil
}

// routeHeaders shows a client request's headers to a routing plugin
// (proxy.HeaderSource): every header but the credentials and cookies,
// names lower-cased, values copied (fasthttp reuses its buffers). It is a
// view of the request's headers, valid while the handler runs; the
// request loop asks it only while it plans the request.
type routeHeaders fasthttp.RequestHeader

// RouteHeaders lists the headers.
func (h *routeHeaders) RouteHeaders() map[string]string {
	out := map[string]string{}
	(*fasthttp.RequestHeader)(h).VisitAll(func(k, v []byte) {
		name := strings.ToLower(string(k))
		switch name {
		case "authorization", "proxy-authorization", "x-api-key", "api-key", "cookie", "x-goog-api-key":
			return
		}
		out[name] = string(v)
	})
	return out
}
