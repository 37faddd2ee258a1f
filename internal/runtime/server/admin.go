package server

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// adminRoutes mounts the admin API of docs/api.md behind the admin token.
func (s *Server) adminRoutes() {
	// EventSource cannot send an Authorization header: the console's live
	// stream is opened with a single-use ticket obtained with the admin
	// token. It is mounted before the admin group's token check.
	s.app.Get("/api/console/events", s.handleConsoleEvents)
	api := s.app.Group("/api", s.adminAuth)
	api.Get("/monitoring/health", s.handleHealth)
	api.Post("/resilience/reset", s.handleResetBreakers)
	api.Get("/resilience", s.handleGetResilience)
	api.Patch("/resilience", s.handlePatchResilience)
	api.Get("/resilience/cooldowns", s.handleListCooldowns)
	api.Post("/resilience/cooldowns", s.handleClearCooldowns)
	api.Get("/resilience/model-cooldowns", s.handleListLockouts)
	api.Post("/rate-limits", s.handleRateLimits)
	api.Get("/combos", s.handleListCombos)
	api.Put("/combos/:name", s.handlePutCombo)
	api.Delete("/combos/:name", s.handleDeleteCombo)
	api.Get("/policies", s.handleGetPolicies)
	api.Put("/policies/operator-rules", s.handlePutOperatorRules)
	api.Post("/policies/explain", s.handleExplain)
	api.Get("/policies/decisions", s.handleGetDecisions)
	api.Get("/plugins", s.handleListPlugins)
	api.Post("/plugins/reload", s.handleReloadPlugins)
	api.Delete("/resilience/model-cooldowns", s.handleClearLockout)
	api.Post("/resilience/connections/reset", s.handleResetConnections)
	api.Post("/providers/:provider/connections/:connection/test", s.handleTestConnection)
	api.Get("/resilience/tool-limits", s.handleListToolLimits)
	api.Delete("/resilience/tool-limits", s.handleClearToolLimit)
	if s.metrics != nil {
		s.app.Get("/metrics", s.adminAuth, adaptor.HTTPHandler(s.metrics.Handler()))
	}
	s.mountConsole(api)
	s.app.Get("/", s.handleConsolePage)
	s.app.Get("/dashboard", s.handleConsolePage)
	s.app.Get("/dashboard/assets/:name", s.handleConsoleAsset)
	api.Get("/version", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"version": s.version}) })
}

func badRequest(field, msg string) *wire.APIError {
	e := wire.InvalidRequest(field, msg)
	return e
}

// decodeJSON reads an optional JSON body into v; an empty body leaves v
// untouched.
func decodeJSON(c *fiber.Ctx, v any) *wire.APIError {
	body := c.Body()
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("body", "invalid JSON: "+err.Error())
	}
	return nil
}

func (s *Server) adminError(c *fiber.Ctx, e *wire.APIError) error {
	return s.writeError(c, e, wire.FormatChat)
}

// engineError maps an engine admin error to 400 (caller's fault) or 500.
func (s *Server) engineError(c *fiber.Ctx, err error) error {
	if errors.Is(err, engine.ErrInvalidRequest) {
		return s.adminError(c, badRequest("body", err.Error()))
	}
	s.log.Error("admin request failed", "path", c.Path(), "error", err)
	return s.adminError(c, &wire.APIError{Status: 500, Type: "server_error", Code: "internal_error", Message: "internal error: " + err.Error()})
}

func (s *Server) handleHealth(c *fiber.Ctx) error {
	h := s.eng.Health()
	return c.JSON(fiber.Map{
		"status":                  "ok",
		"version":                 s.version,
		"providers":               h.Providers,
		"cooling_connections":     h.CoolingConnections,
		"unavailable_connections": h.UnavailableConnections,
		"lockouts":                h.Lockouts,
		"lockouts_by_reason":      h.LockoutsByReason,
		"admission":               s.proxy.Admission().Snapshot(),
		"store":                   s.storeStatus(),
	})
}

