package server

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
)

// handleRateLimits serves POST /api/rate-limits {connection_id, enabled}:
// the explicit rate_limit_protection flag of one connection, persisted.
func (s *Server) handleRateLimits(c *fiber.Ctx) error {
	var req struct {
		ConnectionID string `json:"connection_id"`
		Enabled      *bool  `json:"enabled"`
	}
	if e := decodeJSON(c, &req); e != nil {
		return s.adminError(c, e)
	}
	if req.ConnectionID == "" {
		return s.adminError(c, badRequest("connection_id", "is required"))
	}
	if req.Enabled == nil {
		return s.adminError(c, badRequest("enabled", "is required (true or false)"))
	}
	st, err := s.proxy.SetProtection(c.UserContext(), req.ConnectionID, *req.Enabled)
	if errors.Is(err, proxy.ErrUnknownConnection) {
		return s.adminError(c, badRequest("connection_id", err.Error()))
	}
	if err != nil {
		return s.engineError(c, err)
	}
	return c.JSON(fiber.Map{"connection_id": st.Provider + "/" + st.Connection, "rate_limit_protection": st.RateLimitProtection, "protected": st.Protected})
}
