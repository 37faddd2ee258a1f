package server

import (
	"net"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// loopbackOnly guards the client API when no client key is configured
// (the gateway then listens on loopback only and trusts whatever reaches
// it there). A web page the operator opens could otherwise spend the
// gateway's upstream credits: a cross-site "simple" POST (form or
// text/plain) needs no CORS preflight, and a DNS-rebinding page reaches
// 127.0.0.1 under its own host name. So:
//
//   - the Host must be a loopback name or address (or the listen host):
//     403 forbidden_host;
//   - an Origin, when sent, must be a loopback origin: 403
//     forbidden_origin (a browser always sends it on cross-origin POSTs);
//   - a POST must be Content-Type application/json, which a page cannot
//     send cross-origin without a preflight the gateway never grants: 415
//     unsupported_media_type.
//
// The console is not concerned: it calls the admin API with the admin
// token, from the gateway's own origin.
func (s *Server) loopbackOnly(ctx *fasthttp.RequestCtx) *wire.APIError {
	h := &ctx.Request.Header
	// The Host header itself (Fiber's Hostname would prefer
	// X-Forwarded-Host, which a rebinding page may send), as the parsed
	// URI holds it, parsed only when it must be (requestHost).
	if host := hostOnly(utils.UnsafeString(requestHost(&ctx.Request))); !s.localHost(host) {
		return &wire.APIError{Status: 403, Type: "permission_error", Code: "forbidden_host",
			Message: "without client keys the gateway answers only requests addressed to a loopback host (got Host " + quote(wire.Clip(host)) + ")"}
	}
	if o := reqHeader(h, fiber.HeaderOrigin); o != "" {
		u, err := url.Parse(o)
		if err != nil || !s.localHost(u.Hostname()) {
			return &wire.APIError{Status: 403, Type: "permission_error", Code: "forbidden_origin",
				Message: "without client keys the gateway answers only requests from loopback origins (got Origin " + quote(wire.Clip(o)) + ")"}
		}
	}
	if string(ctx.Method()) == fiber.MethodPost {
		// ContentType is what Peek("Content-Type") returns, without
		// normalising the name first.
		mt, _, _ := strings.Cut(utils.UnsafeString(h.ContentType()), ";")
		if !strings.EqualFold(strings.TrimSpace(mt), fiber.MIMEApplicationJSON) {
			return &wire.APIError{Status: 415, Type: "invalid_request_error", Code: "unsupported_media_type", Param: "Content-Type",
				Message: "send the request body as Content-Type: application/json"}
		}
	}
	return nil
}

// localHost reports whether host names this machine: a loopback name or
// address, or the configured listen host.
func (s *Server) localHost(host string) bool {
	if host == "127.0.0.1" || host == "localhost" || config.IsLoopback(host) {
		return true
	}
	lh, _, err := net.SplitHostPort(s.cfg.Server.Listen)
	return err == nil && lh != "" && strings.EqualFold(lh, host)
}

// hostOnly strips the port (and an IPv6 address's brackets) from a Host
// header value.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}
