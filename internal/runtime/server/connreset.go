package server

import (
	"slices"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
)

// handleResetConnections serves POST /api/resilience/connections/reset
// {provider, connection?}: it clears the cooldowns, model lockouts and
// terminal states (banned, expired, credits_exhausted) of one connection,
// or of every connection of the provider when connection is absent, and
// answers {"connections": [{provider, connection, previous_state,
// lockouts_cleared}]}. The engine logs each reset as an operator reset.
// An unknown provider or connection is a 400 naming the field.
func (s *Server) handleResetConnections(c *fiber.Ctx) error {
	var req struct {
		Provider   string `json:"provider"`
		Connection string `json:"connection"`
	}
	if e := decodeJSON(c, &req); e != nil {
		return s.adminError(c, e)
	}
	if req.Provider == "" {
		return s.adminError(c, badRequest("provider", "is required"))
	}
	p, ok := s.view.Load().routing.Topology.Provider(req.Provider)
	if !ok {
		return s.adminError(c, badRequest("provider", "unknown provider "+quote(req.Provider)))
	}
	if req.Connection != "" && !slices.ContainsFunc(p.Connections, func(cn *topology.Connection) bool { return cn.ID == req.Connection }) {
		return s.adminError(c, badRequest("connection", "provider "+quote(req.Provider)+" has no connection "+quote(req.Connection)))
	}
	res, err := s.eng.ResetConnections(c.UserContext(), req.Provider, req.Connection, engine.ResetByOperator)
	if err != nil {
		return s.engineError(c, err)
	}
	return c.JSON(res)
}

// handleListToolLimits serves GET /api/resilience/tool-limits: the learned
// tool-count limit of every provider+model, {"tool_limits": [{provider,
// model, limit, failing, learned_at}]}.
func (s *Server) handleListToolLimits(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"tool_limits": s.eng.ToolLimits()})
}

// handleClearToolLimit serves DELETE /api/resilience/tool-limits
// {provider, model}: it forgets a learned limit, {"cleared": bool}.
func (s *Server) handleClearToolLimit(c *fiber.Ctx) error {
	var req struct {
		Provider string `json:"provider"`
		Model    string `json:"model"`
	}
	if e := decodeJSON(c, &req); e != nil {
		return s.adminError(c, e)
	}
	for _, f := range []struct{ name, v string }{{"provider", req.Provider}, {"model", req.Model}} {
		if f.v == "" {
			return s.adminError(c, badRequest(f.name, "is required"))
		}
	}
	ok, err := s.eng.ClearToolLimit(c.UserContext(), req.Provider, req.Model)
	if err != nil {
		return s.engineError(c, err)
	}
	return c.JSON(fiber.Map{"cleared": ok})
}
