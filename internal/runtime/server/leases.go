package server

import (
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/runtime/leaseapi"
)

// keyInfo describes the request's authenticated client key for the lease
// API.
func keyInfo(ctx *fasthttp.RequestCtx) leaseapi.KeyInfo {
	k, _ := ctx.UserValue(localsKey).(*clientKey)
	if k == nil {
		return leaseapi.KeyInfo{}
	}
	return leaseapi.KeyInfo{ID: k.id, Scopes: k.scopes, AllowedConnections: k.allow, Authenticated: true}
}

// handleLease serves POST /api/v1/session-leases (client key auth).
func (s *Server) handleLease(c *fiber.Ctx) error {
	r := leaseapi.Handle(c.UserContext(), s.proxy.Leases(), keyInfo(c.Context()), c.Get(fiber.HeaderContentType), c.Get(leaseapi.OwnerHeader), c.Body())
	if r.Err != nil {
		s.log.Error("session lease call failed", "error", r.Err)
	}
	for k, v := range r.Headers {
		c.Set(k, v)
	}
	return c.Status(r.Status).Send(r.Body)
}
