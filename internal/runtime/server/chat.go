package server

import (
	"bufio"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/engine/affinity"
	"github.com/breakwater-dev/breakwater/internal/runtime/leaseapi"
	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
	"github.com/breakwater-dev/breakwater/plugins/abi"
)

func (s *Server) handleChat(c *fiber.Ctx) error     { return s.serveClient(c, wire.FormatChat) }
func (s *Server) handleMessages(c *fiber.Ctx) error { return s.serveClient(c, wire.FormatMessages) }

// handleResponses serves OpenAI Responses API calls: passed through to
// OpenAI-kind providers, translated for the others (the provider adapter
// decides). A background request is served synchronously, with a warning
// header.
func (s *Server) handleResponses(c *fiber.Ctx) error { return s.serveClient(c, wire.FormatResponses) }

// serveClient is every client API call: parse the body, run the
// on_request plugins, build the proxy.Request, serve it and render the
// result.
func (s *Server) serveClient(c *fiber.Ctx, f wire.Format) error {
	req := &proxy.Request{ID: s.nextRequestID(), Format: f, Body: c.Body(), Start: time.Now()}
	c.Set("X-Request-Id", req.ID)
	var err error
	if req.Parsed, err = wire.ParseFor(f, req.Body); err != nil {
		return s.render(c, s.proxy.Reject(req, wire.InvalidRequestFor(err, "body")))
	}
	if e := s.onRequest(c, req); e != nil {
		return s.render(c, s.proxy.Reject(req, e))
	}
	if req.Parsed.Background {
		req.Body = req.Parsed.WithoutBackground(req.Body)
		if req.Parsed, err = wire.ParseFor(f, req.Body); err != nil {
			return s.render(c, s.proxy.Reject(req, wire.InvalidRequestFor(err, "background")))
		}
		c.Set("X-Breakwater-Warning", "background mode is not supported: the response was served synchronously")
	}
	// Strings that outlive the handler (a stream's finaliser pins the
	// session) are cloned: Fiber reuses the request's buffers.
	req.Session = strings.Clone(affinity.SessionID(func(h string) string { return c.Get(h) }))
	req.Lease = proxy.LeaseClaim{Owner: strings.Clone(c.Get(leaseapi.OwnerHeader)), Generation: strings.Clone(c.Get(leaseapi.GenerationHeader))}
	req.Key = keyInfo(c)
	req.Headers = (*routeHeaders)(c)
	for _, name := range provider.Forwardable() {
		if v := c.Get(name); v != "" {
			if err := provider.CheckForwarded(name, v); err != nil {
				return s.render(c, s.proxy.Reject(req, wire.InvalidRequestFor(err, name)))
			}
			req.Forward = append(req.Forward, wire.Header{Name: name, Value: strings.Clone(v)})
		}
	}
	req.Query = forwardQuery(c)
	if d := s.cfg.Server.RequestDeadlineMS; d > 0 {
		req.Deadline = req.Start.Add(time.Duration(d) * time.Millisecond)
	}
	sc := newScope(s.baseCtx, c.Context().Conn(), req.Deadline)
	res := s.proxy.Serve(sc.ctx, req)
	sc.settle()
	if res.Stream == nil {
		sc.end()
		return s.render(c, res)
	}
	return s.renderStream(c, res, sc)
}

// render writes a proxy.Result whose content is its body.
func (s *Server) render(c *fiber.Ctx, res *proxy.Result) error {
	for _, h := range res.Header {
		c.Set(h.Name, h.Value)
	}
	c.Status(res.Status)
	return s.sendBody(c, res.Body)
}

// renderStream writes a committed stream: its status and headers, then
// the stream relayed as the response body is written, each write renewing
// the write deadline. The stream holds the request's body (and its share
// of the body budget) and its scope until it ends.
func (s *Server) renderStream(c *fiber.Ctx, res *proxy.Result, sc *scope) error {
	for _, h := range res.Header {
		c.Set(h.Name, h.Value)
	}
	c.Status(res.Status)
	c.Locals(bodyHeldLocal, true)
	req, conn := &c.Context().Request, c.Context().Conn()
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		s.streamTo(w, conn, func(w *bufio.Writer) { res.Stream.Run(w) })
		sc.end()
		s.doneWithBody(req)
	})
	return nil
}

// onRequest runs the plugins' on_request hook, once per client request: a
// plugin may rewrite the model, set upstream headers or reject the request
// with a client error.
func (s *Server) onRequest(c *fiber.Ctx, req *proxy.Request) *wire.APIError {
	keyID := ""
	if k, _ := c.Locals(localsKey).(*clientKey); k != nil {
		keyID = k.id
	}
	act, ok := s.plugins.OnRequest(c.UserContext(), abi.RequestInfo{Model: req.Parsed.Model, Path: c.Path(), KeyID: keyID})
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
// names lower-cased, values copied (Fiber reuses its buffers). It is a
// view of the Fiber context, valid while the handler runs; the request
// loop asks it only while it plans the request.
type routeHeaders fiber.Ctx

// RouteHeaders lists the headers.
func (h *routeHeaders) RouteHeaders() map[string]string {
	c := (*fiber.Ctx)(h)
	out := map[string]string{}
	c.Request().Header.VisitAll(func(k, v []byte) {
		name := strings.ToLower(string(k))
		switch name {
		case "authorization", "proxy-authorization", "x-api-key", "api-key", "cookie", "x-goog-api-key":
			return
		}
		out[name] = string(v)
	})
	return out
}
