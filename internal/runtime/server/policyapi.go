package server

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/policies"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// handleGetPolicies serves GET /api/policies: the serving revision, the
// built-in and operator files (with their load errors) and the operator
// rules.
func (s *Server) handleGetPolicies(c *fiber.Ctx) error {
	rules := s.policies.OperatorRules()
	if rules == nil {
		rules = []policies.OperatorRule{}
	}
	return c.JSON(fiber.Map{"status": s.policies.Status(), "operator_rules": rules})
}

// handlePutOperatorRules serves PUT /api/policies/operator-rules: the
// whole list is validated, persisted and applied atomically; on error
// nothing changes.
func (s *Server) handlePutOperatorRules(c *fiber.Ctx) error {
	var rules []policies.OperatorRule
	body := bytes.TrimSpace(c.Body())
	if !bytes.HasPrefix(body, []byte("[")) {
		// null, an object, nothing: never "clear every rule" by accident;
		// an explicit [] clears them.
		return s.adminError(c, badRequest("body", "want a JSON list of operator rules ([] removes every rule)"))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rules); err != nil {
		return s.adminError(c, badRequest("body", "want a JSON list of operator rules: "+err.Error()))
	}
	if dec.More() {
		return s.adminError(c, badRequest("body", "want one JSON list of operator rules, found more after it"))
	}
	if rules == nil {
		rules = []policies.OperatorRule{}
	}
	if err := s.policies.SetOperatorRules(c.UserContext(), rules); err != nil {
		field, msg := splitFieldError(err.Error())
		return s.adminError(c, badRequest(field, msg))
	}
	return s.handleGetPolicies(c)
}

// handleExplain serves POST /api/policies/explain: how an upstream error
// would be restated and classified, and by which rule.
func (s *Server) handleExplain(c *fiber.Ctx) error {
	var req struct {
		Provider   string            `json:"provider"`
		Connection string            `json:"connection"`
		Model      string            `json:"model"`
		Status     int               `json:"status"`
		Headers    map[string]string `json:"headers"`
		Body       string            `json:"body"`
	}
	if e := decodeJSON(c, &req); e != nil {
		return s.adminError(c, e)
	}
	if req.Provider == "" {
		return s.adminError(c, badRequest("provider", "is required"))
	}
	if req.Status < 0 || req.Status > 599 {
		return s.adminError(c, badRequest("status", "must be an HTTP status (0 for a transport error)"))
	}
	return c.JSON(s.policies.Explain(explainInput(s, req.Provider, req.Connection, req.Model, req.Status, req.Headers, req.Body)))
}

// explainInput builds the classifier input of an explain request: header
// names lower-cased, the provider's profile when it is configured.
func explainInput(s *Server, provider, connection, model string, status int, headers map[string]string, body string) engine.ErrorInput {
	h := make(map[string]string, len(headers))
	for k, v := range headers {
		h[strings.ToLower(k)] = v
	}
	in := engine.ErrorInput{Provider: provider, Connection: connection, Model: model, Status: status, Headers: h, Body: body,
		Profile: engine.ProfileAPIKey, Now: time.Now()}
	if s != nil {
		if p, ok := s.view.Load().routing.Topology.Provider(provider); ok {
			in.Profile = p.Profile
		}
		in.Now = s.clock.Now()
	}
	in.ErrorCode, in.ErrorType = wire.ErrorFields([]byte(body))
	return in
}

// handleListPlugins serves GET /api/plugins: the loaded plugins, and the
// counters of every combo a routing plugin routes ("route_strategies").
func (s *Server) handleListPlugins(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"plugins": s.plugins.List(), "route_strategies": s.proxy.RouteStrategies()})
}

// handleReloadPlugins serves POST /api/plugins/reload: every plugin file is
// read and compiled again; a plugin that fails keeps its previous build.
func (s *Server) handleReloadPlugins(c *fiber.Ctx) error {
	if err := s.plugins.Reload(c.UserContext()); err != nil {
		return s.adminError(c, &wire.APIError{Status: 400, Type: "invalid_request_error", Code: "plugin_reload_failed", Message: err.Error()})
	}
	return s.handleListPlugins(c)
}