func (s *Server) handleResetBreakers(c *fiber.Ctx) error {
	var req struct {
		Provider string `json:"provider"`
	}
	if e := decodeJSON(c, &req); e != nil {
		return s.adminError(c, e)
	}
	if req.Provider != "" {
		if _, ok := s.view.Load().routing.Topology.Provider(req.Provider); !ok {
			return s.adminError(c, badRequest("provider", "unknown provider "+quote(req.Provider)))
		}
	}
	reset, err := s.eng.ResetBreakers(c.UserContext(), req.Provider)
	if err != nil {
		return s.engineError(c, err)
	}
	if reset == nil {
		reset = []string{}
	}
	return c.JSON(fiber.Map{"reset": reset})
}

func (s *Server) handleGetResilience(c *fiber.Ctx) error {
	return c.JSON(s.eng.Settings())
}

func (s *Server) handlePatchResilience(c *fiber.Ctx) error {
	if !json.Valid(c.Body()) {
		return s.adminError(c, badRequest("body", "invalid JSON"))
	}
	st, err := s.eng.UpdateSettings(c.UserContext(), c.Body())
	if err != nil {
		if !errors.Is(err, engine.ErrInvalidSettings) {
			return s.engineError(c, err)
		}
		var fe engine.FieldErrors
		if errors.As(err, &fe) && len(fe) > 0 { // name the first invalid setting in param
			return s.adminError(c, badRequest(fe[0].Path, strings.TrimPrefix(fe.Error(), fe[0].Path+": ")))
		}
		field, msg := splitFieldError(err.Error())
		return s.adminError(c, badRequest(field, msg))
	}
	s.proxy.SettingsChanged(st)
	return c.JSON(st)
}

// splitFieldError splits "field.path: message" as the engine's settings
// errors are written.
func splitFieldError(s string) (string, string) {
	s = strings.TrimPrefix(s, "resilience: ")
	if f, m, ok := strings.Cut(s, ": "); ok && !strings.Contains(f, " ") {
		return f, m
	}
	return "body", s
}

func (s *Server) handleListCooldowns(c *fiber.Ctx) error {
	list := s.eng.Cooldowns(c.Query("provider"))
	if list == nil {
		list = []engine.ConnectionStatus{}
	}
	return c.JSON(fiber.Map{"connections": list})
}

func (s *Server) handleClearCooldowns(c *fiber.Ctx) error {
	var req engine.ClearRequest
	if e := decodeJSON(c, &req); e != nil {
		return s.adminError(c, e)
	}
	if !req.All && len(req.ConnectionIDs) == 0 {
		return s.adminError(c, badRequest("connection_ids", `give "connection_ids" or "all": true`))
	}
	res, err := s.eng.ClearCooldowns(c.UserContext(), req)
	if err != nil {
		return s.engineError(c, err)
	}
	return c.JSON(res)
}

func (s *Server) handleListLockouts(c *fiber.Ctx) error {
	list := s.eng.Lockouts()
	if list == nil {
		list = []engine.LockoutInfo{}
	}
	return c.JSON(fiber.Map{"lockouts": list})
}

func (s *Server) handleClearLockout(c *fiber.Ctx) error {
	var req struct {
		Provider   string `json:"provider"`
		Connection string `json:"connection"`
		Model      string `json:"model"`
	}
	if e := decodeJSON(c, &req); e != nil {
		return s.adminError(c, e)
	}
	for _, f := range []struct{ name, v string }{{"provider", req.Provider}, {"connection", req.Connection}, {"model", req.Model}} {
		if f.v == "" {
			return s.adminError(c, badRequest(f.name, "is required"))
		}
	}
	ok, err := s.eng.ClearLockout(c.UserContext(), req.Provider, req.Connection, req.Model)
	if err != nil {
		return s.engineError(c, err)
	}
	return c.JSON(fiber.Map{"cleared": ok})
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
